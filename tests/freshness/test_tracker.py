"""FreshnessTracker: every label, racy rewrites, unreadable files, symlinks, races, accept."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from freshness_magic.errors import FreshnessError
from freshness_magic.freshness.baseline import (
    NONE,
    Baseline,
    FileRecord,
    FileView,
    pack_block,
    unpack_block,
)
from freshness_magic.freshness.check import FreshnessTracker, compare
from freshness_magic.freshness.hashing import StatKey, hash_file
from freshness_magic.freshness.labels import FileLabel, NodeLabel
from freshness_magic.freshness.report import NodeReport
from freshness_magic.freshness.resolve import Resolution
from tests.unprivileged import NOBODY, unprivileged

from .conftest import write


def labels(report: NodeReport) -> dict[str, str]:
    found = {f.path: f.label.value for f in report.files}
    found.update(dict.fromkeys(report.fresh, "fresh"))
    return found


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    write(tmp_path, "docs/spec.md", "spec v1\n")
    write(tmp_path, "src/a.py", "a\n")
    write(tmp_path, "src/b.py", "b\n")
    return tmp_path


def test_unchanged_files_are_fresh(tree: Path) -> None:
    tracker = FreshnessTracker(tree)
    tracker.capture({"n": ["docs/spec.md", "src/*.py"]})
    report = tracker.check("n")
    assert report.label is NodeLabel.FRESH
    assert labels(report) == dict.fromkeys(["docs/spec.md", "src/a.py", "src/b.py"], "fresh")
    assert report.stale_files == []


def test_changed_content_is_stale_changed_with_old_and_new_details(tree: Path) -> None:
    tracker = FreshnessTracker(tree)
    tracker.capture({"n": ["docs/spec.md"]})
    write(tree, "docs/spec.md", "spec v2, longer\n")
    report = tracker.check("n")
    assert report.label is NodeLabel.STALE_CHANGED
    (entry,) = report.files
    assert entry.label is FileLabel.STALE_CHANGED and entry.method == "hash"
    assert entry.old_digest and entry.new_digest and entry.old_digest != entry.new_digest
    assert (entry.old_size, entry.new_size) == (8, 16)
    assert entry.old_mtime_ns is not None and entry.new_mtime_ns is not None
    data = entry.to_dict()
    assert len(data["old_hash"]) == 12 and data["old_hash"] == entry.old_digest[:12]


def test_deleted_file_is_stale_deleted(tree: Path) -> None:
    tracker = FreshnessTracker(tree)
    tracker.capture({"lit": ["docs/spec.md"], "glob": ["src/*.py"]})
    (tree / "docs/spec.md").unlink()
    (tree / "src/b.py").unlink()
    assert labels(tracker.check("lit")) == {"docs/spec.md": "stale_deleted"}
    assert labels(tracker.check("glob")) == {"src/a.py": "fresh", "src/b.py": "stale_deleted"}
    assert tracker.check("glob").label is NodeLabel.STALE_DELETED


def test_new_glob_match_is_stale_added(tree: Path) -> None:
    tracker = FreshnessTracker(tree)
    tracker.capture({"n": ["src/**/*.py"]})
    write(tree, "src/pkg/c.py", "c\n")
    report = tracker.check("n")
    assert report.label is NodeLabel.STALE_ADDED
    assert labels(report)["src/pkg/c.py"] == "stale_added"


def test_listed_path_appearing_is_stale_added_and_missing_twice_is_fresh(tree: Path) -> None:
    tracker = FreshnessTracker(tree)
    tracker.capture({"n": ["later.txt"]})
    assert labels(tracker.check("n")) == {"later.txt": "fresh"}
    write(tree, "later.txt")
    assert labels(tracker.check("n")) == {"later.txt": "stale_added"}


def test_outside_entry_is_unknown_and_not_stale(tree: Path) -> None:
    tracker = FreshnessTracker(tree / "src")
    tracker.capture({"n": ["../docs/spec.md", "a.py"]})
    report = tracker.check("n")
    assert labels(report) == {"../docs/spec.md": "unknown", "a.py": "fresh"}
    assert report.label is NodeLabel.UNKNOWN and report.stale_files == []


def test_node_without_files_is_no_refs(tree: Path) -> None:
    tracker = FreshnessTracker(tree)
    tracker.capture({"n": ["nothing/*.c"]})
    assert tracker.baselines["n"].files == {}
    assert tracker.check("n").label is NodeLabel.NO_REFS


def test_racy_rewrite_with_same_size_and_mtime_is_detected(tree: Path) -> None:
    path = tree / "docs/spec.md"
    tracker = FreshnessTracker(tree)
    tracker.capture({"n": ["docs/spec.md"]})
    before = os.stat(path)
    path.write_text("spec v9\n")  # same size
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))  # same mtime tick
    assert os.stat(path).st_size == before.st_size
    assert os.stat(path).st_mtime_ns == before.st_mtime_ns
    assert labels(tracker.check("n")) == {"docs/spec.md": "stale_changed"}


def test_racy_entry_is_rehashed_even_when_the_whole_stat_key_matches(tree: Path) -> None:
    """Forge the stat key of the cached record so only the racy rule can catch the change."""
    path = tree / "docs/spec.md"
    tracker = FreshnessTracker(tree)
    tracker.capture({"n": ["docs/spec.md"]})
    path.write_text("spec v9\n")
    assert "docs/spec.md" not in tracker.snapshotter.cache.records  # racily clean: not kept
    record = tracker.baselines["n"].files["docs/spec.md"]
    now_key = type(record.stat).of(os.stat(path))
    forged = FileRecord(record.existed, now_key, record.digest)
    tracker.snapshotter.cache.store("docs/spec.md", forged, tracker.baselines["n"].fs_time_ns)
    tracker.baselines["n"].files["docs/spec.md"] = forged
    assert labels(tracker.check("n")) == {"docs/spec.md": "stale_changed"}


def test_stat_cache_skips_rehashing_old_unchanged_files(tree: Path) -> None:
    old = time.time_ns() - 10 * 1_000_000_000
    for rel in ("src/a.py", "src/b.py"):
        os.utime(tree / rel, ns=(old, old))
    tracker = FreshnessTracker(tree)
    tracker.capture({"n": ["src/*.py"]})
    first = tracker.snapshotter.cache.records["src/a.py"]
    report = tracker.check("n")
    assert report.fresh == ("src/a.py", "src/b.py")
    assert tracker.snapshotter.cache.records["src/a.py"] is first


def test_unreadable_file_falls_back_to_stat_and_says_so(tree: Path) -> None:
    """As root every permission is granted, so unreadability is simulated with a FIFO."""
    fifo = tree / "pipe.md"
    if os.geteuid() == 0:
        os.mkfifo(fifo)
    else:
        write(tree, "pipe.md")
        fifo.chmod(0)
    tracker = FreshnessTracker(tree)
    tracker.capture({"n": ["pipe.md"]})
    (entry,) = tracker.check("n").files
    assert entry.label is FileLabel.UNKNOWN
    assert entry.note


@pytest.fixture
def shared_tree() -> Iterator[Path]:
    """A tree an unprivileged user works in, with a file its owner may write but not read."""
    root = Path(tempfile.mkdtemp(prefix="fm-perm-"))
    try:
        write(root, "docs/spec.md", "spec v1\n")
        secret = write(root, "secret.md", "s1")
        for folder, _dirs, files in os.walk(root):
            os.chmod(folder, 0o777)
            for name in files:
                os.chmod(os.path.join(folder, name), 0o666)
        if os.geteuid() == 0:
            os.chown(secret, NOBODY, NOBODY)
        secret.chmod(0o200)
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_permission_denied_is_compared_by_stat(shared_tree: Path) -> None:
    def scenario() -> list[tuple[str, str, str]]:
        tracker = FreshnessTracker(shared_tree)
        tracker.capture({"n": ["secret.md"]})
        (before,) = tracker.check("n").files
        os.utime(shared_tree / "secret.md", ns=(1, 1))
        (after,) = tracker.check("n").files
        return [(e.label.value, e.method, e.note) for e in (before, after)]

    before, after = unprivileged(scenario) if os.geteuid() == 0 else scenario()
    assert before[:2] == ("unknown", "stat") and "unreadable" in before[2]
    assert after[:2] == ("stale_changed", "stat")


def test_glob_into_an_unreadable_folder_is_unknown(shared_tree: Path) -> None:
    write(shared_tree, "locked/inner.md")
    root = os.geteuid() == 0
    # As root: owned by root, mode 700, and the scenario runs as nobody. Otherwise: mode 000.
    os.chmod(shared_tree / "locked", 0o700 if root else 0o000)

    def scenario() -> tuple[dict[str, str], dict[str, str]]:
        tracker = FreshnessTracker(shared_tree, git=False)
        tracker.capture({"n": ["**/*.md"]})
        report = tracker.check("n")
        notes = {f.path: f.note for f in report.files}
        return labels(report), notes

    try:
        found, notes = unprivileged(scenario) if root else scenario()
    finally:
        os.chmod(shared_tree / "locked", 0o700)
    assert found["locked"] == "unknown"
    assert notes["locked"] == "folder unreadable: Permission denied"
    assert found["docs/spec.md"] == "fresh"


def test_readable_file_turning_into_a_folder_is_unknown(tree: Path) -> None:
    tracker = FreshnessTracker(tree)
    tracker.capture({"n": ["docs/spec.md"]})
    (tree / "docs/spec.md").unlink()
    (tree / "docs/spec.md").mkdir()
    (entry,) = tracker.check("n").files
    assert entry.label is FileLabel.UNKNOWN
    assert "folder" in entry.note


def test_file_too_large_for_the_limit_is_compared_by_stat(tree: Path) -> None:
    big = write(tree, "big.bin", "x" * 100)
    tracker = FreshnessTracker(tree, hash_size_limit=50)
    tracker.capture({"n": ["big.bin", "src/a.py"]})
    report = tracker.check("n")
    assert labels(report) == {"big.bin": "fresh", "src/a.py": "fresh"}
    (entry,) = report.files
    assert entry.method == "stat" and "too large" in entry.note
    big.write_text("y" * 101)
    (entry,) = tracker.check("n").files
    assert entry.label is FileLabel.STALE_CHANGED and entry.method == "stat"


def test_symlink_to_file_tracks_the_target_content(tree: Path) -> None:
    os.symlink(tree / "docs/spec.md", tree / "link.md")
    tracker = FreshnessTracker(tree)
    tracker.capture({"n": ["link.md"]})
    write(tree, "docs/spec.md", "changed through the target\n")
    assert labels(tracker.check("n")) == {"link.md": "stale_changed"}


def test_symlink_to_folder_and_loop(tree: Path) -> None:
    os.symlink(tree / "src", tree / "docs/code")
    os.symlink(tree / "docs", tree / "docs/loop")
    tracker = FreshnessTracker(tree)
    tracker.capture({"n": ["docs/**/*.py"]})
    assert sorted(tracker.baselines["n"].files) == ["docs/code/a.py", "docs/code/b.py"]
    write(tree, "src/a.py", "a2\n")
    assert labels(tracker.check("n"))["docs/code/a.py"] == "stale_changed"


def test_symlink_loop_as_a_listed_path_is_unknown(tree: Path) -> None:
    os.symlink("loop.md", tree / "loop.md")
    tracker = FreshnessTracker(tree)
    tracker.capture({"n": ["loop.md"]})
    (entry,) = tracker.check("n").files
    assert entry.label is FileLabel.UNKNOWN


def test_file_deleted_between_resolving_and_hashing(tree: Path) -> None:
    state = {"armed": False}

    def delete_after_resolve(resolutions: Mapping[str, Resolution]) -> None:
        if state["armed"]:
            assert "src/b.py" in resolutions["n"].files
            (tree / "src/b.py").unlink()
            state["armed"] = False

    tracker = FreshnessTracker(tree, after_resolve=delete_after_resolve)
    tracker.capture({"n": ["src/*.py"]})
    state["armed"] = True
    report = tracker.check("n")
    assert not state["armed"]
    assert labels(report) == {"src/a.py": "fresh", "src/b.py": "stale_deleted"}


def test_file_deleted_between_resolving_and_hashing_at_capture(tree: Path) -> None:
    def delete(resolutions: Mapping[str, Resolution]) -> None:
        if (tree / "src/b.py").exists():
            (tree / "src/b.py").unlink()

    tracker = FreshnessTracker(tree, after_resolve=delete)
    tracker.capture({"n": ["src/*.py"]})
    assert tracker.baselines["n"].files["src/b.py"].existed is False
    assert labels(tracker.check("n")) == {"src/a.py": "fresh"}


def test_a_named_path_missing_then_and_now_is_fresh_and_reported_missing(tree: Path) -> None:
    tracker = FreshnessTracker(tree)
    tracker.capture({"n": ["src/typo.py", "src/a.py", "src/*.txt"]})
    report = tracker.check("n")
    assert report.label is NodeLabel.FRESH and not report.is_stale
    assert report.missing_files == ["src/typo.py"]
    assert labels(report) == {"src/typo.py": "fresh", "src/a.py": "fresh"}
    assert report.details() == [
        "  missing        src/typo.py (also at the snapshot: nothing to compare)"
    ]
    write(tree, "src/typo.py", "now it exists\n")
    report = tracker.check("n")
    assert labels(report)["src/typo.py"] == "stale_added" and report.missing_files == []


def test_checkpoint_round_trip_keeps_everything_and_seeds_the_cache(tree: Path) -> None:
    old = time.time_ns() - 10 * 1_000_000_000
    for rel in ("src/a.py", "src/b.py", "docs/spec.md"):
        os.utime(tree / rel, ns=(old, old))  # older than the racy window: cacheable
    tracker = FreshnessTracker(tree)
    tracker.capture({"n": ["src/*.py", "docs/spec.md", "/elsewhere/x"]})
    tracker.snapshot_run("n")
    state = tracker.to_dict()
    again = FreshnessTracker(tree)
    again.load(state)
    assert again.to_dict() == state
    write(tree, "src/a.py", "a2\n")
    assert again.check("n").stale_files == ["src/a.py"]
    loaded = again.baselines["n"].files
    cached = again.snapshotter.cache.records
    assert set(cached) == {"src/b.py", "docs/spec.md"}  # a.py just written: racy, not kept
    assert cached["src/b.py"] is loaded["src/b.py"]  # trusted as loaded: not read again
    assert cached["docs/spec.md"] is loaded["docs/spec.md"]


def _aged(tree: Path) -> None:
    """Every file and folder of ``tree`` ten seconds old: out of every racy window."""
    old = time.time_ns() - 10 * 1_000_000_000
    for folder, _, names in os.walk(tree):
        for name in names:
            os.utime(os.path.join(folder, name), ns=(old, old))
        os.utime(folder, ns=(old, old))


def _listed(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The folders listed from now on (every listing goes through ``os.scandir``)."""
    listed: list[str] = []
    scandir = os.scandir

    def counting(path: Any = ".") -> Any:
        listed.append(os.fspath(path))
        return scandir(path)

    monkeypatch.setattr(os, "scandir", counting)
    return listed


def test_a_new_process_takes_the_checkpointed_file_list_while_no_folder_changed(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tree / ".freshness").mkdir()
    _aged(tree)
    tracker = FreshnessTracker(tree)
    tracker.capture({"n": ["**"]})
    state = json.loads(json.dumps(tracker.to_dict()))
    recorded = state["baselines"]["n"]["folders"]
    assert set(recorded) == {str(tree), str(tree / "src"), str(tree / "docs")}
    again = FreshnessTracker(tree)
    again.load(state)
    listed = _listed(monkeypatch)
    write(tree, "src/a.py", "a2\n")  # in place: its folder keeps its entries and its key
    report = again.report().nodes["n"].since_baseline
    assert listed == []
    assert report.stale_files == ["src/a.py"]
    assert report.fresh == ("docs/spec.md", "src/b.py")


@pytest.mark.parametrize("added", ["src/c.py", "src/deeper/d.py", "e.txt"])
def test_a_file_added_since_the_checkpoint_is_found_by_listing_again(
    tree: Path, monkeypatch: pytest.MonkeyPatch, added: str
) -> None:
    (tree / ".freshness").mkdir()
    _aged(tree)
    tracker = FreshnessTracker(tree)
    tracker.capture({"n": ["**"]})
    again = FreshnessTracker(tree)
    again.load(json.loads(json.dumps(tracker.to_dict())))
    listed = _listed(monkeypatch)
    write(tree, added, "new\n")
    report = again.report().nodes["n"].since_baseline
    assert listed  # a folder changed: listed again
    assert {f.path: f.label for f in report.files} == {added: FileLabel.STALE_ADDED}


CHANGES = {
    "a hidden folder in the top folder": (lambda t: (t / ".cache").mkdir(), [""], {}),
    "a file added": (lambda t: write(t, "src/c.py"), ["src"], {"src/c.py": "stale_added"}),
    "a file in a new folder": (
        lambda t: write(t, "src/deeper/d.py"),
        ["src", "src/deeper"],
        {"src/deeper/d.py": "stale_added"},
    ),
    "a file removed": (lambda t: (t / "src/b.py").unlink(), ["src"], {"src/b.py": "stale_deleted"}),
    "a file added to a hidden folder a glob names": (
        lambda t: write(t, ".cfg/new.ini"),
        [".cfg"],
        {".cfg/new.ini": "stale_added"},
    ),
    "an empty folder added": (lambda t: (t / "src/empty").mkdir(), ["src", "src/empty"], {}),
    "a file renamed in its folder": (
        lambda t: (t / "src/b.py").rename(t / "src/c.py"),
        ["src"],
        {"src/b.py": "stale_deleted", "src/c.py": "stale_added"},
    ),
    "a folder removed": (
        lambda t: shutil.rmtree(t / "docs/old"),
        ["docs"],
        {"docs/old/notes.md": "stale_deleted"},
    ),
    "a folder replaced by a file of its name": (
        lambda t: (shutil.rmtree(t / "docs/old"), write(t, "docs/old", "now a file\n")),
        ["docs"],
        {"docs/old/notes.md": "stale_deleted", "docs/old": "stale_added"},
    ),
    "a file that a literal entry names added": (
        lambda t: write(t, "docs/typo.md", "now here\n"),
        ["docs"],
        {"docs/typo.md": "stale_added"},
    ),
}


@pytest.mark.parametrize("change", list(CHANGES))
def test_only_the_folders_changed_since_the_checkpoint_are_listed_again(
    tree: Path, monkeypatch: pytest.MonkeyPatch, change: str
) -> None:
    """The other folders give what the checkpointed snapshot found in them: the same files as
    a tracker listing every folder finds."""
    make, expected_listed, expected = CHANGES[change]
    write(tree, ".cfg/app.ini", "x = 1\n")
    write(tree, "docs/old/notes.md", "old\n")
    (tree / ".freshness").mkdir()
    _aged(tree)
    entries = {"n": ["**", ".cfg/*.ini", "docs/typo.md"]}
    tracker = FreshnessTracker(tree)
    tracker.capture(entries)
    state = json.loads(json.dumps(tracker.to_dict()))
    again = FreshnessTracker(tree)
    again.load(state)
    make(tree)
    listed = _listed(monkeypatch)
    report = again.report().nodes["n"].since_baseline
    assert sorted(listed) == sorted(
        str(tree / rel) if rel else str(tree) for rel in expected_listed
    )
    assert {f.path: f.label.value for f in report.files if not f.missing} == expected
    del state["baselines"]["n"]["folders"]  # as written before folders were recorded
    fresh = FreshnessTracker(tree)  # lists every folder
    fresh.load(state)
    assert labels(fresh.report().nodes["n"].since_baseline) == labels(report)


def test_a_folder_changed_within_the_racy_window_of_its_listing_is_listed_again(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A folder whose mtime lies within the racy window before it was listed could have taken
    an entry in the same timestamp tick without a new mtime: it is never taken as unchanged."""
    (tree / ".freshness").mkdir()
    _aged(tree)
    os.utime(tree / "src")  # now: within the racy window of the capture's listing
    tracker = FreshnessTracker(tree)
    tracker.capture({"n": ["**"]})
    again = FreshnessTracker(tree)
    again.load(json.loads(json.dumps(tracker.to_dict())))
    listed = _listed(monkeypatch)
    assert again.report().nodes["n"].since_baseline.stale_files == []
    assert str(tree / "src") in listed


def _old(tree: Path, count: int) -> None:
    old = time.time_ns() - 10 * 1_000_000_000
    for i in range(count):
        write(tree, f"data/f{i:03d}.txt", f"file {i}\n")
        os.utime(tree / f"data/f{i:03d}.txt", ns=(old, old))  # cacheable: outside the racy window


def test_checkpoint_lists_shared_and_unchanged_files_once(tree: Path) -> None:
    _old(tree, 40)
    tracker = FreshnessTracker(tree)
    tracker.capture({"a": ["data/**"], "b": ["data/**"], "c": ["src/*.py"]})
    write(tree, "data/f007.txt", "changed by a\n")
    (tree / "data/f008.txt").unlink()
    tracker.snapshot_run("a")
    state = json.loads(json.dumps(tracker.to_dict()))
    saved = state["baselines"]
    assert len(saved["a"]["files_packed"]["paths"]) == 40 and "files_from" not in saved["a"]
    assert saved["b"]["files_from"] == "a" and "files" not in saved["b"]
    assert saved["b"]["files_changed"] == {} and saved["b"]["files_removed"] == []
    assert "files_packed" in saved["c"]  # other entries: whole
    run = state["run_snapshots"]["a"]
    assert run["files_from"] == "a" and set(run["files_changed"]) == {"data/f007.txt"}
    assert run["files_removed"] == ["data/f008.txt"]

    again = FreshnessTracker(tree)
    again.load(state)
    assert again.baselines == tracker.baselines
    assert again.run_snapshots == tracker.run_snapshots
    assert (
        again.baselines["b"].files["data/f001.txt"] is again.baselines["a"].files["data/f001.txt"]
    )
    assert again.to_dict() == state
    assert again.check("a").stale_files == [] and again.check("b").stale_files == [
        "data/f007.txt",
        "data/f008.txt",
    ]


def test_a_completion_snapshot_of_a_node_whose_baseline_is_a_delta_round_trips(
    tree: Path,
) -> None:
    """docs/FORMATS.md: a completion snapshot's ``files_from`` is its own node, whose baseline may
    itself be a delta of another node's; the loader rebuilds the baselines first."""
    _old(tree, 20)
    tracker = FreshnessTracker(tree)
    tracker.capture({"a": ["data/**"], "b": ["data/**"]})
    write(tree, "data/f003.txt", "changed by b\n")
    tracker.snapshot_run("b")
    state = json.loads(json.dumps(tracker.to_dict()))
    assert state["baselines"]["b"]["files_from"] == "a"
    assert state["run_snapshots"]["b"]["files_from"] == "b"
    again = FreshnessTracker(tree)
    again.load(state)
    assert again.baselines == tracker.baselines
    assert again.run_snapshots == tracker.run_snapshots
    assert again.check("a").stale_files == ["data/f003.txt"]


def test_a_delta_larger_than_half_the_files_is_written_whole(tree: Path) -> None:
    _old(tree, 10)
    tracker = FreshnessTracker(tree)
    tracker.capture({"a": ["data/**"]})
    for i in range(6):
        write(tree, f"data/f{i:03d}.txt", "rewritten\n")
    tracker.snapshot_run("a")
    run = tracker.to_dict()["run_snapshots"]["a"]
    assert "files_from" not in run and len(run["files_packed"]["paths"]) == 10


def test_a_version_1_checkpoint_state_still_loads(tree: Path) -> None:
    tracker = FreshnessTracker(tree)
    tracker.capture({"a": ["src/*.py"], "b": ["src/*.py"]})
    tracker.snapshot_run("a")
    whole = {
        "version": 1,
        "baselines": {k: b.to_dict() for k, b in tracker.baselines.items()},
        "run_snapshots": {k: b.to_dict() for k, b in tracker.run_snapshots.items()},
    }
    again = FreshnessTracker(tree)
    again.load(json.loads(json.dumps(whole)))
    assert again.baselines == tracker.baselines and again.run_snapshots == tracker.run_snapshots


def test_a_version_3_checkpoint_state_with_one_object_per_file_still_loads(tree: Path) -> None:
    tracker = FreshnessTracker(tree)
    tracker.capture({"a": ["src/*.py"], "b": ["src/*.py"]})
    write(tree, "src/a.py", "changed\n")
    tracker.snapshot_run("a")
    state = json.loads(json.dumps(tracker.to_dict()))
    assert state["version"] == 5
    whole = state["baselines"]["a"]
    whole["files"] = {p: r.to_dict() for p, r in tracker.baselines["a"].files.items()}
    del whole["files_packed"]
    state["version"] = 3
    again = FreshnessTracker(tree)
    again.load(state)
    assert again.baselines == tracker.baselines and again.run_snapshots == tracker.run_snapshots
    write(tree, "src/b.py", "changed too\n")
    assert list(again.check("a").stale_files) == ["src/b.py"]


def test_a_delta_naming_a_missing_baseline_is_a_freshness_error(tree: Path) -> None:
    tracker = FreshnessTracker(tree)
    tracker.capture({"a": ["src/*.py"], "b": ["src/*.py"]})
    state = json.loads(json.dumps(tracker.to_dict()))
    state["baselines"]["b"]["files_from"] = "ghost"
    with pytest.raises(FreshnessError, match=r"baseline of node .b. is malformed.*ghost"):
        FreshnessTracker(tree).load(state)


def test_malformed_checkpoint_state_is_a_freshness_error(tree: Path) -> None:
    with pytest.raises(FreshnessError, match="unknown format"):
        FreshnessTracker(tree).load({"version": 99})
    with pytest.raises(FreshnessError, match="malformed"):
        FreshnessTracker(tree).load({"version": 1, "baselines": {"n": {"files": {}}}})


def test_checking_an_untracked_node_says_what_to_do(tree: Path) -> None:
    with pytest.raises(FreshnessError, match="no freshness baseline"):
        FreshnessTracker(tree).check("ghost")


def test_stale_since_run_is_separate_from_stale_since_baseline(tree: Path) -> None:
    tracker = FreshnessTracker(tree)
    tracker.capture({"n": ["docs/spec.md"]})
    write(tree, "docs/spec.md", "v2\n")
    tracker.snapshot_run("n")  # the node ran with v2
    assert tracker.check("n").stale_files == []
    report = tracker.report()
    entry = report.nodes["n"]
    assert entry.since_baseline.stale_files == ["docs/spec.md"]
    assert entry.since_run is not None and entry.since_run.stale_files == []
    assert report.all_fresh
    write(tree, "docs/spec.md", "v3\n")
    entry = tracker.report().nodes["n"]
    assert entry.since_run is not None and entry.since_run.stale_files == ["docs/spec.md"]
    assert tracker.check("n").since == "run"


def test_a_completion_snapshot_read_back_unchanged_shares_its_baselines_files(
    tree: Path,
) -> None:
    """Nothing changed while the node ran: the checkpoint keeps an empty delta, the snapshot
    read back shares its baseline's records, and its comparison is the baseline's, told as
    since the run (its own kind and time)."""
    old = time.time_ns() - 10 * 1_000_000_000
    for rel in ("src/a.py", "src/b.py"):
        os.utime(tree / rel, ns=(old, old))
    tracker = FreshnessTracker(tree)
    tracker.capture({"n": ["src/*.py"]})
    tracker.snapshot_run("n")
    state = json.loads(json.dumps(tracker.to_dict()))
    assert state["run_snapshots"]["n"]["files_changed"] == {}
    again = FreshnessTracker(tree)
    again.load(state)
    run, baseline = again.run_snapshots["n"], again.baselines["n"]
    assert run.files is baseline.files
    assert again.to_dict() == state
    write(tree, "src/a.py", "a2\n")
    entry = again.report().nodes["n"]
    assert entry.since_run is not None
    assert entry.since_run.stale_files == entry.since_baseline.stale_files == ["src/a.py"]
    assert entry.since_run.fresh == entry.since_baseline.fresh == ("src/b.py",)
    assert (entry.since_run.since, entry.since_run.snapshot_kind) == ("run", "run")
    assert entry.since_run.snapshot_taken_at == run.taken_at != baseline.taken_at
    assert entry.since_baseline.since == "baseline"


def test_accept_recaptures_and_returns_changed_files(tree: Path) -> None:
    tracker = FreshnessTracker(tree)
    tracker.capture({"n": ["src/*.py"], "m": ["docs/spec.md"]})
    write(tree, "src/a.py", "a2\n")
    assert tracker.accept(["n"]) == {"n": ["src/a.py"]}
    assert tracker.baselines["n"].kind == "accepted"
    assert tracker.check("n").stale_files == []


def test_report_text_and_json(tree: Path) -> None:
    tracker = FreshnessTracker(tree)
    tracker.capture({"n": ["docs/spec.md"], "ok": ["src/*.py"]})
    write(tree, "docs/spec.md", "v2\n")
    report = tracker.report()
    assert report.stale_nodes == ["n"] and not report.all_fresh
    text = str(report)
    assert "stale_changed" in text and "docs/spec.md" in text and "stale: n" in text
    data = report.to_dict()
    assert data["nodes"]["n"]["since_baseline"]["stale_files"] == ["docs/spec.md"]
    assert data["nodes"]["ok"]["since_baseline"]["counts"] == {"fresh": 2}
    full = report.to_dict(all_files=True)["nodes"]["ok"]["since_baseline"]["files"]
    assert {f["path"] for f in full} == {"src/a.py", "src/b.py"}


def test_folder_named_as_a_path_is_unknown_with_advice(tree: Path) -> None:
    tracker = FreshnessTracker(tree)
    tracker.capture({"n": ["docs"]})
    (entry,) = tracker.check("n").files
    assert entry.label is FileLabel.UNKNOWN and "docs/**" not in entry.note
    assert "folder/**" in entry.note


def test_symlink_to_outside_is_unknown_and_its_content_never_stored(tmp_path: Path) -> None:
    work = tmp_path / "work"
    write(tmp_path, "outside/secret.txt", "secret")
    write(work, "a.txt", "a")
    os.symlink("../outside/secret.txt", work / "notes.txt")
    os.symlink("/", work / "r")
    tracker = FreshnessTracker(work, git=False)
    tracker.capture({"n": ["notes.txt", "**"]})
    baseline = tracker.baselines["n"]
    assert list(baseline.files) == ["a.txt"]
    assert "secret" not in str(tracker.to_dict())
    report = tracker.check("n")
    assert labels(report) == {"a.txt": "fresh", "notes.txt": "unknown", "r": "unknown"}
    assert {f.note for f in report.files} == {"symlink to outside the work tree"}


def test_freshness_works_without_fcntl(tmp_path: Path) -> None:
    """Importing and snapshotting must not need fcntl (absent on Windows)."""
    import subprocess
    import sys

    write(tmp_path, "a.txt")
    script = (
        "import sys; sys.modules['fcntl'] = None\n"
        "from freshness_magic.freshness.check import FreshnessTracker\n"
        "import freshness_magic.freshness.extension\n"
        f"t = FreshnessTracker({str(tmp_path)!r}, git=False)\n"
        "t.capture({'n': ['*.txt']})\n"
        "print(t.check('n').fresh)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "('a.txt',)"


def test_a_link_turned_outside_between_resolving_and_hashing_is_never_read(
    tmp_path: Path,
) -> None:
    work = tmp_path / "work"
    write(work, "docs/spec.md", "spec")
    write(tmp_path, "outside/secret.md", "secret")
    os.symlink("docs/spec.md", work / "link.md")
    state = {"armed": False}

    def turn_outside(resolutions: Mapping[str, Resolution]) -> None:
        if state["armed"]:
            assert "link.md" in resolutions["n"].files
            (work / "link.md").unlink()
            os.symlink("../outside/secret.md", work / "link.md")
            state["armed"] = False

    tracker = FreshnessTracker(work, git=False, after_resolve=turn_outside)
    tracker.capture({"n": ["*.md"]})
    assert labels(tracker.check("n")) == {"link.md": "fresh"}
    state["armed"] = True
    (entry,) = tracker.check("n").files
    assert (entry.label, entry.note) == (FileLabel.UNKNOWN, "symlink to outside the work tree")
    secret = hash_file(tmp_path / "outside/secret.md").digest
    assert secret not in json.dumps(tracker.to_dict())


class _DamagedHashSource:
    """A hash source (the hub's role) whose store hands out a digest that is not hex."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    def file_hash(self, path: str, stat_key: StatKey) -> str | None:
        self.asked.append(path)
        return "not a digest"


def test_a_digest_from_the_hash_source_that_is_not_hex_is_hashed_here(tree: Path) -> None:
    source = _DamagedHashSource()
    tracker = FreshnessTracker(tree, git=False, hash_source=source)
    baseline = tracker.capture({"n": ["docs/spec.md"]})["n"]
    assert source.asked == ["docs/spec.md"]
    assert baseline.files["docs/spec.md"].digest == hash_file(tree / "docs/spec.md").digest


def test_the_text_report_says_a_node_that_ran_after_a_change_is_fresh(tree: Path) -> None:
    """Stale since its baseline, fresh since it ran: one headline says both, and 'all fresh'."""
    tracker = FreshnessTracker(tree)
    tracker.capture({"n": ["src/*.py"]})
    (tree / "src/a.py").unlink()
    tracker.snapshot_run("n")
    text = str(tracker.report()).splitlines()
    assert text[0] == "n: fresh (since run); stale_deleted since baseline"
    assert text[1].startswith("  stale_deleted  src/a.py")
    assert text[-1] == "all fresh"
    write(tree, "src/b.py", "b2\n")
    text = str(tracker.report()).splitlines()
    assert text[0] == "n: stale_deleted (since baseline)"
    assert "n: stale_changed (since run)" in text and text[-1] == "stale: n"


def test_the_text_report_says_a_change_since_baseline_and_run_once(tree: Path) -> None:
    tracker = FreshnessTracker(tree)
    tracker.capture({"n": ["src/*.py"]})
    tracker.snapshot_run("n")
    write(tree, "src/a.py", "a2\n")
    text = str(tracker.report()).splitlines()
    assert text[0] == "n: stale_changed (since baseline and run)"
    assert [line.split()[:2] for line in text[1:-1]] == [["stale_changed", "src/a.py"]]
    assert text[-1] == "stale: n"


def test_the_text_report_does_not_call_inputs_it_could_not_check_fresh(
    tree: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    outside = tmp_path_factory.mktemp("outside") / "secret.txt"
    outside.write_text("x\n")
    (tree / "link.txt").symlink_to(outside)
    tracker = FreshnessTracker(tree)
    tracker.capture({"n": ["link.txt"], "m": ["src/*.py"]})
    text = str(tracker.report()).splitlines()
    assert text[0].startswith("n: unknown")
    assert text[-1] == "nothing stale; inputs that could not be checked (unknown): n"


def test_a_comparison_with_a_view_of_the_reference_s_records_labels_as_with_a_dict() -> None:
    """Where git vouched for most files, the current records are a view sharing the
    reference's: compared by their keys, with the same report as the records in a dict."""
    key = StatKey(1, 2, 0o100644, 3, 4, 5)
    ref = {f"f{i}.txt": FileRecord(True, key._replace(ino=i), f"{i:032x}") for i in range(8)}
    packed = unpack_block(*pack_block(ref))
    own = {
        "f1.txt": FileRecord(True, key._replace(ino=1, size=9), "e" * 32),  # changed
        "f2.txt": FileRecord(True, key._replace(ino=2, mtime_ns=9), f"{2:032x}"),  # touched
        "f3.txt": FileRecord(False, method=NONE),  # deleted
        "new.txt": FileRecord(True, key, "d" * 32),  # a new match
    }
    shared = dict.fromkeys(k for k in ref if k not in own and k != "f4.txt")  # f4: unresolved now
    view = FileView(packed, shared, own)
    as_dict = dict(view.items())

    def report(files: Mapping[str, FileRecord]) -> NodeReport:
        snapshot = Baseline("n", ("*",), "baseline", 1.0, 1, packed, frozenset({"f7.txt"}))
        now = Baseline("n", ("*",), "current", 2.0, 2, files)
        return compare(snapshot, now, "baseline")

    through_view, through_dict = report(view), report(as_dict)
    assert through_view == through_dict
    assert {f.path: f.label for f in through_view.files} == {
        "f1.txt": FileLabel.STALE_CHANGED,
        "f3.txt": FileLabel.STALE_DELETED,
        "f4.txt": FileLabel.STALE_DELETED,
        "new.txt": FileLabel.STALE_ADDED,
    }
    assert through_view.fresh == ("f0.txt", "f2.txt", "f5.txt", "f6.txt", "f7.txt")
