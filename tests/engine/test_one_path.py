"""Every node goes down one path: parallel branch nodes get what main-path nodes get.

Runs real fan-out pipelines through ``session.open_run`` (freshness and evidence on, real shell
tools) and checks the branch nodes' evidence records, events, status files and checkpoint
outcomes; then recovery with ``Run.retry`` (in process and with ``resume --retry``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from freshness_magic.atomicio import read_jsonl
from freshness_magic.engine import Run, RunState
from freshness_magic.engine.extensions import BaseRunExtension
from freshness_magic.engine.model import Node
from freshness_magic.engine.outcome import Outcome, StageStatus
from freshness_magic.freshness.events import FreshnessEvent
from freshness_magic.freshness.extension import accept_changes
from freshness_magic.session import default_extensions, open_run
from tests.pipelines import one_tool
from tests.processes import cli

FAN_OUT = """
digraph fan {
  start [shape=Mdiamond]
  fan   [shape=component%s]
  a     [shape=parallelogram, tool_command="echo A > a.txt"]
  b     [shape=parallelogram, tool_command="echo B > b.txt"]
  %s
  join  [shape=tripleoctagon]
  done  [shape=Msquare]
  start -> fan
  fan -> a
  fan -> b
  %s
  a -> join
  b -> join
  join -> done
}
"""


def two_branches() -> str:
    return FAN_OUT % ("", "", "")


def three_branches(c_attrs: str) -> str:
    return FAN_OUT % ("", f"c [shape=parallelogram, {c_attrs}]", "fan -> c\n  c -> join")


def events(run: Run) -> list[dict[str, Any]]:
    return list(read_jsonl(run.run_dir / "events.jsonl"))


def evidence_log(run: Run) -> list[dict[str, Any]]:
    return list(read_jsonl(run.run_dir / "evidence.jsonl"))


def checkpoint(run: Run) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((run.run_dir / "checkpoint.json").read_text())
    return data


def assert_branch_node_recorded(run: Run, node_id: str, status: str) -> dict[str, Any]:
    """The branch node has its status file, checkpoint outcome, stage events and evidence."""
    status_file = json.loads((run.run_dir / "nodes" / node_id / "status.json").read_text())
    assert status_file["outcome"] == status
    assert checkpoint(run)["node_outcomes"][node_id]["outcome"] == status
    started = [e for e in events(run) if e["type"] == "stage_started" and e["node_id"] == node_id]
    assert [e["data"]["branch_of"] for e in started] == ["fan"]
    finished = [
        e
        for e in events(run)
        if e["type"] in ("stage_completed", "stage_failed") and e["node_id"] == node_id
    ]
    assert finished and finished[-1]["data"]["status"] == status
    records = [r for r in evidence_log(run) if r["nodeId"] == node_id]
    assert len(records) == 1, records
    own = json.loads((run.workdir / ".orchestrator" / "evidence" / f"{node_id}.json").read_text())
    assert own["nodeId"] == node_id
    record: dict[str, Any] = records[0]
    return record


def test_two_branch_fan_out_records_every_branch_node(tmp_path: Path) -> None:
    run = open_run(two_branches(), workdir=tmp_path)
    result = run.run()
    assert result.state is RunState.COMPLETED
    for node_id in ("a", "b"):
        record = assert_branch_node_recorded(run, node_id, "success")
        assert record["outcome"]["engine"]["status"] == "success"
    assert (tmp_path / "a.txt").read_text() == "A\n"
    assert {"a", "b"} <= set(result.node_outcomes)


def test_three_branches_with_a_failing_branch(tmp_path: Path) -> None:
    command = 'tool_command="echo no >&2; echo really >&2; exit 3"'
    run = open_run(three_branches(command), workdir=tmp_path)
    result = run.run()
    assert result.state is RunState.COMPLETED
    assert result.node_outcomes["fan"].status is StageStatus.PARTIAL_SUCCESS
    # one line naming every branch that did not succeed (the stderr tail is the branch's own)
    assert result.node_outcomes["fan"].notes == (
        "2 of 3 branches succeeded (wait_all); c: exit code 3: echo no >&2; echo really >&2; exit 3"
    )
    record = assert_branch_node_recorded(run, "c", "fail")
    assert "exit code 3" in record["outcome"]["engine"]["failure_reason"]
    assert_branch_node_recorded(run, "a", "success")


def test_a_blocked_branch_node_blocks_that_branch(tmp_path: Path) -> None:
    (tmp_path / "spec.md").write_text("v1\n")
    run = open_run(
        three_branches('tool_command="cat spec.md", source_files="spec.md", freshness="block"'),
        workdir=tmp_path,
    )
    run.start()
    (tmp_path / "spec.md").write_text("v2\n")
    result = run.run()
    c = result.node_outcomes["c"]
    assert c.status is StageStatus.FAIL
    assert "stale input: spec.md" in c.failure_reason
    logged = run.events.kinds.read(run.run_dir / "events.jsonl")
    stale = [e for e in logged if e.type is FreshnessEvent.STALE_INPUT and e.node_id == "c"]
    assert stale and stale[0].data["mode"] == "block"
    assert result.node_outcomes["a"].status is StageStatus.SUCCESS
    assert_branch_node_recorded(run, "c", "fail")


def test_a_branch_node_timeout_is_enforced(tmp_path: Path) -> None:
    run = open_run(
        three_branches('tool_command="sleep 10; touch late.txt", timeout="1s"'), workdir=tmp_path
    )
    result = run.run()
    c = result.node_outcomes["c"]
    assert c.status is StageStatus.FAIL
    assert "timed out after 1s" in c.failure_reason
    assert not (tmp_path / "late.txt").exists()
    assert_branch_node_recorded(run, "c", "fail")


class Seen(BaseRunExtension):
    """Counts the executor's calls per node and attempt."""

    name = "seen"

    def __init__(self, retry_once: str = "") -> None:
        self.retry_once = retry_once
        """A node whose first attempt this extension answers with RETRY (as a blocked input)."""
        self.before: list[tuple[str, int]] = []
        self.after: list[tuple[str, int]] = []
        self.finished: list[str] = []

    def before_execute(self, run: Run, node: Node, attempt: int) -> Outcome | None:
        self.before.append((node.id, attempt))
        if node.id == self.retry_once and attempt == 1:
            return Outcome(status=StageStatus.RETRY, failure_reason="try again")
        return None

    def after_execute(
        self, run: Run, node: Node, outcome: Outcome, attempt: int, started_at: float
    ) -> Outcome:
        self.after.append((node.id, attempt))
        return outcome

    def on_step_finished(self, run: Run, step_result: Any) -> None:
        self.finished.append(step_result.node_id)


def test_branch_and_main_path_share_one_executor(tmp_path: Path) -> None:
    seen = Seen(retry_once="c")
    run = open_run(
        three_branches('tool_command="true", max_retries=1'),
        workdir=tmp_path,
        extensions=[seen],
        sleep=lambda _s: None,
    )
    run.run()
    nodes = ["start", "fan", "a", "b", "c", "join", "done"]
    assert sorted({n for n, _ in seen.before}) == sorted(nodes)
    assert seen.before.count(("c", 1)) == 1 and seen.before.count(("c", 2)) == 1
    for node_id in nodes:
        if node_id != "c":
            assert seen.before.count((node_id, 1)) == 1, node_id
            assert (node_id, 2) not in seen.before
    assert sorted(seen.before) == sorted(seen.after)
    assert sorted(seen.finished) == sorted(nodes)


FLAKY = """
digraph flaky {
  start [shape=Mdiamond]
  build [shape=parallelogram, tool_command="test -f ready.txt"]
  ship  [shape=parallelogram, tool_command="echo shipped > shipped.txt"]
  done  [shape=Msquare]
  start -> build -> ship -> done
}
"""


def test_retry_after_a_failure_continues_from_the_failed_node(tmp_path: Path) -> None:
    run = open_run(FLAKY, workdir=tmp_path)
    failed = run.run()
    assert failed.state is RunState.FAILED
    assert failed.failed_node == "build"
    assert "exit code 1" in failed.failure_reason
    assert run.step().executed is False
    (tmp_path / "ready.txt").write_text("ok")
    assert run.retry() == "build"
    result = run.run()
    assert result.state is RunState.COMPLETED
    assert result.completed_nodes == ["start", "build", "build", "ship", "done"]
    assert (tmp_path / "shipped.txt").exists()
    retried = [e for e in events(run) if e["type"] == "run_retried"]
    assert [e["node_id"] for e in retried] == ["build"]
    builds = [r for r in evidence_log(run) if r["nodeId"] == "build"]
    assert [r["outcome"]["engine"]["status"] for r in builds] == ["fail", "success"]


def test_retry_a_named_completed_node(tmp_path: Path) -> None:
    (tmp_path / "ready.txt").write_text("ok")
    run = open_run(FLAKY, workdir=tmp_path)
    assert run.run().state is RunState.COMPLETED
    run.retry("ship")
    assert run.run().completed_nodes[-2:] == ["ship", "done"]


BLOCKED = one_tool(
    "cat spec.md", node="draft", name="blocked", more='source_files="spec.md", freshness="block"'
)


def test_accept_changed_inputs_then_retry_without_reset(tmp_path: Path) -> None:
    (tmp_path / "spec.md").write_text("v1\n")
    run = open_run(BLOCKED, workdir=tmp_path)
    run.start()
    (tmp_path / "spec.md").write_text("v2\n")
    failed = run.run()
    assert failed.state is RunState.FAILED
    assert failed.failed_node == "draft"
    assert "stale input: spec.md" in failed.failure_reason
    accept_changes(run, "draft")
    run.retry()
    result = run.run()
    assert result.state is RunState.COMPLETED
    assert result.node_outcomes["draft"].status is StageStatus.SUCCESS
    assert result.context["tool.output"] == "v2"


def test_resume_retry_across_processes(tmp_path: Path) -> None:
    dot = tmp_path / "flaky.dot"
    dot.write_text(FLAKY)
    first = cli("run", str(dot), "--workdir", str(tmp_path), "--json", cwd=tmp_path)
    assert first.returncode == 1, first.stderr
    data = json.loads(first.stdout)
    assert data["failed_node"] == "build"
    nothing = cli("resume", data["run_dir"], "--json", cwd=tmp_path)
    assert json.loads(nothing.stdout)["status"] == "failed"
    (tmp_path / "ready.txt").write_text("ok")
    again = cli("resume", data["run_dir"], "--retry", "--json", cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    final = json.loads(again.stdout)
    assert final["status"] == "completed"
    assert final["completed_nodes"] == ["start", "build", "build", "ship", "done"]
    status = cli("status", data["run_dir"], "--json", cwd=tmp_path)
    assert json.loads(status.stdout)["status"] == "completed"


def test_interrupt_pauses_at_the_node_and_a_step_runs_it_again(tmp_path: Path) -> None:
    seen = Seen()

    class StopAtBuild(BaseRunExtension):
        name = "stop"

        def before_execute(self, run: Run, node: Node, attempt: int) -> Outcome | None:
            if node.id == "build" and not (tmp_path / "ready.txt").exists():
                run.interrupt()
                (tmp_path / "ready.txt").write_text("ok")
            return None

    run = open_run(
        FLAKY, workdir=tmp_path, extensions=[seen, StopAtBuild(), *default_extensions(tmp_path)]
    )
    paused = run.run()
    assert paused.state is RunState.PAUSED
    assert paused.interrupted_node == "build"
    assert "build" not in paused.node_outcomes
    assert any(e["type"] == "stage_interrupted" for e in events(run))
    assert run.run().state is RunState.COMPLETED


class Raising:
    """A custom handler with a bug in it."""

    def execute(self, node: Node, context: Any, env: Any) -> Outcome:
        return self.lookup({"a": 1})

    def lookup(self, table: dict[str, int]) -> Outcome:
        table["missing"]
        return Outcome()


def test_a_handler_that_raises_keeps_its_traceback_in_its_node_folder(tmp_path: Path) -> None:
    """The outcome holds the exception's line; the traceback, to debug the handler with, is in
    the node's folder, and the notes say where (here for branch nodes, which go down the one
    path every node does)."""
    from freshness_magic.engine.handlers.builtin import default_registry

    registry = default_registry()
    registry.register("buggy", Raising())
    dot = FAN_OUT % ("", 'c [type="buggy"]', "fan -> c\n  c -> join")
    run = open_run(
        dot.replace("a     [shape=par", "a     [type=buggy, shape=par"),
        workdir=tmp_path,
        registry=registry,
    )
    run.run()
    for node_id in ("a", "c"):
        outcome = run.node_outcomes[node_id]
        assert outcome.failure_reason == "handler 'buggy' raised KeyError: 'missing'"
        kept = run.run_dir / "nodes" / node_id / "traceback.txt"
        assert outcome.notes == f"node '{node_id}' raised an exception; its traceback: {kept}"
        text = kept.read_text()
        assert text.startswith("Traceback (most recent call last):")
        assert "in lookup" in text and 'table["missing"]' in text
        assert text.rstrip().endswith("KeyError: 'missing'")
