"""Validation (§7): every rule positive and negative, severities, positions, fixes, custom rules."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from freshness_magic.engine.model import Edge, Graph, Node, Position
from freshness_magic.engine.pipeline import load_pipeline
from freshness_magic.engine.validation import (
    Diagnostic,
    LintRule,
    ScanRule,
    Severity,
    Validator,
    default_rules,
    has_errors,
    validate,
    validate_or_raise,
)
from freshness_magic.errors import ValidationError
from freshness_magic.evidence.lint import evidence_rules
from freshness_magic.freshness.lint import freshness_rules

from .spec_examples import BRANCH, REVIEW, SIMPLE, SMOKE

OK = """digraph ok {
  start [shape=Mdiamond]
  work  [prompt="do it"]
  done  [shape=Msquare]
  start -> work -> done
}
"""


def lint(text: str, rule: str | None = None, **kwargs: object) -> list[Diagnostic]:
    """Every rule a session run checks: the engine's plus freshness and evidence ones."""
    kwargs.setdefault("extra_rules", [*freshness_rules(), *evidence_rules()])
    diagnostics = validate(load_pipeline(text, path="p.dot"), **kwargs)  # type: ignore[arg-type]
    return [d for d in diagnostics if rule is None or d.rule == rule]


def pipeline(body: str, header: str = "") -> str:
    """The OK pipeline with extra statements; ``body`` starts on line 6."""
    return OK.replace("  start -> work -> done\n", "  start -> work -> done\n" + body) + header


def only(diagnostics: list[Diagnostic]) -> Diagnostic:
    assert len(diagnostics) == 1, [d.format() for d in diagnostics]
    return diagnostics[0]


def test_valid_pipeline_has_no_diagnostics() -> None:
    assert lint(OK) == []


SPEC_EXAMPLES = [SIMPLE, BRANCH, REVIEW, SMOKE]


@pytest.mark.parametrize("text", SPEC_EXAMPLES, ids=["simple", "branch", "human", "smoke"])
def test_spec_examples_have_no_errors(text: str) -> None:
    diagnostics = lint(text)
    assert not has_errors(diagnostics), [d.format() for d in diagnostics]


def test_spec_human_gate_example_warns_about_prompts_only() -> None:
    rules = {(d.rule, d.node) for d in lint(SPEC_EXAMPLES[2])}
    assert rules == {("prompt_on_llm_nodes", "ship_it"), ("prompt_on_llm_nodes", "fixes")}


def test_smoke_example_warns_goal_gate_without_retry_target() -> None:
    d = only(lint(SPEC_EXAMPLES[3], "goal_gate_has_retry"))
    assert d.node == "implement"
    assert d.severity is Severity.WARNING


# -- §7.2 rules ---------------------------------------------------------------------------


def test_start_node_missing_points_at_digraph() -> None:
    d = only(
        lint(
            "// c\ndigraph g {\n  a [prompt=x]\n  done [shape=Msquare]\n  a -> done\n}",
            "start_node",
        )
    )
    assert d.severity is Severity.ERROR
    assert (d.line, d.column) == (2, 1)
    assert "no start node" in d.message
    assert "shape=Mdiamond" in d.fix


def test_start_node_found_by_id() -> None:
    text = "digraph g { start [label=S]\n a [prompt=x]\n exit\n start -> a -> exit }"
    assert lint(text, "start_node") == []
    assert lint(text, "terminal_node") == []


def test_two_start_nodes_is_an_error_at_the_second() -> None:
    d = only(lint(pipeline("  again [shape=Mdiamond]\n  again -> work\n"), "start_node"))
    assert d.node == "again"
    assert (d.line, d.column) == (6, 10)
    assert "2 start nodes" in d.message


def test_terminal_node_missing() -> None:
    d = only(
        lint("digraph g {\n start [shape=Mdiamond]\n a [prompt=x]\n start -> a }", "terminal_node")
    )
    assert d.severity is Severity.ERROR
    assert "no exit node" in d.message
    assert "shape=Msquare" in d.fix


def test_orphan_node_is_a_warning() -> None:
    d = only(lint(pipeline('  lonely [prompt="p"]\n'), "reachability"))
    assert d.severity is Severity.WARNING
    assert d.node == "lonely"
    assert (d.line, d.column) == (6, 3)
    assert "cannot be reached" in d.message
    assert "add an edge to `lonely`" in d.fix


def test_reachability_follows_edges_through_cycles() -> None:
    text = pipeline("  work -> back\n  back [prompt=b]\n  back -> work\n")
    assert lint(text, "reachability") == []


def test_edge_target_exists() -> None:
    graph = Graph("g")
    for node_id, shape in (("start", "Mdiamond"), ("done", "Msquare")):
        graph.nodes[node_id] = Node(node_id, {"shape": shape})
    graph.edges = [
        Edge("start", "done", position=Position(3, 1)),
        Edge("start", "ghost", position=Position(4, 1), index=1),
        Edge("phantom", "done", position=Position(5, 1), index=2),
    ]
    found = [d for d in validate(graph) if d.rule == "edge_target_exists"]
    assert [(d.edge, d.line, d.severity) for d in found] == [
        (("start", "ghost"), 4, Severity.ERROR),
        (("phantom", "done"), 5, Severity.ERROR),
    ]
    assert "`ghost` is not a node" in found[0].message
    assert "declare `ghost`" in found[0].fix


def test_start_no_incoming() -> None:
    d = only(lint(pipeline("  work -> start\n"), "start_no_incoming"))
    assert d.severity is Severity.ERROR
    assert d.edge == ("work", "start")
    assert (d.line, d.column) == (6, 3)
    assert lint(OK, "start_no_incoming") == []


def test_exit_no_outgoing() -> None:
    d = only(lint(pipeline("  done -> work\n"), "exit_no_outgoing"))
    assert d.severity is Severity.ERROR
    assert d.edge == ("done", "work")
    assert "remove the edge" in d.fix


def test_condition_syntax_points_at_the_token_in_the_file() -> None:
    text = pipeline('  work -> done [condition="outcome=success || outcome=fail"]\n')
    d = only(lint(text, "condition_syntax"))
    assert d.severity is Severity.ERROR
    assert d.edge == ("work", "done")
    line = text.splitlines()[d.line - 1]
    assert line[d.column - 1 : d.column + 1] == "||"
    assert "column 17" in d.message
    assert d.fix == "use two edges, one per alternative"


def test_condition_syntax_column_accounts_for_escapes() -> None:
    text = pipeline('  work -> done [label="x", condition="context.n=\\"a b\\" && x==1"]\n')
    d = only(lint(text, "condition_syntax"))
    line = text.splitlines()[d.line - 1]
    assert line[d.column - 1 : d.column + 1] == "=="
    assert d.fix == "write `x=1`"


def test_valid_conditions_pass() -> None:
    text = pipeline('  work -> done [condition="outcome=success && context.a!=b && flag"]\n')
    assert lint(text, "condition_syntax") == []


def test_stylesheet_syntax_points_into_the_stylesheet() -> None:
    text = (
        "digraph g {\n"
        '  graph [model_stylesheet="\n'
        "    * { llm_model: a; }\n"
        '    .code { llm_model b; }"]\n'
        "  start [shape=Mdiamond]\n  done [shape=Msquare]\n  start -> done\n}"
    )
    d = only(lint(text, "stylesheet_syntax"))
    assert d.severity is Severity.ERROR
    assert (d.line, d.column) == (4, 23)
    assert "model_stylesheet line 3, column 23" in d.message
    assert "selector { property: value; }" in d.fix


def test_stylesheet_syntax_ok() -> None:
    text = pipeline("", header="")
    text = text.replace(
        "digraph ok {", 'digraph ok {\n  graph [model_stylesheet="* { llm_model: m; }"]'
    )
    assert lint(text, "stylesheet_syntax") == []


def test_type_known() -> None:
    text = pipeline('  odd [type="magic.thing", prompt=x]\n  work -> odd\n')
    d = only(lint(text, "type_known"))
    assert d.severity is Severity.WARNING
    assert d.node == "odd"
    assert (d.line, d.column) == (6, 8)
    assert "register a handler" in d.fix
    assert d.message.endswith("so the node runs the default handler (codergen) instead")
    assert lint(text, "type_known", known_types=["magic.thing"]) == []
    assert lint(pipeline('  h [type="wait.human"]\n  work -> h\n'), "type_known") == []


def test_fidelity_valid_on_graph_node_and_edge() -> None:
    text = pipeline(
        '  work -> x [fidelity="huge"]\n  x [prompt=p, fidelity="summary:high"]\n'
        '  y [prompt=p, fidelity="tiny"]\n  x -> y\n'
    ).replace("digraph ok {", 'digraph ok {\n  default_fidelity="weird"')
    found = lint(text, "fidelity_valid")
    assert {(d.node, d.edge) for d in found} == {(None, None), (None, ("work", "x")), ("y", None)}
    assert all(d.severity is Severity.WARNING for d in found)
    assert "summary:medium" in found[0].fix


def test_retry_target_exists() -> None:
    text = pipeline(
        "  w2 [prompt=p, retry_target=nowhere, fallback_retry_target=work]\n  work -> w2\n"
    ).replace("digraph ok {", "digraph ok {\n  retry_target=gone")
    found = lint(text, "retry_target_exists")
    assert [(d.node, d.severity) for d in found] == [
        (None, Severity.WARNING),
        ("w2", Severity.WARNING),
    ]
    assert "`gone`" in found[0].message
    assert "`nowhere`" in found[1].message


def test_goal_gate_has_retry() -> None:
    d = only(lint(pipeline("  g [prompt=p, goal_gate=true]\n  work -> g\n"), "goal_gate_has_retry"))
    assert d.node == "g"
    assert "retry_target" in d.fix
    assert (
        lint(
            pipeline("  g [prompt=p, goal_gate=true, retry_target=work]\n  work -> g\n"),
            "goal_gate_has_retry",
        )
        == []
    )
    with_graph_target = pipeline("  g [prompt=p, goal_gate=true]\n  work -> g\n").replace(
        "digraph ok {", "digraph ok {\n  retry_target=work"
    )
    assert lint(with_graph_target, "goal_gate_has_retry") == []


def test_prompt_on_llm_nodes() -> None:
    d = only(lint(pipeline("  bare\n  work -> bare\n"), "prompt_on_llm_nodes"))
    assert (d.node, d.severity) == ("bare", Severity.WARNING)
    assert lint(pipeline('  lab [label="Do it"]\n  work -> lab\n'), "prompt_on_llm_nodes") == []
    assert lint(pipeline("  t [shape=parallelogram]\n  work -> t\n"), "prompt_on_llm_nodes") == []


# -- project rules --------------------------------------------------------------------------


def test_freshness_valid() -> None:
    d = only(
        lint(
            pipeline('  f [prompt=p, source_files="a.py", freshness="strict"]\n  work -> f\n'),
            "freshness_valid",
        )
    )
    assert d.severity is Severity.ERROR
    assert (d.line, d.column) == (6, 37)
    assert "ignore|warn|block" in d.message
    for mode in ("ignore", "warn", "block"):
        text = pipeline(f'  f [prompt=p, source_files="a.py", freshness="{mode}"]\n  work -> f\n')
        assert lint(text, "freshness_valid") == []


@pytest.mark.parametrize("mode", ["warn", "block"])
def test_freshness_without_source_files_warns(mode: str) -> None:
    d = only(
        lint(pipeline(f'  f [prompt=p, freshness="{mode}"]\n  work -> f\n'), "freshness_sources")
    )
    assert d.severity is Severity.WARNING
    assert "source_files" in d.fix
    assert (
        lint(pipeline('  f [prompt=p, freshness="ignore"]\n  work -> f\n'), "freshness_sources")
        == []
    )


def test_source_files_without_freshness_is_an_info_that_says_they_are_never_checked() -> None:
    d = only(
        lint(pipeline('  f [prompt=p, source_files="a.py"]\n  work -> f\n'), "freshness_unset")
    )
    assert d.severity is Severity.INFO and d.node == "f"
    assert "never checked or shown stale" in d.message and 'freshness="warn"' in d.fix
    for attrs in ('source_files="a.py", freshness="ignore"', 'freshness="warn"', "prompt=q"):
        assert lint(pipeline(f"  f [prompt=p, {attrs}]\n  work -> f\n"), "freshness_unset") == []


@pytest.mark.parametrize(
    ("entry", "warned"),
    [
        ("/etc/passwd", True),
        ("../other/x.py", True),
        ("src/../../x", True),
        ("~/x", True),
        ("src/**/*.py", False),
        ("a..b.py", False),
        ("docs/spec.md", False),
    ],
)
def test_source_files_outside_the_work_tree(entry: str, warned: bool) -> None:
    text = pipeline(f'  f [prompt=p, source_files="ok.py, {entry}"]\n  work -> f\n')
    found = lint(text, "source_files_path")
    assert bool(found) is warned
    if warned:
        assert found[0].severity is Severity.ERROR
        assert entry in found[0].message
        assert "outside the working directory (not allowed)" in found[0].message


GATE = """digraph g {
  start [shape=Mdiamond]
  approve [shape=hexagon, label="Ship it?", human.default_choice="%s"]
  done [shape=Msquare]
  redo [prompt=r]
  start -> approve
  approve -> done [label="[Y] Yes"]
  approve -> redo [label="N) No, redo"]
  redo -> approve
}
"""


@pytest.mark.parametrize("choice", ["Y", "y", "Yes", "[Y] Yes", "done", "N", "No, redo", "redo"])
def test_default_choice_matches_a_choice(choice: str) -> None:
    assert lint(GATE % choice, "default_choice_matches") == []


def test_default_choice_matching_nothing_warns() -> None:
    d = only(lint(GATE % "Maybe", "default_choice_matches"))
    assert d.severity is Severity.WARNING
    assert (d.line, d.column) == (3, (GATE % "Maybe").splitlines()[2].index("human.") + 1)
    assert "Y (Yes -> done)" in d.message and "N (No, redo -> redo)" in d.message


def test_default_choice_on_a_non_gate_warns() -> None:
    d = only(
        lint(
            pipeline('  w [prompt=p, human.default_choice="Y"]\n  work -> w\n'),
            "default_choice_matches",
        )
    )
    assert "not a human gate" in d.message


def test_unknown_edge_attribute_is_info() -> None:
    d = only(
        lint(pipeline("  work -> done [colour=red, color=blue, label=x]\n"), "edge_attr_known")
    )
    assert d.severity is Severity.INFO
    assert "`colour`" in d.message
    assert (d.line, d.column) == (6, 17)


@pytest.mark.parametrize(
    ("statement", "key"),
    [
        ("  w [prompt=p, max_retries=lots]\n  work -> w\n", "max_retries"),
        ("  w [prompt=p, max_retries=-1]\n  work -> w\n", "max_retries"),
        ("  w [prompt=p, goal_gate=maybe, retry_target=work]\n  work -> w\n", "goal_gate"),
        ("  w [prompt=p, timeout=soon]\n  work -> w\n", "timeout"),
        ('  w [prompt=p, timeout="999999d"]\n  work -> w\n', "timeout"),
        ('  w [shape=hexagon, "human.timeout"=soon]\n  work -> w\n', "human.timeout"),
        ("  w [prompt=p, allow_partial=2]\n  work -> w\n", "allow_partial"),
        ("  w [prompt=p, expects_no_changes=perhaps]\n  work -> w\n", "expects_no_changes"),
        ("  work -> done [weight=high]\n", "weight"),
        ("  work -> done [loop_restart=sometimes]\n", "loop_restart"),
    ],
)
def test_values_that_do_not_coerce_are_errors(statement: str, key: str) -> None:
    d = only(lint(pipeline(statement), "attr_type"))
    assert d.severity is Severity.ERROR
    assert key in d.message
    assert d.line == 6
    assert statement.splitlines()[0][d.column - 1 :].lstrip('"').startswith(key)
    assert d.fix.startswith(f"write {key} as ")


def test_graph_typed_attributes() -> None:
    text = OK.replace("digraph ok {", "digraph ok {\n  default_max_retry=many\n  commit=sure")
    found = lint(text, "attr_type")
    assert [(d.line, d.column) for d in found] == [(2, 3), (3, 3)]


def test_typed_values_that_coerce_pass() -> None:
    text = pipeline(
        '  w [prompt=p, max_retries=3, goal_gate=false, timeout="250ms", allow_partial=true]\n'
        "  work -> w [weight=-2, loop_restart=false]\n"
    )
    assert lint(text, "attr_type") == []


def test_evidence_valid() -> None:
    text = pipeline('  w [prompt=p, evidence="maybe"]\n  work -> w\n').replace(
        "digraph ok {", 'digraph ok {\n  evidence="always"'
    )
    found = lint(text, "evidence_valid")
    assert [(d.node, d.severity) for d in found] == [(None, Severity.ERROR), ("w", Severity.ERROR)]
    assert "record|require" in found[0].message
    assert (
        lint(pipeline('  w [prompt=p, evidence="require"]\n  work -> w\n'), "evidence_valid") == []
    )


# -- diagnostics and the API ------------------------------------------------------------------


def test_diagnostic_dict_and_format() -> None:
    d = only(lint(pipeline("  work -> done [colour=red]\n"), "edge_attr_known"))
    data = d.to_dict()
    assert list(data) == ["rule", "severity", "message", "node", "edge", "line", "column", "fix"]
    assert data["severity"] == "info"
    assert data["edge"] == ["work", "done"]
    json.dumps(data)
    assert d.format("p.dot") == f"p.dot:6:17: info edge_attr_known: {d.message} (fix: {d.fix})"
    bare = Diagnostic("r", Severity.ERROR, "m", line=2, column=5)
    assert bare.format("x.dot") == "x.dot:2:5: error r: m"


def test_diagnostics_are_sorted_by_position() -> None:
    text = pipeline('  lonely [prompt="p"]\n  work -> done [colour=red]\n  done -> work\n')
    positions = [(d.line, d.column) for d in lint(text)]
    assert positions == sorted(positions)


def test_validate_or_raise() -> None:
    graph = load_pipeline(
        pipeline("  done -> work\n  w [prompt=p, max_retries=x]\n  work -> w\n"), path="bad.dot"
    )
    with pytest.raises(ValidationError) as info:
        validate_or_raise(graph)
    message = str(info.value)
    assert "2 validation errors and 2 warnings; fix the errors before running" in message
    assert "bad.dot:6:3: error exit_no_outgoing" in message
    # the warnings too, in source order: a run's refusal shows what validate shows but infos
    assert [d.rule for d in info.value.diagnostics] == [
        "unconditional_choice",
        "exit_no_outgoing",
        "dead_end_node",
        "attr_type",
    ]
    assert message.index("warning dead_end_node") < message.index("error attr_type")
    warnings = validate_or_raise(load_pipeline(pipeline('  lonely [prompt="p"]\n')))
    assert [d.rule for d in warnings] == ["reachability"]


def test_all_spec_rules_are_built_in() -> None:
    names = [rule.name for rule in default_rules()]
    for name in (
        "start_node",
        "terminal_node",
        "reachability",
        "edge_target_exists",
        "start_no_incoming",
        "exit_no_outgoing",
        "condition_syntax",
        "stylesheet_syntax",
        "type_known",
        "fidelity_valid",
        "retry_target_exists",
        "goal_gate_has_retry",
        "prompt_on_llm_nodes",
    ):
        assert name in names
    assert all(isinstance(rule, LintRule) for rule in default_rules())


@dataclass
class NoToolsRule:
    name: str = "no_tools"

    def apply(self, graph: Graph) -> list[Diagnostic]:
        return [
            Diagnostic(
                self.name,
                Severity.ERROR,
                f"tool node {n.id}",
                n.id,
                line=n.position.line,
                column=n.position.column,
                fix="remove it",
            )
            for n in graph.nodes.values()
            if n.handler_type == "tool"
        ]


TOOLS = pipeline(
    '  t [shape=parallelogram, tool_command="true"]\n'
    '  work -> t [condition="outcome=success"]\n  t -> done\n'
)


def test_custom_rule_per_call_and_registered() -> None:
    assert lint(TOOLS, "no_tools") == []
    d = only(lint(TOOLS, "no_tools", extra_rules=[NoToolsRule()]))
    assert (d.node, d.line) == ("t", 6)
    validator = Validator()
    validator.register_rule(NoToolsRule())
    graph = load_pipeline(TOOLS)
    assert [d.rule for d in validator.validate(graph)] == ["no_tools"]
    assert validator.rules[-1].name == "no_tools"
    assert [d.rule for d in validate(graph)] == []  # nothing leaked into a global registry
    with pytest.raises(ValidationError):
        validator.validate_or_raise(graph)


def test_validator_with_only_custom_rules() -> None:
    validator = Validator([NoToolsRule()])
    assert [r.name for r in validator.rules] == ["no_tools"]


def test_register_rejects_non_rules() -> None:
    with pytest.raises(TypeError, match="not a lint rule"):
        Validator().register_rule(object())  # type: ignore[arg-type]


def test_a_crashing_custom_rule_becomes_an_error_diagnostic() -> None:
    class Broken:
        name = "broken"

        def apply(self, graph: Graph) -> list[Diagnostic]:
            raise KeyError("oops")

    found = lint(OK, extra_rules=[Broken()])
    d = only(found)
    assert (d.rule, d.severity) == ("broken", Severity.ERROR)
    assert "KeyError" in d.message


def test_graph_built_in_code_validates_without_source() -> None:
    graph = Graph("g")
    graph.nodes["start"] = Node("start", {"shape": "Mdiamond"})
    graph.nodes["a"] = Node("a", {"prompt": "p"})
    graph.edges = [Edge("start", "a", {"condition": "x==1"})]
    found = validate(graph)
    rules = {d.rule: d for d in found}
    assert set(rules) == {"terminal_node", "condition_syntax"}
    assert (rules["terminal_node"].line, rules["terminal_node"].column) == (0, 0)


def test_scan_rule_runs_standalone_and_fused() -> None:
    def node_check(graph: Graph, node: Node, out: list[Diagnostic]) -> None:
        if node.id == "work":
            out.append(Diagnostic("mine", Severity.INFO, "seen", node.id, line=3, column=3))

    rule = ScanRule("mine", node_check=node_check)
    graph = load_pipeline(OK)
    assert [d.message for d in rule.apply(graph)] == ["seen"]
    assert [d.rule for d in validate(graph, extra_rules=[rule])] == ["mine"]


def test_a_crashing_scan_rule_is_reported_once() -> None:
    def node_check(graph: Graph, node: Node, out: list[Diagnostic]) -> None:
        raise ValueError(f"bad {node.id}")

    found = validate(load_pipeline(OK), extra_rules=[ScanRule("fragile", node_check=node_check)])
    d = only(found)
    assert (d.rule, d.severity) == ("fragile", Severity.ERROR)
    assert "ValueError: bad start" in d.message


KEYS = st.sampled_from(
    [
        "shape",
        "type",
        "prompt",
        "label",
        "max_retries",
        "goal_gate",
        "timeout",
        "fidelity",
        "retry_target",
        "freshness",
        "source_files",
        "evidence",
        "human.default_choice",
        "allow_partial",
        "class",
    ]
)
EDGE_KEYS = st.sampled_from(["label", "condition", "weight", "fidelity", "loop_restart", "zz"])
VALUES = st.one_of(
    st.text(max_size=12),
    st.sampled_from(["Mdiamond", "Msquare", "hexagon", "true", "-1", "x==1", "../a", "block"]),
)


@settings(max_examples=150, deadline=None)
@given(
    nodes=st.lists(st.dictionaries(KEYS, VALUES, max_size=6), min_size=1, max_size=6),
    edges=st.lists(
        st.tuples(st.integers(0, 7), st.integers(0, 7), st.dictionaries(EDGE_KEYS, VALUES)),
        max_size=10,
    ),
)
def test_arbitrary_graphs_validate_without_raising(
    nodes: list[dict[str, str]], edges: list[tuple[int, int, dict[str, str]]]
) -> None:
    graph = Graph("g", source="digraph g {}")
    for index, attrs in enumerate(nodes):
        graph.nodes[f"n{index}"] = Node(f"n{index}", attrs, Position(index + 2, 1))
    graph.edges = [
        Edge(f"n{a}", f"n{b}", attrs, Position(20 + i, 1), index=i)
        for i, (a, b, attrs) in enumerate(edges)
    ]
    diagnostics = validate(graph)
    assert not [d for d in diagnostics if d.message.startswith("lint rule failed")]
    for d in diagnostics:
        assert d.format("g.dot").startswith("g.dot:")
        json.dumps(d.to_dict())


def test_condition_position_with_quoted_key_and_line_continuation() -> None:
    text = (
        "digraph g {\n start [shape=Mdiamond]\n done [shape=Msquare]\n"
        ' start -> done ["condition"="a=\\"x\\" && \\\nb==2"]\n}'
    )
    d = only(lint(text, "condition_syntax"))
    assert (d.line, d.column) == (5, 2)
    assert text.splitlines()[d.line - 1][d.column - 1 :].startswith("==2")
