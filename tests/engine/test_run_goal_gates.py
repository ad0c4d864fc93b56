"""Goal gates (DESIGN.md §4 item 4): visited nodes only, the retry-target chain, the bound."""

from __future__ import annotations

from pathlib import Path

from freshness_magic.engine import RunState
from freshness_magic.engine.events import EventType
from freshness_magic.engine.outcome import StageStatus
from tests.engine.runkit import Scripted, make_run


def test_unvisited_goal_gate_does_not_block_exit(tmp_path: Path) -> None:
    dot = """digraph g {
      start [shape=Mdiamond]
      check [shape=diamond]
      skipped [prompt="s", goal_gate=true]
      done [shape=Msquare]
      start -> check
      check -> done [condition="outcome=success"]
      check -> skipped [condition="outcome=fail"]
      skipped -> done
    }"""
    result = make_run(dot, tmp_path).run()
    assert result.state is RunState.COMPLETED
    assert result.completed_nodes == ["start", "check", "done"]


def test_satisfied_goal_gate_allows_exit(tmp_path: Path) -> None:
    dot = """digraph g { start [shape=Mdiamond] impl [prompt="i", goal_gate=true]
             done [shape=Msquare] start -> impl -> done }"""
    result = make_run(dot, tmp_path, handler=Scripted({"impl": ["partial_success"]})).run()
    assert result.state is RunState.COMPLETED


GATED = """digraph g {{
  graph [{graph_attrs}]
  start [shape=Mdiamond]
  plan [prompt="p"]
  fix [prompt="f"]
  impl [prompt="i", goal_gate=true {impl_attrs}]
  review [prompt="r"]
  done [shape=Msquare]
  start -> plan -> impl
  impl -> review [condition="outcome=success"]
  impl -> review [condition="outcome=fail"]
  review -> done
  fix -> impl
}}"""


def gated(impl_attrs: str = "", graph_attrs: str = "") -> str:
    return GATED.format(impl_attrs=impl_attrs, graph_attrs=graph_attrs)


def run_gated(tmp_path: Path, impl_attrs: str, graph_attrs: str = "") -> list[str]:
    handler = Scripted({"impl": ["fail", "success"]})
    run = make_run(gated(impl_attrs, graph_attrs), tmp_path, handler=handler)
    result = run.run()
    assert result.state is RunState.COMPLETED, result.failure_reason
    return result.completed_nodes


def test_node_retry_target_first(tmp_path: Path) -> None:
    path = run_gated(
        tmp_path, ', retry_target="fix", fallback_retry_target="plan"', 'retry_target="plan"'
    )
    assert path == ["start", "plan", "impl", "review", "fix", "impl", "review", "done"]


def test_node_fallback_retry_target_second(tmp_path: Path) -> None:
    path = run_gated(tmp_path, ', fallback_retry_target="fix"', 'retry_target="plan"')
    assert path == ["start", "plan", "impl", "review", "fix", "impl", "review", "done"]


def test_graph_retry_target_third(tmp_path: Path) -> None:
    path = run_gated(tmp_path, "", 'retry_target="fix", fallback_retry_target="plan"')
    assert path == ["start", "plan", "impl", "review", "fix", "impl", "review", "done"]


def test_graph_fallback_retry_target_last(tmp_path: Path) -> None:
    path = run_gated(tmp_path, "", 'fallback_retry_target="plan"')
    assert path == ["start", "plan", "impl", "review", "plan", "impl", "review", "done"]


def test_no_retry_target_fails_the_run_with_a_clear_reason(tmp_path: Path) -> None:
    run = make_run(gated(), tmp_path, handler=Scripted({"impl": ["fail"]}))
    result = run.run()
    assert result.state is RunState.FAILED
    assert result.failure_reason == (
        "goal gate 'impl' is unsatisfied (last outcome fail) and no retry target is set; "
        "add retry_target to 'impl' or to the graph"
    )
    assert "done" not in result.completed_nodes


def test_a_run_stopped_by_a_goal_gate_failed_at_the_gate_and_a_retry_runs_it(
    tmp_path: Path,
) -> None:
    """It "failed at" the node that reached the exit, so ``--retry`` ran that node again and
    reached the same unsatisfied gate, for ever."""
    run = make_run(gated(), tmp_path, handler=Scripted({"impl": ["fail", "success"]}))
    assert run.run().state is RunState.FAILED
    assert run.failed_node == "impl"
    assert run.goal_gate_redirects == 0
    run.retry()
    result = run.run()
    assert result.state is RunState.COMPLETED, result.failure_reason
    assert result.completed_nodes == ["start", "plan", "impl", "review", "impl", "review", "done"]


def test_redirects_are_bounded(tmp_path: Path) -> None:
    run = make_run(
        gated(', retry_target="fix"', "max_goal_gate_redirects=3"),
        tmp_path,
        handler=Scripted({"impl": ["fail"]}),
    )
    redirects = []
    run.events.subscribe(
        lambda e: redirects.append(e.data) if e.type is EventType.GOAL_GATE_REDIRECT else None
    )
    result = run.run()
    assert result.state is RunState.FAILED
    assert [r["redirects"] for r in redirects] == [1, 2, 3]
    assert result.completed_nodes.count("impl") == 4
    assert "already redirected 3 time(s) (max_goal_gate_redirects=3)" in result.failure_reason
    assert run.goal_gate_redirects == 3


def test_default_bound_is_ten(tmp_path: Path) -> None:
    run = make_run(gated(', retry_target="fix"'), tmp_path, handler=Scripted({"impl": ["fail"]}))
    result = run.run()
    assert result.state is RunState.FAILED
    assert result.completed_nodes.count("fix") == 10
    assert result.node_outcomes["impl"].status is StageStatus.FAIL
