"""Every DOT loader error: its own message, the line and column, and the caret under the column."""

from __future__ import annotations

import pytest

from freshness_magic.engine.dot_parser import parse_dot
from freshness_magic.errors import ParseError

ID_RULE = "node ids must match [A-Za-z_][A-Za-z0-9_]*"
NO_VALUE = 'write {k}=value, or {k}="" for an empty value'

# (case id, text, message, line, column)
CASES: list[tuple[str, str, str, int, int]] = [
    ("empty", "", "empty pipeline: expected 'digraph NAME { ... }'", 1, 1),
    (
        "only-comment",
        "// nothing here\n",
        "empty pipeline: expected 'digraph NAME { ... }'",
        2,
        1,
    ),
    (
        "undirected-graph",
        "graph G { a -- b }",
        "undirected graphs are not supported: write 'digraph' instead of 'graph'",
        1,
        1,
    ),
    (
        "strict",
        "strict digraph G { a }",
        "'strict' graphs are not supported: remove 'strict' and write 'digraph NAME { ... }'",
        1,
        1,
    ),
    (
        "not-a-graph",
        "pipeline G { a }",
        "expected 'digraph' at the start of the pipeline, found 'pipeline'",
        1,
        1,
    ),
    (
        "second-graph",
        "digraph G { a }\ndigraph H { b }",
        "a second graph: a pipeline file must contain exactly one digraph "
        "(the first one ends with the '}' at line 1, column 15)",
        2,
        1,
    ),
    (
        "nested-digraph",
        "digraph G {\n  digraph H { }\n}",
        "'digraph' cannot appear inside the graph: a pipeline file contains exactly one "
        "'digraph NAME { ... }'",
        2,
        3,
    ),
    (
        "undirected-edge",
        "digraph G {\n  a -- b\n}",
        "undirected edge '--' is not supported: pipelines are directed, use '->'",
        2,
        5,
    ),
    ("fat-arrow", "digraph G {\n  a => b\n}", "'=>' is not an edge: an edge is written '->'", 2, 5),
    (
        "long-arrow",
        "digraph G {\n  a --> b\n}",
        "'-->' is not an edge: an edge is written '->'",
        2,
        5,
    ),
    (
        "em-dash-arrow",
        "digraph G {\n  a \u2014> b\n}",
        "'\u2014' is a dash, not a hyphen: an edge is written '->'",
        2,
        5,
    ),
    (
        "arrow-sign",
        "digraph G {\n  a \u2192 b\n}",
        "'\u2192' is not an edge: an edge is written '->'",
        2,
        5,
    ),
    (
        "html-label",
        "digraph G {\n  a [label=<b>bold</b>]\n}",
        "HTML-like values <...> are not supported: write the text as a quoted string, "
        'e.g. label="..."',
        2,
        12,
    ),
    (
        "port-on-source",
        "digraph G {\n  a:n -> b\n}",
        "ports are not supported ('a:n'): refer to the node as 'a' alone",
        2,
        3,
    ),
    (
        "port-on-target",
        "digraph G {\n  a -> b:s\n}",
        "ports are not supported ('b:s'): refer to the node as 'b' alone",
        2,
        8,
    ),
    (
        "port-spaced",
        'digraph G {\n  a : "p" -> b\n}',
        "ports are not supported ('a:...'): refer to the node as 'a' alone",
        2,
        5,
    ),
    (
        "numeric-id",
        "digraph G {\n  1abc -> b\n}",
        f"invalid node id '1abc': {ID_RULE}; use an identifier and put the text in label, "
        'e.g. n_1abc [label="1abc"]',
        2,
        3,
    ),
    (
        "hyphenated-id",
        "digraph G {\n  run-tests [label=x]\n}",
        f"invalid node id 'run-tests': {ID_RULE}; use an identifier and put the text in label, "
        'e.g. run_tests [label="run-tests"]',
        2,
        3,
    ),
    (
        "dotted-id",
        "digraph G {\n  a.b -> c\n}",
        f"invalid node id 'a.b': {ID_RULE}; use an identifier and put the text in label, "
        'e.g. a_b [label="a.b"]',
        2,
        3,
    ),
    (
        "quoted-id",
        'digraph G {\n  "Run tests" -> b\n}',
        f'quoted node id "Run tests" is not supported: {ID_RULE}; use an identifier and put '
        'the text in label, e.g. Run_tests [label="Run tests"]',
        2,
        3,
    ),
    (
        "quoted-non-ascii-id",  # the hint was `node [label=...]`, which labels every node
        'digraph G {\n  "начало" -> b\n}',
        f'quoted node id "начало" is not supported: {ID_RULE}; use an identifier and put '
        'the text in label, e.g. stage_1 [label="начало"]',
        2,
        3,
    ),
    (
        "non-ascii-name",  # the hint was to quote values
        "digraph G {\n  начало -> b\n}",
        "unexpected character 'н': names (node ids, attributes) are ASCII identifiers "
        '[A-Za-z_][A-Za-z0-9_]*; put other text in a quoted value, e.g. label="..."',
        2,
        3,
    ),
    (
        "quoted-target",
        'digraph G {\n  a -> "Run tests"\n}',
        f'quoted node id "Run tests" is not supported: {ID_RULE}; use an identifier and put '
        'the text in label, e.g. Run_tests [label="Run tests"]',
        2,
        8,
    ),
    (
        "long-id",  # it names files of the run: an id of 230 characters failed only when run
        "digraph G {\n  a -> " + "n" * 101 + "\n}",
        "node id 'nnnnnnnnnnnnnnnnnnnn…' has 101 characters, at most 100: node ids name files of "
        "the run; use a shorter id and put the text in label",
        2,
        8,
    ),
    (
        "keyword-id",
        "digraph G {\n  a -> Node\n}",
        "'Node' is a DOT keyword and cannot be a node id: use another identifier and put the "
        'text in label, e.g. Node_ [label="Node"]',
        2,
        8,
    ),
    (
        "keyword-statement",
        "digraph G {\n  node -> b\n}",
        "'node' is a DOT keyword: it must be followed by '[...]' (attributes of later nodes); "
        "to name a node like this, use another id and put the text in label",
        2,
        3,
    ),
    (
        "equals-before-bracket",
        "digraph G {\n  a [label=]\n}",
        "'=' without a value for 'label' (found ']'): " + NO_VALUE.format(k="label"),
        2,
        11,
    ),
    (
        "equals-before-comma",
        "digraph G {\n  a [label=,shape=box]\n}",
        "'=' without a value for 'label' (found ','): " + NO_VALUE.format(k="label"),
        2,
        11,
    ),
    (
        "equals-at-graph-level",
        "digraph G {\n  goal =\n}",
        "'=' without a value for 'goal' (found '}'): " + NO_VALUE.format(k="goal"),
        2,
        8,
    ),
    (
        "equals-at-end",
        "digraph G {\n  goal =",
        "'=' without a value for 'goal' (found the end of the file): " + NO_VALUE.format(k="goal"),
        2,
        8,
    ),
    (
        "unterminated-string",
        'digraph G {\n  a [label="x]\n}',
        "unterminated string: this '\"' has no closing '\"' "
        '(add one, or escape a quote inside the string as \\")',
        2,
        12,
    ),
    (
        "unterminated-comment",
        "digraph G {\n  /* never closed\n  a\n}",
        "unterminated comment: this '/*' has no closing '*/'",
        2,
        3,
    ),
    (
        "missing-close-brace",
        "digraph G {\n  a -> b\n",
        "unbalanced braces: the '{' of the graph opened at line 1, column 11 is never closed; "
        "add the missing '}'",
        1,
        11,
    ),
    (
        "missing-subgraph-brace",
        "digraph G {\n  subgraph s {\n    a\n  }\n  subgraph t {\n}",
        "unbalanced braces: the '{' of the graph opened at line 1, column 11 is never closed; "
        "add the missing '}'",
        1,
        11,
    ),
    (
        "extra-close-brace",
        "digraph G { a }\n}",
        "unbalanced braces: this '}' has no matching '{' "
        "(the graph already ended with the '}' at line 1, column 15)",
        2,
        1,
    ),
    (
        "text-after-graph",
        "digraph G { a } b",
        "unexpected 'b' after the end of the graph (closed by the '}' at line 1, column 15): "
        "everything must be inside 'digraph NAME { ... }'; check for an extra '}'",
        1,
        17,
    ),
    (
        "missing-close-bracket",
        'digraph G {\n  a [label="x"\n  b [label="y"]\n}',
        "unbalanced brackets: this '[' is never closed (found 'b' at line 3, column 3); "
        "add the missing ']'",
        2,
        5,
    ),
    (
        "missing-close-bracket-at-end",
        'digraph G {\n  a [label="x"',
        "unbalanced brackets: this '[' is never closed (found the end of the file at line 2, "
        "column 15); add the missing ']'",
        2,
        5,
    ),
    (
        "stray-close-bracket",
        "digraph G {\n  a ]\n}",
        "unbalanced brackets: this ']' has no matching '['",
        2,
        5,
    ),
    (
        "attribute-without-value",
        "digraph G {\n  a [shape]\n}",
        "attribute 'shape' has no value: write shape=value",
        2,
        6,
    ),
    (
        "unquoted-words",
        "digraph G {\n  a [label=Hello World]\n}",
        "attribute 'World' has no value: write World=value; if it belongs to the previous "
        "value, quote the whole value",
        2,
        18,
    ),
    (
        "subgraph-endpoint",
        "digraph G {\n  a -> { b c }\n}",
        "subgraphs as edge endpoints are not supported: write one edge per target, "
        "e.g. 'a -> b' and 'a -> c'",
        2,
        8,
    ),
    (
        "subgraph-source",
        "digraph G {\n  { a b } -> c\n}",
        "subgraphs as edge endpoints are not supported: write one edge per source, "
        "e.g. 'a -> c' and 'b -> c'",
        2,
        11,
    ),
    (
        "arrow-without-target",
        "digraph G {\n  a -> ;\n}",
        "'->' must be followed by a node id, found ';'",
        2,
        5,
    ),
    (
        "arrow-without-source",
        "digraph G {\n  -> b\n}",
        "an edge needs a source node before '->': write 'a -> b'",
        2,
        3,
    ),
    (
        "orphan-attribute-list",
        "digraph G {\n  [label=x]\n}",
        "an attribute list needs a statement before it: write 'node [...]', 'edge [...]', "
        "'graph [...]' or 'node_id [...]'",
        2,
        3,
    ),
    (
        "bad-attribute-name",
        "digraph G {\n  a [1x=2]\n}",
        "invalid attribute name '1x': names are identifiers, optionally dotted "
        "(e.g. timeout, human.default_choice)",
        2,
        6,
    ),
    (
        "bad-quoted-attribute-name",
        'digraph G {\n  a ["bad key"=1]\n}',
        "invalid attribute name 'bad key': names are identifiers, optionally dotted "
        "(e.g. timeout, human.default_choice)",
        2,
        6,
    ),
    (
        "plus-without-string",
        'digraph G {\n  a [label="x" + y]\n}',
        "'+' joins quoted strings only: found 'y' after it",
        2,
        16,
    ),
    (
        "string-without-name",
        'digraph G {\n  a ["x"]\n}',
        "a quoted string without a name: write key=\"value\" (join adjacent strings with '+')",
        2,
        6,
    ),
    (
        "unexpected-char",
        "digraph G {\n  a @ b\n}",
        "unexpected character '@': quote values that contain it, e.g. key=\"...\"",
        2,
        5,
    ),
    (
        "single-quotes",
        "digraph G {\n  a [label='x']\n}",
        'unexpected character "\'": quote values with double quotes, e.g. label="..."',
        2,
        12,
    ),
    (
        "lone-hyphen",
        "digraph G {\n  a - b\n}",
        "unexpected character '-': an edge is written '->' and a negative number '-1'",
        2,
        5,
    ),
    (
        "no-break-space",
        "digraph G {\n  a\u00a0-> b\n}",
        "unexpected character '\\xa0' (U+00A0): quote values that contain it, e.g. key=\"...\"",
        2,
        4,
    ),
    (
        "missing-open-brace",
        "digraph G\n  a -> b\n}",
        "expected '{' after 'digraph G', found 'a'",
        2,
        3,
    ),
    (
        "subgraph-without-brace",
        "digraph G {\n  subgraph s a\n}",
        "expected '{' to open the subgraph, found 'a'",
        2,
        14,
    ),
    (
        "equals-without-name",
        "digraph G {\n  = x\n}",
        "'=' needs an attribute name before it: write key=value",
        2,
        3,
    ),
    (
        "double-equals",
        "digraph G {\n  a [x=1 = 2]\n}",
        "expected an attribute name, found '=': write key=value",
        2,
        10,
    ),
    (
        "keyword-graph-name",
        "digraph node { a }",
        "'node' is a DOT keyword and cannot name the graph; pick another name",
        1,
        9,
    ),
]


@pytest.mark.parametrize(
    ("text", "message", "line", "column"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_error_message_position_and_caret(text: str, message: str, line: int, column: int) -> None:
    with pytest.raises(ParseError) as caught:
        parse_dot(text, "pipes/p.dot")
    error = caught.value
    assert error.message == message
    assert (error.line, error.column) == (line, column)
    assert error.path == "pipes/p.dot"
    expected_line = text.splitlines()[line - 1] if text.splitlines()[line - 1 : line] else ""
    assert error.source_line == expected_line
    rendered = str(error).splitlines()
    assert rendered[0] == f"pipes/p.dot:{line}:{column}: {message}"
    if expected_line:
        shown = expected_line.expandtabs(1)
        assert rendered[1] == f"    {shown}"
        assert rendered[2] == "    " + " " * (column - 1) + "^"


def test_caret_sits_under_the_offending_character_with_tabs() -> None:
    text = "digraph G {\n\ta -- b\n}"
    with pytest.raises(ParseError) as caught:
        parse_dot(text)
    rendered = str(caught.value).splitlines()
    assert rendered[0].startswith("<string>:2:4: undirected edge")
    assert rendered[1] == "     a -- b"
    assert rendered[2] == "       ^"
    assert rendered[1][len(rendered[2]) - 1] == "-"


def test_earlier_structural_error_wins_over_a_later_bad_token() -> None:
    with pytest.raises(ParseError) as caught:
        parse_dot("digraph G { a } graph H { b -- c }")
    assert caught.value.message.startswith("a second graph")


def test_bad_token_is_reported_where_the_parser_reaches_it() -> None:
    with pytest.raises(ParseError) as caught:
        parse_dot("digraph G { a [x=1, y=<b>] }")
    assert caught.value.message.startswith("HTML-like values")
    assert caught.value.column == 23


def test_crlf_source_line_has_no_carriage_return() -> None:
    with pytest.raises(ParseError) as caught:
        parse_dot("digraph G {\r\n  a -- b\r\n}\r\n")
    assert caught.value.source_line == "  a -- b"
    assert (caught.value.line, caught.value.column) == (2, 5)


QUOTE_HINT = (
    "; the quoted string that starts at line {0}, column {1} runs on to line {2}: if its "
    "closing '\"' is missing, add it there"
)


@pytest.mark.parametrize(
    ("next_line", "message", "column"),
    [
        (
            '  b [label="Review", prompt="x"]',
            "attribute 'Review' has no value: write Review=value; if it belongs to the "
            "previous value, quote the whole value",
            13,
        ),
        (
            '  start -> a [label="ok"]',
            "unterminated string: this '\"' has no closing '\"' (add one, or escape a quote "
            'inside the string as \\")',
            24,
        ),
    ],
    ids=["word-after-the-runaway-string", "unterminated-string-after-it"],
)
def test_an_error_after_a_string_that_spans_lines_names_where_it_started(
    next_line: str, message: str, column: int
) -> None:
    text = (
        "digraph q {\n  start [shape=Mdiamond]\n  done [shape=Msquare]\n"
        f'  a [label="Estimate]\n{next_line}\n  start -> a -> done\n}}\n'
    )
    with pytest.raises(ParseError) as caught:
        parse_dot(text, "quote.dot")
    error = caught.value
    assert (error.line, error.column) == (5, column)
    assert error.message == message + QUOTE_HINT.format(4, 12, 5)
    rendered = str(error).splitlines()
    assert rendered[0] == f"quote.dot:5:{column}: {error.message}"
    assert rendered[1:] == [f"    {next_line}", "    " + " " * (column - 1) + "^"]


def test_a_string_that_spans_lines_on_purpose_gets_no_hint_for_a_later_error() -> None:
    text = 'digraph q {\n  a [prompt="line one\nline two"]\n  b [label="x" "y"]\n}\n'
    with pytest.raises(ParseError) as caught:
        parse_dot(text)
    assert caught.value.line == 4
    assert "runs on to line" not in caught.value.message


def test_a_parse_error_on_a_long_line_shows_the_part_around_the_column() -> None:
    """A one-line file of megabytes printed itself, and as many spaces again."""
    text = 'digraph x { a [label="' + "y" * 100_000 + '"]; a -> }'
    with pytest.raises(ParseError) as info:
        parse_dot(text)
    _, line, caret = str(info.value).split("\n")
    assert len(line) < 130 and line.startswith("    …y") and line.endswith("a -> }")
    assert caret.strip() == "^"
    assert line[len(caret) - 1] == text[info.value.column - 1]  # the caret is on the column


def test_crlf_line_endings_and_tabs_are_no_control_characters() -> None:
    graph = parse_dot('digraph G {\r\n\ta [label="x"]\r\n  a -> b\r\n}\r\n')
    assert list(graph.nodes) == ["a", "b"]


@pytest.mark.parametrize(
    ("label", "message", "column"),
    [
        (
            "Ship it?\rOVERWRITE",  # a terminal printing the label went back over the line
            "a carriage return not followed by a line break (U+000D): pipeline text holds no "
            "control characters (a terminal would act on them); remove it, or end lines with \\n",
            21,
        ),
        (
            "a\x1b[31mred",  # and this turned the terminal red
            "control character U+001B: pipeline text holds none (a terminal would act on it); "
            "remove it",
            14,
        ),
    ],
)
def test_a_control_character_is_refused_and_shown_as_its_picture(
    label: str, message: str, column: int
) -> None:
    with pytest.raises(ParseError) as info:
        parse_dot(f'digraph G {{\n  g [label="{label}"]\n}}')
    assert (info.value.message, info.value.line, info.value.column) == (message, 2, column)
    pictured = label.replace("\r", "\u240d").replace("\x1b", "\u241b")
    assert str(info.value).split("\n")[1:] == [
        f'      g [label="{pictured}"]',
        "    " + " " * (column - 1) + "^",
    ]
