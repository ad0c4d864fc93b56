"""The run object: context keys, step/run(to)/max_steps, events, listeners, extensions,
loop_restart and misuse."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from freshness_magic.atomicio import read_jsonl
from freshness_magic.engine import Run, RunState, StepResult
from freshness_magic.engine.events import Event, EventType
from freshness_magic.engine.extensions import BaseRunExtension, RunExtension
from freshness_magic.engine.model import Node
from freshness_magic.engine.outcome import Outcome, StageStatus
from freshness_magic.errors import RunError, ValidationError
from tests.engine.runkit import Scripted, graph, make_run

LINEAR = """digraph pipe {
  graph [goal="Ship it", label="Linear"]
  start [shape=Mdiamond]
  a [prompt="do a for $goal"]
  b [prompt="b"]
  c [prompt="c"]
  done [shape=Msquare]
  start -> a -> b -> c -> done
}"""


def test_context_built_in_keys(tmp_path: Path) -> None:
    handler = Scripted({"a": [Outcome(preferred_label="next", context_updates={"x.y": 1})]})
    run = make_run(LINEAR, tmp_path, handler=handler)
    run.step()
    assert run.context["graph.goal"] == "Ship it"
    assert run.context["graph.label"] == "Linear"
    assert run.context["current_node"] == "start"
    assert run.context["outcome"] == "success"
    run.step()
    assert run.context["current_node"] == "a"
    assert run.context["x.y"] == 1
    assert run.context["preferred_label"] == "next"
    assert "internal.retry_count.a" not in run.context
    run.step()
    assert run.context["last_stage"] == "b"


def test_step_executes_exactly_one_node_and_reports(tmp_path: Path) -> None:
    run = make_run(LINEAR, tmp_path)
    assert run.state is RunState.READY
    assert run.next_node == "start"
    first = run.step()
    assert isinstance(first, StepResult)
    assert (first.node_id, first.next_node, first.attempts) == ("start", "a", 1)
    assert first.outcome is not None and first.outcome.status is StageStatus.SUCCESS
    assert first.reason == "the only unconditional edge"
    assert first.state is RunState.PAUSED
    assert run.completed_nodes == ["start"]
    assert run.next_node == "a"


def test_run_to_stops_before_the_node_and_resumes(tmp_path: Path) -> None:
    run = make_run(LINEAR, tmp_path)
    paused = []
    run.events.subscribe(
        lambda e: paused.append(e) if e.type is EventType.PIPELINE_PAUSED else None
    )
    result = run.run(to="c")
    assert result.state is RunState.PAUSED and result.status == "paused"
    assert result.completed_nodes == ["start", "a", "b"]
    assert result.next_node == "c"
    assert paused[0].data["reason"] == "stopped before node 'c'"
    assert run.run(to="c").completed_nodes == ["start", "a", "b"]
    assert run.run().state is RunState.COMPLETED
    assert run.completed_nodes == ["start", "a", "b", "c", "done"]


BRANCHED = """digraph p {
  start [shape=Mdiamond]
  fan [shape=component]
  a [prompt="a"]
  b [prompt="b"]
  b2 [prompt="b2"]
  join [shape=tripleoctagon]
  after [prompt="after"]
  done [shape=Msquare]
  start -> fan
  fan -> a -> join
  fan -> b -> b2 -> join
  join -> after -> done
}"""


@pytest.mark.parametrize("inside", ["a", "b", "b2"])
def test_run_to_a_node_inside_parallel_branches_is_refused_before_anything_runs(
    tmp_path: Path, inside: str
) -> None:
    """It was ignored: the run went through the node and on to the exit."""
    run = make_run(BRANCHED, tmp_path)
    with pytest.raises(RunError) as refused:
        run.run(to=inside)
    assert str(refused.value) == (
        f"run to: '{inside}' runs inside the branches of parallel node 'fan', where a run does "
        "not stop; stop before 'fan' (the branches) or before 'join' (the fan-in after them)"
    )
    assert run.completed_nodes == []
    for main_path in ("fan", "join", "after"):
        assert make_run(BRANCHED, tmp_path / main_path).run(to=main_path).next_node == main_path


def test_run_to_a_branch_target_the_main_path_also_reaches_is_allowed(tmp_path: Path) -> None:
    reached = BRANCHED.replace(
        "join -> after", 'join -> b2 [condition="outcome=fail"]\n  join -> after'
    )
    result = make_run(reached, tmp_path).run(to="b2")
    assert result.state is RunState.COMPLETED  # b2 ran in a branch; the fan-in succeeded


def test_max_steps(tmp_path: Path) -> None:
    run = make_run(LINEAR, tmp_path)
    assert run.run(max_steps=2).completed_nodes == ["start", "a"]
    assert run.run(max_steps=0).completed_nodes == ["start", "a"]
    assert run.run(max_steps=10).state is RunState.COMPLETED


def test_step_on_a_finished_run_says_so(tmp_path: Path) -> None:
    run = make_run(LINEAR, tmp_path)
    run.run()
    step = run.step()
    assert not step.executed
    assert step.reason == "the run has already completed; nothing to step"
    assert run.completed_nodes == ["start", "a", "b", "c", "done"]


def test_misuse_raises_run_error(tmp_path: Path) -> None:
    run = make_run(LINEAR, tmp_path)
    with pytest.raises(RunError, match=r"^run to: no node 'xyzzy' in the pipeline; nodes: start,"):
        run.run(to="xyzzy")
    with pytest.raises(RunError, match=r"^run to: no node 'donee' \(did you mean 'done'\?\)"):
        run.run(to="donee")
    with pytest.raises(RunError, match="not usable as a folder name"):
        make_run(LINEAR, tmp_path, run_id="../escape")


def test_a_new_run_never_overwrites_an_existing_run_dir(tmp_path: Path) -> None:
    first = make_run(LINEAR, tmp_path, run_id="same")
    first.run(max_steps=2)
    before = (first.run_dir / "checkpoint.json").read_bytes()
    second = make_run(LINEAR, tmp_path, run_id="same")
    with pytest.raises(RunError, match="already holds a run; resume it"):
        second.step()
    assert (first.run_dir / "checkpoint.json").read_bytes() == before


def test_invalid_pipeline_is_refused_at_construction(tmp_path: Path) -> None:
    with pytest.raises(ValidationError):
        make_run("digraph g { a -> b }", tmp_path)


def test_events_jsonl_records_every_event_in_order(tmp_path: Path) -> None:
    run = make_run(LINEAR, tmp_path)
    delivered: list[Event] = []
    run.events.subscribe(delivered.append)
    run.run()
    records = list(read_jsonl(run.run_dir / "events.jsonl"))
    assert [r["seq"] for r in records] == list(range(1, len(records) + 1))
    assert [r["type"] for r in records] == [e.type.value for e in delivered]
    types = [r["type"] for r in records]
    assert types[0] == "pipeline_started"
    assert types[-2:] == ["pipeline_completed", "checkpoint_saved"]
    assert types.count("stage_started") == 5
    assert types.count("stage_completed") == 5
    started = next(r for r in records if r["type"] == "stage_started" and r["node_id"] == "b")
    assert started["run_id"] == run.run_id
    assert started["timestamp"].endswith("Z")
    assert started["data"] == {"handler_type": "codergen"}


def test_a_listener_that_raises_is_logged_and_skipped(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    run = make_run(LINEAR, tmp_path)
    after: list[str] = []

    def broken(event: Event) -> None:
        raise ZeroDivisionError("listener bug")

    run.events.subscribe(broken)
    run.events.subscribe(lambda e: after.append(e.type.value))
    with caplog.at_level(logging.ERROR):
        result = run.run()
    assert result.state is RunState.COMPLETED
    assert "pipeline_completed" in after
    assert "listener bug" in caplog.text
    run.events.unsubscribe(broken)


def test_handler_events_reach_the_bus(tmp_path: Path) -> None:
    def emits(node: Node, context: Any, env: Any) -> Outcome:
        env.emit("parallel_started", {"branch_count": 2})
        env.emit("my_custom_thing", {"k": 1})
        return Outcome()

    run = make_run(LINEAR, tmp_path, handler=Scripted({"a": [emits]}))
    seen: list[Event] = []
    run.events.subscribe(seen.append)
    run.run()
    kinds = [(e.type, e.node_id) for e in seen]
    assert (EventType.PARALLEL_STARTED, "a") in kinds
    custom = next(e for e in seen if e.type is EventType.HANDLER_EVENT)
    assert custom.data == {"k": 1, "name": "my_custom_thing"}


class Recorder(BaseRunExtension):
    name = "recorder"

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []
        self.resumed_with: dict[str, Any] | None = None

    def on_run_start(self, run: Run) -> None:
        self.calls.append(("start", ""))

    def before_execute(self, run: Run, node: Node, attempt: int) -> Outcome | None:
        self.calls.append(("before", f"{node.id}#{attempt}"))
        if node.id == "b" and attempt == 1:
            return Outcome(status=StageStatus.RETRY, failure_reason="stale input: x.txt")
        return None

    def after_execute(
        self, run: Run, node: Node, outcome: Outcome, attempt: int, started_at: float
    ) -> Outcome:
        self.calls.append(("after", f"{node.id}#{attempt}:{outcome.status.value}"))
        if node.id == "c":
            return Outcome(status=StageStatus.FAIL, failure_reason="no evidence of work")
        return outcome

    def on_step_finished(self, run: Run, step_result: StepResult) -> None:
        self.calls.append(("finished", str(step_result.node_id)))

    def checkpoint_state(self) -> dict[str, Any]:
        return {"steps": sum(1 for c in self.calls if c[0] == "finished")}

    def on_resume(self, run: Run, saved_state: dict[str, Any] | None) -> None:
        self.resumed_with = saved_state


def test_extension_hooks_replace_outcomes_and_store_state(tmp_path: Path) -> None:
    ext = Recorder()
    assert isinstance(ext, RunExtension)
    dot = LINEAR.replace('b [prompt="b"]', 'b [prompt="b", max_retries=1]')
    run = make_run(dot, tmp_path, extensions=[ext])
    result = run.run()
    assert ("before", "b#1") in ext.calls
    assert ("after", "b#1:retry") in ext.calls
    assert ("after", "b#2:success") in ext.calls
    assert result.node_outcomes["c"].failure_reason == "no evidence of work"
    assert result.state is RunState.FAILED
    assert ext.calls[0] == ("start", "")
    saved = json.loads((run.run_dir / "checkpoint.json").read_text())
    assert saved["extensions"] == {"recorder": {"steps": 4}}
    again = Recorder()
    Run.resume(run.run_dir, extensions=[again])
    assert again.resumed_with == {"steps": 4}


class Exploding(BaseRunExtension):
    name = "exploding"

    def before_execute(self, run: Run, node: Node, attempt: int) -> Outcome | None:
        if node.id == "a":
            raise OSError("baseline unreadable")
        return None

    def on_step_finished(self, run: Run, step_result: StepResult) -> None:
        raise RuntimeError("display broke")


def test_extension_errors_fail_the_attempt_or_are_skipped(tmp_path: Path) -> None:
    run = make_run(LINEAR, tmp_path, extensions=[Exploding()])
    result = run.run()
    assert result.state is RunState.FAILED
    assert "run extension error at node 'a': OSError: baseline unreadable" in (
        result.node_outcomes["a"].failure_reason
    )


def test_loop_restart_continues_in_a_fresh_linked_run_dir(tmp_path: Path) -> None:
    dot = """digraph g {
      start [shape=Mdiamond]
      work [prompt="w", max_retries=2]
      check [shape=diamond]
      done [shape=Msquare]
      start -> work -> check
      check -> work [condition="context.round!=2", loop_restart=true]
      check -> done [condition="context.round=2"]
    }"""
    rounds = iter([1, 2])
    handler = Scripted({"work": [lambda n, c, e: Outcome(context_updates={"round": next(rounds)})]})
    run = make_run(dot, tmp_path, handler=handler, run_id="loop")
    first_dir = run.run_dir
    result = run.run()
    assert result.state is RunState.COMPLETED
    assert run.run_id == "loop-r1"
    assert run.run_dir == first_dir.parent / "loop-r1"
    assert result.completed_nodes == ["work", "check", "done"]
    link = json.loads((first_dir / "restarted_as.json").read_text())
    assert link["run_dir"] == str(run.run_dir)
    old = json.loads((first_dir / "checkpoint.json").read_text())
    assert old["completed_nodes"] == ["start", "work", "check"]
    manifest = json.loads((run.run_dir / "manifest.json").read_text())
    assert manifest["restarted_from"] == str(first_dir)
    assert Run.resume(first_dir).run_dir == run.run_dir
    assert result.context["round"] == 2


def test_graph_built_in_code_runs(tmp_path: Path) -> None:
    g = graph(LINEAR)
    g.source = ""
    run = make_run(g, tmp_path)
    assert run.run().state is RunState.COMPLETED
    with pytest.raises(Exception, match="pass graph= to resume it"):
        Run.resume(run.run_dir)
    assert Run.resume(run.run_dir, graph=g).state is RunState.COMPLETED
