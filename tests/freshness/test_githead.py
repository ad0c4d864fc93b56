"""HEAD's commit and tree read from the repository's files agree with git, or say None."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from freshness_magic.freshness.githead import commit_tree, head_commit

from .conftest import git, write


def read(repo: Path, git_dir: Path | None = None) -> tuple[str | None, str | None]:
    common = repo / ".git"
    commit = head_commit(str(git_dir or common), str(common))
    tree = commit_tree(str(common), commit) if commit else None
    return commit, tree.hex() if tree else None


def by_git(repo: Path) -> tuple[str, str]:
    return git(repo, "rev-parse", "HEAD").strip(), git(repo, "rev-parse", "HEAD^{tree}").strip()


@pytest.mark.parametrize("layout", ["loose", "packed", "packed refs", "detached"])
def test_head_and_its_tree_agree_with_git(repo: Path, layout: str) -> None:
    write(repo, "src/a.py", "a = 2\n")
    git(repo, "commit", "-q", "-am", "two")
    if layout == "packed":
        git(repo, "gc", "-q")
        assert not list((repo / ".git/objects").glob("??/*"))
    elif layout == "packed refs":
        git(repo, "pack-refs", "--all")
    elif layout == "detached":
        git(repo, "checkout", "-q", "--detach", "HEAD~1")
    assert read(repo) == by_git(repo)


def test_a_linked_worktree_has_its_own_head(repo: Path, tmp_path: Path) -> None:
    git(repo, "branch", "side")
    other = tmp_path / "other"
    git(repo, "worktree", "add", "-q", str(other), "side")
    write(other, "x.txt", "x\n")
    git(other, "add", "x.txt")
    git(other, "commit", "-q", "-m", "side")
    git_dir = repo / ".git/worktrees/other"
    assert read(repo, git_dir) == by_git(other)
    assert read(repo) == by_git(repo)


def test_what_is_not_read_here_is_none(repo: Path) -> None:
    commit, _ = by_git(repo)
    assert commit_tree(str(repo / ".git"), "0" * 40) is None  # no such object
    loose = repo / ".git/objects" / commit[:2] / commit[2:]
    loose.chmod(0o644)
    loose.write_bytes(b"not zlib")
    assert commit_tree(str(repo / ".git"), commit) is None
    (repo / ".git/HEAD").write_text("ref: refs/heads/unborn\n")
    assert head_commit(str(repo / ".git"), str(repo / ".git")) is None
    (repo / ".git/HEAD").write_text("ref: ../../outside\n")
    assert head_commit(str(repo / ".git"), str(repo / ".git")) is None
    shutil.rmtree(repo / ".git/refs")
    assert head_commit(str(repo / ".git"), str(repo / ".git")) is None


def test_a_damaged_pack_is_none(repo: Path) -> None:
    git(repo, "gc", "-q")
    commit, _ = by_git(repo)
    for pack in (repo / ".git/objects/pack").glob("*.pack"):
        pack.chmod(0o644)
        pack.write_bytes(b"")
    assert commit_tree(str(repo / ".git"), commit) is None
    for idx in (repo / ".git/objects/pack").glob("*.idx"):
        idx.chmod(0o644)
        idx.write_bytes(b"\377tOc\0\0\0\2" + b"\xff" * 2000)
    assert commit_tree(str(repo / ".git"), commit) is None
