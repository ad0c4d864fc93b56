"""Blob ids from git's index: a first capture stats clean tracked files instead of reading them."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest

from freshness_magic.freshness import snapshot
from freshness_magic.freshness.baseline import Baseline, FileRecord
from freshness_magic.freshness.check import FreshnessTracker
from freshness_magic.freshness.git import GitTier
from freshness_magic.freshness.gitindex import INDEX_BYTES_PER_FILE, AttributesRule, GitIndex
from freshness_magic.freshness.hashing import StatKey, digest_file_at, pack_files_at
from freshness_magic.freshness.labels import FileLabel, NodeLabel
from freshness_magic.vcs import git as vcs
from tests.gitrepo import git

from .conftest import write


@pytest.fixture(autouse=True)
def plain_git_config(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The machine's own git config and attributes files stay out of these tests."""
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", os.devnull)
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the files a snapshot reads (hashes) itself."""
    seen: list[str] = []

    def counting(path: str, *args: object, **kwargs: object) -> object:
        seen.append(os.fspath(path))
        return digest_file_at(path, *args, **kwargs)  # type: ignore[arg-type]

    def counting_many(names: list[str], *args: object, **kwargs: object) -> object:
        seen.extend(names)
        return pack_files_at(names, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(snapshot, "digest_file_at", counting)
    monkeypatch.setattr(snapshot, "pack_files_at", counting_many)
    return seen


def settle(root: Path) -> None:
    """Take the tracked files out of git's racy window (file timestamps have the kernel's tick
    as resolution, so a file written just before the index can share its mtime): their mtimes
    go back ten seconds and git records the new stat data in an index written after them."""
    back = time.time_ns() - 10_000_000_000
    for rel in git(root, "ls-files", "-z").split("\0"):
        if rel and (root / rel).is_file():
            os.utime(root / rel, ns=(back, back))
    git(root, "update-index", "-q", "--refresh")


@pytest.fixture
def repo(repo: Path) -> Path:
    """The shared repository, settled (see :func:`settle`)."""
    settle(repo)
    return repo


def hash_object(repo: Path, rel: str) -> str:
    return git(repo, "hash-object", rel).strip()


def blob_paths(baseline: Baseline) -> set[str]:
    return {path for path, record in baseline.files.items() if record.blob}


def test_clean_tracked_files_are_not_read(repo: Path, reads: list[str]) -> None:
    write(repo, "src/a.py", "dirty\n")  # tracked, modified: read
    write(repo, "src/new.py", "new\n")  # untracked: read
    baseline = FreshnessTracker(repo).capture({"n": ["**"]})["n"]
    assert set(baseline.files) == {"src/a.py", "src/b.py", "src/new.py", "docs/spec.md"}
    assert sorted(reads) == ["a.py", "new.py"]
    for rel in baseline.files:  # read or not, each digest is git's blob id: one kind per tree
        assert baseline.files[rel].digest == hash_object(repo, rel)


def touch(path: Path) -> None:
    """A new mtime (five seconds on), same content."""
    later = path.stat().st_mtime_ns + 5_000_000_000
    os.utime(path, ns=(later, later))


def test_a_touched_file_stays_fresh_and_an_edited_one_is_stale(repo: Path) -> None:
    tracker = FreshnessTracker(repo)
    tracker.capture({"n": ["src/*.py"]})
    touch(repo / "src/b.py")
    assert tracker.check("n").label is NodeLabel.FRESH

    write(repo, "src/b.py", "b = 2\n")
    (changed,) = tracker.check("n").files
    assert changed.label is FileLabel.STALE_CHANGED
    assert changed.new_digest == hash_object(repo, "src/b.py")

    write(repo, "src/b.py", "b = 1\n")
    assert tracker.check("n").label is NodeLabel.FRESH


def test_two_kinds_of_digest_are_compared_like_with_like(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GIT_INDEX_FILE", str(repo / ".git" / "index"))  # no index: xxh3
    first = FreshnessTracker(repo)
    first.capture({"old": ["src/*.py"]})
    state = first.to_dict()
    monkeypatch.delenv("GIT_INDEX_FILE")
    tracker = FreshnessTracker(repo)
    tracker.load(state)  # xxh3 records, from a run before this one
    tracker.capture({"new": ["docs/*.md"]})  # blob ids from the index: files hash as blob ids
    assert tracker.snapshotter.blob_ids and not tracker.baselines["old"].files["src/a.py"].blob
    touch(repo / "src/a.py")
    assert tracker.check("old").label is NodeLabel.FRESH
    write(repo, "src/a.py", "a = 2\n")
    assert [f.path for f in tracker.check("old").files] == ["src/a.py"]


@pytest.mark.parametrize("place", ["src/.gitattributes", ".gitattributes"])
def test_an_attributes_file_keeps_the_index_out_of_its_folders(
    repo: Path, place: str, reads: list[str]
) -> None:
    write(repo, place, "*.py text eol=crlf\n")
    baseline = FreshnessTracker(repo).capture({"n": ["src/*.py", "docs/*"]})["n"]
    if place == ".gitattributes":  # nothing from the index: files keep xxh3_128 digests
        assert sorted(reads) == ["a.py", "b.py", "spec.md"] and blob_paths(baseline) == set()
    else:
        assert sorted(reads) == ["a.py", "b.py"] and len(blob_paths(baseline)) == 3


def test_keys_are_looked_at_one_by_one_only_when_a_folder_holding_them_may_be_filtered(
    repo: Path,
) -> None:
    write(repo, "src/deep/.gitattributes", "*.py text eol=crlf\n")
    keys = ["src/a.py", "src/deep/c.py", "docs/spec.md"]
    rule = AttributesRule(str(repo), str(repo))
    assert rule.filtered(keys) == {"src/deep/c.py"}
    assert rule.filtered(keys, {"", "src", "src/deep", "docs"}) == {"src/deep/c.py"}
    # told that the keys lie in free folders only, the rule takes that word: no key is split
    assert rule.filtered(keys, {"src", "docs"}) == set()


def test_a_tracked_attributes_file_keeps_the_index_out(repo: Path) -> None:
    write(repo, "docs/.gitattributes", "*.md -text\n")
    git(repo, "add", "docs/.gitattributes")
    (repo / "docs/.gitattributes").unlink()  # git still reads it from the index
    baseline = FreshnessTracker(repo).capture({"n": ["src/*.py"]})["n"]
    assert blob_paths(baseline) == set()


def test_attributes_above_a_workdir_inside_the_tree(repo: Path, reads: list[str]) -> None:
    baseline = FreshnessTracker(repo / "src").capture({"n": ["*.py"]})["n"]
    assert blob_paths(baseline) == {"a.py", "b.py"} and reads == []
    write(repo, ".gitattributes", "* text=auto\n")
    baseline = FreshnessTracker(repo / "src").capture({"n": ["*.py"]})["n"]
    assert sorted(reads) == ["a.py", "b.py"] and blob_paths(baseline) == set()


@pytest.mark.parametrize("setting", ["core.autocrlf", "core.attributesFile"])
def test_filter_settings_in_git_config_keep_the_index_out(repo: Path, setting: str) -> None:
    git(repo, "config", setting, "input")
    assert blob_paths(FreshnessTracker(repo).capture({"n": ["src/*.py"]})["n"]) == set()


def test_global_attributes_and_environment_keep_the_index_out(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(tmp_path, "xdg/git/attributes", "* text\n")
    assert blob_paths(FreshnessTracker(repo).capture({"n": ["src/*.py"]})["n"]) == set()
    (tmp_path / "xdg/git/attributes").unlink()
    monkeypatch.setenv("GIT_INDEX_FILE", str(repo / ".git" / "index"))
    assert blob_paths(FreshnessTracker(repo).capture({"n": ["src/*.py"]})["n"]) == set()


def test_racily_clean_entries_are_read(repo: Path, reads: list[str]) -> None:
    index = repo / ".git" / "index"
    oldest = min(p.stat().st_mtime_ns for p in (repo / "src").iterdir())
    os.utime(index, ns=(oldest, oldest))  # git's rule: an entry as new as its index is racy
    FreshnessTracker(repo).capture({"n": ["src/*.py"]})
    assert sorted(reads) == ["a.py", "b.py"]


def test_index_versions_and_entry_flags(repo: Path, reads: list[str]) -> None:
    git(repo, "update-index", "--index-version", "4")
    baseline = FreshnessTracker(repo).capture({"n": ["**"]})["n"]
    assert blob_paths(baseline) == {"src/a.py", "src/b.py", "docs/spec.md"} and reads == []
    git(repo, "update-index", "--index-version", "3")
    git(repo, "update-index", "--skip-worktree", "src/b.py")
    write(repo, "src/c.py", "c\n")
    git(repo, "add", "-N", "src/c.py")  # intent to add: the entry holds no content yet
    FreshnessTracker(repo).capture({"n": ["src/*.py"]})
    assert sorted(reads) == ["b.py", "c.py"]


def test_a_split_index_is_not_used(repo: Path) -> None:
    git(repo, "update-index", "--split-index")
    assert GitIndex.read(str(repo.resolve()), "") is None
    assert blob_paths(FreshnessTracker(repo).capture({"n": ["src/*.py"]})["n"]) == set()


def test_a_damaged_index_is_not_used(repo: Path) -> None:
    index = repo / ".git" / "index"
    index.write_bytes(index.read_bytes()[:100])
    assert GitIndex.read(str(repo.resolve()), "") is None
    baseline = FreshnessTracker(repo, git=True).capture({"n": ["src/*.py"]})["n"]
    assert blob_paths(baseline) == set() and len(baseline.files) == 2


def test_blob_ids_match_git_for_small_and_streamed_files(repo: Path) -> None:
    big = repo / "big.bin"
    big.write_bytes(os.urandom(3 << 20))  # streamed in chunks
    for rel in ("src/a.py", "big.bin"):
        digest, _ = digest_file_at(repo / rel, blob=True)
        assert digest.hex() == hash_object(repo, rel)


def test_a_checkpoint_keeps_blob_ids(repo: Path) -> None:
    tracker = FreshnessTracker(repo)
    tracker.capture({"n": ["src/*.py"]})
    state = tracker.to_dict()
    again = FreshnessTracker(repo)
    again.load(state)
    assert blob_paths(again.baselines["n"]) == {"src/a.py", "src/b.py"}
    write(repo, "src/a.py", "a = 2\n")
    assert [f.path for f in again.check("n").files] == ["src/a.py"]


def test_a_digest_of_another_length_is_refused() -> None:
    with pytest.raises(ValueError, match="not a digest"):
        FileRecord(True, StatKey(1, 2, 0o100644, 3, 4, 5), "ab" * 5)


def test_the_index_is_read_only_for_a_look_at_enough_files(repo: Path, reads: list[str]) -> None:
    for i in range(60):
        write(repo, f"data/f{i:02d}.txt", f"{i}\n")
    git(repo, "add", "-A")
    top, size = str(repo.resolve()), (repo / ".git" / "index").stat().st_size
    assert size > INDEX_BYTES_PER_FILE  # a capture of one file would parse all of it
    assert GitIndex.read(top, "", files=1) is None
    index = GitIndex.read(top, "", files=size // INDEX_BYTES_PER_FILE + 1)
    assert index is not None and len(index) == 64
    one = FreshnessTracker(repo).capture({"n": ["data/f00.txt"]})["n"]
    assert blob_paths(one) == set() and reads == ["f00.txt"]  # xxh3: no blob ids in this tracker
    FreshnessTracker(repo).capture({"n": ["data/*"]})
    assert reads == ["f00.txt"]


def test_a_linked_worktree_and_a_submodule_use_their_own_index(
    repo: Path, tmp_path: Path, reads: list[str]
) -> None:
    linked = tmp_path / "linked"
    git(repo, "worktree", "add", "-q", "-b", "other", str(linked))
    settle(linked)
    baseline = FreshnessTracker(linked).capture({"n": ["src/*.py"]})["n"]
    assert blob_paths(baseline) == {"src/a.py", "src/b.py"} and reads == []

    git(repo, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(linked), "sub")
    inner = repo / "sub"
    assert (inner / ".git").is_file()
    settle(inner)
    baseline = FreshnessTracker(inner).capture({"n": ["src/*.py"]})["n"]
    assert blob_paths(baseline) == {"src/a.py", "src/b.py"} and reads == []
    write(inner, "src/a.py", "changed\n")
    FreshnessTracker(inner).capture({"n": ["src/*.py"]})
    assert reads == ["a.py"]


def test_a_large_first_look_through_the_index_stays_on_one_core(
    repo: Path, reads: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """No git process: the index tells both the blob ids and git's status."""
    for folder in range(4):
        for i in range(10):
            write(repo, f"data/d{folder}/f{i}.txt", f"{folder}.{i}\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "data")
    settle(repo)
    started: list[object] = []
    monkeypatch.setattr(vcs, "start", lambda *args: started.append(args))
    write(repo, "data/d3/f9.txt", "changed\n")
    tracker = FreshnessTracker(repo)
    baseline = tracker.capture({"n": ["data/**"]})["n"]
    assert started == []
    assert reads == ["f9.txt"]
    assert len(blob_paths(baseline)) == 40
    assert baseline.git_states == {"data/d3/f9.txt": "modified"}
    assert baseline.head == git(repo, "rev-parse", "HEAD").strip()


@pytest.fixture
def git_calls(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The arguments of every git process freshness starts (they still run)."""
    calls: list[list[str]] = []
    start = vcs.start

    def counting(args: list[str], cwd: str) -> vcs.Pending:
        calls.append(list(args))
        return start(args, cwd)

    monkeypatch.setattr(vcs, "start", counting)
    return calls


def git_view(repo: Path, baseline: Baseline) -> tuple[str | None, dict[str, str]]:
    """HEAD and the states a whole-tree ``git status`` gives the baseline's files."""
    status = GitTier(repo).status()
    assert status is not None
    return status.head, {k: v for k, v in status.entries.items() if k in baseline.files}


def every_kind_of_file(repo: Path) -> dict[str, list[str]]:
    """A tree with a file of each kind git tells apart, and the entries that name them all."""
    write(repo, ".gitignore", ".freshness/\n*.log\n")
    write(repo, "run.sh", "echo\n")
    write(repo, "attr/data.txt", "text\n")
    (repo / "link.py").symlink_to("src/b.py")
    write(repo, "gone.txt", "soon deleted\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "kinds")
    settle(repo)
    write(repo, "src/a.py", "a = 2\n")  # modified
    touch(repo / "src/b.py")  # same content, new mtime: clean
    (repo / "gone.txt").unlink()  # deleted
    write(repo, "src/new.py", "new\n")  # untracked
    write(repo, "src/debug.log", "ignored\n")  # ignored
    (repo / "run.sh").chmod(0o755)  # mode change
    write(repo, "attr/.gitattributes", "*.txt text\n")  # not tracked: the index is still read
    write(repo, "attr/data.txt", "other text\n")  # under an attributes file
    return {"n": ["src/*", "docs/**", "gone.txt", "run.sh", "attr/*.txt", "link.py"]}


def test_git_status_told_by_the_index_is_the_one_git_gives(
    repo: Path, git_calls: list[list[str]]
) -> None:
    nodes = every_kind_of_file(repo)
    baseline = FreshnessTracker(repo).capture(nodes)["n"]
    # git is asked about the files the index cannot tell about, by name, after the hashing
    assert len(git_calls) == 1
    asked = git_calls[0][git_calls[0].index("--") + 1 :]
    assert sorted(asked) == ["attr/data.txt", "link.py", "run.sh", "src/debug.log", "src/new.py"]
    head, states = git_view(repo, baseline)
    assert states == {
        "src/a.py": "modified",
        "gone.txt": "deleted",
        "src/new.py": "untracked",
        "run.sh": "modified",
        "attr/data.txt": "modified",
    }
    assert (baseline.head, baseline.git_states) == (head, states)
    assert baseline.git_state("src/debug.log") == baseline.git_state("src/b.py") == "clean"


@pytest.mark.parametrize("change", ["packed", "detached", "staged", "unborn", "reverted"])
def test_git_status_agrees_whatever_the_repository_state(
    repo: Path, change: str, git_calls: list[list[str]]
) -> None:
    """Packed objects and refs, a detached HEAD, a staged change (the index no longer holds
    HEAD's tree: git is asked), no commit yet, and an edit taken back."""
    if change == "unborn":
        shutil.rmtree(repo / ".git")
        git(repo, "init", "-q", "-b", "main")
        git(repo, "add", "src")
    elif change == "packed":
        write(repo, "src/b.py", "b = 2\n")
        git(repo, "commit", "-q", "-am", "two")
        git(repo, "gc", "-q")
        assert not (repo / ".git/refs/heads/main").exists()
    elif change == "detached":
        git(repo, "checkout", "-q", "--detach")
    elif change == "staged":
        write(repo, "src/b.py", "b = 2\n")
        git(repo, "add", "src/b.py")
    # Edits after the settling: git compares whole seconds, and settling moves mtimes.
    settle(repo)
    write(repo, "src/a.py", "a = 9\n")
    write(repo, "src/b.py", "b = 3\n")
    if change == "reverted":
        write(repo, "src/b.py", "b = 1\n")
    baseline = FreshnessTracker(repo).capture({"n": ["src/*.py", "docs/*"]})["n"]
    # without HEAD's tree in the index (staged, no commit) git runs, in the background
    assert len(git_calls) == (1 if change in ("staged", "unborn") else 0)
    assert (baseline.head, baseline.git_states) == git_view(repo, baseline)
    assert baseline.git_states["src/a.py"] in ("modified", "added")


def test_a_look_the_stat_cache_knows_asks_git_about_its_files_by_name(
    repo: Path, git_calls: list[list[str]]
) -> None:
    """A step's snapshot (the stat cache knows its files: the index is not read) asks git about
    those files only, not the whole tree; many files go to one whole-tree status."""
    back = time.time_ns() - 20_000_000_000  # not racy, and not the second settle() gave git
    os.utime(write(repo, "src/a.py", "a = 2\n"), ns=(back, back))
    tracker = FreshnessTracker(repo)
    tracker.capture({"n": ["src/*.py"]})
    assert git_calls == []  # the first look: the index told it all
    again = tracker.capture({"n": ["src/*.py"]})["n"]
    assert [call[call.index("--") + 1 :] for call in git_calls] == [["src/a.py", "src/b.py"]]
    assert again.git_states == {"src/a.py": "modified"}
    for i in range(70):
        os.utime(write(repo, f"many/f{i}.txt", f"{i}\n"), ns=(back, back))
    tracker.capture({"m": ["many/*"]})  # untracked: asked for by name, 70 of them: whole tree
    tracker.capture({"m": ["many/*"]})
    assert git_calls[-1][git_calls[-1].index("--") + 1 :] == ["."]


TRACKED = ("src/a.py", "src/b.py", "docs/spec.md")


@pytest.mark.parametrize("version", ["2", "3", "4"])
def test_every_index_version_gives_git_s_blob_ids_head_and_status(
    repo: Path, reads: list[str], version: str
) -> None:
    git(repo, "update-index", "--index-version", version)
    write(repo, "src/a.py", "a = 3\n")  # modified: the only file read
    baseline = FreshnessTracker(repo).capture({"n": ["src/*", "docs/**"]})["n"]
    assert reads == ["a.py"]
    assert {path: baseline.files[path].digest for path in TRACKED} == {
        path: hash_object(repo, path) for path in TRACKED
    }
    assert (baseline.head, baseline.git_states) == git_view(repo, baseline)
    assert baseline.git_states == {"src/a.py": "modified"}


@pytest.mark.parametrize("layout", ["packed refs", "packed objects", "detached", "worktree"])
def test_head_is_the_one_git_names_whatever_the_ref_and_object_store(
    repo: Path, tmp_path: Path, layout: str
) -> None:
    """HEAD comes from ``git rev-parse``: git reads its own refs and objects (a reftable
    store too, with a git that writes one; the installed git may not)."""
    write(repo, "src/a.py", "a = 2\n")
    git(repo, "commit", "-q", "-am", "two")
    where = repo
    if layout == "packed refs":
        git(repo, "pack-refs", "--all")
    elif layout == "packed objects":
        git(repo, "gc", "-q")
        assert not list((repo / ".git/objects").glob("??/*"))
    elif layout == "detached":
        git(repo, "checkout", "-q", "--detach", "HEAD~1")
    else:
        where = tmp_path / "other"
        git(repo, "worktree", "add", "-q", "-b", "side", str(where))
        write(where, "x.txt", "x\n")
        git(where, "add", "x.txt")
        git(where, "commit", "-q", "-m", "side")
    settle(where)
    baseline = FreshnessTracker(where).capture({"n": ["src/*", "docs/**"]})["n"]
    assert blob_paths(baseline) == set(TRACKED)
    assert baseline.head == git(where, "rev-parse", "HEAD").strip()
    assert (baseline.head, baseline.git_states) == git_view(where, baseline)


def test_a_sparse_index_is_not_read_and_git_tells_the_status(repo: Path) -> None:
    git(repo, "sparse-checkout", "set", "--cone", "--sparse-index", "src")
    assert b"sdir" in (repo / ".git/index").read_bytes()  # a folder entry stands for docs/
    assert GitIndex.read(str(repo.resolve()), "") is None
    write(repo, "src/a.py", "a = 3\n")
    baseline = FreshnessTracker(repo).capture({"n": ["src/*"]})["n"]
    assert blob_paths(baseline) == set()
    assert (baseline.head, baseline.git_states) == git_view(repo, baseline)
    assert baseline.git_states == {"src/a.py": "modified"}
