"""An attempt stopped by an interrupt leaves an evidence record; its rerun leaves its own."""

from __future__ import annotations

import threading
from pathlib import Path

from freshness_magic.engine import Run, RunState
from freshness_magic.evidence.record import EvidenceRecord, read_evidence_log
from freshness_magic.session import open_run
from tests.pipelines import ONE_ENDS_ONE_WAITS, one_tool
from tests.waiting import wait_until

WAITS_FOR_GO = one_tool(
    "echo draft > out.txt; echo $$ > pgid.txt; test -f go || exec sleep 60",
    more='evidence="require"',
)


def interrupt_when(run: Run, path: Path, *ended: str) -> threading.Thread:
    """Interrupt ``run`` from another thread once ``path`` exists (the node is running) and
    the nodes ``ended`` have their outcomes."""

    def watch() -> None:
        wait_until(path.exists, f"{path.name} written by the running node")
        wait_until(lambda: set(ended) <= set(run.node_outcomes), f"{ended} ended")
        run.interrupt()

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread


def records(run: Run, node_id: str) -> list[EvidenceRecord]:
    return read_evidence_log(run.run_dir, node_id)


def test_an_interrupted_attempt_is_recorded_and_its_rerun_too(tmp_path: Path) -> None:
    run = open_run(WAITS_FOR_GO, workdir=tmp_path)
    watcher = interrupt_when(run, tmp_path / "pgid.txt")
    assert run.run().state is RunState.PAUSED
    watcher.join()

    (stopped,) = records(run, "work")
    engine = stopped.engine
    assert engine["interrupted"] is True
    assert engine["status"] == "fail"
    assert engine["failure_reason"] == "interrupted"
    assert engine["files"]["added"] == ["out.txt", "pgid.txt"]
    assert "interrupted" in stopped.summary

    (tmp_path / "go").touch()
    assert run.run().state is RunState.COMPLETED
    again = records(run, "work")
    assert len(again) == 2
    assert again[0] == stopped
    assert "interrupted" not in again[1].engine
    assert again[1].engine["status"] == "success"
    assert again[1].engine["step"] == engine["step"]


def test_interrupted_branch_nodes_are_recorded_and_ended_ones_once(tmp_path: Path) -> None:
    run = open_run(ONE_ENDS_ONE_WAITS, workdir=tmp_path)
    watcher = interrupt_when(run, tmp_path / "slow.txt", "quick")
    assert run.run().state is RunState.PAUSED
    watcher.join()

    (slow,) = records(run, "slow")
    assert slow.engine["interrupted"] is True
    (fan,) = records(run, "fan")
    assert fan.engine["interrupted"] is True
    assert [r.engine["status"] for r in records(run, "quick")] == ["success"]

    (tmp_path / "go").touch()
    assert run.run().state is RunState.COMPLETED
    assert [r.engine.get("interrupted", False) for r in records(run, "slow")] == [True, False]
    assert [r.engine.get("interrupted", False) for r in records(run, "fan")] == [True, False]
    assert len(records(run, "quick")) == 1
