"""The git tier: status relative to the baseline (never HEAD), change kinds, one call per check."""

from __future__ import annotations

import os
import shutil
import stat
import time
from pathlib import Path

import pytest

from freshness_magic.freshness.check import FreshnessTracker
from freshness_magic.freshness.git import GitTier, PendingTreeStatus, parse_porcelain_v2
from freshness_magic.freshness.gitstart import TreeStatus
from freshness_magic.vcs.git import find_work_tree
from freshness_magic.vcs.rawdiff import RawDiffRecord, raw_diff_records
from tests.gitrepo import git, git_repo

from .conftest import REPO_FILES, write


@pytest.fixture
def git_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Put a logging ``git`` wrapper first on PATH; returns the log file (one line per call)."""
    real = shutil.which("git")
    assert real is not None
    folder = tmp_path / "bin"
    folder.mkdir()
    log = tmp_path / "git-calls.log"
    wrapper = folder / "git"
    wrapper.write_text(f'#!/bin/sh\necho "$*" >> "{log}"\nexec "{real}" "$@"\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{folder}:{os.environ['PATH']}")
    return log


def calls(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


def test_find_work_tree_and_prefix(repo: Path) -> None:
    assert find_work_tree(str(repo)) == (str(repo.resolve()), "")
    assert find_work_tree(str(repo / "src")) == (str(repo.resolve()), "src/")


def test_not_a_work_tree_means_no_git_info(tmp_path: Path) -> None:
    write(tmp_path, "a.txt")
    tracker = FreshnessTracker(tmp_path)
    tracker.capture({"n": ["a.txt"]})
    write(tmp_path, "a.txt", "changed")
    (entry,) = tracker.check("n").files
    assert entry.git_change is None and entry.git_at_snapshot is None
    assert tracker.baselines["n"].git is False and tracker.baselines["n"].head is None


def test_baseline_records_head_and_status(repo: Path) -> None:
    write(repo, "src/a.py", "dirty\n")
    write(repo, "src/new.py", "new\n")
    tracker = FreshnessTracker(repo)
    baseline = tracker.capture({"n": ["src/*.py"]})["n"]
    assert baseline.head == git(repo, "rev-parse", "HEAD").strip()
    assert baseline.git_state("src/a.py") == "modified"
    assert baseline.git_state("src/b.py") == "clean"
    assert baseline.git_state("src/new.py") == "untracked"


def test_dirty_at_capture_then_unchanged_is_fresh(repo: Path) -> None:
    write(repo, "src/a.py", "modified before the run\n")
    tracker = FreshnessTracker(repo)
    tracker.capture({"n": ["src/a.py"]})
    report = tracker.check("n")
    assert report.stale_files == [] and report.fresh == ("src/a.py",)


def test_committed_after_capture(repo: Path) -> None:
    tracker = FreshnessTracker(repo)
    tracker.capture({"n": ["src/a.py"]})
    write(repo, "src/a.py", "a = 2\n")
    git(repo, "commit", "-q", "-am", "change a")
    report = tracker.check("n")
    (entry,) = report.files
    assert entry.git_change == "committed" and entry.git_at_snapshot == "clean"
    assert report.head_moved is True
    assert report.details()[-1].startswith("  HEAD moved: ")


def test_a_commit_elsewhere_is_not_shown_under_a_fresh_node(repo: Path) -> None:
    """``check`` printed "HEAD moved" under every node after a commit=true node committed,
    fresh ones too, where it says nothing."""
    tracker = FreshnessTracker(repo)
    tracker.capture({"n": ["src/a.py"], "m": ["src/b.py"]})
    write(repo, "src/b.py", "b = 2\n")
    git(repo, "commit", "-q", "-am", "change b")
    reports = tracker.check_many(["n", "m"])  # git is asked once m is stale: n knows HEAD too
    fresh, stale = reports["n"], reports["m"]
    assert fresh.head_moved is True and not fresh.is_stale
    assert fresh.details() == []
    assert stale.details()[-1].startswith("  HEAD moved: ")


def test_uncommitted_change(repo: Path) -> None:
    tracker = FreshnessTracker(repo)
    tracker.capture({"n": ["src/a.py"]})
    write(repo, "src/a.py", "a = 3\n")
    report = tracker.check("n")
    assert report.files[0].git_change == "uncommitted"
    assert report.head_moved is False


def test_untracked_new_glob_match(repo: Path) -> None:
    tracker = FreshnessTracker(repo)
    tracker.capture({"n": ["src/**/*.py"]})
    write(repo, "src/pkg/new.py", "n\n")
    (entry,) = tracker.check("n").files
    assert entry.label.value == "stale_added" and entry.git_change == "untracked"


def test_deleted_and_reverted_files(repo: Path) -> None:
    write(repo, "docs/spec.md", "locally edited\n")
    tracker = FreshnessTracker(repo)
    tracker.capture({"n": ["src/a.py", "docs/spec.md"]})
    (repo / "src/a.py").unlink()
    git(repo, "checkout", "--", "docs/spec.md")
    by_path = {f.path: f for f in tracker.check("n").files}
    assert by_path["src/a.py"].git_change == "uncommitted"
    assert by_path["docs/spec.md"].label.value == "stale_changed"
    assert by_path["docs/spec.md"].git_change == "matches_head"


def test_workdir_inside_a_repo_gets_relative_paths(repo: Path) -> None:
    tracker = FreshnessTracker(repo / "src")
    tracker.capture({"n": ["*.py"]})
    write(repo, "src/a.py", "changed\n")
    (entry,) = tracker.check("n").files
    assert entry.path == "a.py" and entry.git_change == "uncommitted"


def test_at_most_one_git_call_per_check_and_none_when_fresh(repo: Path, git_log: Path) -> None:
    for i in range(30):
        write(repo, f"src/m{i}.py", f"{i}\n")
    tracker = FreshnessTracker(repo)
    tracker.capture({"n": ["src/**/*.py"]})
    # the capture's status, and the rev-parse that names HEAD's tree for git's index
    assert [c.split()[1] for c in calls(git_log)] == ["--quiet", "status"]
    assert calls(git_log)[0].startswith("rev-parse")
    tracker.check("n")
    assert len(calls(git_log)) == 2  # nothing stale: git is not asked
    for i in range(30):
        write(repo, f"src/m{i}.py", f"changed {i}\n")
    report = tracker.check("n")
    assert len(report.stale_files) == 30
    assert len(calls(git_log)) == 3
    assert "status" in calls(git_log)[-1]


def test_the_report_explains_untracked_and_ignored_files_asking_git_for_them_alone(
    repo: Path, git_log: Path
) -> None:
    """The report's whole-tree view from git lists tracked files only; git is asked about the
    stale files it did not list, by name, and says which are untracked or ignored."""
    write(repo, ".gitignore", ".freshness/\n*.log\n")
    git(repo, "commit", "-qam", "ignore logs")
    tracker = FreshnessTracker(repo)
    tracker.capture({"n": ["src/**", "docs/spec.md"]})
    write(repo, "src/new.py", "new\n")
    write(repo, "src/run.log", "log\n")
    write(repo, "docs/spec.md", "# edited\n")
    before = len(calls(git_log))
    report = tracker.report(["n"]).nodes["n"].since_baseline
    by_path = {f.path: f.git_change for f in report.files}
    assert by_path == {
        "docs/spec.md": "uncommitted",
        "src/new.py": "untracked",
        "src/run.log": "ignored",
    }
    asked = calls(git_log)[before:]
    whole = [c for c in asked if c.endswith(" -- .")]
    assert len(whole) == 1 and " diff-index " in whole[0]  # of the tracked files only
    (by_name,) = [c for c in asked if "src/new.py" in c]
    assert "--untracked-files=all" in by_name and "--ignored=matching" in by_name
    assert "docs/spec.md" not in by_name  # listed by the first status


def test_a_reverted_file_unlisted_by_the_report_status_matches_head(repo: Path) -> None:
    tracker = FreshnessTracker(repo)
    write(repo, "src/a.py", "a = 2\n")
    tracker.capture({"n": ["src/a.py"]})
    git(repo, "checkout", "-q", "--", "src/a.py")
    (entry,) = tracker.report(["n"]).nodes["n"].since_baseline.files
    assert entry.label.value == "stale_changed" and entry.git_change == "matches_head"


def test_porcelain_v2_parser_handles_every_record_kind() -> None:
    out = (
        b"# branch.oid 0123abcd\0# branch.head main\0"
        b"1 .M N... 100644 100644 100644 aaa bbb sub/a b.py\0"
        b"1 A. N... 000000 100644 100644 000 ccc sub/new.py\0"
        b"1 .D N... 100644 100644 000000 ddd ddd sub/gone.py\0"
        b"2 R. N... 100644 100644 100644 eee eee R100 sub/to.py\0sub/from.py\0"
        b"u UU N... 100644 100644 100644 100644 f1 f2 f3 sub/conflict.py\0"
        b"? sub/untracked.py\0! sub/ignored.log\0? elsewhere.py\0"
    )
    status = parse_porcelain_v2(out, "sub/")
    assert status.head == "0123abcd"
    assert status.entries == {
        "a b.py": "modified",
        "new.py": "added",
        "gone.py": "deleted",
        "to.py": "renamed",
        "conflict.py": "unmerged",
        "untracked.py": "untracked",
        "ignored.log": "ignored",
    }
    assert status.edited == frozenset({"a b.py", "gone.py"})  # other content, or gone
    assert parse_porcelain_v2(b"# branch.oid (initial)\0", "").head is None


def test_the_raw_diff_parser_reads_ids_letters_and_any_path() -> None:
    zeros, blob = "0" * 40, "9" * 40
    out = (
        f":100644 100644 {blob} {zeros} M\0sub/a b.py\0".encode()
        + f":000000 100644 {zeros} {blob} A\0new\nline.py\0".encode()
        + f":100644 000000 {blob} {zeros} D\0".encode()
        + b"caf\xe9.txt\0"
    )
    assert raw_diff_records(out) == [
        RawDiffRecord(blob, None, "M", "sub/a b.py"),
        RawDiffRecord(None, blob, "A", "new\nline.py"),
        RawDiffRecord(blob, None, "D", "caf\udce9.txt"),
    ]
    assert raw_diff_records(b"") == []
    for bad in (
        b"M\0a.py\0",
        b":100644 100644 x y M\0",
        f":1 1 {blob} {blob} R100\0a\0b\0".encode(),
    ):
        with pytest.raises(ValueError):
            raw_diff_records(bad)


TREE_CASES = {
    "clean.txt": "clean\n",
    "touched.txt": "touched\n",
    "edited.txt": "edited\n",
    "staged.txt": "staged\n",
    "staged_edited.txt": "staged, edited\n",
    "staged_back.txt": "staged, put back\n",
    "deleted.txt": "deleted\n",
    "unindexed.txt": "unindexed\n",
    "typechanged.txt": "typechanged\n",
}


def test_the_tree_diff_lists_what_git_status_lists_once_confirmed(tmp_path: Path) -> None:
    """HEAD's tree against the tracked files, the paths git listed on their stat alone
    confirmed by their blob ids now, lists the tracked files ``git status`` lists, but for
    those whose file is HEAD's or not a regular file: left unlisted (a report asks git about
    them when they are stale)."""
    repo = git_repo(tmp_path / "repo", TREE_CASES, "init")
    then = time.time_ns() - 100_000_000_000
    os.utime(repo / "touched.txt", ns=(then, then))
    write(repo, "edited.txt", "edited again\n")
    write(repo, "staged.txt", "staged again\n")
    write(repo, "staged_edited.txt", "staged again\n")
    write(repo, "staged_back.txt", "staged again\n")
    git(repo, "add", "staged.txt", "staged_edited.txt", "staged_back.txt")
    write(repo, "staged_edited.txt", "and edited\n")
    write(repo, "staged_back.txt", TREE_CASES["staged_back.txt"])
    os.utime(repo / "staged_back.txt", ns=(then, then))
    (repo / "deleted.txt").unlink()
    git(repo, "rm", "-q", "--cached", "unindexed.txt")
    write(repo, "added.txt", "added\n")
    git(repo, "add", "added.txt")
    (repo / "typechanged.txt").unlink()
    (repo / "typechanged.txt").symlink_to("clean.txt")

    started = TreeStatus.start(str(repo), str(repo))
    tree = PendingTreeStatus(started, "").result()
    assert tree is not None and tree.head == git(repo, "rev-parse", "HEAD").strip()

    def blob_of(path: str) -> str | None:
        file = repo / path
        if file.is_symlink() or not file.is_file():
            return None
        return git(repo, "hash-object", path).strip()

    confirmed = tree.confirmed(blob_of)
    out = git(repo, "status", "--porcelain=v2", "-z", "--branch", "--untracked-files=no")
    status = parse_porcelain_v2(out.encode(), "")
    left_to_ask = {"staged_back.txt", "typechanged.txt"}
    assert confirmed.entries == {p: s for p, s in status.entries.items() if p not in left_to_ask}
    assert status.entries.keys() >= left_to_ask
    assert confirmed.head == status.head
    assert tree.edited == {
        "touched.txt",
        "edited.txt",
        "staged_edited.txt",
        "staged_back.txt",
        "deleted.txt",
        "unindexed.txt",
        "typechanged.txt",
    }
    assert set(tree.unsure) == {
        "touched.txt",
        "edited.txt",
        "staged_edited.txt",
        "staged_back.txt",
        "typechanged.txt",
    }


def test_a_stale_file_listed_on_its_stat_alone_is_explained_as_git_status_would(
    repo: Path, git_log: Path
) -> None:
    """A file whose content is HEAD's again, by hand, while the index holds another: ``git
    status`` lists it (the index differs from HEAD); the tree diff cannot tell, so git is asked
    about it by name."""
    write(repo, "src/a.py", "a = 2\n")
    tracker = FreshnessTracker(repo)
    tracker.capture({"n": ["src/a.py"]})
    git(repo, "add", "src/a.py")
    write(repo, "src/a.py", REPO_FILES["src/a.py"])
    before = len(calls(git_log))
    (entry,) = tracker.report(["n"]).nodes["n"].since_baseline.files
    assert entry.label.value == "stale_changed" and entry.git_change == "uncommitted"
    assert any("src/a.py" in call and " status " in f" {call} " for call in calls(git_log)[before:])


def test_before_the_first_commit_the_report_asks_git_status(tmp_path: Path, git_log: Path) -> None:
    """No HEAD to diff with: the exact status of the tracked files runs instead, and explains."""
    repo = tmp_path / "repo"
    write(repo, "src/a.py", "a = 1\n")
    git(repo, "init", "-q")
    git(repo, "add", "src/a.py")
    tracker = FreshnessTracker(repo)
    tracker.capture({"n": ["src/a.py"]})
    write(repo, "src/a.py", "a = 2\n")
    before = len(calls(git_log))
    report = tracker.report(["n"])
    (entry,) = report.nodes["n"].since_baseline.files
    assert entry.label.value == "stale_changed" and entry.git_change == "uncommitted"
    assert report.nodes["n"].since_baseline.head_now is None
    assert any("--untracked-files=no" in call for call in calls(git_log)[before:])


def test_git_tier_disabled(repo: Path) -> None:
    assert GitTier(repo, enabled=False).available is False
    assert GitTier(repo).available is True


def test_a_check_explains_at_most_max_explained_stale_files(repo: Path, git_log: Path) -> None:
    from freshness_magic.freshness.check import MAX_EXPLAINED

    count = MAX_EXPLAINED + 6
    for i in range(count):
        write(repo, f"src/m{i:03d}.py", f"{i}\n")
    tracker = FreshnessTracker(repo)
    tracker.capture({"n": ["src/**/*.py"]})
    for i in range(count):
        write(repo, f"src/m{i:03d}.py", f"changed {i}\n")
    report = tracker.check("n")
    changes = [f.git_change for f in report.files]
    assert len(changes) == count
    assert changes[:MAX_EXPLAINED] == ["untracked"] * MAX_EXPLAINED
    assert changes[MAX_EXPLAINED:] == [None] * 6
    assert f"src/m{MAX_EXPLAINED - 1:03d}.py" in calls(git_log)[-1]
    assert f"src/m{MAX_EXPLAINED:03d}.py" not in calls(git_log)[-1]
    full = tracker.report(["n"]).nodes["n"].since_baseline
    assert [f.git_change for f in full.files] == ["untracked"] * count


def test_a_rename_is_one_change_in_check_and_in_why(repo: Path) -> None:
    """`git mv` read as a delete and an add in `check` and `why` (a trial)."""
    from freshness_magic.engine import load_pipeline
    from freshness_magic.views.marks import StaleFile, stale_from_report

    tracker = FreshnessTracker(repo)
    tracker.capture({"n": ["src/*.py"]})
    git(repo, "mv", "src/a.py", "src/c.py")
    write(repo, "src/b.py", "b = 2\n")
    report = tracker.report(["n"])
    details = report.nodes["n"].effective.details()
    assert details[0] == "  renamed        src/a.py -> src/c.py (same content)"
    assert [line.split()[0] for line in details] == ["renamed", "stale_changed"]
    graph = load_pipeline(
        'digraph g { start [shape=Mdiamond] n [source_files="src/*.py", freshness=warn] '
        "done [shape=Msquare] start -> n -> done }"
    )
    assert stale_from_report(report, graph)["n"].files == (
        StaleFile("src/c.py", "renamed from src/a.py"),
        StaleFile("src/b.py", "modified"),
    )


def test_a_pure_rename_is_headed_renamed_not_deleted(repo: Path) -> None:
    """`check` headed a node whose only change was `git mv` as stale_deleted (the worst of its
    delete and add): the headline now says what happened; the JSON label stays the worst."""
    tracker = FreshnessTracker(repo)
    tracker.capture({"n": ["src/*.py"]})
    git(repo, "mv", "src/a.py", "src/c.py")
    node = tracker.report(["n"]).nodes["n"].effective
    assert str(node).splitlines()[0] == "n: stale_renamed (since baseline)"
    assert node.to_dict()["label"] == "stale_deleted"
    write(repo, "src/b.py", "b = 2\n")
    assert str(tracker.report(["n"]).nodes["n"].effective).splitlines()[0] == (
        "n: stale_deleted (since baseline)"
    )
