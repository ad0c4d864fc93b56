"""The stat worker: a large re-check shares its stat calls with a second process, sees every
change either half holds, and goes on alone when the worker dies."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from freshness_magic.freshness.check import FreshnessTracker
from freshness_magic.freshness.report import NodeReport
from freshness_magic.freshness.statworker import (
    FAILED,
    KEY_SIZE,
    MIN_FILES,
    encode_request,
    stat_keys,
    worth_a_worker,
)

FOLDERS = 30
PER_FOLDER = MIN_FILES // FOLDERS + 10

needs_two_cores = pytest.mark.skipif(
    not worth_a_worker(), reason="the stat worker is used only with two or more cores"
)


def stale(report: NodeReport) -> dict[str, str]:
    return {f.path: f.label.value for f in report.files}


@pytest.fixture
def big_tree(tmp_path: Path) -> Path:
    """More files than MIN_FILES, with mtimes well before now (outside the racy window)."""
    past = time.time() - 60
    for f in range(FOLDERS):
        folder = tmp_path / f"d{f:02d}"
        folder.mkdir()
        for i in range(PER_FOLDER):
            path = folder / f"f{i:04d}.txt"
            path.write_text(f"{f}/{i}\n")
            os.utime(path, (past, past))
    return tmp_path


def rewrite(path: Path, text: str) -> None:
    path.write_text(text)
    past = time.time() - 30
    os.utime(path, (past, past))


@needs_two_cores
def test_a_large_recheck_shares_its_stats_and_sees_changes_in_both_halves(
    big_tree: Path,
) -> None:
    tracker = FreshnessTracker(big_tree, git=False)
    tracker.capture({"all": ["**"]})
    worker = tracker.snapshotter.worker
    assert worker is not None
    assert tracker.check("all").stale_files == []
    assert worker.pid is not None, "the re-check of a known large tree uses the worker"

    first, last = big_tree / "d00", big_tree / f"d{FOLDERS - 1:02d}"
    rewrite(first / "f0001.txt", "changed in the first half\n")
    rewrite(last / "f0002.txt", "changed in the second half\n")
    (last / "f0003.txt").unlink()
    (last / "f0004.txt").unlink()
    (last / "f0004.txt").symlink_to(last / "f0005.txt")  # same content as f0005, now a link
    (last / "new.txt").write_text("added\n")
    os.chmod(last / "f0006.txt", 0o600)  # a stat change with the same content: still fresh

    report = tracker.check("all")
    assert worker.pid is not None and not worker.broken
    assert stale(report) == {
        "d00/f0001.txt": "stale_changed",
        f"d{FOLDERS - 1:02d}/f0002.txt": "stale_changed",
        f"d{FOLDERS - 1:02d}/f0003.txt": "stale_deleted",
        f"d{FOLDERS - 1:02d}/f0004.txt": "stale_changed",
        f"d{FOLDERS - 1:02d}/new.txt": "stale_added",
    }
    assert f"d{FOLDERS - 1:02d}/f0006.txt" in report.fresh


@needs_two_cores
def test_a_snapshot_shared_with_the_worker_lists_its_files_in_the_order_they_resolve(
    big_tree: Path,
) -> None:
    """Files the worker saw change are looked at again here, after the others: the snapshot
    still lists every file where it resolves, so what a checkpoint writes does not depend on
    which process looked."""
    tracker = FreshnessTracker(big_tree, git=False)
    order = list(tracker.capture({"all": ["**"]})["all"].files)
    tracker.check("all")
    worker = tracker.snapshotter.worker
    assert worker is not None and worker.pid is not None
    last = big_tree / f"d{FOLDERS - 1:02d}"
    rewrite(last / "f0001.txt", "changed in the worker's half\n")
    rewrite(big_tree / "d00" / "f0002.txt", "changed in this process's half\n")

    assert tracker.accept(["all"]) == {"all": ["d00/f0002.txt", f"d{FOLDERS - 1:02d}/f0001.txt"]}
    assert list(tracker.baselines["all"].files) == order
    assert tracker.check("all").stale_files == []


@needs_two_cores
def test_a_dead_worker_leaves_the_check_to_this_process(big_tree: Path) -> None:
    tracker = FreshnessTracker(big_tree, git=False)
    tracker.capture({"all": ["**"]})
    tracker.check("all")
    worker = tracker.snapshotter.worker
    assert worker is not None and worker.pid is not None
    os.kill(worker.pid, signal.SIGKILL)
    rewrite(big_tree / f"d{FOLDERS - 1:02d}" / "f0007.txt", "changed while the worker died\n")

    report = tracker.check("all")
    assert stale(report) == {f"d{FOLDERS - 1:02d}/f0007.txt": "stale_changed"}
    assert worker.broken and worker.pid is None
    rewrite(big_tree / "d00" / "f0008.txt", "changed later\n")
    assert set(tracker.check("all").stale_files) == {
        f"d{FOLDERS - 1:02d}/f0007.txt",
        "d00/f0008.txt",
    }


def test_a_small_check_or_a_first_capture_does_not_start_the_worker(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("a\n")
    tracker = FreshnessTracker(tmp_path, git=False)
    tracker.capture({"n": ["*.txt"]})
    tracker.check("n")
    worker = tracker.snapshotter.worker
    assert worker is None or worker.pid is None


def test_the_answer_marks_what_could_not_be_stat_ed(tmp_path: Path) -> None:
    odd = "line\nbreak \udcff.txt"  # a newline and a byte that is not UTF-8
    (tmp_path / "a.txt").write_text("a\n")
    with open(os.path.join(os.fsencode(tmp_path), os.fsencode(odd)), "w") as handle:
        handle.write("odd\n")
    request = encode_request(
        [(str(tmp_path), ["a.txt", "missing.txt", odd]), (str(tmp_path / "gone"), ["x", "y"])]
    )
    answer = stat_keys(request)
    keys = [answer[i : i + KEY_SIZE] for i in range(0, len(answer), KEY_SIZE)]
    assert len(keys) == 5
    st = os.stat(tmp_path / "a.txt")
    assert keys[0][:16] == st.st_dev.to_bytes(8, "little") + st.st_ino.to_bytes(8, "little")
    assert keys[1] == FAILED and keys[3] == keys[4] == FAILED
    assert keys[2] != FAILED
