"""Retries (DESIGN.md §4 item 3): backoff with a fake clock, exhaustion, allow_partial,
exceptions, auto_status and timeouts."""

from __future__ import annotations

import random
import threading
import time
from pathlib import Path

import pytest

from freshness_magic.engine import RunState
from freshness_magic.engine.context import Context
from freshness_magic.engine.events import EventType
from freshness_magic.engine.handlers.base import StepEnv, stop_slack
from freshness_magic.engine.model import Node
from freshness_magic.engine.outcome import Outcome, StageStatus
from freshness_magic.engine.retry import BackoffConfig, build_retry_policy
from freshness_magic.engine.run import Run
from freshness_magic.errors import RunError
from tests.engine.runkit import FakeClock, Scripted, graph, make_run, registry

LINEAR = """digraph g {{
  {graph_attrs}
  start [shape=Mdiamond]
  work [prompt="w" {attrs}]
  done [shape=Msquare]
  start -> work -> done
  work -> recover [condition="outcome=fail"]
  recover [prompt="r"]
  recover -> done
}}"""


def pipeline(attrs: str = "", graph_attrs: str = "") -> str:
    return LINEAR.format(attrs=attrs, graph_attrs=graph_attrs)


def test_backoff_delays_without_jitter() -> None:
    cfg = BackoffConfig(jitter=False)
    assert [cfg.delay_for_attempt(i) for i in range(1, 6)] == [0.2, 0.4, 0.8, 1.6, 3.2]
    assert cfg.delay_for_attempt(20) == 60.0


def test_backoff_jitter_uses_injected_random_within_half_to_one_and_a_half() -> None:
    cfg = BackoffConfig()
    first = [cfg.delay_for_attempt(3, random.Random(7)) for _ in range(3)]
    assert len(set(first)) == 1
    for seed in range(50):
        assert 0.4 <= cfg.delay_for_attempt(3, random.Random(seed)) <= 1.2


def test_policy_from_node_then_graph_alias_then_zero() -> None:
    g = graph(pipeline(attrs=", max_retries=4", graph_attrs="default_max_retries=2"))
    assert build_retry_policy(g.nodes["work"], g).max_attempts == 5
    assert build_retry_policy(g.nodes["recover"], g).max_attempts == 3
    g = graph(pipeline(graph_attrs="default_max_retry=1"))
    assert build_retry_policy(g.nodes["work"], g).max_attempts == 2
    g = graph(pipeline())
    assert build_retry_policy(g.nodes["work"], g).max_attempts == 1


def test_retry_consumes_attempts_with_backoff_then_succeeds(tmp_path: Path) -> None:
    clock = FakeClock()
    handler = Scripted({"work": ["retry", "retry", "success"]})
    run = make_run(
        pipeline(", max_retries=3"),
        tmp_path,
        handler=handler,
        clock=clock,
        rng=random.Random(1),
        backoff=BackoffConfig(jitter=False),
    )
    retrying = []
    run.events.subscribe(
        lambda e: retrying.append(e) if e.type is EventType.STAGE_RETRYING else None
    )
    result = run.run()
    assert result.state is RunState.COMPLETED
    assert [c for c in handler.calls if c[0] == "work"] == [("work", 1), ("work", 2), ("work", 3)]
    assert clock.sleeps == [0.2, 0.4]
    assert [e.data["delay"] for e in retrying] == [0.2, 0.4]
    assert run.node_retries["work"] == 2
    assert run.context["internal.retry_count.work"] == 2
    assert run.history[1].attempts == 3
    assert run.history[1].duration == pytest.approx(0.6)


def test_exhausted_retries_fail_and_route_on_fail_edge(tmp_path: Path) -> None:
    clock = FakeClock()
    handler = Scripted({"work": ["retry"]})
    run = make_run(pipeline(", max_retries=2"), tmp_path, handler=handler, clock=clock)
    result = run.run()
    assert len(clock.sleeps) == 2
    work = result.node_outcomes["work"]
    assert work.status is StageStatus.FAIL
    assert work.failure_reason == "max retries exceeded after 3 attempt(s): work said retry"
    assert result.completed_nodes == ["start", "work", "recover", "done"]
    assert result.state is RunState.COMPLETED


def test_a_retry_with_no_retries_allowed_fails_with_the_handler_s_reason(tmp_path: Path) -> None:
    """No "max retries exceeded after 1 attempt(s)" for a node that may not retry at all."""
    run = make_run(pipeline(""), tmp_path, handler=Scripted({"work": ["retry"]}), clock=FakeClock())
    work = run.run().node_outcomes["work"]
    assert work.status is StageStatus.FAIL
    assert work.failure_reason == "work said retry; not retried: max_retries is 0"


def test_exhausted_retries_with_allow_partial_give_partial_success(tmp_path: Path) -> None:
    handler = Scripted({"work": ["retry"]})
    run = make_run(pipeline(", max_retries=1, allow_partial=true"), tmp_path, handler=handler)
    result = run.run()
    work = result.node_outcomes["work"]
    assert work.status is StageStatus.PARTIAL_SUCCESS
    assert "partial success accepted (allow_partial)" in work.notes
    assert result.completed_nodes == ["start", "work", "done"]
    assert result.context["outcome"] == "success"


def test_retry_without_retries_configured_fails_at_once(tmp_path: Path) -> None:
    clock = FakeClock()
    run = make_run(pipeline(), tmp_path, handler=Scripted({"work": ["retry"]}), clock=clock)
    run.run()
    assert clock.sleeps == []
    assert run.node_outcomes["work"].status is StageStatus.FAIL


def test_fail_is_not_retried(tmp_path: Path) -> None:
    handler = Scripted({"work": ["fail"]})
    run = make_run(pipeline(", max_retries=3"), tmp_path, handler=handler)
    run.run()
    assert handler.calls.count(("work", 1)) == 1
    assert ("work", 2) not in handler.calls


def test_handler_exception_becomes_fail_with_text(tmp_path: Path) -> None:
    handler = Scripted({"work": [RuntimeError("disk on fire")]})
    run = make_run(pipeline(), tmp_path, handler=handler)
    result = run.run()
    work = result.node_outcomes["work"]
    assert work.status is StageStatus.FAIL
    assert "RuntimeError: disk on fire" in work.failure_reason
    assert result.completed_nodes == ["start", "work", "recover", "done"]


def test_exception_without_fail_route_fails_the_run_with_the_reason(tmp_path: Path) -> None:
    dot = """digraph g { start [shape=Mdiamond] work [prompt="w"] done [shape=Msquare]
             start -> work -> done }"""
    run = make_run(dot, tmp_path, handler=Scripted({"work": [ValueError("bad value 42")]}))
    result = run.run()
    assert result.state is RunState.FAILED
    assert "ValueError: bad value 42" in result.failure_reason
    assert "no retry_target" in result.failure_reason


class ReturnsNone:
    def execute(self, node: Node, context: Context, env: StepEnv) -> None:
        return None


def test_auto_status_turns_no_outcome_into_success(tmp_path: Path) -> None:
    dot = """digraph g { start [shape=Mdiamond] work [type="custom", auto_status=true]
             done [shape=Msquare] start -> work -> done }"""
    run = make_run(dot, tmp_path, extra={"custom": ReturnsNone()})
    result = run.run()
    assert result.node_outcomes["work"].status is StageStatus.SUCCESS
    assert "auto-status" in result.node_outcomes["work"].notes


def test_no_outcome_without_auto_status_fails(tmp_path: Path) -> None:
    dot = """digraph g { start [shape=Mdiamond] work [type="custom"]
             done [shape=Msquare] start -> work -> done }"""
    run = make_run(dot, tmp_path, extra={"custom": ReturnsNone()})
    result = run.run()
    assert result.state is RunState.FAILED
    assert "set auto_status=true" in result.node_outcomes["work"].failure_reason


class Sleeper:
    def __init__(self) -> None:
        self.release = threading.Event()
        self.deadlines: list[float | None] = []

    def execute(self, node: Node, context: Context, env: StepEnv) -> Outcome:
        self.deadlines.append(env.deadline)
        self.release.wait(10)
        return Outcome()


def test_timeout_is_passed_as_deadline_and_enforced(tmp_path: Path) -> None:
    dot = """digraph g { start [shape=Mdiamond] work [type="slow", timeout="50ms"]
             done [shape=Msquare] start -> work -> done
             work -> done [condition="outcome=fail", label="late"] }"""
    slow = Sleeper()
    clock = FakeClock()
    run = make_run(dot, tmp_path, extra={"slow": slow}, clock=clock)
    try:
        run.run()
    finally:
        slow.release.set()
    assert slow.deadlines == [clock.now + 0.05]
    work = run.node_outcomes["work"]
    assert work.status is StageStatus.FAIL
    assert work.failure_reason == "timed out after 0.05s"
    assert run.state is RunState.COMPLETED


class Overrunner:
    """Reports its own timeout a little after the node's deadline, inside the run's slack."""

    def __init__(self) -> None:
        self.slack: list[float] = []

    def execute(self, node: Node, context: Context, env: StepEnv) -> Outcome:
        self.slack.append(env.slack)
        time.sleep((node.timeout or 0) + env.slack / 10)
        return Outcome(status=StageStatus.FAIL, failure_reason="stopped by the handler itself")


def test_a_handler_gets_its_whole_timeout_and_reports_inside_the_slack(tmp_path: Path) -> None:
    """The work runs for the whole timeout; the run waits a slack past it (10 %, at most 1 s)
    for the handler's own report before it gives up on the handler."""
    dot = """digraph g { start [shape=Mdiamond] work [type="over", timeout="5s"]
             done [shape=Msquare] start -> work -> done
             work -> done [condition="outcome=fail", label="late"] }"""
    over = Overrunner()
    run = make_run(dot, tmp_path, extra={"over": over})
    run.run()
    assert over.slack == [pytest.approx(0.5)]
    assert run.node_outcomes["work"].failure_reason == "stopped by the handler itself"
    assert stop_slack(100) == 1.0 and stop_slack(0.05) == pytest.approx(0.005)


def test_status_given_as_text_is_accepted_and_bad_status_fails(tmp_path: Path) -> None:
    dot = pipeline()
    handler = Scripted({"work": [Outcome(status="partial_success")]})  # type: ignore[arg-type]
    run = make_run(dot, tmp_path, handler=handler)
    assert run.run().node_outcomes["work"].status is StageStatus.PARTIAL_SUCCESS
    handler = Scripted({"work": [Outcome(status="great")]})  # type: ignore[arg-type]
    run = make_run(dot, tmp_path, handler=handler)
    work = run.run().node_outcomes["work"]
    assert work.status is StageStatus.FAIL
    assert "unknown outcome status 'great'" in work.failure_reason


FIX_LOOP = """digraph g {{
  graph [{graph_attrs}]
  start [shape=Mdiamond]
  tests [prompt="t" {attrs}]
  fix [prompt="f"]
  done [shape=Msquare]
  start -> tests
  tests -> done [condition="outcome=success"]
  {fail_edge}
  fix -> tests
}}"""


def fix_loop(
    graph_attrs: str = "", attrs: str = ', retry_target="fix"', fail_edge: str = ""
) -> str:
    return FIX_LOOP.format(graph_attrs=graph_attrs, attrs=attrs, fail_edge=fail_edge)


def test_a_failure_routed_to_its_retry_target_again_and_again_stops_the_run(
    tmp_path: Path,
) -> None:
    run = make_run(
        fix_loop("max_failure_redirects=3"), tmp_path, handler=Scripted({"tests": ["fail"]})
    )
    result = run.run()
    assert result.state is RunState.FAILED
    assert result.completed_nodes == ["start"] + ["tests", "fix"] * 3 + ["tests"]
    assert result.failed_node == "tests"
    assert result.failure_reason == (
        "node 'tests' failed (tests said fail); its failures led on to 'fix' 3 time(s) in a row "
        "already (max_failure_redirects=3): fix the cause and retry, or raise "
        "max_failure_redirects on the graph"
    )


def test_a_fail_edge_loop_is_bounded_too_by_default_at_ten(tmp_path: Path) -> None:
    dot = fix_loop(attrs="", fail_edge='tests -> fix [condition="outcome=fail"]')
    result = make_run(dot, tmp_path, handler=Scripted({"tests": ["fail"]})).run()
    assert result.state is RunState.FAILED
    assert result.completed_nodes.count("fix") == 10
    assert "(max_failure_redirects=10)" in result.failure_reason


def test_a_success_between_failures_starts_the_count_again(tmp_path: Path) -> None:
    script = Scripted({"tests": ["fail", "fail", "success"]})
    dot = fix_loop("max_failure_redirects=2").replace(
        'tests -> done [condition="outcome=success"]',
        'tests -> again [condition="outcome=success"]\n again [prompt="a"] again -> tests2\n'
        ' tests2 [prompt="t2", retry_target="fix2"] fix2 [prompt="f"] fix2 -> tests2\n'
        ' tests2 -> done [condition="outcome=success"]',
    )
    script.script["tests2"] = ["fail", "fail", "success"]
    result = make_run(dot, tmp_path, handler=script).run()
    assert result.state is RunState.COMPLETED, result.failure_reason
    assert result.completed_nodes.count("fix") == 2 and result.completed_nodes.count("fix2") == 2


def test_the_failure_count_survives_a_resume_and_a_retry_starts_it_again(tmp_path: Path) -> None:
    run = make_run(
        fix_loop("max_failure_redirects=3"), tmp_path, handler=Scripted({"tests": ["fail"]})
    )
    run.run(to="fix")
    run.step()  # fix: the count of tests' failures is 1 and is in the checkpoint
    run.close()
    again = Run.resume(run.run_dir, registry=registry(Scripted({"tests": ["fail"]})))
    result = again.run()
    assert result.state is RunState.FAILED
    assert result.completed_nodes.count("fix") == 3  # not 1 + 3: the count was kept
    again.retry()
    result = again.run()
    assert result.completed_nodes.count("fix") == 6  # a retry gives a new allowance of 3
    assert result.failed_node == "tests"


def test_retry_of_a_run_that_has_not_begun_is_refused(tmp_path: Path) -> None:
    run = make_run(fix_loop(), tmp_path)
    for node in (None, "fix"):
        with pytest.raises(RunError, match="no node of the run has run yet; step"):
            run.retry(node)
    assert run.state is RunState.READY and run.result().completed_nodes == []
    assert run.step().node_id == "start"
