"""The current (Mar-17) Attractor spec where the project used to follow older text.

Each test names the section it checks.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from freshness_magic.atomicio import read_jsonl
from freshness_magic.engine import RunState, evaluate_condition, explain_condition
from freshness_magic.engine.outcome import Outcome
from freshness_magic.engine.validation import Severity, validate
from freshness_magic.errors import ValidationError
from tests.engine.runkit import Scripted, graph, make_run


def diagnostics(dot: str, rule: str) -> list[tuple[Severity, str, str]]:
    return [(d.severity, d.message, d.fix) for d in validate(graph(dot)) if d.rule == rule]


def test_two_exit_nodes_are_an_error_7_2(tmp_path: Path) -> None:
    dot = """digraph p {
      start [shape=Mdiamond]
      a [prompt=a]
      done [shape=Msquare]
      also_done [shape=Msquare]
      start -> a -> done
      a -> also_done [condition="outcome=fail"]
    }"""
    found = diagnostics(dot, "terminal_node")
    assert [s for s, _, _ in found] == [Severity.ERROR]
    assert "2 exit nodes" in found[0][1]
    with pytest.raises(ValidationError, match="terminal_node"):
        make_run(dot, tmp_path)


GOAL_VIA_FAILURE = """digraph p {
  start [shape=Mdiamond]
  check [prompt=check, goal_gate=true, retry_target=check]
  work [prompt=work, retry_target=done]
  done [shape=Msquare]
  start -> check
  check -> work [condition="outcome=fail"]
  check -> work
  work -> done [condition="outcome=success"]
}"""


def test_goal_gates_are_judged_when_failure_routing_reaches_the_exit_3_4(tmp_path: Path) -> None:
    handler = Scripted({"check": ["fail", "success"], "work": ["fail", "success"]})
    run = make_run(GOAL_VIA_FAILURE, tmp_path, handler=handler)
    result = run.run()
    assert result.state is RunState.COMPLETED
    redirects = [r for r in read_jsonl(run.run_dir / "events.jsonl")]
    assert [r["data"]["target"] for r in redirects if r["type"] == "goal_gate_redirect"] == [
        "check"
    ]
    assert result.completed_nodes == ["start", "check", "work", "check", "work", "done"]


def test_status_json_writes_preferred_label_appendix_c(tmp_path: Path) -> None:
    handler = Scripted({"a": [Outcome(preferred_label="Yes")]})
    run = make_run(
        "digraph p { start [shape=Mdiamond]; a [prompt=a]; done [shape=Msquare]; "
        "start -> a -> done }",
        tmp_path,
        handler=handler,
    )
    run.run()
    status = json.loads((run.run_dir / "nodes" / "a" / "status.json").read_text())
    assert status["preferred_label"] == "Yes"
    assert "preferred_next_label" not in status
    assert Outcome.from_dict({"preferred_next_label": "Old"}).preferred_label == "Old"


def test_a_skipped_goal_gate_is_not_recorded_and_does_not_loop_5_2(tmp_path: Path) -> None:
    dot = """digraph p {
      start [shape=Mdiamond]
      gate [prompt=g, goal_gate=true, retry_target=gate]
      done [shape=Msquare]
      start -> gate -> done
    }"""
    run = make_run(dot, tmp_path, handler=Scripted({"gate": ["skipped"]}))
    result = run.run()
    assert result.state is RunState.COMPLETED
    assert "gate" not in result.node_outcomes
    assert result.completed_nodes == ["start", "done"]
    assert run.goal_gate_redirects == 0
    types = [r["type"] for r in read_jsonl(run.run_dir / "events.jsonl")]
    assert "stage_skipped" in types


def test_stylesheet_sets_only_llm_properties_8_2(tmp_path: Path) -> None:
    dot = """digraph p {
      graph [model_stylesheet="box { type: tool; goal_gate: true; llm_model: m1 }"]
      start [shape=Mdiamond]
      a [prompt=a]
      done [shape=Msquare]
      start -> a -> done
    }"""
    g = graph(dot)
    node = g.nodes["a"]
    assert node.handler_type == "codergen"
    assert not node.goal_gate
    assert node.attrs["llm_model"] == "m1"
    found = diagnostics(dot, "stylesheet_property")
    assert {s for s, _, _ in found} == {Severity.WARNING}
    assert sorted(m.split("`")[1] for _, m, _ in found) == ["goal_gate", "type"]


def test_every_outgoing_edge_of_a_parallel_node_is_a_branch_4_8(tmp_path: Path) -> None:
    dot = """digraph p {
      start [shape=Mdiamond]
      fan [shape=component]
      a [prompt=a]
      b [prompt=b]
      join [shape=tripleoctagon]
      done [shape=Msquare]
      start -> fan
      fan -> a
      fan -> b [condition="outcome=fail"]
      a -> join
      b -> join
      join -> done
    }"""
    run = make_run(dot, tmp_path)
    result = run.run()
    assert result.state is RunState.COMPLETED
    branches = sorted(r["id"] for r in result.context["parallel.results"])
    assert branches == ["a", "b"]


DEAD_END = """digraph p {
  start [shape=Mdiamond]
  check [prompt=check]
  fix [prompt=fix]
  done [shape=Msquare]
  start -> check
  check -> fix [condition="context.errors=1"]
  check -> done [condition="outcome=fail"]
  fix -> done
}"""


def test_a_dead_end_completes_the_run_and_says_so_3_2(tmp_path: Path) -> None:
    run = make_run(DEAD_END, tmp_path, handler=Scripted({"check": [Outcome()]}))
    result = run.run()
    assert result.state is RunState.COMPLETED
    assert result.dead_end is not None
    assert result.dead_end.node == "check"
    values = {(t.condition, t.value) for t in result.dead_end.conditions}
    assert values == {("context.errors=1", False), ("outcome=fail", False)}
    assert "ended at 'check': no edge matched" in result.summary()
    events = list(read_jsonl(run.run_dir / "events.jsonl"))
    dead = [e for e in events if e["type"] == "dead_end"]
    assert dead and dead[0]["data"]["node"] == "check"
    assert run.history[-1].dead_end == result.dead_end
    found = diagnostics(DEAD_END, "dead_end_possible")
    assert [(s, "check") for s, m, _ in found if "`check`" in m] == [(Severity.WARNING, "check")]


def test_a_key_and_its_negation_leave_no_dead_end() -> None:
    routed = """digraph p {
      start [shape=Mdiamond]
      route [shape=diamond]
      fix [prompt=fix]
      later [prompt=later]
      done [shape=Msquare]
      start -> route
      route -> fix [condition="context.severity=high"]
      route -> later [condition="context.severity!=high"]
      fix -> done
      later -> done
    }"""
    assert diagnostics(routed, "dead_end_possible") == []
    mixed = routed.replace("context.severity!=high", "severity!=high")
    assert diagnostics(mixed, "dead_end_possible") == []
    other = routed.replace("context.severity!=high", "context.severity!=low")
    (found,) = diagnostics(other, "dead_end_possible")
    assert found[0] is Severity.WARNING and "node `route`" in found[1]


def test_a_bare_key_is_true_for_the_string_false_10_5() -> None:
    assert evaluate_condition("flag", outcome="success", context={"flag": "false"})
    assert not evaluate_condition("flag", outcome="success", context={"flag": ""})
    explained = explain_condition("flag", outcome="success", context={"flag": "false"})
    assert explained.result is True
    assert explained.warnings and "write `flag=true`" in explained.warnings[0]
    assert "warning:" in str(explained)


def test_validate_warns_where_a_bare_key_meets_a_graph_value_false_10_5() -> None:
    dot = """digraph p {
      graph [dry_run="false"]
      start [shape=Mdiamond]
      a [prompt=a]
      done [shape=Msquare]
      start -> a
      a -> done [condition="graph.dry_run"]
      a -> done
    }"""
    found = diagnostics(dot, "condition_values")
    assert len(found) == 1
    assert found[0][2] == "write `graph.dry_run=true`"


def test_an_unknown_shape_is_flagged_with_the_closest_shape() -> None:
    dot = """digraph p {
      start [shape=Mdiamond]
      fan [shape=parallel]
      done [shape=Msquare]
      start -> fan -> done
    }"""
    found = diagnostics(dot, "shape_known")
    assert found == [
        (
            Severity.WARNING,
            "node `fan`: shape 'parallel' selects no handler (§2.8), so the node runs as "
            "codergen (an LLM call)",
            "did you mean shape=parallelogram (tool)?",
        )
    ]


def test_an_unknown_outcome_value_is_flagged_with_the_closest_status() -> None:
    dot = """digraph p {
      start [shape=Mdiamond]
      a [prompt=a]
      done [shape=Msquare]
      start -> a
      a -> done [condition="outcome=succes"]
      a -> done
    }"""
    found = diagnostics(dot, "condition_values")
    assert [(s, f) for s, _, f in found] == [(Severity.WARNING, "write `outcome=success`")]


def test_a_misspelt_stylesheet_property_gets_the_rename_not_a_copy_of_the_typo() -> None:
    dot = """digraph g {
      graph [model_stylesheet="* { reasoning_efort: high; } a { goal_gate: true; }"]
      start [shape=Mdiamond]
      a [prompt=a]
      done [shape=Msquare]
      start -> a -> done
    }"""
    fixes = sorted(fix for _, _, fix in diagnostics(dot, "stylesheet_property"))
    assert fixes == [
        "did you mean `reasoning_effort`? rename `reasoning_efort` to `reasoning_effort`",
        "set `goal_gate` on the nodes themselves",
    ]
