"""Before snapshots and diffs, in real git repositories and in plain folders."""

from __future__ import annotations

import json
import os
from pathlib import Path

from freshness_magic.evidence.record import EvidenceRecord, write_evidence
from freshness_magic.evidence.snapshot import (
    FileChanges,
    WorkTreeSnapshot,
    changes_since,
    take_snapshot,
)
from tests.gitrepo import git


def test_clean_repo_without_changes_has_none(repo: Path) -> None:
    before = take_snapshot(repo)
    assert before.kind == "git" and before.head and before.entries == {}
    changes = changes_since(before)
    assert not changes.uncommitted and not changes.head_moved and changes.commits == ()


def test_added_modified_deleted_are_classified(repo: Path) -> None:
    before = take_snapshot(repo)
    (repo / "new.txt").write_text("new\n")
    (repo / "nested").mkdir()
    (repo / "nested" / "deep.txt").write_text("deep\n")
    (repo / "edit.txt").write_text("changed\n")
    (repo / "gone.txt").unlink()
    changes = changes_since(before)
    assert changes.uncommitted == FileChanges(
        added=("nested/deep.txt", "new.txt"), modified=("edit.txt",), deleted=("gone.txt",)
    )


def test_pre_existing_dirty_files_do_not_count(repo: Path) -> None:
    (repo / "edit.txt").write_text("user edit\n")
    (repo / "scratch.txt").write_text("user scratch\n")
    (repo / "gone.txt").unlink()
    before = take_snapshot(repo)
    assert set(before.entries) == {"edit.txt", "scratch.txt", "gone.txt"}
    assert not changes_since(before).uncommitted


def test_a_dirty_file_modified_again_counts(repo: Path) -> None:
    (repo / "edit.txt").write_text("user edit\n")
    (repo / "scratch.txt").write_text("user scratch\n")
    before = take_snapshot(repo)
    (repo / "edit.txt").write_text("node edit\n")
    (repo / "scratch.txt").unlink()
    changes = changes_since(before)
    assert changes.uncommitted == FileChanges(modified=("edit.txt",), deleted=("scratch.txt",))


def test_reverting_a_dirty_file_counts_as_a_change(repo: Path) -> None:
    (repo / "edit.txt").write_text("user edit\n")
    before = take_snapshot(repo)
    git(repo, "checkout", "--", "edit.txt")
    assert changes_since(before).uncommitted == FileChanges(modified=("edit.txt",))


def test_staging_alone_is_not_a_change(repo: Path) -> None:
    (repo / "edit.txt").write_text("user edit\n")
    before = take_snapshot(repo)
    git(repo, "add", "edit.txt")
    assert not changes_since(before).uncommitted


def test_engine_folders_never_count(repo: Path) -> None:
    before = take_snapshot(repo, "n")
    write_evidence(repo, EvidenceRecord("other", "x", "analysis", {"k": 1}))
    (repo / ".freshness" / "runs" / "r1").mkdir(parents=True)
    (repo / ".freshness" / "runs" / "r1" / "checkpoint.json").write_text("{}")
    (repo / "sub" / ".orchestrator").mkdir(parents=True)
    (repo / "sub" / ".orchestrator" / "x.json").write_text("{}")
    changes = changes_since(before)
    assert not changes.uncommitted
    assert not changes.evidence_file_changed


def test_own_commits_are_found(repo: Path) -> None:
    before = take_snapshot(repo)
    (repo / "feature.py").write_text("x = 1\n")
    (repo / "gone.txt").unlink()
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "Add feature\n\nLonger body.")
    (repo / "edit.txt").write_text("second\n")
    git(repo, "commit", "-q", "-am", "Tweak edit")
    changes = changes_since(before)
    assert changes.head_moved and not changes.uncommitted
    assert [c.subject for c in changes.commits] == ["Add feature", "Tweak edit"]
    assert changes.commits[0].message == "Add feature\n\nLonger body."
    assert changes.commits[1].id == git(repo, "rev-parse", "HEAD").strip()
    assert changes.committed == FileChanges(
        added=("feature.py",), modified=("edit.txt",), deleted=("gone.txt",)
    )


def test_committing_a_pre_existing_dirty_file_is_not_also_uncommitted(repo: Path) -> None:
    (repo / "edit.txt").write_text("user edit\n")
    before = take_snapshot(repo)
    git(repo, "commit", "-q", "-am", "node commits the edit")
    changes = changes_since(before)
    assert changes.committed == FileChanges(modified=("edit.txt",))
    assert not changes.uncommitted


def test_first_commit_in_an_empty_repository(tmp_path: Path) -> None:
    root = tmp_path / "empty"
    root.mkdir()
    git(root, "init", "-q")
    before = take_snapshot(root)
    assert before.head is None
    (root / "a.txt").write_text("a\n")
    git(root, "add", "a.txt")
    git(root, "commit", "-q", "-m", "first")
    changes = changes_since(before)
    assert changes.head_moved and [c.subject for c in changes.commits] == ["first"]
    assert changes.committed == FileChanges(added=("a.txt",))


def test_workdir_in_a_subfolder_uses_the_whole_work_tree(repo: Path) -> None:
    sub = repo / "pkg"
    sub.mkdir()
    before = take_snapshot(sub)
    assert Path(before.root) == repo.resolve()
    (repo / "top.txt").write_text("top\n")
    (sub / "inner.txt").write_text("inner\n")
    assert changes_since(before).uncommitted.added == ("pkg/inner.txt", "top.txt")


def test_evidence_file_change_is_tracked_separately(repo: Path) -> None:
    before = take_snapshot(repo, "draft")
    assert before.evidence_digest is None
    write_evidence(repo, EvidenceRecord("draft", "x", "analysis", {"k": 1}))
    changes = changes_since(before)
    assert changes.evidence_file_changed and not changes.uncommitted
    again = take_snapshot(repo, "draft")
    assert not changes_since(again).evidence_file_changed


def test_plain_folder_content_snapshot(plain_dir: Path) -> None:
    (plain_dir / "node_modules").mkdir()
    (plain_dir / "node_modules" / "dep.js").write_text("1")
    before = take_snapshot(plain_dir)
    assert before.kind == "content" and before.head is None
    assert set(before.entries) == {"keep.txt", "edit.txt", "sub/gone.txt"}
    (plain_dir / "edit.txt").write_text("edited\n")
    (plain_dir / "sub" / "gone.txt").unlink()
    (plain_dir / "sub" / "new.txt").write_text("new\n")
    (plain_dir / "node_modules" / "dep.js").write_text("2")
    (plain_dir / "__pycache__").mkdir()
    (plain_dir / "__pycache__" / "m.pyc").write_bytes(b"\0")
    venv = plain_dir / "myenv"
    venv.mkdir()
    (venv / "pyvenv.cfg").write_text("home = /usr\n")
    (venv / "lib.py").write_text("x")
    write_evidence(plain_dir, EvidenceRecord("n", "x", "analysis", {"k": 1}))
    changes = changes_since(before)
    assert changes.kind == "content" and not changes.head_moved
    assert changes.uncommitted == FileChanges(
        added=("sub/new.txt",), modified=("edit.txt",), deleted=("sub/gone.txt",)
    )


def test_content_snapshot_sees_same_size_rewrite_within_the_same_second(plain_dir: Path) -> None:
    path = plain_dir / "edit.txt"
    before = take_snapshot(plain_dir)
    st = path.stat()
    path.write_text("EDIT\n")
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert changes_since(before).uncommitted.modified == ("edit.txt",)


def test_snapshot_round_trips_through_json(repo: Path) -> None:
    (repo / "edit.txt").write_text("dirty\n")
    before = take_snapshot(repo, "n")
    restored = WorkTreeSnapshot.from_dict(json.loads(json.dumps(before.to_dict())))
    assert restored == before
    (repo / "edit.txt").write_text("dirtier\n")
    assert changes_since(restored).uncommitted.modified == ("edit.txt",)


def test_symlinks_are_compared_by_target(plain_dir: Path) -> None:
    os.symlink("keep.txt", plain_dir / "link")
    before = take_snapshot(plain_dir)
    (plain_dir / "link").unlink()
    os.symlink("edit.txt", plain_dir / "link")
    assert changes_since(before).uncommitted.modified == ("link",)
