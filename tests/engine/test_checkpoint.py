"""Checkpoints and resume: §5.3 fields, exact resume in the same and in a new process, corrupt
checkpoint fallback, bounded history, manifest."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from freshness_magic.engine import Run, RunResult, RunState
from freshness_magic.engine.checkpoint import load_checkpoint
from freshness_magic.engine.checkpoint_format import JOURNAL_FILE, history_files
from freshness_magic.engine.events import EventType
from freshness_magic.engine.outcome import Outcome, StageStatus
from freshness_magic.errors import CheckpointError
from tests.engine.runkit import Scripted, graph, make_run
from tests.processes import cli

REPO = Path(__file__).resolve().parents[2]

PIPELINE = """digraph ship {
  graph [goal="Ship the fix", retry_target="plan"]
  start [shape=Mdiamond]
  plan [prompt="Plan $goal"]
  impl [prompt="Implement", goal_gate=true]
  check [shape=diamond]
  approve [shape=hexagon, label="Ship it?"]
  done [shape=Msquare]
  start -> plan -> impl -> check
  check -> approve [condition="outcome=success"]
  check -> plan [condition="outcome=fail"]
  approve -> done [label="[Y] Yes"]
  approve -> plan [label="[N] No"]
}"""


def comparable(result: RunResult) -> tuple[object, ...]:
    return (
        result.state,
        result.completed_nodes,
        {k: (o.status, o.notes, o.failure_reason) for k, o in result.node_outcomes.items()},
        result.next_node,
        result.pending_gate,
        result.context,
    )


def reference(tmp_path: Path) -> RunResult:
    run = Run(graph(PIPELINE), workdir=tmp_path / "ref")
    run.run()
    run.answer("approve", "N")
    run.run()
    run.answer("approve", "Y")
    return run.run()


def test_checkpoint_has_the_spec_fields_and_more(tmp_path: Path) -> None:
    run = Run(graph(PIPELINE), workdir=tmp_path)
    run.run()
    data, path = load_checkpoint(run.run_dir)
    assert path == run.run_dir / "checkpoint.json"
    for key in (
        "timestamp",
        "current_node",
        "completed_nodes",
        "node_retries",
        "context",
        "logs",
        "node_outcomes",
        "next_node",
        "state",
        "pending_gate",
        "goal_gate_redirects",
        "pipeline",
        "extensions",
    ):
        assert key in data, key
    assert data["current_node"] == "approve"
    assert data["state"] == "waiting"
    assert data["pending_gate"]["node"] == "approve"
    assert data["pipeline"]["source_file"] == "pipeline.dot"
    assert (run.run_dir / "pipeline.dot").read_text() == PIPELINE
    assert len(data["pipeline"]["sha256"]) == 64
    manifest = json.loads((run.run_dir / "manifest.json").read_text())
    assert manifest["name"] == "ship" and manifest["goal"] == "Ship the fix"
    assert manifest["run_id"] == run.run_id and manifest["started_at"]


def test_resume_in_the_same_process_is_exact(tmp_path: Path) -> None:
    expected = reference(tmp_path)
    run = Run(graph(PIPELINE), workdir=tmp_path / "w")
    run.run(to="impl")
    again = Run.resume(run.run_dir)
    assert again.state is RunState.PAUSED
    assert again.next_node == "impl"
    assert comparable(again.result()) == comparable(run.result())
    again.run()
    again.answer("approve", "N")
    again = Run.resume(again.run_dir)
    again.run()
    again.answer("approve", "Y")
    assert comparable(again.run()) == comparable(expected)


def test_resume_in_a_new_process_is_exact(tmp_path: Path) -> None:
    expected = reference(tmp_path)
    dot = tmp_path / "ship.dot"
    dot.write_text(PIPELINE)
    work = tmp_path / "w"
    work.mkdir()
    first = cli("run", str(dot), "--workdir", str(work), "--to", "check", "--json", cwd=tmp_path)
    assert first.returncode == 3, first.stderr
    run_dir = Path(json.loads(first.stdout)["run_dir"])
    dot.unlink()
    second = cli("resume", str(run_dir), "--answer", "approve=N", "--json", cwd=tmp_path)
    assert second.returncode == 3, second.stderr
    assert json.loads(second.stdout)["status"] == "waiting"
    third = cli("resume", str(run_dir), "--answer", "approve=Y", "--json", cwd=tmp_path)
    assert third.returncode == 0, third.stderr
    final = Run.resume(run_dir).result()
    assert comparable(final) == comparable(expected)
    assert json.loads(third.stdout) == json.loads(
        json.dumps(expected.to_dict() | {"run_dir": str(run_dir)}, default=str)
    )


def test_corrupt_latest_checkpoint_falls_back_to_history(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    run = make_run(PIPELINE, tmp_path)
    run.run(to="check")
    latest = run.run_dir / "checkpoint.json"
    good = json.loads(latest.read_text())
    latest.unlink()
    latest.write_text('{"timestamp": "2026-01-01", "completed_no')
    with caplog.at_level(logging.WARNING):
        again = Run.resume(run.run_dir)
    assert str(latest) in caplog.text
    assert again.completed_nodes == good["completed_nodes"]
    assert again.next_node == "check"
    events = [json.loads(line) for line in (run.run_dir / "events.jsonl").read_text().splitlines()]
    corrupt = [e for e in events if e["type"] == EventType.CHECKPOINT_CORRUPT.value]
    assert corrupt[0]["data"]["path"] == str(latest)
    assert "truncated" in corrupt[0]["data"]["why"]
    assert latest.read_text().startswith('{"timestamp"')
    assert again.run().state is RunState.WAITING


def test_in_place_corruption_uses_an_older_valid_checkpoint_and_deletes_nothing(
    tmp_path: Path,
) -> None:
    run = make_run(PIPELINE, tmp_path)
    run.run(to="check")
    with open(run.run_dir / "checkpoint.json", "r+b") as handle:
        handle.truncate(100)
    before = sorted(p.name for p in (run.run_dir / "checkpoints").iterdir())
    again = Run.resume(run.run_dir)
    assert again.completed_nodes[:3] == ["start", "plan", "impl"][: len(again.completed_nodes)]
    assert sorted(p.name for p in (run.run_dir / "checkpoints").iterdir()) == before
    result = again.run()
    assert result.state is RunState.WAITING
    assert result.completed_nodes == ["start", "plan", "impl", "check"]


def test_no_valid_checkpoint_is_a_checkpoint_error_naming_the_path(tmp_path: Path) -> None:
    empty = tmp_path / "not-a-run"
    empty.mkdir()
    with pytest.raises(CheckpointError, match=r"not-a-run/checkpoint\.json: missing"):
        Run.resume(empty)
    run = make_run(PIPELINE, tmp_path)
    run.run(max_steps=1)
    for path in [run.run_dir / "checkpoint.json", *history_files(run.run_dir)]:
        path.unlink()
        path.write_text("garbage\n")
    assert Run.resume(run.run_dir).completed_nodes == ["start"]
    journal = run.run_dir / JOURNAL_FILE
    journal.write_bytes(b"garbage\n" + journal.read_bytes())
    with pytest.raises(CheckpointError, match="no usable checkpoint") as info:
        Run.resume(run.run_dir)
    assert str(run.run_dir / "checkpoint.json") in str(info.value)
    assert str(journal) in str(info.value)


def test_history_is_bounded_and_names_are_unique(tmp_path: Path) -> None:
    dot = (
        "digraph g { start [shape=Mdiamond] "
        + " ".join(f'n{i} [prompt="x"]' for i in range(40))
        + " done [shape=Msquare] start -> "
        + " -> ".join(f"n{i}" for i in range(40))
        + " -> done }"
    )
    run = make_run(dot, tmp_path, checkpoint_history=2)
    run.run()
    files = history_files(run.run_dir)
    assert len(files) == 2
    assert files[-1].read_bytes() == (run.run_dir / "checkpoint.json").read_bytes()
    assert json.loads(files[-1].read_text())["state"] == "completed"
    assert len(json.loads(files[0].read_text())["completed_nodes"]) < 42

    unbounded = make_run(dot, tmp_path, checkpoint_history=1000)
    unbounded.run()
    names = [p.name for p in history_files(unbounded.run_dir)]
    assert len(names) == len(set(names))
    assert 2 < len(names) < 42 // 2, "snapshots are compactions, not one per step"


def test_resume_refuses_another_pipeline(tmp_path: Path) -> None:
    run = make_run(PIPELINE, tmp_path)
    run.run(max_steps=2)
    other = graph(PIPELINE.replace("Plan $goal", "Plan something else"))
    with pytest.raises(CheckpointError, match="belongs to another pipeline"):
        Run.resume(run.run_dir, graph=other)


def test_goal_gate_judged_from_restored_outcomes(tmp_path: Path) -> None:
    dot = """digraph g {
      start [shape=Mdiamond]
      plan [prompt="p"]
      impl [prompt="i", goal_gate=true, retry_target="plan"]
      check [shape=diamond]
      done [shape=Msquare]
      start -> plan -> impl -> check -> done
      impl -> check [condition="outcome=fail"]
    }"""
    handler = Scripted({"impl": [Outcome(status=StageStatus.FAIL), Outcome()]})
    run = make_run(dot, tmp_path, handler=handler)
    run.run(max_steps=4)
    assert run.completed_nodes == ["start", "plan", "impl", "check"]
    assert run.next_node == "plan"
    assert run.goal_gate_redirects == 1
    again = Run.resume(run.run_dir, registry=run.registry)
    assert again.goal_gate_redirects == 1
    assert again.node_outcomes["impl"].status is StageStatus.FAIL
    assert again.run().completed_nodes == [
        "start",
        "plan",
        "impl",
        "check",
        "plan",
        "impl",
        "check",
        "done",
    ]


def test_tampered_stored_pipeline_is_refused(tmp_path: Path) -> None:
    run = make_run(PIPELINE, tmp_path)
    run.run(max_steps=2)
    (run.run_dir / "pipeline.dot").write_text(PIPELINE.replace("Plan $goal", "Hacked"))
    with pytest.raises(CheckpointError, match="does not match its checkpoint"):
        Run.resume(run.run_dir)
    assert Run.resume(run.run_dir, graph=graph(PIPELINE)).next_node == "impl"


def test_encoded_map_is_spliced_as_valid_sorted_json() -> None:
    from freshness_magic.engine.checkpoint_format import EncodedMap, encode_checkpoint

    outcomes = EncodedMap()
    outcomes.set("b", {"outcome": "fail", "notes": 'quote " and ünïcode'})
    outcomes.set("a", {"outcome": "success"})
    outcomes.set("b", {"outcome": "success"})
    raw = encode_checkpoint({"z": [1], "node_outcomes": outcomes, "a": None})
    assert raw.endswith(b"}\n") and raw.count(b"\n") == 1
    assert json.loads(raw) == {
        "a": None,
        "node_outcomes": {"b": {"outcome": "success"}, "a": {"outcome": "success"}},
        "z": [1],
    }
    assert list(json.loads(raw)) == ["a", "node_outcomes", "z"]
