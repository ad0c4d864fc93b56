"""A report takes git's word for tracked files its status finds unchanged, where it is exact."""

from __future__ import annotations

import itertools
import json
import os
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from freshness_magic.freshness import check as check_module
from freshness_magic.freshness import gitvouch
from freshness_magic.freshness.check import FreshnessTracker
from freshness_magic.freshness.filestore import FileStore
from freshness_magic.freshness.gitvouch import StatusVouch
from freshness_magic.freshness.labels import FileLabel
from freshness_magic.freshness.snapshot import Settled
from freshness_magic.freshness.statcache import filesystem_now_ns
from freshness_magic.vcs import git as vcs
from tests.gitrepo import git, git_repo
from tests.processes import cli

from .conftest import REPO_FILES, write

ENTRIES = {"n": ["**"]}


@pytest.fixture(autouse=True)
def plain_git_config(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The machine's own git config and attributes files stay out of these tests."""
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", os.devnull)
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))


def back(path: Path, seconds: float) -> None:
    """Give ``path`` an mtime ``seconds`` ago (its content stays)."""
    then = time.time_ns() - int(seconds * 1e9)
    os.utime(path, ns=(then, then))


def age(repo: Path) -> None:
    """Tracked files ten seconds old, recorded so in an index five seconds old: out of every
    racy window, as in a work tree nobody touched for a while."""
    for rel in git(repo, "ls-files", "-z").split("\0"):
        if rel and (repo / rel).is_file():
            back(repo / rel, 10)
    git(repo, "update-index", "-q", "--refresh")
    back(repo / ".git" / "index", 5)


@pytest.fixture
def repo(repo: Path) -> Path:
    (repo / ".freshness").mkdir()
    age(repo)
    return repo


RACY_WAIT_S = 2.1
"""How long after :func:`age` git's recorded ctimes (set by the ageing, and not to be set back)
are older than a capture's racy window."""


class AgedRepos:
    """Work trees like :func:`repo`'s, aged several at a time and handed out once git's recorded
    ctimes are older than a capture's racy window: the tests that need that wait for it once
    between them, not once each. Every test still gets a work tree of its own."""

    BATCH = 8

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.numbers = itertools.count()
        self.ready: list[tuple[Path, float]] = []

    def take(self) -> Path:
        if not self.ready:
            made = [
                git_repo(self.folder / f"repo{next(self.numbers)}", REPO_FILES, "init")
                for _ in range(self.BATCH)
            ]
            for root in made:
                (root / ".freshness").mkdir()
                age(root)
                self.ready.append((root, time.monotonic()))
        root, aged_at = self.ready.pop(0)
        wait_out_racy_window(aged_at)
        return root


def wait_out_racy_window(aged_at: float) -> None:
    """Wait until :data:`RACY_WAIT_S` have passed since ``aged_at`` (``time.monotonic()`` right
    after an :func:`age`)."""
    time.sleep(max(0.0, aged_at + RACY_WAIT_S - time.monotonic()))


@pytest.fixture(scope="module")
def aged_repos(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AgedRepos]:
    yield AgedRepos(tmp_path_factory.mktemp("aged"))


@pytest.fixture
def settled(aged_repos: AgedRepos, plain_git_config: None) -> Path:
    """A work tree like :func:`repo`'s whose git's recorded ctimes are older than a capture's
    racy window (its files untouched since)."""
    return aged_repos.take()


def reloaded(repo: Path, later_s: float = 3.0) -> FreshnessTracker:
    """A tracker with a capture of every file, restored from its state as another process
    (``freshness-magic check``) restores it. The capture is dated ``later_s`` later than it
    was taken, as if the files had been left alone that long before it (their ctimes cannot
    be set back): a date after git's recorded ctimes, less the racy window, lets git vouch."""
    first = FreshnessTracker(repo)
    first.capture(ENTRIES)
    assert all(record.blob for record in first.baselines["n"].files.values())
    state = first.to_dict()
    state["baselines"]["n"]["fs_time_ns"] += int(later_s * 1e9)
    tracker = FreshnessTracker(repo)
    tracker.load(state)
    return tracker


def settled_now(tracker: FreshnessTracker, node: str = "n") -> Settled:
    """What the report's git status tells a look at ``node``'s files now (against its baseline
    and, once it ran, its completion snapshot)."""
    snapshots = [tracker.baselines[node]]
    if node in tracker.run_snapshots:
        snapshots.append(tracker.run_snapshots[node])
    vouch = StatusVouch(tracker.git)
    vouch.compare_with({node: snapshots})
    fs_now = filesystem_now_ns(tracker.snapshotter.state_dir)
    entries = {node: tracker.baselines[node].entries}
    resolved = tracker.snapshotter.resolver.resolve_many(entries, fs_now)
    return vouch.settle({node: resolved[node].files}, fs_now)


def vouched(tracker: FreshnessTracker, node: str = "n") -> set[str]:
    """The files the report's git status vouches for now (see :func:`settled_now`)."""
    return set(settled_now(tracker, node).records)


def labels(tracker: FreshnessTracker) -> dict[str, FileLabel]:
    report = tracker.report().nodes["n"].since_baseline
    found = {path: FileLabel.FRESH for path in report.fresh}
    found.update((f.path, f.label) for f in report.files)
    return found


def same_size_same_mtime(path: Path, text: str) -> None:
    """New content of the old size, the old mtime put back: only ctime tells."""
    st = path.stat()
    assert len(text.encode()) == st.st_size
    path.write_text(text)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def test_unchanged_files_are_vouched_for_touched_and_edited_ones_are_read(settled: Path) -> None:
    tracker = reloaded(settled, later_s=0)
    assert vouched(tracker) == {"src/a.py", "src/b.py", "docs/spec.md"}

    same_size_same_mtime(settled / "src/a.py", "a = 2\n")
    back(settled / "docs/spec.md", 1)  # touched, content unchanged: git lists it, unread
    write(settled, "src/new.py", "new\n")
    assert settled_now(tracker) == Settled(
        {"src/b.py": tracker.baselines["n"].files["src/b.py"]},
        edited=frozenset({"src/a.py", "docs/spec.md"}),
    )
    assert labels(tracker) == {
        "src/a.py": FileLabel.STALE_CHANGED,
        "src/b.py": FileLabel.FRESH,
        "docs/spec.md": FileLabel.FRESH,
        "src/new.py": FileLabel.STALE_ADDED,
    }


def test_an_edit_in_the_second_of_git_s_ctime_is_caught(repo: Path) -> None:
    tracker = reloaded(repo, later_s=0)  # right after git recorded the files' ctimes
    # no claim on the index: every file's ctime lies in the capture's racy window
    assert tracker.baselines["n"].index_match is None
    # within the second of that ctime: git, comparing whole seconds, does not see this edit
    same_size_same_mtime(repo / "src/a.py", "a = 2\n")
    back(repo / ".git" / "index", 5)
    assert labels(tracker)["src/a.py"] is FileLabel.STALE_CHANGED


@pytest.mark.parametrize("flag", ["--assume-unchanged", "--skip-worktree"])
def test_entries_git_does_not_compare_are_looked_at(repo: Path, flag: str) -> None:
    tracker = reloaded(repo)
    git(repo, "update-index", flag, "src/a.py")
    same_size_same_mtime(repo / "src/a.py", "a = 2\n")
    back(repo / ".git" / "index", 5)
    assert "src/a.py" not in git(repo, "status", "--porcelain")  # git itself misses it
    assert vouched(tracker) == {"src/b.py", "docs/spec.md"}
    assert labels(tracker)["src/a.py"] is FileLabel.STALE_CHANGED


def test_a_file_staged_since_the_snapshot_is_looked_at(repo: Path) -> None:
    tracker = reloaded(repo)
    write(repo, "src/a.py", "a = 22\n")
    git(repo, "add", "src/a.py")  # clean against the index, not against the snapshot
    back(repo / ".git" / "index", 5)
    told = settled_now(tracker)
    assert set(told.records) == {"src/b.py", "docs/spec.md"}
    assert told.edited == frozenset()  # its file is its index entry's: git did not call it edited
    assert labels(tracker)["src/a.py"] is FileLabel.STALE_CHANGED


def test_files_git_found_edited_are_read_without_a_stat_against_their_records(
    settled: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """git read the files it lists as edited: their checkpointed record is out of date, so a
    look reads them at once rather than first comparing their stat with that record."""
    tracker = reloaded(settled, later_s=0)
    write(settled, "src/a.py", "a = 22\n")
    assert settled_now(tracker).edited == frozenset({"src/a.py"})
    looked: list[str] = []
    stat = os.stat

    def counted(path: Any, *args: Any, **kwargs: Any) -> os.stat_result:
        looked.append(os.fspath(path))
        return stat(path, *args, **kwargs)

    monkeypatch.setattr(os, "stat", counted)
    report = tracker.report().nodes["n"].since_baseline
    monkeypatch.undo()
    assert "a.py" not in looked and looked  # the folders are still looked at
    assert {f.path: f.label for f in report.files} == {"src/a.py": FileLabel.STALE_CHANGED}
    changed = next(f for f in report.files if f.path == "src/a.py")
    assert changed.new_digest == git(settled, "hash-object", "src/a.py").strip()


def test_files_git_vouched_for_keep_their_checkpointed_records_for_a_later_look(
    repo: Path,
) -> None:
    """A report looks only at the files git did not vouch for, and only their checkpointed
    records enter the stat cache then; the others enter it at the next look at every file,
    which trusts them as loaded (no file read again)."""
    tracker = reloaded(repo)
    loaded = tracker.baselines["n"].files
    write(repo, "src/a.py", "a = 22\n")
    back(repo / ".git" / "index", 5)
    assert labels(tracker)["src/a.py"] is FileLabel.STALE_CHANGED
    cached = tracker.snapshotter.cache.records
    assert "src/b.py" not in cached and "docs/spec.md" not in cached
    assert tracker.check("n").stale_files == ["src/a.py"]
    assert cached["src/b.py"] is loaded["src/b.py"]
    assert cached["docs/spec.md"] is loaded["docs/spec.md"]


def test_an_index_written_within_the_racy_window_is_not_trusted(repo: Path) -> None:
    tracker = reloaded(repo)
    os.utime(repo / ".git" / "index")  # written just now
    assert vouched(tracker) == set()
    assert set(labels(tracker).values()) == {FileLabel.FRESH}


def test_an_index_replaced_while_git_looks_is_not_trusted(repo: Path) -> None:
    tracker = reloaded(repo)
    vouch = StatusVouch(tracker.git)
    vouch.compare_with({"n": [tracker.baselines["n"]]})
    write(repo, "src/a.py", "a = 22\n")
    git(repo, "add", "src/a.py")  # a new index file, aged: only its stat key differs
    back(repo / ".git" / "index", 5)
    fs_now = filesystem_now_ns(tracker.snapshotter.state_dir)
    assert vouch.settle({"n": ["src/a.py", "src/b.py", "docs/spec.md"]}, fs_now) == Settled({})


def test_attributes_keep_git_s_word_out_of_their_folders(repo: Path) -> None:
    for rel in ("docs/intro.md", "docs/usage.md"):  # most files outside src/
        write(repo, rel, f"# {rel}\n")
    git(repo, "add", "docs")
    git(repo, "commit", "-q", "-m", "docs")
    age(repo)
    tracker = reloaded(repo)
    write(repo, "src/.gitattributes", "*.py text eol=crlf\n")
    assert vouched(tracker) == {"docs/spec.md", "docs/intro.md", "docs/usage.md"}
    git(repo, "add", "src/.gitattributes")
    back(repo / ".git" / "index", 5)
    assert vouched(tracker) == set()


def test_files_mostly_beyond_git_s_word_are_looked_at_without_waiting(repo: Path) -> None:
    tracker = reloaded(repo)
    write(repo, "src/.gitattributes", "*.py text eol=crlf\n")  # two of three files filtered
    vouch = StatusVouch(tracker.git)
    vouch.compare_with({"n": [tracker.baselines["n"]]})
    fs_now = filesystem_now_ns(tracker.snapshotter.state_dir)
    assert vouch.settle({"n": ["src/a.py", "src/b.py", "docs/spec.md"]}, fs_now) == Settled({})
    assert vouch._pending is not None  # git not waited for: it runs beside the look
    vouch.cancel()


def test_files_not_recorded_by_blob_id_are_looked_at_without_waiting(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GIT_INDEX_FILE", str(repo / ".git" / "index"))  # no index: xxh3
    first = FreshnessTracker(repo)
    first.capture(ENTRIES)
    monkeypatch.delenv("GIT_INDEX_FILE")
    tracker = FreshnessTracker(repo)
    tracker.load(first.to_dict())
    assert vouched(tracker) == set()
    same_size_same_mtime(repo / "src/a.py", "a = 2\n")
    assert labels(tracker)["src/a.py"] is FileLabel.STALE_CHANGED


PIPELINE = """digraph p { start [shape=Mdiamond]; done [shape=Msquare];
  work [prompt="x", source_files="**", freshness="warn"];
  start -> work -> done }
"""


def test_check_on_the_command_line_catches_what_git_misses(repo: Path) -> None:
    write(repo, "p.dot", PIPELINE)  # untracked: looked at
    age(repo)
    time.sleep(2.1)  # git's ctimes older than the run's snapshots by more than the racy window
    assert cli("run", "p.dot", cwd=repo).returncode == 0
    (run_dir,) = (repo / ".freshness" / "runs").iterdir()
    tracker = FreshnessTracker(repo)
    data = json.loads((run_dir / "checkpoint.json").read_text())
    tracker.load(data["extensions"]["freshness"]["tracker"], FileStore(run_dir))
    assert vouched(tracker, "work") == {"src/a.py", "src/b.py", "docs/spec.md"}

    back(repo / "docs/spec.md", 1)  # touched, content unchanged
    git(repo, "update-index", "--assume-unchanged", "src/b.py")
    same_size_same_mtime(repo / "src/b.py", "b = 2\n")  # git itself does not look at it
    back(repo / ".git" / "index", 5)
    done = cli("check", str(run_dir), "--json", cwd=repo)
    assert done.returncode == 1, done.stderr
    report = json.loads(done.stdout)["nodes"]["work"]["since_run"]
    assert [(f["path"], f["label"]) for f in report["files"]] == [("src/b.py", "stale_changed")]
    assert report["counts"] == {"fresh": 3, "stale_changed": 1}  # p.dot, src/a.py, docs/spec.md


def test_a_working_directory_inside_the_work_tree(repo: Path) -> None:
    (repo / "src" / ".freshness").mkdir()
    first = FreshnessTracker(repo / "src")
    first.capture(ENTRIES)
    state = first.to_dict()
    state["baselines"]["n"]["fs_time_ns"] += 3_000_000_000  # see reloaded()
    tracker = FreshnessTracker(repo / "src")
    tracker.load(state)
    assert vouched(tracker) == {"a.py", "b.py"}
    write(repo, "src/a.py", "a = 22\n")
    back(repo / ".git" / "index", 5)
    assert vouched(tracker) == {"b.py"}
    assert labels(tracker) == {"a.py": FileLabel.STALE_CHANGED, "b.py": FileLabel.FRESH}


def claimed(repo: Path) -> FreshnessTracker:
    """A tracker restored from a capture taken when git's recorded ctimes were older than its
    racy window (``repo`` is :func:`settled`, or was aged that long ago), so the capture claims
    the index (:class:`IndexMatch`) for every file."""
    first = FreshnessTracker(repo)
    first.capture(ENTRIES)
    match = first.baselines["n"].index_match
    assert match is not None and not match.unmatched & first.baselines["n"].files.keys()
    tracker = FreshnessTracker(repo)
    tracker.load(first.to_dict())
    return tracker


def index_read_counted(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How often a vouch reads git's index entry by entry, counted from now on."""
    calls: list[int] = []
    read = gitvouch.GitIndex.read

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return read(*args, **kwargs)

    monkeypatch.setattr(gitvouch.GitIndex, "read", counted)
    return calls


def test_a_capture_s_claim_on_the_index_outlasts_a_rewrite_of_the_same_entries(
    settled: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tracker = claimed(settled)
    before = (settled / ".git" / "index").stat().st_ino
    git(settled, "-c", "core.untrackedCache=true", "status", "--porcelain")  # adds an extension
    assert (settled / ".git" / "index").stat().st_ino != before
    back(settled / ".git" / "index", 5)
    reads = index_read_counted(monkeypatch)
    assert vouched(tracker) == {"src/a.py", "src/b.py", "docs/spec.md"}
    assert reads == []  # the claim settled it: the entries are the ones captured

    same_size_same_mtime(settled / "src/a.py", "a = 2\n")  # only its ctime tells
    assert vouched(tracker) == {"src/b.py", "docs/spec.md"}
    assert labels(tracker) == {
        "src/a.py": FileLabel.STALE_CHANGED,
        "src/b.py": FileLabel.FRESH,
        "docs/spec.md": FileLabel.FRESH,
    }
    assert reads == []


def test_a_claim_on_other_entries_is_not_taken(
    settled: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tracker = claimed(settled)
    write(settled, "src/a.py", "a = 22\n")
    git(settled, "add", "src/a.py")  # new entries: clean against the index, not the snapshot
    back(settled / ".git" / "index", 5)
    reads = index_read_counted(monkeypatch)
    assert vouched(tracker) == {"src/b.py", "docs/spec.md"}
    assert reads == [1]  # told by the index's entries, one by one
    assert labels(tracker)["src/a.py"] is FileLabel.STALE_CHANGED


def test_attributes_written_after_the_claim_keep_git_s_word_out_of_their_folder(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for rel in ("docs/intro.md", "docs/usage.md"):  # most files outside src/
        write(repo, rel, f"# {rel}\n")
    git(repo, "add", "docs")
    git(repo, "commit", "-q", "-m", "docs")
    time.sleep(1.1)  # ageing again in another second: git refreshes every entry's stat data
    age(repo)
    wait_out_racy_window(time.monotonic())
    tracker = claimed(repo)
    write(repo, "src/.gitattributes", "*.py text eol=crlf\n")
    reads = index_read_counted(monkeypatch)
    assert vouched(tracker) == {"docs/spec.md", "docs/intro.md", "docs/usage.md"}
    assert reads == []


def git_views(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Each view git is asked for from now on: ``tree`` for a vouch's exact view of the whole
    tree, ``paths`` for a status naming paths (to explain stale files)."""
    started: list[str] = []
    start = vcs.start

    def counted(args: Sequence[str], cwd: Any) -> Any:
        if "diff-index" in args and all(setting in args for setting in vcs.EXACT_STATUS):
            started.append("tree")
        elif "status" in args:
            started.append("paths")
        return start(args, cwd)

    monkeypatch.setattr(vcs, "start", counted)
    return started


def test_a_check_of_many_files_takes_git_s_word_through_a_claim(
    settled: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(check_module, "VOUCHED_CHECK_FILES", 3)  # "many" for three files
    tracker = claimed(settled)
    views = git_views(monkeypatch)
    reads = index_read_counted(monkeypatch)
    assert tracker.check("n").stale_files == []
    same_size_same_mtime(settled / "src/a.py", "a = 2\n")  # only its ctime tells
    report = tracker.check("n")
    assert report.stale_files == ["src/a.py"]
    assert [f.git_change for f in report.files] == ["uncommitted"]  # from the vouch's view
    assert views == ["tree", "tree"] and reads == []

    git(settled, "add", "src/a.py")  # other entries: the claim no longer holds
    back(settled / ".git" / "index", 5)
    assert tracker.check("n").stale_files == ["src/a.py"]
    assert views == ["tree", "tree", "paths"]  # every file looked at here; git asked by name


def test_a_check_of_few_files_looks_at_them_without_git(
    settled: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tracker = claimed(settled)  # three files, fewer than a check takes git's word for
    views = git_views(monkeypatch)
    same_size_same_mtime(settled / "src/a.py", "a = 2\n")
    assert tracker.check("n").stale_files == ["src/a.py"]
    assert views == ["paths"]  # only to explain the stale file


def test_accepting_changes_keeps_the_claim_for_the_files_that_did_not_change(
    settled: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tracker = claimed(settled)
    write(settled, "src/a.py", "a = 22\n")
    assert tracker.accept(["n"]) == {"n": ["src/a.py"]}
    match = tracker.baselines["n"].index_match
    assert match is not None and match.unmatched == {"src/a.py"}  # hashed anew: not the entry's
    reads = index_read_counted(monkeypatch)
    assert vouched(tracker) == {"src/b.py", "docs/spec.md"}
    same_size_same_mtime(settled / "src/b.py", "b = 2\n")
    assert vouched(tracker) == {"docs/spec.md"}
    assert labels(tracker)["src/b.py"] is FileLabel.STALE_CHANGED
    assert reads == []


def test_accepting_many_files_claims_the_index_as_it_is_now(
    settled: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(check_module, "VOUCHED_CHECK_FILES", 3)  # "many" for three files
    tracker = claimed(settled)
    write(settled, "src/a.py", "a = 22\n")
    git(settled, "add", "src/a.py")  # new entries: the capture's claim no longer holds
    back(settled / ".git" / "index", 5)
    assert tracker.accept(["n"]) == {"n": ["src/a.py"]}
    match = tracker.baselines["n"].index_match
    assert match is not None and match.unmatched == {"src/a.py"}  # its entry changed just now
    reads = index_read_counted(monkeypatch)
    assert vouched(tracker) == {"src/b.py", "docs/spec.md"}
    same_size_same_mtime(settled / "src/b.py", "b = 2\n")
    assert tracker.check("n").stale_files == ["src/b.py"]
    assert reads == []
