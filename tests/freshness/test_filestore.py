"""A run keeps its whole snapshots' files as blocks beside the checkpoint, named by their digest:
written once, before the journal record that names them; read back only when their bytes are
their name; kept inline when they cannot be written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from freshness_magic import faults
from freshness_magic.errors import FreshnessError
from freshness_magic.freshness.baseline import (
    NONE,
    STAT,
    STORED_FROM_FILES,
    FileRecord,
    pack_block,
    unpack_block,
)
from freshness_magic.freshness.check import FreshnessTracker
from freshness_magic.freshness.filestore import FOLDER, FileStore
from freshness_magic.freshness.hashing import StatKey
from tests.processes import cli, cli_process

from .conftest import write

PIPELINE = """digraph p { start [shape=Mdiamond]; done [shape=Msquare];
  work [prompt="x", source_files="src/**", freshness="warn"];
  start -> work -> done }
"""


def make_tree(folder: Path) -> Path:
    """Enough files under ``src`` for their snapshot to be kept as a block."""
    for i in range(STORED_FROM_FILES):
        write(folder, f"src/f{i:04d}.txt", f"file {i}\n")
    write(folder, "p.dot", PIPELINE)
    return folder


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    return make_tree(tmp_path / "work")


def traced_block_write(folder: Path, trace: Path) -> int:
    """The number of the traced write that writes the block of a run of :data:`PIPELINE` in a
    new tree ``folder`` (a run in an identical tree makes the same writes)."""
    env = {faults.TRACE_ENV: str(trace)}
    assert cli_process("run", "p.dot", cwd=make_tree(folder), env=env).returncode == 0
    lines = trace.read_text().splitlines()
    (number,) = [n for n, line in enumerate(lines, 1) if f"/{FOLDER}/" in line.split("\t")[1]]
    return number


def saved_state(tracker: FreshnessTracker, store: FileStore | None) -> dict:
    """The tracker's state as a checkpoint holds it (through JSON)."""
    return json.loads(json.dumps(tracker.to_dict(store)))


def test_a_whole_snapshot_is_one_block_named_by_its_digest_and_read_back(tree: Path) -> None:
    store = FileStore(tree / "run")
    tracker = FreshnessTracker(tree)
    tracker.capture({"a": ["src/*"], "b": ["src/*"]})
    write(tree, "src/f0003.txt", "changed\n")
    tracker.snapshot_run("a")
    state = saved_state(tracker, store)
    (block,) = (tree / "run" / FOLDER).iterdir()
    assert state["baselines"]["a"]["files_stored"] == {"block": block.name, "others": []}
    assert "files_from" in state["baselines"]["b"]  # same entries: a delta of a's
    assert "src/f0001.txt" not in json.dumps(state)  # the paths are in the block only
    assert block.read_bytes().count(b"src/f0001.txt") == 1
    again = FreshnessTracker(tree)
    again.load(state, store)
    assert again.baselines == tracker.baselines and again.run_snapshots == tracker.run_snapshots
    write(tree, "src/f0005.txt", "changed after\n")
    assert "src/f0005.txt" in again.check("a").stale_files
    assert (
        again.check("b").stale_files
        == tracker.check("b").stale_files
        == [
            "src/f0003.txt",
            "src/f0005.txt",
        ]
    )
    assert saved_state(tracker, store) == state  # a later checkpoint names the same block
    assert len(list((tree / "run" / FOLDER).iterdir())) == 1


def test_a_block_holds_any_path_and_every_kind_of_record() -> None:
    key = StatKey(1, 2, 0o100644, 3, 4, 5)
    files = {
        "plain.txt": FileRecord(True, key, "ab" * 16),
        "blob.txt": FileRecord(True, key, "cd" * 20),
        "caf\u00e9/\udce9t\u00e9.bin": FileRecord(True, key, "ef" * 16),  # a name not UTF-8
        "big.iso": FileRecord(True, key, None, STAT, "too large to hash"),
        "gone.txt": FileRecord(False, None, None, NONE),
        "/outside/abs.txt": FileRecord(True, key, "01" * 16, regular=False),
    }
    block, others = pack_block(files)
    assert len(others) == 3
    assert unpack_block(block, json.loads(json.dumps(others))) == files
    assert list(unpack_block(block, others)) == list(files)  # in order
    assert unpack_block(*pack_block({})) == {}


@pytest.mark.parametrize(
    "damage",
    [
        lambda block: block[:-1],  # truncated
        lambda block: block[:40] + b"\0" + block[41:],  # a byte changed
        lambda block: b"",
    ],
)
def test_a_block_whose_parts_do_not_fit_is_refused_with_a_value_error(damage) -> None:
    key = StatKey(1, 2, 0o100644, 3, 4, 5)
    block, others = pack_block({f"f{i}": FileRecord(True, key, "ab" * 16) for i in range(3)})
    with pytest.raises(ValueError):
        unpack_block(damage(block), others)


def stored(tree: Path) -> tuple[FreshnessTracker, FileStore, dict, Path]:
    """A tracker of the tree's ``src`` files, its run's store, its saved state and the block."""
    store = FileStore(tree / "run")
    tracker = FreshnessTracker(tree)
    tracker.capture({"a": ["src/*"]})
    state = saved_state(tracker, store)
    (block,) = (tree / "run" / FOLDER).iterdir()
    return tracker, store, state, block


def test_a_missing_block_is_a_freshness_error_naming_the_file(tree: Path) -> None:
    _, store, state, block = stored(tree)
    block.unlink()
    with pytest.raises(FreshnessError, match=f"{block}, which is missing; restore it"):
        FreshnessTracker(tree).load(state, store)


def test_a_damaged_or_replaced_block_is_refused_not_read(tree: Path) -> None:
    _, store, state, block = stored(tree)
    data = bytearray(block.read_bytes())
    data[-1] ^= 1  # one bit of a digest: the files would still unpack, wrongly
    block.write_bytes(bytes(data))
    with pytest.raises(FreshnessError, match="does not hold the run's recorded input files"):
        FreshnessTracker(tree).load(state, store)


def test_a_name_that_is_not_a_digest_reads_no_file(tree: Path) -> None:
    write(tree, "secret.txt", "not a block\n")
    _, store, state, _ = stored(tree)
    state["baselines"]["a"]["files_stored"]["block"] = "../../secret.txt"
    with pytest.raises(FreshnessError, match="not a name this run gives them"):
        FreshnessTracker(tree).load(state, store)


def test_a_block_removed_while_the_run_goes_on_is_written_again(tree: Path) -> None:
    tracker, store, first, block = stored(tree)
    block.unlink()
    assert saved_state(tracker, store) == first
    assert block.is_file()
    again = FreshnessTracker(tree)
    again.load(first, store)
    assert again.baselines == tracker.baselines


def test_a_snapshot_of_fewer_files_stays_in_the_checkpoint(tree: Path) -> None:
    store = FileStore(tree / "run")
    tracker = FreshnessTracker(tree)
    tracker.capture({"a": ["src/f00*.txt"]})  # 100 files
    state = saved_state(tracker, store)
    assert len(state["baselines"]["a"]["files_packed"]["paths"]) == 100
    assert not (tree / "run" / FOLDER).exists()
    again = FreshnessTracker(tree)
    again.load(state, store)
    assert again.baselines == tracker.baselines


def test_without_a_run_directory_the_files_are_kept_inline(tree: Path) -> None:
    tracker = FreshnessTracker(tree)
    tracker.capture({"a": ["src/*"]})
    state = saved_state(tracker, None)
    assert "files_packed" in state["baselines"]["a"]
    again = FreshnessTracker(tree)
    again.load(state)
    assert again.baselines == tracker.baselines


def test_a_stored_snapshot_without_its_store_is_a_clear_error(tree: Path) -> None:
    tracker = FreshnessTracker(tree)
    tracker.capture({"a": ["src/*"]})
    state = saved_state(tracker, FileStore(tree / "run"))
    with pytest.raises(FreshnessError, match="kept in the run directory, which was not given"):
        FreshnessTracker(tree).load(state)


def test_a_block_that_cannot_be_written_is_kept_in_the_checkpoint(
    tree: Path, tmp_path: Path
) -> None:
    number = traced_block_write(tmp_path / "traced", tmp_path / "writes.txt")
    env = {faults.TRACE_ENV: str(tmp_path / "again.txt"), faults.FAULT_ENV: f"{number}:ENOSPC"}
    assert cli_process("run", "p.dot", cwd=tree, env=env).returncode == 0
    (run_dir,) = (tree / ".freshness" / "runs").iterdir()
    assert not list((run_dir / FOLDER).glob("[0-9a-f]*"))
    data = json.loads((run_dir / "checkpoint.json").read_text())
    assert "files_packed" in data["extensions"]["freshness"]["tracker"]["baselines"]["work"]
    write(tree, "src/f0007.txt", "changed\n")
    done = cli("check", str(run_dir), cwd=tree)
    assert done.returncode == 1 and "stale_changed  src/f0007.txt" in done.stdout


@pytest.mark.parametrize("after", [0, 1], ids=["at the block", "after the block"])
def test_a_driver_killed_around_the_block_write_leaves_a_run_that_resumes(
    tree: Path, tmp_path: Path, after: int
) -> None:
    number = traced_block_write(tmp_path / "traced", tmp_path / "writes.txt")
    env = {
        faults.TRACE_ENV: str(tmp_path / "again.txt"),
        faults.FAULT_ENV: f"{number + after}:kill",
    }
    assert cli_process("run", "p.dot", cwd=tree, env=env).returncode == -9
    (run_dir,) = (tree / ".freshness" / "runs").iterdir()
    assert any((run_dir / FOLDER).glob("[0-9a-f]*")) == bool(after)
    resumed = cli("resume", str(run_dir), cwd=tree)
    assert resumed.returncode == 0, resumed.stderr
    write(tree, "src/f0011.txt", "changed\n")
    done = cli("check", str(run_dir), cwd=tree)
    assert done.returncode == 1, done.stderr
    assert "stale_changed  src/f0011.txt" in done.stdout


def test_check_names_a_missing_block_and_exits_2(tree: Path) -> None:
    assert cli("run", "p.dot", cwd=tree).returncode == 0
    (run_dir,) = (tree / ".freshness" / "runs").iterdir()
    (block,) = (run_dir / FOLDER).iterdir()
    block.unlink()
    done = cli("check", str(run_dir), cwd=tree)
    assert done.returncode == 2
    assert f"{block}, which is missing" in done.stderr
    assert "Traceback" not in done.stderr


def test_status_and_why_say_the_inputs_were_not_checked_when_the_block_is_missing(
    tree: Path,
) -> None:
    assert cli("run", "p.dot", cwd=tree).returncode == 0
    (run_dir,) = (tree / ".freshness" / "runs").iterdir()
    write(tree, "src/f0009.txt", "changed\n")
    shown = cli("status", str(run_dir), cwd=tree)
    assert "(stale)" in shown.stdout and "not checked" not in shown.stdout
    (block,) = (run_dir / FOLDER).iterdir()
    block.unlink()
    shown = cli("status", str(run_dir), cwd=tree)
    assert "(stale)" not in shown.stdout
    said = f"note: its inputs were not checked: the run's recorded input files are kept in {block}"
    assert f"{said}, which is missing" in shown.stdout
    data = json.loads(cli("status", "--json", str(run_dir), cwd=tree).stdout)
    assert "which is missing" in data["inputs_unchecked"] and "stale_nodes" not in data
    told = cli("why", str(run_dir), "work", cwd=tree)
    assert told.returncode == 0 and f"{said}, which is missing" in told.stdout
    data = json.loads(cli("why", "--json", str(run_dir), "work", cwd=tree).stdout)
    assert "which is missing" in data["inputs_unchecked"]


def test_status_of_a_run_without_tracked_inputs_says_nothing_of_them(tmp_path: Path) -> None:
    write(tmp_path, "p.dot", PIPELINE.replace(', source_files="src/**", freshness="warn"', ""))
    assert cli("run", "p.dot", cwd=tmp_path).returncode == 0
    (run_dir,) = (tmp_path / ".freshness" / "runs").iterdir()
    shown = cli("status", "--json", str(run_dir), cwd=tmp_path)
    assert "inputs_unchecked" not in json.loads(shown.stdout)
