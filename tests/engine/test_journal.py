"""The run directory's journal (format 2): constant bytes per step, amortised snapshots, torn
lines dropped, the format version checked, a run killed at once still resumable."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from freshness_magic.engine import EventType, Run, RunState
from freshness_magic.engine.checkpoint import load_checkpoint, load_state
from freshness_magic.engine.checkpoint_format import (
    CHECKPOINT_FILE,
    JOURNAL_FILE,
    MANIFEST_FILE,
    parse_journal_line,
)
from freshness_magic.errors import CheckpointError, RunError
from freshness_magic.session import open_run
from tests.engine.runkit import graph, make_run
from tests.processes import cli

REPO = Path(__file__).resolve().parents[2]


def linear(count: int, attrs: str = 'prompt="x"') -> str:
    nodes = [f"n{i:05d}" for i in range(count)]
    return (
        "digraph g { start [shape=Mdiamond] "
        + " ".join(f"{n} [{attrs}]" for n in nodes)
        + " done [shape=Msquare] start -> "
        + " -> ".join(nodes)
        + " -> done }"
    )


def records(run_dir: Path) -> list[tuple[int, dict[str, object]]]:
    """(line size, record) of every journal line."""
    out = []
    for line in (run_dir / JOURNAL_FILE).read_bytes().splitlines(keepends=True):
        record = parse_journal_line(line)
        assert record is not None, line
        out.append((len(line), record))
    return out


def test_step_records_do_not_grow_with_the_run_with_freshness_and_evidence(
    tmp_path: Path,
) -> None:
    (tmp_path / "src").mkdir()
    for i in range(20):
        (tmp_path / "src" / f"f{i}.txt").write_text(f"file {i}\n")
    count = 300
    run = open_run(
        linear(count, 'prompt="x", source_files="src/*.txt"'),
        workdir=tmp_path,
        durability="none",
    )
    assert run.run().state is RunState.COMPLETED
    steps = [size for size, record in records(run.run_dir) if record["kind"] == "step"]
    assert len(steps) > count
    first, last = steps[5:55], steps[-60:-10]
    assert max(last) <= max(first) * 1.05 + 16, (max(first), max(last))
    full = [record for _, record in records(run.run_dir) if record["kind"] == "full"]
    assert len(full) == 1 and full[0]["extensions"] is not None
    data, _ = load_checkpoint(run.run_dir)
    result = run.result()
    assert data["completed_nodes"] == result.completed_nodes
    assert data["context"] == json.loads(json.dumps(result.context, default=str))
    assert data["extensions"]["evidence"]["records"] >= count


def test_status_reads_a_long_run_without_replaying_every_record(tmp_path: Path) -> None:
    """920 steps: replaying every record, or a snapshot per step (the history keeps 200, more
    than the 18 allowed), fails as it would at any length; a longer run only costs time."""
    steps = 920
    run = make_run(linear(1000), tmp_path, durability="none", checkpoint_history=200)
    for _ in range(steps):
        run.step()
    loaded = load_state(run.run_dir)
    assert loaded.data["completed_nodes"] == run.completed_nodes
    assert len(loaded.data["completed_nodes"]) == steps
    assert loaded.path == run.run_dir / CHECKPOINT_FILE
    assert loaded.replayed < steps // 2, loaded.replayed
    snapshots = len(list((run.run_dir / "checkpoints").iterdir()))
    assert snapshots < steps // 50, "snapshots are rare: amortised O(1) bytes per step"
    status = cli("status", str(run.run_dir), "--json", cwd=tmp_path)
    assert status.returncode == 3, status.stderr
    assert len(json.loads(status.stdout)["completed_nodes"]) == steps


def test_a_run_directory_of_the_old_format_gets_a_one_line_error(tmp_path: Path) -> None:
    run = make_run(linear(3), tmp_path)
    run.run(max_steps=2)
    data = json.loads((run.run_dir / CHECKPOINT_FILE).read_text())
    data["format"] = 1
    del data["journal_offset"]
    (run.run_dir / CHECKPOINT_FILE).write_text(json.dumps(data) + "\n")
    (run.run_dir / JOURNAL_FILE).unlink()
    for old in (run.run_dir / "checkpoints").iterdir():
        old.unlink()
    with pytest.raises(CheckpointError) as info:
        Run.resume(run.run_dir)
    message = str(info.value)
    assert "format 1" in message and "format 2" in message and "\n" not in message
    status = cli("status", str(run.run_dir), cwd=tmp_path)
    assert status.returncode != 0
    assert status.stderr.strip().count("\n") == 0 and "format 1" in status.stderr


def test_a_torn_or_damaged_last_record_is_dropped_and_cut_on_resume(tmp_path: Path) -> None:
    reference = make_run(linear(6), tmp_path / "ref").run()
    run = make_run(linear(6), tmp_path / "w")
    run.run(max_steps=2)
    run.step()
    journal = run.run_dir / JOURNAL_FILE
    good = journal.read_bytes()
    *_, last = good.splitlines(keepends=True)
    assert load_checkpoint(run.run_dir)[0]["completed_nodes"] == run.completed_nodes
    journal.write_bytes(good + last[: len(last) // 2])
    assert load_checkpoint(run.run_dir)[0]["completed_nodes"] == run.completed_nodes
    damaged = good[: -len(last)] + last.replace(b'"kind":"step"', b'"kind":"stop"')
    assert damaged != good
    journal.write_bytes(damaged + last[:10])
    assert load_checkpoint(run.run_dir)[0]["completed_nodes"] == run.completed_nodes[:-1]
    del run
    again = Run.resume(journal.parent)
    assert journal.read_bytes() == good[: -len(last)]
    result = again.run()
    assert result.completed_nodes == reference.completed_nodes
    assert result.context == reference.context


KILLED_AT_ONCE = r"""
import os, signal, sys
from pathlib import Path
from freshness_magic.engine.pipeline import load_pipeline
from freshness_magic.engine.run import Run

class Die:
    name = "die"
    def on_run_start(self, run):
        os.kill(os.getpid(), signal.SIGKILL)
    def checkpoint_state(self):
        return {}

dot = "digraph g { start [shape=Mdiamond] a [prompt=x] done [shape=Msquare] start -> a -> done }"
Run(load_pipeline(dot), workdir=sys.argv[1], run_id="r", extensions=[Die()]).run()
"""


def test_a_journal_cut_inside_what_its_snapshot_holds_gets_whole_lines_after_resume(
    tmp_path: Path,
) -> None:
    """Bytes lost from the end of a journal whose snapshot covers them: the snapshot is used,
    and the partial line left is cut before the first new record, not continued by it."""
    reference = make_run(linear(6), tmp_path / "ref").run()
    run = make_run(linear(6), tmp_path / "w")
    run.run(max_steps=3)
    run.save_checkpoint()
    journal = run.run_dir / JOURNAL_FILE
    good = journal.read_bytes()
    *_, last = good.splitlines(keepends=True)
    journal.write_bytes(good[:-40])
    assert load_checkpoint(run.run_dir)[0]["completed_nodes"] == run.completed_nodes
    del run
    again = Run.resume(journal.parent)
    assert journal.read_bytes() == good[: -len(last)]
    result = again.run()
    assert result.completed_nodes == reference.completed_nodes
    records(journal.parent)  # every line is one whole record
    for snapshot in (journal.parent / CHECKPOINT_FILE, *journal.parent.glob("checkpoints/*")):
        snapshot.unlink()
    assert load_state(journal.parent).data["completed_nodes"] == reference.completed_nodes


def test_a_run_killed_in_its_first_milliseconds_resumes(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", KILLED_AT_ONCE, str(tmp_path)],
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    run_dir = tmp_path / ".freshness" / "runs" / "r"
    again = Run.resume(run_dir)
    result = again.run()
    assert result.state is RunState.COMPLETED
    assert result.completed_nodes == ["start", "a", "done"]
    assert result.context["graph.goal"] == ""


def test_a_run_directory_with_a_manifest_but_no_state_says_how_to_start_over(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "early"
    folder.mkdir()
    (folder / MANIFEST_FILE).write_text('{"run_id": "early"}\n')
    with pytest.raises(CheckpointError, match="stopped before its first checkpoint") as info:
        Run.resume(folder)
    assert "start the pipeline again with `run`" in str(info.value)
    status = cli("status", str(folder), cwd=tmp_path)
    assert status.returncode == 2 and "before its first checkpoint" in status.stderr


def test_a_run_directory_whose_journal_is_lost_after_steps_ran_is_never_called_empty(
    tmp_path: Path,
) -> None:
    run = Run(graph(linear(2)), workdir=tmp_path)
    assert run.run().state is RunState.COMPLETED
    run.close()
    (run.run_dir / "journal.jsonl").unlink()
    (run.run_dir / "checkpoint.json").unlink()
    shutil.rmtree(run.run_dir / "checkpoints")
    status = cli("status", str(run.run_dir), cwd=tmp_path)
    assert status.returncode == 2
    assert "delete" not in status.stderr and "nothing ran" not in status.stderr
    assert "though its nodes ran and left records (nodes, events.jsonl)" in status.stderr
    assert "keep this directory for those records" in status.stderr
    assert (run.run_dir / "nodes").is_dir()


def test_the_first_record_is_written_before_the_run_starts_anything(tmp_path: Path) -> None:
    seen: list[bool] = []

    class Probe:
        name = "probe"

        def on_run_start(self, run: Run) -> None:
            seen.append((run.run_dir / JOURNAL_FILE).exists())

        def checkpoint_state(self) -> dict[str, object]:
            return {}

    Run(graph(linear(1)), workdir=tmp_path, extensions=[Probe()]).start()  # type: ignore[list-item]
    assert seen == [True]


def test_state_patches_turn_the_old_state_into_the_new_one() -> None:
    import copy
    import random

    from freshness_magic.engine.checkpoint_format import apply_patch
    from freshness_magic.engine.persistence import state_patch

    rng = random.Random(15)
    old: dict[str, object] = {"index": {f"n{i}": f"t{i}" for i in range(100)}, "n": 1}
    for _ in range(300):
        new = copy.deepcopy(old)
        index = new["index"]
        assert isinstance(index, dict)
        choice = rng.randrange(5)
        if choice == 0:
            index[f"n{rng.randrange(1000)}"] = f"t{rng.random()}"
        elif choice == 1 and index:
            del index[rng.choice(sorted(index))]
        elif choice == 2:
            new["n"] = rng.randrange(3)
        elif choice == 3:
            new[f"k{rng.randrange(5)}"] = {"deep": {"x": rng.randrange(3)}}
        elif choice == 4 and len(new) > 2:
            del new[rng.choice(sorted(k for k in new if k.startswith("k")) or ["n"])]
        patched = copy.deepcopy(old)
        apply_patch(patched, json.loads(json.dumps(state_patch(old, new))))
        assert patched == new
        old = new


def test_a_step_with_freshness_and_evidence_makes_one_fsync_in_durable_mode(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a.txt").write_text("a\n")
    run = open_run(linear(30, 'prompt="x", source_files="src/*.txt"'), workdir=tmp_path)
    run.start()
    calls = [0]
    real = os.fsync

    def counting(fd: int) -> None:
        calls[0] += 1
        real(fd)

    monkeypatch.setattr(os, "fsync", counting)
    per_step = []
    while not run.state.finished:
        before = calls[0]
        run.step()
        per_step.append(calls[0] - before)
    assert per_step and set(per_step) == {1}, per_step
    strict = open_run(linear(3), workdir=tmp_path / "strict", durability="strict")
    before = calls[0]
    strict.step()
    strict.step()
    assert calls[0] - before > 2, "strict mode fsyncs every file"
    with pytest.raises(RunError, match="durability 'sometimes' is not one of"):
        open_run(linear(3), workdir=tmp_path / "bad", durability="sometimes")


# The node waits for the event of its own start being recorded (its group id kept), not for time.
WIPE = 'until [ -f \\"$FRESHNESS_STAGE_DIR/pgid\\" ]; do sleep 0.01; done; rm -rf .freshness'
WIPES_ITS_STATE = (
    """digraph g {
  start [shape=Mdiamond]
  a    [shape=parallelogram, tool_command="echo a"]
  wipe [shape=parallelogram, tool_command="WIPE"]
  b    [shape=parallelogram, tool_command="echo b"]
  gate [shape=hexagon, label="Go?"]
  done [shape=Msquare]
  start -> a -> wipe -> b -> gate
  gate -> done [label="[Y] Yes"]
}"""
).replace("WIPE", WIPE, 1)
TRY_TO_DRIVE = """
import sys
from freshness_magic.engine import Run
from freshness_magic.errors import RunError
try:
    Run.resume(sys.argv[1])
except RunError as exc:
    sys.exit(f"refused: {exc}")
"""


def test_a_run_whose_directory_a_node_removes_writes_it_again_and_stays_resumable(
    tmp_path: Path,
) -> None:
    """A tool that cleans the work tree (``git clean -x``) takes ``.freshness`` with it: the
    run makes its directory again (lock, pipeline, manifest) and starts the new journal with
    the whole state, instead of step records that continue a state no file holds."""
    said: list[str] = []
    run = open_run(WIPES_ITS_STATE, workdir=tmp_path)
    run.events.subscribe(
        lambda event: (
            said.append(event.data["text"])
            if event.type is EventType.STAGE_OUTPUT and event.node_id is None
            else None
        )
    )
    run_dir = run.run_dir
    run.run()
    assert run.state is RunState.WAITING
    [note] = said
    assert note.startswith(f"the run directory {run_dir} was removed or replaced while")
    first = records(run_dir)[0][1]
    assert first["kind"] == "full"
    assert first["completed_nodes"] == ["start", "a", "wipe"]
    for kept in (MANIFEST_FILE, "pipeline.dot", "driver.lock"):
        assert (run_dir / kept).is_file(), kept
    assert (tmp_path / ".freshness" / ".gitignore").is_file()
    other = subprocess.run(
        [sys.executable, "-c", TRY_TO_DRIVE, str(run_dir)],
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert other.returncode == 1 and "refused:" in other.stderr, other.stderr
    run.close()

    again = Run.resume(run_dir)
    assert again.state is RunState.WAITING
    assert again.completed_nodes == ["start", "a", "wipe", "b"]
    again.answer("gate", "Y")
    again.run()
    assert again.state is RunState.COMPLETED
    again.close()


def test_a_journal_replaced_under_the_run_starts_again_with_the_whole_state(
    tmp_path: Path,
) -> None:
    """Only the journal was swapped (a backup put back by hand): the lock file is still the one
    held, and the run goes on, appending a whole state to the file that stands there now."""
    run = open_run(linear(4), workdir=tmp_path)
    run.step()
    run.step()
    journal = run.run_dir / JOURNAL_FILE
    journal.rename(run.run_dir / "journal.old")
    journal.write_bytes((run.run_dir / "journal.old").read_bytes())
    run.run()
    assert run.state is RunState.COMPLETED
    kinds = [record["kind"] for _, record in records(run.run_dir)]
    assert kinds.count("full") == 2  # the first one, and the one after the swap
    run.close()
    assert Run.resume(run.run_dir).state is RunState.COMPLETED


def test_every_trace_is_in_the_snapshot_and_once_in_the_journal_as_the_run_holds_it(
    tmp_path: Path,
) -> None:
    run = open_run(linear(40), workdir=tmp_path, durability="none")
    run.step()
    run.step()
    run.save_checkpoint()  # a snapshot with two traces, then more steps and snapshots
    assert run.run().state is RunState.COMPLETED
    held = [t.to_dict() for t in run.traces]
    assert len(held) == 42  # start, the 40 nodes and done
    data, _ = load_checkpoint(run.run_dir)
    assert data["traces"] == held
    journaled: list[object] = []
    for _, record in records(run.run_dir):
        if record["kind"] == "full":
            journaled = list(record["traces"])  # type: ignore[call-overload]
        else:
            journaled += record.get("traces", [])  # type: ignore[operator]
    assert journaled == held
