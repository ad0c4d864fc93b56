"""The model stylesheet (§8): grammar, selectors, specificity, precedence, error positions."""

from __future__ import annotations

import pytest

from freshness_magic.engine.dot_parser import parse_dot
from freshness_magic.engine.model import Graph, Node
from freshness_magic.engine.pipeline import load_pipeline
from freshness_magic.engine.stylesheet import (
    SelectorKind,
    apply_stylesheet,
    parse_stylesheet,
)
from freshness_magic.engine.transforms import StylesheetTransform
from freshness_magic.errors import StylesheetError

from .spec_examples import STYLESHEET


def graph_of(stylesheet: str, *nodes: Node) -> Graph:
    graph = Graph("g", attrs={"model_stylesheet": stylesheet})
    for node in nodes:
        graph.nodes[node.id] = node
    return graph


def node(node_id: str, explicit: bool = True, **attrs: str) -> Node:
    return Node(node_id, dict(attrs), explicit=frozenset(attrs) if explicit else frozenset())


def test_spec_8_6_example() -> None:
    graph = load_pipeline(STYLESHEET)
    plan, implement, review = (graph.nodes[n] for n in ("plan", "implement", "critical_review"))
    assert plan.llm_model == "claude-sonnet-4-5"
    assert plan.llm_provider == "anthropic"
    assert implement.llm_model == "claude-opus-4-6"
    assert implement.llm_provider == "anthropic"
    assert review.llm_model == "gpt-5.2"
    assert review.llm_provider == "openai"
    assert review.attrs["reasoning_effort"] == "high"
    assert "reasoning_effort" not in implement.attrs
    # start and exit match `*` too
    assert graph.nodes["start"].llm_model == "claude-sonnet-4-5"


def test_parse_rules_selectors_and_declarations() -> None:
    sheet = parse_stylesheet(
        "* { llm_model: a; }\nbox, .fast { llm_model = 'b c'; x.y: \"q;}\" }\n#n1 {}"
    )
    assert [[(s.kind, s.value) for s in r.selectors] for r in sheet.rules] == [
        [(SelectorKind.UNIVERSAL, "")],
        [(SelectorKind.SHAPE, "box"), (SelectorKind.CLASS, "fast")],
        [(SelectorKind.ID, "n1")],
    ]
    decls = sheet.rules[1].declarations
    assert [(d.property, d.value, d.line, d.column) for d in decls] == [
        ("llm_model", "b c", 2, 14),
        ("x.y", "q;}", 2, 33),
    ]


def test_comments_and_newline_separated_declarations() -> None:
    sheet = parse_stylesheet("/* models */ * {\n  llm_model: a\n  llm_provider: b\n}")
    assert [(d.property, d.value) for d in sheet.rules[0].declarations] == [
        ("llm_model", "a"),
        ("llm_provider", "b"),
    ]


def test_empty_stylesheet_has_no_rules() -> None:
    assert parse_stylesheet("  \n ").rules == ()


def test_shape_selector() -> None:
    graph = graph_of(
        "box { llm_model: boxy; } hexagon { llm_model: gate; }",
        node("a"),
        node("b", shape="hexagon"),
        node("c", shape="parallelogram"),
    )
    styled = StylesheetTransform().apply(graph)
    assert styled.nodes["a"].llm_model == "boxy"  # default shape is box
    assert styled.nodes["b"].llm_model == "gate"
    assert "llm_model" not in styled.nodes["c"].attrs


def test_specificity_universal_shape_class_id() -> None:
    sheet = parse_stylesheet(
        "#n { p: id; } .k { p: class; q: class; } box { p: shape; q: shape; r: shape; } "
        "* { p: all; q: all; r: all; s: all; }"
    )
    props = sheet.properties_for(node("n", **{"class": "k"}))
    assert props == {"p": "id", "q": "class", "r": "shape", "s": "all"}


def test_later_rule_of_equal_specificity_wins() -> None:
    sheet = parse_stylesheet(".a { p: first; } .b { p: second; } .a { q: x; }")
    assert sheet.properties_for(node("n", **{"class": "a,b"})) == {"p": "second", "q": "x"}
    sheet = parse_stylesheet(".b { p: second; } .a { p: first; }")
    assert sheet.properties_for(node("n", **{"class": "a,b"}))["p"] == "first"


def test_subgraph_classes_match() -> None:
    graph = load_pipeline(
        'digraph g { graph [model_stylesheet=".loop-a { llm_model: fast; }"]\n'
        '  subgraph cluster_x { label="Loop A"; plan [prompt="p"] }\n  other [prompt="o"] }'
    )
    assert graph.nodes["plan"].llm_model == "fast"
    assert graph.nodes["other"].llm_model == ""


def test_explicit_attribute_wins_over_stylesheet() -> None:
    graph = graph_of("#a { llm_model: sheet; reasoning_effort: low; }", node("a", llm_model="mine"))
    styled = StylesheetTransform().apply(graph)
    assert styled.nodes["a"].llm_model == "mine"
    assert styled.nodes["a"].reasoning_effort == "low"


def test_an_empty_value_on_the_node_leaves_the_stylesheet_in_force() -> None:
    graph = load_pipeline(
        'digraph g { graph [model_stylesheet="* { llm_model: sheet; llm_provider: openai; }"]\n'
        '  a [prompt="x", llm_model="", llm_provider=" "]\n  b [prompt="y", llm_model="own"] }'
    )
    assert graph.nodes["a"].llm_model == "sheet"
    assert graph.nodes["a"].llm_provider == "openai"
    assert graph.nodes["b"].llm_model == "own"


def test_stylesheet_beats_node_default_block() -> None:
    graph = load_pipeline(
        'digraph g { graph [model_stylesheet="* { llm_model: sheet; }"]\n'
        '  node [llm_model="default", timeout="9s"]\n'
        '  a [prompt="x"]\n  b [prompt="y", llm_model="own"] }'
    )
    assert graph.nodes["a"].llm_model == "sheet"
    assert graph.nodes["a"].attrs["timeout"] == "9s"
    assert "llm_model" not in graph.nodes["a"].attr_positions
    assert graph.nodes["b"].llm_model == "own"


def test_apply_does_not_modify_the_input_graph() -> None:
    original = parse_dot(STYLESHEET)
    before = {n.id: dict(n.attrs) for n in original.nodes.values()}
    styled = apply_stylesheet(original, parse_stylesheet(original.model_stylesheet))
    assert {n.id: dict(n.attrs) for n in original.nodes.values()} == before
    assert styled is not original
    assert styled.nodes["plan"].llm_model == "claude-sonnet-4-5"


def test_transform_leaves_graph_alone_on_syntax_error() -> None:
    graph = graph_of("* { llm_model a }", node("a"))
    assert StylesheetTransform().apply(graph) is graph


@pytest.mark.parametrize(
    ("text", "line", "column", "fragment"),
    [
        ("* { llm_model a; }", 1, 15, "expected `:` after property `llm_model`"),
        ("* { llm_model: ; }", 1, 16, "`llm_model` has no value"),
        ("* llm_model: a; }", 1, 3, "expected `{` after selector `*`"),
        ("\n\n  . { a: b; }", 3, 3, "`.` must be followed by a class name"),
        ("# { a: b; }", 1, 1, "`#` must be followed by a node id"),
        ("* { a: b;", 1, 10, "`}` is missing"),
        ("* { a: 'b; }", 1, 8, "unterminated quoted value"),
        ("* { 9a: b; }", 1, 5, "expected a property name"),
        ("{ a: b; }", 1, 1, "expected a selector"),
        ("* { a: b c }  /* x", 1, 15, "unterminated comment"),
        ("* {\n  a: 'b' c; }", 2, 10, "expected `;` or `}` after the value of `a`"),
    ],
)
def test_syntax_errors_carry_line_and_column(
    text: str, line: int, column: int, fragment: str
) -> None:
    with pytest.raises(StylesheetError) as info:
        parse_stylesheet(text)
    assert (info.value.line, info.value.column) == (line, column), info.value.message
    assert fragment in info.value.message
    assert str(info.value).startswith(f"stylesheet line {line}, column {column}: ")
