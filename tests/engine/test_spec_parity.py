"""The spec's §11.12 cross-feature parity matrix (one test per row) and the §11.13 smoke test.

Every test that executes asserts the path taken and the final context. The codergen backend is
the simulated one unless a row needs scripted outcomes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from freshness_magic.engine import Run, RunResult, RunState
from freshness_magic.engine.context import Context
from freshness_magic.engine.handlers.base import StepEnv
from freshness_magic.engine.handlers.builtin import default_registry
from freshness_magic.engine.model import Node
from freshness_magic.engine.outcome import Outcome, StageStatus
from freshness_magic.engine.pipeline import load_pipeline
from freshness_magic.engine.validation import Severity, validate
from freshness_magic.errors import ValidationError
from tests.engine.runkit import FakeClock, Scripted, make_run

from .spec_examples import SMOKE


def run_dot(dot: str, tmp_path: Path, **kw: Any) -> RunResult:
    result = make_run(dot, tmp_path, **kw).run()
    return result


def ctx(result: RunResult, *keys: str) -> dict[str, Any]:
    return {k: result.context.get(k) for k in keys}


LINEAR = """digraph linear {
  start [shape=Mdiamond]
  A [prompt="do A"]
  B [prompt="do B"]
  done [shape=Msquare]
  start -> A -> B -> done
}"""


def test_parse_simple_linear_pipeline(tmp_path: Path) -> None:
    g = load_pipeline(LINEAR)
    assert list(g.nodes) == ["start", "A", "B", "done"]
    assert [(e.source, e.target) for e in g.edges] == [("start", "A"), ("A", "B"), ("B", "done")]
    result = Run(g, workdir=tmp_path).run()
    assert result.completed_nodes == ["start", "A", "B", "done"]
    assert ctx(result, "outcome", "last_stage", "current_node") == {
        "outcome": "success",
        "last_stage": "B",
        "current_node": "done",
    }


def test_parse_graph_level_attributes(tmp_path: Path) -> None:
    g = load_pipeline(LINEAR.replace("{", '{ graph [goal="Ship", label="Release train"]', 1))
    assert (g.goal, g.label) == ("Ship", "Release train")
    result = Run(g, workdir=tmp_path).run()
    assert result.completed_nodes == ["start", "A", "B", "done"]
    assert ctx(result, "graph.goal", "graph.label") == {
        "graph.goal": "Ship",
        "graph.label": "Release train",
    }


def test_parse_multi_line_node_attributes(tmp_path: Path) -> None:
    dot = """digraph m {
      start [shape=Mdiamond]
      A [
        label="Step A",
        prompt="first line",
        max_retries=2
      ]
      done [shape=Msquare]
      start -> A -> done
    }"""
    g = load_pipeline(dot)
    assert g.nodes["A"].attrs == {"label": "Step A", "prompt": "first line", "max_retries": "2"}
    result = Run(g, workdir=tmp_path).run()
    assert result.completed_nodes == ["start", "A", "done"]
    assert result.context["last_stage"] == "A"


def test_validate_missing_start_node_is_an_error() -> None:
    diags = validate(load_pipeline("digraph g { A [prompt=x] done [shape=Msquare] A -> done }"))
    assert any(d.rule == "start_node" and d.severity is Severity.ERROR for d in diags)


def test_validate_missing_exit_node_is_an_error() -> None:
    diags = validate(load_pipeline("digraph g { start [shape=Mdiamond] A [prompt=x] start -> A }"))
    assert any(d.rule == "terminal_node" and d.severity is Severity.ERROR for d in diags)


def test_validate_orphan_node_is_a_warning(tmp_path: Path) -> None:
    dot = LINEAR.replace("start -> A", 'orphan [prompt="never"]\n start -> A')
    diags = validate(load_pipeline(dot))
    orphan = [d for d in diags if d.node == "orphan"]
    assert orphan and all(d.severity is Severity.WARNING for d in orphan)
    result = run_dot(dot, tmp_path)
    assert result.completed_nodes == ["start", "A", "B", "done"]
    assert "orphan" not in result.node_outcomes


def test_execute_linear_three_node_pipeline(tmp_path: Path) -> None:
    result = run_dot(LINEAR, tmp_path)
    assert result.state is RunState.COMPLETED
    assert result.completed_nodes == ["start", "A", "B", "done"]
    assert all(o.status is StageStatus.SUCCESS for o in result.node_outcomes.values())
    assert result.context["last_response"] == "[Simulated] Response for stage: B"


BRANCHING = """digraph b {
  start [shape=Mdiamond]
  test [prompt="run tests"]
  ship [prompt="ship"]
  fix [prompt="fix"]
  done [shape=Msquare]
  start -> test
  test -> ship [condition="outcome=success"]
  test -> fix [condition="outcome=fail"]
  ship -> done
  fix -> done
}"""


@pytest.mark.parametrize(("status", "path"), [("success", "ship"), ("fail", "fix")])
def test_execute_conditional_branching(tmp_path: Path, status: str, path: str) -> None:
    result = run_dot(BRANCHING, tmp_path, handler=Scripted({"test": [status]}))
    assert result.completed_nodes == ["start", "test", path, "done"]
    assert result.node_outcomes["test"].status.value == status
    assert result.context["last_stage"] == path


def test_execute_with_retry_on_failure_max_retries_2(tmp_path: Path) -> None:
    clock = FakeClock()
    dot = BRANCHING.replace('test [prompt="run tests"]', 'test [prompt="t", max_retries=2]')
    result = run_dot(
        dot, tmp_path, handler=Scripted({"test": ["retry", "retry", "success"]}), clock=clock
    )
    assert result.completed_nodes == ["start", "test", "ship", "done"]
    assert len(clock.sleeps) == 2
    assert result.context["internal.retry_count.test"] == 2
    dot_exhaust = dot
    result = run_dot(
        dot_exhaust, tmp_path, handler=Scripted({"test": ["retry"]}), clock=FakeClock()
    )
    assert result.completed_nodes == ["start", "test", "fix", "done"]
    assert result.context["outcome"] == "success"
    assert result.node_outcomes["test"].status is StageStatus.FAIL


GOAL = """digraph g {
  start [shape=Mdiamond]
  impl [prompt="i", goal_gate=true, retry_target="impl"]
  done [shape=Msquare]
  start -> impl
  impl -> done [condition="outcome=success"]
  impl -> done [condition="outcome=fail"]
}"""


def test_goal_gate_blocks_exit_when_unsatisfied(tmp_path: Path) -> None:
    result = run_dot(GOAL, tmp_path, handler=Scripted({"impl": ["fail", "fail", "success"]}))
    assert result.completed_nodes == ["start", "impl", "impl", "impl", "done"]
    assert result.state is RunState.COMPLETED
    assert result.context["outcome"] == "success"
    failing = run_dot(
        GOAL.replace(', retry_target="impl"', ""), tmp_path, handler=Scripted({"impl": ["fail"]})
    )
    assert failing.state is RunState.FAILED
    assert failing.completed_nodes == ["start", "impl"]
    assert failing.context["outcome"] == "fail"


def test_goal_gate_allows_exit_when_all_satisfied(tmp_path: Path) -> None:
    result = run_dot(GOAL, tmp_path)
    assert result.completed_nodes == ["start", "impl", "done"]
    assert result.state is RunState.COMPLETED
    assert result.context["last_stage"] == "impl"


def test_wait_human_presents_choices_and_routes_on_selection(tmp_path: Path) -> None:
    dot = """digraph h {
      start [shape=Mdiamond]
      gate [shape=hexagon, label="Deploy?"]
      deploy [prompt="deploy"]
      abort [prompt="abort"]
      done [shape=Msquare]
      start -> gate
      gate -> deploy [label="[D] Deploy"]
      gate -> abort [label="[A] Abort"]
      deploy -> done
      abort -> done
    }"""
    run = make_run(dot, tmp_path)
    waiting = run.run()
    assert waiting.state is RunState.WAITING
    assert [c.label for c in waiting.pending_gate.choices] == ["[D] Deploy", "[A] Abort"]  # type: ignore[union-attr]
    run.answer("gate", "A")
    result = run.run()
    assert result.completed_nodes == ["start", "gate", "abort", "done"]
    assert ctx(result, "human.gate.selected", "human.gate.label", "last_stage") == {
        "human.gate.selected": "A",
        "human.gate.label": "[A] Abort",
        "last_stage": "abort",
    }


FANOUT = """digraph e {
  start [shape=Mdiamond]
  n [prompt="n"]
  heavy [prompt="h"] cond [prompt="c"] light [prompt="l"] zeta [prompt="z"] alpha [prompt="a"]
  done [shape=Msquare]
  start -> n
  n -> heavy [weight=10]
  n -> cond [condition="outcome=success"]
  heavy -> done
  cond -> done
  light -> done
  zeta -> done
  alpha -> done
}"""


def test_edge_selection_condition_match_wins_over_weight(tmp_path: Path) -> None:
    result = run_dot(FANOUT, tmp_path)
    assert result.completed_nodes == ["start", "n", "cond", "done"]
    assert result.context["last_stage"] == "cond"


def test_edge_selection_weight_breaks_ties_for_unconditional_edges(tmp_path: Path) -> None:
    dot = FANOUT.replace(
        'n -> cond [condition="outcome=success"]', "n -> light [weight=3]\n n -> cond [weight=2]"
    )
    result = run_dot(dot.replace("n -> heavy [weight=10]", ""), tmp_path)
    assert result.completed_nodes == ["start", "n", "light", "done"]
    assert result.context["last_stage"] == "light"


def test_edge_selection_lexical_tiebreak_as_final_fallback(tmp_path: Path) -> None:
    dot = FANOUT.replace("n -> heavy [weight=10]", "n -> zeta").replace(
        'n -> cond [condition="outcome=success"]', "n -> alpha\n n -> light"
    )
    result = run_dot(dot, tmp_path)
    assert result.completed_nodes == ["start", "n", "alpha", "done"]
    assert result.context["last_stage"] == "alpha"


def test_context_updates_are_visible_to_the_next_node(tmp_path: Path) -> None:
    seen: list[Any] = []

    def reader(node: Node, context: Context, env: StepEnv) -> Outcome:
        seen.append(context.get("context.ticket"))
        return Outcome(context_updates={"context.read_back": context.get("context.ticket")})

    handler = Scripted(
        {
            "A": [Outcome(context_updates={"context.ticket": "T-42"})],
            "B": [reader],
        }
    )
    result = run_dot(LINEAR, tmp_path, handler=handler)
    assert seen == ["T-42"]
    assert result.completed_nodes == ["start", "A", "B", "done"]
    assert ctx(result, "context.ticket", "context.read_back") == {
        "context.ticket": "T-42",
        "context.read_back": "T-42",
    }


def test_checkpoint_save_and_resume_produces_same_result(tmp_path: Path) -> None:
    whole = Run(load_pipeline(LINEAR), workdir=tmp_path / "a").run()
    part = Run(load_pipeline(LINEAR), workdir=tmp_path / "b")
    part.run(to="B")
    resumed = Run.resume(part.run_dir).run()
    assert resumed.completed_nodes == whole.completed_nodes == ["start", "A", "B", "done"]
    assert resumed.context == whole.context
    assert {k: o.status for k, o in resumed.node_outcomes.items()} == {
        k: o.status for k, o in whole.node_outcomes.items()
    }


def test_stylesheet_applies_model_override_by_shape(tmp_path: Path) -> None:
    dot = LINEAR.replace(
        "{", '{ graph [model_stylesheet="box { llm_model: fast-model; }"]', 1
    ).replace('B [prompt="do B"]', 'B [prompt="do B", llm_model="pinned"]')
    g = load_pipeline(dot)
    assert g.nodes["A"].llm_model == "fast-model"
    assert g.nodes["B"].llm_model == "pinned"
    assert g.nodes["start"].llm_model == ""
    models: dict[str, str] = {}

    def backend(node: Node, prompt: str, context: Context) -> str:
        models[node.id] = node.llm_model
        return f"answered by {node.llm_model}"

    result = Run(g, workdir=tmp_path, registry=default_registry(backend=backend)).run()
    assert models == {"A": "fast-model", "B": "pinned"}
    assert result.completed_nodes == ["start", "A", "B", "done"]
    assert result.context["last_response"] == "answered by pinned"


def test_prompt_variable_expansion_goal(tmp_path: Path) -> None:
    dot = LINEAR.replace("{", '{ graph [goal="Fix login"]', 1).replace(
        'prompt="do A"', 'prompt="Plan: $goal"'
    )
    prompts: list[str] = []

    def backend(node: Node, prompt: str, context: Context) -> str:
        prompts.append(prompt)
        return prompt

    run = Run(load_pipeline(dot), workdir=tmp_path, registry=default_registry(backend=backend))
    result = run.run()
    assert prompts[0] == "Plan: Fix login"
    assert (run.run_dir / "nodes" / "A" / "prompt.md").read_text() == "Plan: Fix login"
    assert result.completed_nodes == ["start", "A", "B", "done"]
    assert result.context["graph.goal"] == "Fix login"


def test_parallel_fan_out_and_fan_in(tmp_path: Path) -> None:
    dot = """digraph p {
      start [shape=Mdiamond]
      fan [shape=component]
      left [prompt="l"]
      right [prompt="r"]
      join [shape=tripleoctagon]
      done [shape=Msquare]
      start -> fan
      fan -> left
      fan -> right
      left -> join
      right -> join
      join -> done
    }"""
    result = run_dot(dot, tmp_path)
    assert result.state is RunState.COMPLETED
    assert result.completed_nodes[0] == "start"
    assert sorted(result.completed_nodes[1:3]) == ["left", "right"]
    assert result.completed_nodes[3:] == ["fan", "join", "done"]
    branches = result.context["parallel.results"]
    assert sorted(b["id"] for b in branches) == ["left", "right"]
    assert all(b["status"] == "success" for b in branches)
    assert result.node_outcomes["join"].status is StageStatus.SUCCESS
    assert any(k.startswith("parallel.fan_in.") for k in result.context)


def test_custom_handler_registration_and_execution(tmp_path: Path) -> None:
    class Stamp:
        def execute(self, node: Node, context: Context, env: StepEnv) -> Outcome:
            out = env.node_dir(node.id) / "stamp.txt"
            out.write_text(node.attrs["stamp"])
            return Outcome(notes="stamped", context_updates={"stamp": node.attrs["stamp"]})

    dot = LINEAR.replace('A [prompt="do A"]', 'A [type="stamp", stamp="ok-1"]')
    run = make_run(dot, tmp_path, extra={"stamp": Stamp()})
    result = run.run()
    assert (run.run_dir / "nodes" / "A" / "stamp.txt").read_text() == "ok-1"
    assert result.completed_nodes == ["start", "A", "B", "done"]
    assert result.node_outcomes["A"].notes == "stamped"
    assert result.context["stamp"] == "ok-1"


def test_pipeline_with_ten_plus_nodes_completes(tmp_path: Path) -> None:
    names = [f"s{i}" for i in range(12)]
    dot = (
        "digraph big { start [shape=Mdiamond] done [shape=Msquare] "
        + " ".join(f'{n} [prompt="step {n}"]' for n in names)
        + " start -> "
        + " -> ".join(names)
        + " -> done }"
    )
    result = run_dot(dot, tmp_path)
    assert result.state is RunState.COMPLETED
    assert result.completed_nodes == ["start", *names, "done"]
    assert result.context["last_stage"] == "s11"
    assert all(o.status is StageStatus.SUCCESS for o in result.node_outcomes.values())


def test_integration_smoke(tmp_path: Path) -> None:
    g = load_pipeline(SMOKE)
    assert g.goal == "Create a hello world Python script"
    assert len(g.nodes) == 5
    assert len(g.edges) == 6
    assert not [d for d in validate(g) if d.severity is Severity.ERROR]

    calls: list[str] = []

    def llm(node: Node, prompt: str, context: Context) -> str:
        calls.append(node.id)
        return f"{node.id}: done for {prompt[:40]}"

    run = Run(g, workdir=tmp_path, registry=default_registry(backend=llm))
    result = run.run()
    assert result.state is RunState.COMPLETED
    assert "implement" in result.completed_nodes
    assert result.completed_nodes == ["start", "plan", "implement", "review", "done"]
    assert calls == ["plan", "implement", "review"]
    for node in ("plan", "implement", "review"):
        for name in ("prompt.md", "response.md", "status.json"):
            assert (run.run_dir / "nodes" / node / name).is_file(), (node, name)
    assert result.node_outcomes["implement"].status is StageStatus.SUCCESS
    checkpoint = json.loads((run.run_dir / "checkpoint.json").read_text())
    assert checkpoint["current_node"] == "done"
    assert {"plan", "implement", "review"} <= set(checkpoint["completed_nodes"])
    assert result.context["graph.goal"] == "Create a hello world Python script"
    assert result.context["last_stage"] == "review"


def test_validation_error_refuses_to_run(tmp_path: Path) -> None:
    with pytest.raises(ValidationError):
        Run(
            load_pipeline("digraph g { A [prompt=x] done [shape=Msquare] A -> done }"),
            workdir=tmp_path,
        )
