"""The one git runner (vcs/git.py): environment, errors, status arguments, work-tree detection;
reading its status (vcs/porcelain.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from freshness_magic.errors import GitError
from freshness_magic.evidence import snapshot as evidence_snapshot
from freshness_magic.freshness import hashing, statcache
from freshness_magic.vcs import git as vcs
from freshness_magic.vcs.porcelain import porcelain_records
from tests.gitrepo import git

from .conftest import write


def test_status_of_named_paths_only(repo: Path) -> None:
    write(repo, "src/a.py", "changed\n")
    write(repo, "docs/spec.md", "changed\n")
    out = vcs.checked(vcs.status_args(["src/a.py"]), repo)
    _head, records = porcelain_records(out)
    assert [(r.kind, r.path) for r in records] == [("1", "src/a.py")]
    everything = porcelain_records(vcs.checked(vcs.status_args(), repo))[1]
    assert {r.path for r in everything} == {"src/a.py", "docs/spec.md"}


def test_too_many_paths_ask_for_the_whole_folder() -> None:
    many = [f"f{i}" for i in range(vcs.MAX_PATHSPECS + 1)]
    assert vcs.status_args(many)[-2:] == ["--", "."]
    assert vcs.status_args(["a", "/abs/b"])[-2:] == ["--", "a"]
    assert vcs.status_args([])[-2:] == ["--", "."]


def test_pathspec_magic_is_taken_literally(repo: Path) -> None:
    write(repo, "src/a.py", "changed\n")
    out = vcs.checked(vcs.status_args(["src/*.py"]), repo)
    assert porcelain_records(out)[1] == []


def test_failure_carries_gits_message(repo: Path) -> None:
    with pytest.raises(GitError, match=r"^git rev-parse nope failed in .*: fatal: .*nope"):
        vcs.checked(["rev-parse", "nope", "--"], repo)


def test_missing_git_is_a_git_error(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(repo / "no-bin"))
    with pytest.raises(GitError, match="git is not installed"):
        vcs.run(["status"], repo)
    assert vcs.toplevel(repo) is None
    assert vcs.start(["status"], repo).output() is None


def test_head_toplevel_and_work_tree(repo: Path, tmp_path: Path) -> None:
    assert vcs.head(repo) == git(repo, "rev-parse", "HEAD").strip()
    assert vcs.toplevel(repo / "src") == repo.resolve()
    assert vcs.find_work_tree(str(repo / "src")) == (str(repo.resolve()), "src/")
    outside = tmp_path / "plain"
    outside.mkdir()
    assert vcs.toplevel(outside) is None and vcs.find_work_tree(str(outside)) is None


def test_status_never_takes_the_index_lock(repo: Path) -> None:
    """GIT_OPTIONAL_LOCKS=0: a status while a user's git holds the lock still works."""
    (repo / ".git" / "index.lock").write_text("")
    write(repo, "src/a.py", "changed\n")
    assert vcs.start(vcs.status_args(), repo).output() is not None


def test_one_racy_window_for_freshness_and_evidence() -> None:
    assert statcache.RACY_WINDOW_NS is hashing.RACY_WINDOW_NS
    assert evidence_snapshot.RACY_WINDOW_NS is hashing.RACY_WINDOW_NS
