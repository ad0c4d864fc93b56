"""The helper process of large snapshots: same records as without it, and never a wrong one.

Every tracker here shares from the first file (``worker_min_files=1``); the worker takes the
files at the end of the sorted list, so the interesting files live under ``z/``.
"""

from __future__ import annotations

import gc
import os
import signal
import sys
import time
from pathlib import Path

import pytest

from freshness_magic.freshness.check import FreshnessTracker
from freshness_magic.freshness.hashworker import (
    COUNT,
    KEY,
    REQUEST,
    Share,
    decode_plan,
    encode_plan,
)
from freshness_magic.freshness.labels import FileLabel
from freshness_magic.freshness.snapshot import MAX_WORKER_FAILURES
from freshness_magic.freshness.statcache import RACY_WINDOW_NS

from .conftest import write


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    for i in range(6):
        write(tmp_path, f"a/f{i}.txt", f"a{i}\n")
        write(tmp_path, f"z/f{i}.txt", f"z{i}\n")
    write(tmp_path, "z/sub/deep.txt", "deep\n")
    os.symlink(tmp_path / "a/f0.txt", tmp_path / "z/link.txt")
    os.mkfifo(tmp_path / "z/pipe")
    (tmp_path / "z/folder").mkdir()
    return tmp_path


ENTRIES = ["**", "z/pipe", "z/folder", "z/missing.txt"]


def settle() -> None:
    """Let the racy window pass, so unchanged files are trusted by their stat key again."""
    time.sleep(RACY_WINDOW_NS / 1e9 + 0.2)


def shared(tracker: FreshnessTracker) -> FreshnessTracker:
    """``tracker``, after checking that its last snapshot was shared with the worker."""
    assert tracker.snapshotter.last_shared > 0, "the last snapshot did not use the worker"
    return tracker


def test_worker_records_equal_the_records_taken_alone(tree: Path) -> None:
    alone = FreshnessTracker(tree, worker_min_files=0).capture({"n": ENTRIES})["n"]
    tracker = FreshnessTracker(tree, worker_min_files=1)
    helped = tracker.capture({"n": ENTRIES})["n"]
    shared(tracker)
    assert helped.files == alone.files
    assert list(helped.files) == list(alone.files)
    assert helped.files["z/pipe"].note == "is a FIFO"
    assert "folder" in helped.files["z/folder"].note
    assert not helped.files["z/missing.txt"].existed
    assert helped.files["z/link.txt"].digest == helped.files["a/f0.txt"].digest


def test_changes_in_the_workers_share_are_labelled(tree: Path) -> None:
    tracker = FreshnessTracker(tree, worker_min_files=1)
    tracker.capture({"n": ["**"]})
    shared(tracker)
    settle()
    assert shared(tracker).check("n").stale_files == []
    write(tree, "z/f1.txt", "changed\n")
    (tree / "z/f2.txt").unlink()
    write(tree, "z/new.txt", "new\n")
    report = tracker.check("n")
    shared(tracker)
    found = {f.path: f.label for f in report.files}
    assert found == {
        "z/f1.txt": FileLabel.STALE_CHANGED,
        "z/f2.txt": FileLabel.STALE_DELETED,
        "z/new.txt": FileLabel.STALE_ADDED,
    }


def test_racy_rewrite_in_the_workers_share_is_detected(tree: Path) -> None:
    target = tree / "z/f3.txt"
    tracker = FreshnessTracker(tree, worker_min_files=1)
    tracker.capture({"n": ["**"]})
    before = target.stat()
    target.write_text("Z3\n")  # same size
    os.utime(target, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert tracker.check("n").stale_files == ["z/f3.txt"]
    shared(tracker)


def test_files_hashed_before_are_only_stat_ed_by_a_new_share(tree: Path) -> None:
    tracker = FreshnessTracker(tree, worker_min_files=1)
    tracker.capture({"n": ["**"]})
    settle()
    tracker.check("n")
    hashed: list[int] = []
    worker = tracker.snapshotter._worker
    assert worker is not None
    original = worker.reports

    def counting(size: int) -> object:
        answer = original(size)
        hashed.append(len(answer.indexes) if answer is not None else -1)
        return answer

    worker.reports = counting  # type: ignore[method-assign]
    tracker.capture({"m": ["z/*.txt", "a/*.txt"]})  # another key list: a new share
    shared(tracker)
    assert hashed == [0]


def test_worker_that_exits_at_once_costs_nothing_but_time(tree: Path) -> None:
    alone = FreshnessTracker(tree, worker_min_files=0).capture({"n": ENTRIES})["n"]
    tracker = FreshnessTracker(tree, worker_min_files=1)
    tracker.snapshotter.worker_argv = [sys.executable, "-c", "pass"]
    for _ in range(MAX_WORKER_FAILURES + 2):
        assert tracker.capture({"n": ENTRIES})["n"].files == alone.files
    assert tracker.snapshotter.worker_failures == MAX_WORKER_FAILURES
    assert tracker.snapshotter._worker is None


@pytest.mark.parametrize(
    "reply",
    [
        b"\xff" * 200,  # a count larger than the share
        COUNT.pack(0),  # leaves out files it has no expected key for
        COUNT.pack(1) + b"\0\0\0\0" + b"\1" + KEY.pack(0, 0, 0, 0, 0, 0) + b"not hex!" * 4,
    ],
    ids=["garbage", "silent-about-files", "bad-digest"],
)
def test_worker_answering_nonsense_is_not_believed(tree: Path, reply: bytes) -> None:
    alone = FreshnessTracker(tree, worker_min_files=0).capture({"n": ENTRIES})["n"]
    script = (
        "import os, struct, sys\n"
        f"H = struct.Struct({REQUEST.format!r})\n"
        "while True:\n"
        "    head = sys.stdin.buffer.read(H.size)\n"
        "    if len(head) < H.size: break\n"
        "    op, n = H.unpack(head)\n"
        "    sys.stdin.buffer.read(n)\n"
        f"    if op == 2: sys.stdout.buffer.write({reply!r}); sys.stdout.buffer.flush()\n"
    )
    tracker = FreshnessTracker(tree, worker_min_files=1)
    tracker.snapshotter.worker_argv = [sys.executable, "-c", script]
    assert tracker.capture({"n": ENTRIES})["n"].files == alone.files
    assert tracker.snapshotter.worker_failures == 1


def test_silent_worker_is_given_up_after_the_timeout(tree: Path) -> None:
    alone = FreshnessTracker(tree, worker_min_files=0).capture({"n": ENTRIES})["n"]
    tracker = FreshnessTracker(tree, worker_min_files=1)
    snapshotter = tracker.snapshotter
    snapshotter.worker_argv = [sys.executable, "-c", "import time; time.sleep(60)"]
    snapshotter.worker_timeout = 0.5
    assert tracker.capture({"n": ENTRIES})["n"].files == alone.files
    assert snapshotter.worker_failures == 1 and snapshotter._worker is None


def test_worker_killed_between_checks_is_replaced(tree: Path) -> None:
    tracker = FreshnessTracker(tree, worker_min_files=1)
    tracker.capture({"n": ["**"]})
    settle()
    tracker.check("n")
    worker = tracker.snapshotter._worker
    assert worker is not None
    os.kill(worker.process.pid, signal.SIGKILL)
    worker.process.wait()
    write(tree, "z/f4.txt", "changed after the kill\n")
    assert tracker.check("n").stale_files == ["z/f4.txt"]
    assert tracker.check("n").stale_files == ["z/f4.txt"]
    replacement = shared(tracker).snapshotter._worker
    assert replacement is not None and replacement is not worker


def test_close_and_dropping_the_tracker_end_the_worker(tree: Path) -> None:
    tracker = FreshnessTracker(tree, worker_min_files=1)
    tracker.capture({"n": ["**"]})
    worker = shared(tracker).snapshotter._worker
    assert worker is not None
    tracker.close()
    assert worker.process.returncode is not None
    assert tracker.check("n").stale_files == []  # still usable; starts another one
    second = shared(tracker).snapshotter._worker
    assert second is not None
    del tracker
    gc.collect()
    assert second.process.returncode is not None


def test_small_snapshots_do_not_keep_a_worker(tree: Path) -> None:
    tracker = FreshnessTracker(tree, worker_min_files=4)
    tracker.capture({"n": ["**"], "one": ["a/f0.txt"]})
    shared(tracker)
    tracker.check("one")  # one file: below the threshold, but the share of "n" stays useful
    assert tracker.snapshotter._worker is not None
    small = FreshnessTracker(tree, worker_min_files=100)
    small.capture({"n": ["**"]})  # started early for the glob, closed once it was small
    assert small.snapshotter._worker is None


def test_plan_round_trip_and_scan_of_a_vanished_folder(tmp_path: Path) -> None:
    write(tmp_path, "d/x.txt", "x")
    plan = [(str(tmp_path / "d"), ["x.txt"]), (str(tmp_path / "gone"), ["y.txt", "z.txt"])]
    decoded = decode_plan(encode_plan(plan))
    assert decoded == plan
    from freshness_magic.freshness.hashing import hash_file_at

    body = Share(decoded).scan(hash_file_at)
    (count,) = COUNT.unpack(body[: COUNT.size])
    assert count == 3  # one hashed, two failed (their folder is gone)


def test_forked_child_starts_its_own_worker(tree: Path) -> None:
    tracker = FreshnessTracker(tree, worker_min_files=1)
    tracker.capture({"n": ["**"]})
    parent_worker = tracker.snapshotter._worker
    assert parent_worker is not None
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(read_end)
            write(tree, "z/f5.txt", "changed in the child\n")
            stale = tracker.check("n").stale_files
            child_worker = tracker.snapshotter._worker
            ok = stale == ["z/f5.txt"] and child_worker is not parent_worker
            ok = ok and tracker.snapshotter.last_shared > 0
            parent_worker.close()  # what the child's exit handlers would do: must not kill it
            os.write(write_end, b"ok" if ok else repr(stale).encode())
        finally:
            os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as handle:
        answer = handle.read()
    os.waitpid(pid, 0)
    assert answer == b"ok"
    assert parent_worker.alive and tracker.snapshotter._worker is parent_worker
    assert tracker.check("n").stale_files == ["z/f5.txt"]
    shared(tracker)


def test_large_tree_in_a_pipeline_shares_by_default_and_blocks_on_a_change(
    tmp_path: Path,
) -> None:
    """4,200 files (over the default threshold); the change is in the last folder: the worker's."""
    from freshness_magic.freshness.extension import FreshnessExtension
    from freshness_magic.freshness.snapshot import WORKER_MIN_FILES
    from freshness_magic.session import open_run

    from .test_pipeline import BLOCK_PIPELINE, events_of

    assert WORKER_MIN_FILES <= 4200
    for i in range(4200):
        path = tmp_path / f"data/d{i // 100:02d}/f{i}.txt"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"{i}\n")
    pipeline = BLOCK_PIPELINE.replace("docs/spec.md", "data/d41/f4199.txt").replace(
        "docs/*.md", "data/**"
    )
    run = open_run(pipeline, workdir=tmp_path)
    result = run.run()
    assert result.status == "completed"
    assert not (tmp_path / "ran.txt").exists() and (tmp_path / "recovered.txt").exists()
    assert "stale input: data/d41/f4199.txt" in run.node_outcomes["guarded"].failure_reason
    stale = [e for e in events_of(run.run_dir) if e["type"] == "stale_input"]
    assert [e["data"]["files"] for e in stale] == [["data/d41/f4199.txt"]]
    (extension,) = [e for e in run.extensions if isinstance(e, FreshnessExtension)]
    assert extension.tracker is not None
    shared(extension.tracker)


def test_one_large_folder_is_split_between_the_two(tmp_path: Path) -> None:
    for i in range(20):
        write(tmp_path, f"f{i:02d}.txt", f"{i}\n")
    alone = FreshnessTracker(tmp_path, worker_min_files=0).capture({"n": ["*.txt"]})["n"]
    tracker = FreshnessTracker(tmp_path, worker_min_files=1)
    helped = tracker.capture({"n": ["*.txt"]})["n"]
    assert 0 < shared(tracker).snapshotter.last_shared < 20
    assert helped.files == alone.files and list(helped.files) == list(alone.files)
    settle()
    write(tmp_path, "f00.txt", "changed by main's half\n")
    write(tmp_path, "f19.txt", "changed in the worker's half\n")
    assert tracker.check("n").stale_files == ["f00.txt", "f19.txt"]
    shared(tracker)
