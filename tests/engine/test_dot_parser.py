"""The DOT loader on the spec's own examples (§2.13, §8.6, §11.13) and on every feature bullet."""

from __future__ import annotations

import subprocess
import textwrap

import pytest

from freshness_magic.engine.dot_graph import subgraph_class
from freshness_magic.engine.dot_parser import parse_dot
from freshness_magic.engine.dot_writer import quote, to_dot
from freshness_magic.engine.model import Graph, Position

from .spec_examples import BRANCH, REVIEW, SIMPLE, SMOKE, STYLESHEET


def edge_list(graph: Graph) -> list[tuple[str, str, dict[str, str]]]:
    return [(e.source, e.target, e.attrs) for e in graph.edges]


# -- the spec's examples ---------------------------------------------------------------------


def test_simple_linear_workflow() -> None:
    graph = parse_dot(SIMPLE, "simple.dot")
    assert graph.name == "Simple"
    assert graph.path == "simple.dot"
    assert graph.source == SIMPLE
    assert graph.attrs == {"goal": "Run tests and report", "rankdir": "LR"}
    assert graph.goal == "Run tests and report"
    assert list(graph.nodes) == ["start", "exit", "run_tests", "report"]
    assert graph.nodes["run_tests"].attrs == {
        "label": "Run Tests",
        "prompt": "Run the test suite and report results",
    }
    assert graph.nodes["run_tests"].handler_type == "codergen"
    assert edge_list(graph) == [
        ("start", "run_tests", {}),
        ("run_tests", "report", {}),
        ("report", "exit", {}),
    ]
    assert [e.index for e in graph.edges] == [0, 1, 2]
    start_node = graph.start_node()
    assert start_node is not None and start_node.id == "start"
    assert graph.is_exit("exit")


def test_branching_workflow_with_defaults_and_conditions() -> None:
    graph = parse_dot(BRANCH)
    assert graph.attrs == {"goal": "Implement and validate a feature", "rankdir": "LR"}
    plan = graph.nodes["plan"]
    assert plan.attrs == {
        "shape": "box",
        "timeout": "900s",
        "label": "Plan",
        "prompt": "Plan the implementation",
    }
    assert plan.explicit == frozenset({"label", "prompt"})
    assert plan.timeout == 900.0
    gate = graph.nodes["gate"]
    assert gate.shape == "diamond"
    assert gate.handler_type == "conditional"
    assert gate.explicit == frozenset({"shape", "label"})
    assert graph.nodes["start"].handler_type == "start"
    assert edge_list(graph)[-2:] == [
        ("gate", "exit", {"label": "Yes", "condition": "outcome=success"}),
        ("gate", "implement", {"label": "No", "condition": "outcome!=success"}),
    ]
    assert len(graph.edges) == 6


def test_human_gate_with_multiline_attributes_and_edge_only_nodes() -> None:
    graph = parse_dot(REVIEW)
    gate = graph.nodes["review_gate"]
    assert gate.attrs == {"shape": "hexagon", "label": "Review Changes", "type": "wait.human"}
    assert gate.handler_type == "wait.human"
    assert gate.position == Position(7, 5)
    assert gate.attr_positions["type"] == Position(10, 9)
    assert list(graph.nodes) == ["start", "exit", "review_gate", "ship_it", "fixes"]
    assert graph.nodes["ship_it"].attrs == {}
    assert graph.nodes["ship_it"].position == Position(14, 20)
    assert graph.nodes["ship_it"].explicit == frozenset()
    assert [e.label for e in graph.outgoing("review_gate")] == ["[A] Approve", "[F] Fix"]


def test_stylesheet_example_keeps_the_multiline_string() -> None:
    graph = parse_dot(STYLESHEET)
    sheet = graph.model_stylesheet
    assert sheet.startswith("\n            * { llm_model: claude-sonnet-4-5;")
    assert "#critical_review { llm_model: gpt-5.2; llm_provider: openai;" in sheet
    assert graph.goal == "Implement feature X"
    assert graph.nodes["implement"].classes == ("code",)
    assert graph.nodes["plan"].classes == ("planning",)
    assert len(graph.edges) == 4


def test_smoke_pipeline() -> None:
    graph = parse_dot(SMOKE)
    assert graph.goal == "Create a hello world Python script"
    assert len(graph.nodes) == 5
    assert len(graph.edges) == 6
    assert graph.nodes["implement"].goal_gate is True
    assert graph.nodes["plan"].prompt == "Plan how to create a hello world script for: $goal"
    assert [e.condition for e in graph.outgoing("implement")] == ["outcome=success", "outcome=fail"]
    assert graph.outgoing("review")[1].label == "Fix"
    assert graph.is_exit("done")


def test_is_exit_agrees_with_the_exit_candidates() -> None:
    shaped = parse_dot("digraph g { start [shape=Mdiamond] fin [shape=Msquare] end; start -> end }")
    named = parse_dot("digraph g { start [shape=Mdiamond] End; Exit; other; start -> End }")
    for graph in (shaped, named):
        exits = {n.id for n in graph.exit_candidates()}
        assert {n for n in graph.nodes if graph.is_exit(n)} == exits
        assert not graph.is_exit("nowhere")
    assert {n.id for n in shaped.exit_candidates()} == {"fin"}  # a shape wins over a name
    assert {n.id for n in named.exit_candidates()} == {"End", "Exit"}


# -- graph attributes, names, statements -----------------------------------------------------


def test_graph_attributes_from_blocks_and_declarations_with_positions() -> None:
    text = 'digraph G {\n  graph [goal="a", label="L"]\n  rankdir = LR;\n  goal="b"\n}\n'
    graph = parse_dot(text)
    assert graph.attrs == {"goal": "b", "label": "L", "rankdir": "LR"}
    assert graph.attr_positions == {
        "goal": Position(4, 3),
        "label": Position(2, 20),
        "rankdir": Position(3, 3),
    }


@pytest.mark.parametrize(
    ("text", "name"),
    [
        ("digraph {}", ""),
        ("digraph my_flow { }", "my_flow"),
        ('digraph "My flow" { }', "My flow"),
        ("DiGraph Caps { }", "Caps"),
    ],
)
def test_graph_names(text: str, name: str) -> None:
    graph = parse_dot(text)
    assert graph.name == name
    assert graph.nodes == {}
    assert graph.edges == []


def test_semicolons_and_commas_are_optional() -> None:
    with_separators = 'digraph G { a [x="1", y="2"]; b [x=1; y=2]; a -> b; }'
    without = 'digraph G { a [x="1" y="2"] b [x=1 y=2] a -> b }'
    for text in (with_separators, without):
        graph = parse_dot(text)
        assert graph.nodes["a"].attrs == {"x": "1", "y": "2"}
        assert graph.nodes["b"].attrs == {"x": "1", "y": "2"}
        assert edge_list(graph) == [("a", "b", {})]


def test_comments_of_all_three_kinds() -> None:
    text = textwrap.dedent(
        """\
        # a preprocessor-style line
        digraph G { // trailing
          /* block
             comment -> with { braces } and "quotes */
          a [label="not // a comment", note="nor /* this */", tag="# nor this"]
          # another line comment
          a -> b /* inline */ [weight=2]
        }
        """
    )
    graph = parse_dot(text)
    assert graph.nodes["a"].attrs == {
        "label": "not // a comment",
        "note": "nor /* this */",
        "tag": "# nor this",
    }
    assert edge_list(graph) == [("a", "b", {"weight": "2"})]
    assert graph.nodes["a"].position == Position(5, 3)


def test_keywords_are_case_insensitive() -> None:
    graph = parse_dot("DIGRAPH G { NODE [shape=box] Edge [weight=1] a -> b GRAPH [goal=x] }")
    assert graph.nodes["a"].attrs == {"shape": "box"}
    assert graph.edges[0].attrs == {"weight": "1"}
    assert graph.attrs == {"goal": "x"}


def test_several_attribute_lists_on_one_statement() -> None:
    graph = parse_dot("digraph G { a [x=1][y=2] a -> b [w=1] [w=2, v=3] }")
    assert graph.nodes["a"].attrs == {"x": "1", "y": "2"}
    assert graph.edges[0].attrs == {"w": "2", "v": "3"}


def test_empty_attribute_list_and_bare_node() -> None:
    graph = parse_dot("digraph G { a [] b; c }")
    assert list(graph.nodes) == ["a", "b", "c"]
    assert all(n.attrs == {} and n.explicit == frozenset() for n in graph.nodes.values())


# -- values ----------------------------------------------------------------------------------


def test_value_types_are_kept_as_written() -> None:
    text = (
        "digraph G { a [i=42, neg=-1, f=0.5, g=-3.14, h=.5, t=true, b=false, d=900s, ms=250ms,"
        " hr=2h, day=1d, m=gpt-5.2, shape=Mdiamond, dir=LR, version=1.2.3] }"
    )
    attrs = parse_dot(text).nodes["a"].attrs
    assert attrs == {
        "i": "42",
        "neg": "-1",
        "f": "0.5",
        "g": "-3.14",
        "h": ".5",
        "t": "true",
        "b": "false",
        "d": "900s",
        "ms": "250ms",
        "hr": "2h",
        "day": "1d",
        "m": "gpt-5.2",
        "shape": "Mdiamond",
        "dir": "LR",
        "version": "1.2.3",
    }


def test_string_escapes() -> None:
    text = (
        r'digraph G { a [q="say \"hi\"", n="a\nb", t="a\tb", b="c:\\dir",'
        r' l="left\l", r="\r\N"] }'
    )
    attrs = parse_dot(text).nodes["a"].attrs
    assert attrs["q"] == 'say "hi"'
    assert attrs["n"] == "a\nb"
    assert attrs["t"] == "a\tb"
    assert attrs["b"] == "c:\\dir"
    assert attrs["l"] == "left\\l"
    assert attrs["r"] == "\\r\\N"


def test_raw_line_breaks_in_strings_and_backslash_continuation() -> None:
    text = 'digraph G { a [p="line one\nline two", c="joined \\\nhere"] b }'
    graph = parse_dot(text)
    assert graph.nodes["a"].attrs == {"p": "line one\nline two", "c": "joined here"}
    assert graph.nodes["b"].position == Position(3, 8)


def test_string_concatenation_with_plus() -> None:
    text = 'digraph G { a [prompt="Hello, " + "world" + "!"] goal = "x" + "y" }'
    graph = parse_dot(text)
    assert graph.nodes["a"].attrs == {"prompt": "Hello, world!"}
    assert graph.attrs == {"goal": "xy"}


def test_qualified_and_quoted_keys() -> None:
    text = (
        'digraph G { tool_hooks.pre="echo pre"  graph [tool_hooks.post="echo post"]\n'
        '  gate [shape=hexagon, human.default_choice="Y", "stack.child_dotfile"="c.dot"] }'
    )
    graph = parse_dot(text)
    assert graph.attrs == {"tool_hooks.pre": "echo pre", "tool_hooks.post": "echo post"}
    assert graph.nodes["gate"].attrs["human.default_choice"] == "Y"
    assert graph.nodes["gate"].attrs["stack.child_dotfile"] == "c.dot"
    assert graph.nodes["gate"].explicit == frozenset(
        {"shape", "human.default_choice", "stack.child_dotfile"}
    )


def test_empty_string_value() -> None:
    graph = parse_dot('digraph G { a [label=""] }')
    assert graph.nodes["a"].attrs == {"label": ""}
    assert graph.nodes["a"].label == "a"


# -- defaults and scoping --------------------------------------------------------------------


def test_defaults_apply_to_later_statements_only_and_in_order() -> None:
    text = textwrap.dedent(
        """\
        digraph G {
          before
          node [shape=box, timeout="900s"]
          edge [weight=1]
          a -> b
          node [shape=hexagon]
          edge [weight=5, label="x"]
          c [timeout="10s"]
          a -> c [weight=9]
        }
        """
    )
    graph = parse_dot(text)
    assert graph.nodes["before"].attrs == {}
    assert graph.nodes["a"].attrs == {"shape": "box", "timeout": "900s"}
    assert graph.nodes["b"].attrs == {"shape": "box", "timeout": "900s"}
    assert graph.nodes["c"].attrs == {"shape": "hexagon", "timeout": "10s"}
    assert graph.nodes["c"].explicit == frozenset({"timeout"})
    assert graph.nodes["c"].attr_positions == {
        "shape": Position(6, 9),
        "timeout": Position(8, 6),
    }
    assert edge_list(graph) == [
        ("a", "b", {"weight": "1"}),
        ("a", "c", {"weight": "9", "label": "x"}),
    ]
    assert graph.edges[1].attr_positions == {"weight": Position(9, 11), "label": Position(7, 19)}


def test_subgraph_scopes_defaults_and_derives_classes() -> None:
    text = textwrap.dedent(
        """\
        digraph G {
          node [shape=box]
          subgraph cluster_loop {
            label = "Loop A"
            node [thread_id="loop-a", timeout="900s"]
            Plan      [label="Plan next step"]
            Implement [label="Implement", timeout="1800s"]
          }
          after
        }
        """
    )
    graph = parse_dot(text)
    plan = graph.nodes["Plan"]
    assert plan.attrs == {
        "shape": "box",
        "thread_id": "loop-a",
        "timeout": "900s",
        "label": "Plan next step",
    }
    assert plan.subgraph_classes == ("loop-a",)
    assert plan.classes == ("loop-a",)
    assert graph.nodes["Implement"].attrs["timeout"] == "1800s"
    assert graph.nodes["Implement"].attrs["thread_id"] == "loop-a"
    assert graph.nodes["after"].attrs == {"shape": "box"}
    assert graph.nodes["after"].subgraph_classes == ()
    assert "label" not in graph.attrs


def test_nested_subgraphs_label_set_late_graph_block_and_anonymous_braces() -> None:
    text = textwrap.dedent(
        """\
        digraph G {
          subgraph outer {
            a
            subgraph inner { graph [label="Inner Loop!"] b -> c }
            { node [x=1] d }
            label = "Outer  Stage 2"
          }
          c [class="extra,loop-a"]
          subgraph { e }
        }
        """
    )
    graph = parse_dot(text)
    assert graph.nodes["a"].subgraph_classes == ("outer--stage-2",)
    assert graph.nodes["b"].subgraph_classes == ("outer--stage-2", "inner-loop")
    assert graph.nodes["c"].subgraph_classes == ("outer--stage-2", "inner-loop")
    assert graph.nodes["c"].classes == ("extra", "loop-a", "outer--stage-2", "inner-loop")
    assert graph.nodes["d"].attrs == {"x": "1"}
    assert graph.nodes["d"].subgraph_classes == ("outer--stage-2",)
    assert graph.nodes["e"].subgraph_classes == ()
    assert graph.attrs == {}


def test_subgraphs_are_kept_with_name_label_parent_and_nodes() -> None:
    graph = parse_dot(
        'digraph G { a  subgraph cluster_outer { label="Outer" b '
        'subgraph cluster_in { label="In" c -> d } }  { e }  f }'
    )
    assert [(s.name, s.label, s.parent, s.nodes) for s in graph.subgraphs] == [
        ("cluster_outer", "Outer", None, ("b", "c", "d")),
        ("cluster_in", "In", 0, ("c", "d")),
        ("", "", None, ("e",)),
    ]
    assert parse_dot("digraph G { a -> b }").subgraphs == []


def test_edge_mention_of_an_existing_node_inside_a_subgraph_adds_no_class() -> None:
    graph = parse_dot('digraph G { a  subgraph s { label="S" a -> b } }')
    assert graph.nodes["a"].subgraph_classes == ()
    assert graph.nodes["b"].subgraph_classes == ("s",)


def test_subgraph_edge_defaults_are_scoped() -> None:
    graph = parse_dot("digraph G { edge [w=1] subgraph { edge [w=2] a -> b } b -> c }")
    assert [e.attrs for e in graph.edges] == [{"w": "2"}, {"w": "1"}]


@pytest.mark.parametrize(
    ("label", "cls"),
    [("Loop A", "loop-a"), ("Review & Ship", "review--ship"), ("x_y.Z 9", "xyz-9"), ("", "")],
)
def test_subgraph_class_derivation(label: str, cls: str) -> None:
    assert subgraph_class(label) == cls


def test_node_first_seen_in_edge_gets_defaults_in_effect_then() -> None:
    text = 'digraph G { node [shape=box] a -> b node [shape=hexagon, color=red] b [label="B"] }'
    graph = parse_dot(text)
    b = graph.nodes["b"]
    # shape came from the defaults when b was created; the later defaults only fill new keys
    assert b.attrs == {"shape": "box", "color": "red", "label": "B"}
    assert b.explicit == frozenset({"label"})
    assert b.position == Position(1, 35)


def test_later_node_statement_merges_and_explicit_wins() -> None:
    text = 'digraph G {\n a [label="one", prompt="p"]\n a -> b\n a [label="two", max_retries=2]\n}'
    graph = parse_dot(text)
    a = graph.nodes["a"]
    assert a.attrs == {"label": "two", "prompt": "p", "max_retries": "2"}
    assert a.explicit == frozenset({"label", "prompt", "max_retries"})
    assert a.position == Position(2, 2)
    assert a.attr_positions["label"] == Position(4, 5)
    assert a.attr_positions["prompt"] == Position(2, 18)
    assert list(graph.nodes) == ["a", "b"]


def test_explicit_attribute_beats_default_even_when_default_is_later() -> None:
    graph = parse_dot("digraph G { a [shape=box] node [shape=hexagon] a }")
    assert graph.nodes["a"].attrs == {"shape": "box"}


# -- edges -----------------------------------------------------------------------------------


def test_chained_edges_expand_with_all_attributes_and_positions() -> None:
    text = 'digraph G {\n  a -> b -> c [label="next", weight=3]\n}'
    graph = parse_dot(text)
    assert edge_list(graph) == [
        ("a", "b", {"label": "next", "weight": "3"}),
        ("b", "c", {"label": "next", "weight": "3"}),
    ]
    assert [e.position for e in graph.edges] == [Position(2, 3), Position(2, 8)]
    assert graph.edges[1].attr_positions == {"label": Position(2, 16), "weight": Position(2, 30)}
    assert [e.index for e in graph.edges] == [0, 1]
    assert [n.position for n in graph.nodes.values()] == [
        Position(2, 3),
        Position(2, 8),
        Position(2, 13),
    ]


def test_multi_edges_are_kept_in_declaration_order() -> None:
    graph = parse_dot('digraph G { a -> b [label="1"] b -> a a -> b [label="2"] a -> b }')
    assert [(e.source, e.target, e.label, e.index) for e in graph.edges] == [
        ("a", "b", "1", 0),
        ("b", "a", "", 1),
        ("a", "b", "2", 2),
        ("a", "b", "", 3),
    ]
    assert [e.label for e in graph.outgoing("a")] == ["1", "2", ""]


def test_self_loop() -> None:
    graph = parse_dot("digraph G { a -> a [loop_restart=true] }")
    assert list(graph.nodes) == ["a"]
    assert graph.edges[0].loop_restart is True


def test_arrow_without_spaces_and_hyphenated_values() -> None:
    graph = parse_dot("digraph G{a->b[llm_model=claude-opus-4-6]b->c}")
    assert edge_list(graph) == [("a", "b", {"llm_model": "claude-opus-4-6"}), ("b", "c", {})]


def test_crlf_line_endings_and_tabs() -> None:
    text = 'digraph G {\r\n\ta [label="x"]\r\n\ta -> b\r\n}\r\n'
    graph = parse_dot(text)
    assert graph.nodes["a"].position == Position(2, 2)
    assert graph.edges[0].position == Position(3, 2)


def test_byte_order_mark_is_ignored() -> None:
    assert parse_dot("\ufeffdigraph G { a }").nodes["a"].position == Position(1, 14)


def test_graph_source_line_helper_matches_positions() -> None:
    graph = parse_dot(BRANCH)
    pos = graph.edges[4].attr_positions["condition"]
    assert graph.source_line(pos.line)[pos.column - 1 :].startswith("condition=")


# -- the writer ------------------------------------------------------------------------------


@pytest.mark.parametrize("text", [SIMPLE, BRANCH, REVIEW, STYLESHEET, SMOKE])
def test_writer_round_trips_the_spec_examples(text: str) -> None:
    graph = parse_dot(text)
    again = parse_dot(to_dot(graph))
    assert snapshot(again) == snapshot(graph)


def test_writer_round_trips_defaults_classes_escapes_and_names() -> None:
    text = textwrap.dedent(
        r"""
        digraph "My pipeline" {
          graph [goal="say \"hi\"\n\tthen \\ leave", tool_hooks.pre="x"]
          node [shape=box]
          subgraph s { label="Outer"
            subgraph t { label="Inner"; node [timeout="2h"] a [p="<b>&</b>"] } }
          a -> b [label="}] -> {", condition="outcome=success"]
          b [label="left\l", "human.default_choice"="Y"]
        }
        """
    )
    graph = parse_dot(text)
    written = to_dot(graph)
    again = parse_dot(written)
    assert snapshot(again) == snapshot(graph)
    assert again.nodes["a"].explicit == frozenset({"p"})
    assert again.nodes["a"].subgraph_classes == ("outer", "inner")
    assert again.nodes["b"].attrs["label"] == "left\\l"


def test_quote_escapes_everything_that_could_break_out() -> None:
    assert quote('a"b\\c\nd\te') == '"a\\"b\\\\c\\nd\\te"'


def snapshot(graph: Graph) -> tuple[object, ...]:
    """Everything the model says except source positions, path and source text."""
    return (
        graph.name,
        graph.attrs,
        [(n.id, n.attrs, n.explicit, n.subgraph_classes) for n in graph.nodes.values()],
        [(e.source, e.target, e.attrs, e.index) for e in graph.edges],
    )


def test_real_dot_accepts_the_writer_output_and_keeps_labels_as_text() -> None:
    text = textwrap.dedent(
        r"""
        digraph review {
          graph [goal="Ship it", tool_hooks.pre="echo hi"]
          node [shape=box]
          subgraph cluster_a { label="Loop A"; draft [label="<b>Draft</b> & \"go\"", timeout="2h"] }
          gate [shape=hexagon, label="Ship it?", human.default_choice="Y"]
          draft -> gate [label="[Y] Yes", condition="outcome=success"]
        }
        """
    )
    written = to_dot(parse_dot(text))
    result = subprocess.run(
        ["dot", "-Tsvg"], input=written.encode(), capture_output=True, check=False, timeout=60
    )
    assert result.returncode == 0, result.stderr.decode()
    svg = result.stdout.decode()
    assert "&lt;b&gt;Draft&lt;/b&gt; &amp; &quot;go&quot;" in svg
    assert "<b>" not in svg
    assert "Ship it?" in svg
