"""``commit=true``: the node's changes and its evidence file become one commit."""

from __future__ import annotations

from pathlib import Path

import pytest

from freshness_magic.engine.model import Node
from freshness_magic.errors import EvidenceError
from freshness_magic.evidence.commit import commit_node_changes
from freshness_magic.evidence.record import EvidenceRecord, write_evidence
from freshness_magic.evidence.snapshot import changes_since, take_snapshot
from tests.gitrepo import git

NODE = Node("implement", {"label": "Implement the fix"})


def files_of(repo: Path, rev: str = "HEAD") -> list[str]:
    return git(repo, "show", "--name-status", "--format=", rev).split("\n")[:-1]


def test_changes_are_committed_with_the_label(repo: Path) -> None:
    before = take_snapshot(repo, NODE.id)
    (repo / "fix.py").write_text("fixed\n")
    (repo / "edit.txt").write_text("edited\n")
    (repo / "gone.txt").unlink()
    commit = commit_node_changes(repo, NODE, changes_since(before), include_evidence_file=False)
    assert commit is not None
    assert commit.message == "[Pipeline] Implement the fix"
    assert commit.id == git(repo, "rev-parse", "HEAD").strip()
    assert sorted(files_of(repo)) == ["A\tfix.py", "D\tgone.txt", "M\tedit.txt"]
    assert git(repo, "status", "--porcelain") == ""


def test_evidence_only_commit_force_adds_the_ignored_file(repo: Path) -> None:
    (repo / ".gitignore").write_text(".orchestrator/\n")
    git(repo, "add", ".gitignore")
    git(repo, "commit", "-q", "-m", "ignore")
    before = take_snapshot(repo, NODE.id)
    write_evidence(repo, EvidenceRecord(NODE.id, "Verified", "validation", {"ok": True}))
    commit = commit_node_changes(repo, NODE, changes_since(before), include_evidence_file=True)
    assert commit is not None
    assert commit.message == "[Pipeline] Implement the fix (evidence only)"
    assert files_of(repo) == ["A\t.orchestrator/evidence/implement.json"]


def test_changes_and_evidence_file_in_one_commit(repo: Path) -> None:
    before = take_snapshot(repo, NODE.id)
    (repo / "fix.py").write_text("fixed\n")
    write_evidence(repo, EvidenceRecord(NODE.id, "Fixed", "file_changes", {"ok": True}))
    commit = commit_node_changes(repo, NODE, changes_since(before), include_evidence_file=True)
    assert commit is not None and commit.message == "[Pipeline] Implement the fix"
    assert sorted(files_of(repo)) == ["A\t.orchestrator/evidence/implement.json", "A\tfix.py"]


def test_nothing_to_commit_returns_none(repo: Path) -> None:
    head = git(repo, "rev-parse", "HEAD")
    before = take_snapshot(repo, NODE.id)
    assert (
        commit_node_changes(repo, NODE, changes_since(before), include_evidence_file=True) is None
    )
    assert git(repo, "rev-parse", "HEAD") == head


def test_only_the_nodes_paths_are_committed(repo: Path) -> None:
    (repo / "user.txt").write_text("user work in progress\n")
    git(repo, "add", "user.txt")
    (repo / "keep.txt").write_text("user edit, not staged\n")
    before = take_snapshot(repo, NODE.id)
    (repo / "fix.py").write_text("fixed\n")
    commit_node_changes(repo, NODE, changes_since(before), include_evidence_file=False)
    assert files_of(repo) == ["A\tfix.py"]
    status = git(repo, "status", "--porcelain").splitlines()
    assert sorted(status) == [" M keep.txt", "A  user.txt"]


def test_paths_with_glob_characters_and_spaces_are_literal(repo: Path) -> None:
    (repo / "a.txt").write_text("tracked\n")
    git(repo, "add", "a.txt")
    git(repo, "commit", "-q", "-m", "a")
    (repo / "a.txt").write_text("user edit that the glob [abc].txt would match\n")
    before = take_snapshot(repo, NODE.id)
    (repo / "[abc].txt").write_text("literal name\n")
    (repo / "my file.txt").write_text("spaces\n")
    commit_node_changes(repo, NODE, changes_since(before), include_evidence_file=False)
    assert sorted(files_of(repo)) == ["A\t[abc].txt", "A\tmy file.txt"]
    assert git(repo, "status", "--porcelain") == " M a.txt\n"


def test_fallback_identity_when_git_has_none(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for key in ("GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL"):
        monkeypatch.delenv(key)
    monkeypatch.delenv("EMAIL", raising=False)
    git(repo, "config", "user.useConfigOnly", "true")
    before = take_snapshot(repo, NODE.id)
    (repo / "fix.py").write_text("fixed\n")
    commit = commit_node_changes(repo, NODE, changes_since(before), include_evidence_file=False)
    assert commit is not None
    assert git(repo, "log", "-1", "--format=%an <%ae>").strip() == (
        "freshness-magic <freshness-magic@localhost>"
    )


def test_configured_identity_is_kept(repo: Path) -> None:
    before = take_snapshot(repo, NODE.id)
    (repo / "fix.py").write_text("fixed\n")
    commit_node_changes(repo, NODE, changes_since(before), include_evidence_file=False)
    assert git(repo, "log", "-1", "--format=%an").strip() == "Evidence Tester"


def test_outside_git_is_an_error_with_advice(plain_dir: Path) -> None:
    before = take_snapshot(plain_dir, NODE.id)
    (plain_dir / "fix.py").write_text("fixed\n")
    with pytest.raises(EvidenceError, match="needs a git work tree"):
        commit_node_changes(plain_dir, NODE, changes_since(before), include_evidence_file=False)


def test_a_refusing_hook_is_reported_and_the_index_is_left_as_it_was(repo: Path) -> None:
    """A trial: after the refusal the node's changes stayed staged, and a retry committed both
    attempts' changes. The index entries of the node's paths are put back, a version the user
    had staged of one of them included."""
    hook = repo / ".git" / "hooks" / "pre-commit"
    hook.write_text("#!/bin/sh\necho 'hook says no' >&2\nexit 1\n")
    hook.chmod(0o755)
    (repo / "edit.txt").write_text("staged by the user\n")
    git(repo, "add", "edit.txt")
    index_before = git(repo, "ls-files", "-s")
    before = take_snapshot(repo, NODE.id)
    (repo / "fix.py").write_text("fixed\n")
    (repo / "edit.txt").write_text("staged by the user\nand the node\n")
    (repo / "gone.txt").unlink()
    write_evidence(repo, EvidenceRecord(NODE.id, "did it", "implementation", {}))
    with pytest.raises(EvidenceError, match="hook says no"):
        commit_node_changes(repo, NODE, changes_since(before), include_evidence_file=True)
    assert git(repo, "ls-files", "-s") == index_before
    assert git(repo, "status", "--porcelain").splitlines() == [
        "MM edit.txt",
        " D gone.txt",
        "?? fix.py",
    ]
