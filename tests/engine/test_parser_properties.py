"""Property tests for the DOT loader and writer.

- Arbitrary text (random characters, and random sequences of DOT fragments that get deep into
  the grammar) either parses or raises ParseError, within hypothesis' deadline.
- Generated models and generated pipeline texts survive ``to_dot`` and re-parsing unchanged
  (positions aside).
- Pathological inputs (deep nesting, thousands of unclosed comments or quotes) finish: the
  lexer is linear and the parser iterative.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from freshness_magic.engine.dot_parser import parse_dot
from freshness_magic.engine.dot_writer import to_dot
from freshness_magic.engine.model import Edge, Graph, Node
from freshness_magic.errors import ParseError

DEADLINE = settings(
    deadline=timedelta(milliseconds=800),
    max_examples=300,
    suppress_health_check=[HealthCheck.too_slow],
)
ROUND_TRIP = settings(DEADLINE, max_examples=150)

KEYWORDS = {"digraph", "graph", "subgraph", "node", "edge", "strict"}

FRAGMENTS = [
    "digraph",
    "graph",
    "strict",
    "subgraph",
    "node",
    "edge",
    "G",
    "a",
    "b",
    "c_1",
    "1x",
    "gpt-5.2",
    "900s",
    "-1",
    "{",
    "}",
    "[",
    "]",
    "=",
    ";",
    ",",
    "+",
    ":",
    "->",
    "--",
    "-",
    '"x"',
    '"a\\"b"',
    '"',
    "\\",
    "<",
    ">",
    "/*",
    "*/",
    "//",
    "#",
    "\n",
    "label",
    "human.default_choice",
    "@",
    "\u00e9",
]


def snapshot(graph: Graph) -> tuple[object, ...]:
    return (
        graph.name,
        graph.attrs,
        [(n.id, n.attrs, n.explicit, n.subgraph_classes) for n in graph.nodes.values()],
        [(e.source, e.target, e.attrs, e.index) for e in graph.edges],
    )


def parses_or_raises_parse_error(text: str) -> None:
    try:
        graph = parse_dot(text)
    except ParseError as error:
        assert error.line >= 1
        assert error.column >= 1
        assert error.message
        return
    assert isinstance(graph, Graph)
    assert graph.source == text
    for node in graph.nodes.values():
        assert node.position.line >= 1
        assert set(node.explicit) <= set(node.attrs)
        assert set(node.attr_positions) == set(node.attrs)
    for index, edge in enumerate(graph.edges):
        assert edge.index == index
        assert edge.source in graph.nodes
        assert edge.target in graph.nodes


@DEADLINE
@given(st.text())
def test_arbitrary_text_parses_or_raises_parse_error(text: str) -> None:
    parses_or_raises_parse_error(text)


@DEADLINE
@given(st.lists(st.sampled_from(FRAGMENTS), max_size=60).map(" ".join))
def test_arbitrary_fragment_sequences_parse_or_raise_parse_error(text: str) -> None:
    parses_or_raises_parse_error(text)


@DEADLINE
@given(st.lists(st.sampled_from(FRAGMENTS), max_size=60).map("".join))
def test_fragments_glued_together_parse_or_raise_parse_error(text: str) -> None:
    parses_or_raises_parse_error("digraph G {" + text)


# -- generated models round-trip through the writer --------------------------------------------

IDENT_START = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_"
IDENT_REST = IDENT_START + "0123456789"
identifiers = st.builds(
    lambda first, rest: first + rest,
    st.sampled_from(IDENT_START),
    st.text(alphabet=IDENT_REST, max_size=7),
)
node_ids = identifiers.filter(lambda s: s.lower() not in KEYWORDS)
keys = st.lists(identifiers, min_size=1, max_size=3).map(".".join)
TEXT = st.characters(exclude_categories=("Cc", "Cs")) | st.sampled_from("\n\t")
"""Characters of pipeline text: no control characters but tab and line break (the parser
refuses them)."""
values = st.text(TEXT, max_size=30)
attr_maps = st.dictionaries(keys, values, max_size=5)
class_names = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-", min_size=1, max_size=8)


@st.composite
def graphs(draw: st.DrawFn) -> Graph:
    ids = draw(st.lists(node_ids, unique=True, max_size=8))
    nodes: dict[str, Node] = {}
    for node_id in ids:
        attrs = draw(attr_maps)
        explicit = draw(st.sets(st.sampled_from(sorted(attrs)))) if attrs else set()
        classes = tuple(draw(st.lists(class_names, unique=True, max_size=3)))
        nodes[node_id] = Node(
            node_id, attrs, explicit=frozenset(explicit), subgraph_classes=classes
        )
    edges: list[Edge] = []
    if ids:
        pairs = draw(st.lists(st.tuples(st.sampled_from(ids), st.sampled_from(ids)), max_size=10))
        for index, (source, target) in enumerate(pairs):
            edges.append(Edge(source, target, draw(attr_maps), index=index))
    name = draw(st.one_of(st.just(""), node_ids, st.text(TEXT, max_size=12)))
    return Graph(name=name, attrs=draw(attr_maps), nodes=nodes, edges=edges)


@ROUND_TRIP
@given(graphs())
def test_generated_models_round_trip_through_to_dot(graph: Graph) -> None:
    again = parse_dot(to_dot(graph))
    assert snapshot(again) == snapshot(graph)


# -- generated pipeline texts round-trip ---------------------------------------------------------


def dot_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


numbers = st.builds(
    lambda sign, whole, frac, unit: f"{sign}{whole}{frac}{unit}",
    st.sampled_from(["", "-"]),
    st.integers(0, 99999),
    st.sampled_from(["", ".5", ".25"]),
    st.sampled_from(["", "ms", "s", "m", "h", "d"]),
)
words = st.builds(
    lambda head, tail: head + tail,
    identifiers,
    st.sampled_from(["", "-5.2", ".x", "-opus-4-6", ":high"]),
)
bare_values = st.one_of(numbers, words)
written_values = st.one_of(bare_values, values.map(dot_string))


@st.composite
def attr_lists(draw: st.DrawFn) -> str:
    items = draw(st.lists(st.tuples(keys, written_values), max_size=4))
    separators = draw(st.lists(st.sampled_from([", ", " ", "; ", ",\n  "]), min_size=len(items)))
    body = "".join(f"{k}={v}{sep}" for (k, v), sep in zip(items, separators, strict=False))
    return f"[{body}]"


@st.composite
def statements(draw: st.DrawFn, depth: int = 0) -> str:
    kind = draw(st.sampled_from(["node", "edge", "chain", "ndef", "edef", "gattr", "sub"]))
    if kind == "node":
        return f"{draw(node_ids)} {draw(attr_lists())}"
    if kind == "edge":
        return f"{draw(node_ids)} -> {draw(node_ids)} {draw(attr_lists())}"
    if kind == "chain":
        chain = draw(st.lists(node_ids, min_size=3, max_size=5))
        return " -> ".join(chain) + " " + draw(attr_lists())
    if kind == "ndef":
        return f"node {draw(attr_lists())}"
    if kind == "edef":
        return f"edge {draw(attr_lists())}"
    if kind == "gattr":
        return f"{draw(keys)} = {draw(written_values)}"
    if depth >= 2:
        return f"graph {draw(attr_lists())}"
    label = draw(st.one_of(st.none(), st.text(TEXT, max_size=12)))
    inner = draw(st.lists(statements(depth + 1), max_size=4))
    head = f"label = {dot_string(label)}\n" if label is not None else ""
    return "subgraph {\n" + head + "\n".join(inner) + "\n}"


@st.composite
def pipelines(draw: st.DrawFn) -> str:
    body = draw(st.lists(statements(), max_size=12))
    return "digraph G {\n" + "\n".join(body) + "\n}\n"


@ROUND_TRIP
@given(pipelines())
def test_generated_pipelines_round_trip_through_to_dot(text: str) -> None:
    graph = parse_dot(text)
    printed = to_dot(graph)
    again = parse_dot(printed)
    assert snapshot(again) == snapshot(graph)
    assert to_dot(again) == printed


# -- pathological inputs finish (no recursion limit, no quadratic backtracking) ------------------


@pytest.mark.parametrize(
    "text",
    [
        "digraph G {" + "{" * 20000 + "a" + "}" * 20000 + "}",
        "digraph G {" + "subgraph {" * 5000 + "}" * 5000 + "}",
        "digraph G { a -> " + " -> ".join(f"n{i}" for i in range(20000)) + " }",
    ],
    ids=["deep-braces", "deep-subgraphs", "long-chain"],
)
def test_deep_and_long_inputs_parse(text: str) -> None:
    graph = parse_dot(text)
    assert graph.name == "G"


@pytest.mark.parametrize(
    "text",
    [
        "digraph G { a " + "/*" * 50000,
        "digraph G { a [x=" + '"\\' * 50000,
        "digraph G { a [x=" + '"' * 50001,
        "digraph G {" + "{" * 50000,
        "digraph G { " + "a [" * 30000,
        "digraph G { a [x=" + '"' + "\\\\" * 50000,
        "digraph G {" + " " * 200000,
        "digraph G { " + "#" * 100000 + "\n" + "// x\n" * 20000,
        'digraph G { "' + "x\\" * 50000,
        "digraph G { a [x=" + '"a" + ' * 50000 + "]",
        "digraph G { " + "a:" * 50000,
    ],
    ids=[
        "unclosed-comments",
        "backslash-quotes",
        "odd-quotes",
        "unclosed-braces",
        "unclosed-brackets",
        "backslash-run",
        "trailing-space",
        "comment-runs",
        "unclosed-escapes",
        "long-concatenation",
        "colon-words",
    ],
)
def test_pathological_inputs_raise_parse_error(text: str) -> None:
    with pytest.raises(ParseError):
        parse_dot(text)


@pytest.mark.parametrize("char", ["\r", "\x1b", "\x00", "\x7f"])
def test_a_model_with_a_control_character_is_refused_by_the_writer(char: str) -> None:
    """DOT has no escape for them and the parser refuses them raw: the writer says so."""
    from freshness_magic.errors import FreshnessMagicError

    graph = Graph(name="g", nodes={"a": Node("a", {"label": f"x{char}y"})})
    with pytest.raises(FreshnessMagicError, match=f"control character U\\+{ord(char):04X}"):
        to_dot(graph)
