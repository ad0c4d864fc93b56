"""Evidence that belongs to its step: the seed format, the node's file kept, runs kept apart."""

from __future__ import annotations

import json
import shutil
import threading
from pathlib import Path

from freshness_magic.engine import RunState
from freshness_magic.evidence.record import evidence_path, read_evidence_log
from freshness_magic.session import open_run, resume_run
from tests.waiting import wait_until

SEED = {
    "version": 1,
    "nodeId": "work",
    "timestamp": "2026-01-01T00:00:00Z",
    "summary": "notified ops",
    "type": "external_effect",
}


def tool_pipeline(command: str, name: str = "p") -> str:
    return f"""digraph {name} {{
      graph [evidence=require]
      start [shape=Mdiamond]
      work [shape=parallelogram, tool_command={json.dumps(command)}]
      done [shape=Msquare]
      start -> work -> done
    }}"""


def write_file_command(doc: dict[str, object]) -> str:
    """A shell command writing ``doc`` as the node's file; ``$FRESHNESS_RUN_ID`` is expanded."""
    text = json.dumps(doc).replace('"', '\\"')
    return f'mkdir -p .orchestrator/evidence && echo "{text}" > .orchestrator/evidence/work.json'


def test_the_seed_format_counts_and_the_file_stays_as_written(tmp_path: Path) -> None:
    run = open_run(tool_pipeline(write_file_command(SEED)), workdir=tmp_path)
    result = run.run()
    assert result.state is RunState.COMPLETED, result.failure_reason
    path = evidence_path(tmp_path, "work")
    assert json.loads(path.read_text()) == SEED
    record = [r for r in read_evidence_log(run.run_dir) if r.node_id == "work"][-1]
    assert record.summary == "notified ops" and record.type == "external_effect"
    assert record.engine["evidence_method"] == "evidence_file"
    assert record.engine["run_id"] == run.run_id and record.engine["attempt"] == 1
    assert record.engine["node_file_digest"]
    claim = json.loads((path.parent / "work.engine.json").read_text())
    assert claim["run_id"] == run.run_id and claim["digest"] == record.engine["node_file_digest"]
    assert not list(path.parent.glob("work.running.*"))


def test_a_node_file_left_by_an_earlier_run_does_not_count(tmp_path: Path) -> None:
    first = open_run(tool_pipeline(write_file_command(SEED)), workdir=tmp_path)
    assert first.run().state is RunState.COMPLETED
    second = open_run(tool_pipeline("true"), workdir=tmp_path)
    result = second.run()
    assert result.state is RunState.FAILED
    assert "No work evidence produced" in result.node_outcomes["work"].failure_reason


def run_beside_a_sleeping_run(tmp_path: Path, writer_doc: dict[str, object]) -> tuple[str, str]:
    """Run A (sleeping until B has ended) and, while it sleeps, run B writing ``work``'s file;
    both states."""
    b_ended = tmp_path.with_name(f"{tmp_path.name}-b-ended")  # not in the work tree: no change
    until_b_ended = f"timeout 60 sh -c 'until [ -e {b_ended} ]; do sleep 0.02; done'"
    sleeper = open_run(tool_pipeline(until_b_ended, "a"), workdir=tmp_path)
    states: dict[str, str] = {}
    worker = threading.Thread(target=lambda: states.update(a=sleeper.run().state.value))
    worker.start()
    markers = tmp_path / ".orchestrator" / "evidence"
    try:
        wait_until(
            lambda: list(markers.glob(f"work.running.{sleeper.run_id}")),
            "run A started its work node",
        )
        writer = open_run(tool_pipeline(write_file_command(writer_doc), "b"), workdir=tmp_path)
        states["b"] = writer.run().state.value
        assert worker.is_alive(), "run A ended before run B did"
    finally:
        b_ended.touch()
        worker.join(60)
    return states["a"], states["b"]


def test_another_runs_evidence_bound_by_run_id_does_not_satisfy_require(tmp_path: Path) -> None:
    a, b = run_beside_a_sleeping_run(tmp_path, {**SEED, "runId": "$FRESHNESS_RUN_ID"})
    assert (a, b) == ("failed", "completed")


def test_unbound_evidence_written_while_another_run_ran_the_node_counts_for_neither(
    tmp_path: Path,
) -> None:
    a, b = run_beside_a_sleeping_run(tmp_path, SEED)
    assert (a, b) == ("failed", "failed")
    logs = sorted((tmp_path / ".freshness" / "runs").glob("*/evidence.jsonl"))
    problems = [
        p
        for log in logs
        for r in read_evidence_log(log.parent)
        if r.node_id == "work"
        for p in r.engine["evidence_problems"]
    ]
    assert any("also ran node 'work'" in p or "during a step of run" in p for p in problems)


def test_resume_after_a_kill_between_record_and_checkpoint_keeps_one_record(
    tmp_path: Path,
) -> None:
    # Each execution writes new content (the same bytes again would not be a change).
    doc = {**SEED, "summary": "notified ops at $(date +%s%N)"}
    run = open_run(tool_pipeline(write_file_command(doc)), workdir=tmp_path)
    run.step()  # start
    saved = tmp_path / "checkpoint-before-work.json"
    shutil.copy(run.run_dir / "checkpoint.json", saved)
    journal = run.run_dir / "journal.jsonl"
    journal_before = journal.stat().st_size
    history = set((run.run_dir / "checkpoints").iterdir())
    run.step()  # work: its evidence record is appended, then its journal record
    run.close()
    # The disk as a kill right after the evidence record (before the journal record) leaves it.
    with journal.open("r+b") as handle:
        handle.truncate(journal_before)
    shutil.copy(saved, run.run_dir / "checkpoint.json")
    for newer in set((run.run_dir / "checkpoints").iterdir()) - history:
        newer.unlink()
    resumed = resume_run(run.run_dir)
    assert resumed.next_node == "work"
    assert resumed.run().state is RunState.COMPLETED
    nodes = [r.node_id for r in read_evidence_log(run.run_dir)]
    assert nodes == ["start", "work", "done"]
