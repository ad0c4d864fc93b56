"""Real temporary git repositories with a fixed identity, isolated from the user's git config."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.gitrepo import git_repo

IDENTITY = {
    "GIT_AUTHOR_NAME": "Evidence Tester",
    "GIT_AUTHOR_EMAIL": "tester@example.invalid",
    "GIT_COMMITTER_NAME": "Evidence Tester",
    "GIT_COMMITTER_EMAIL": "tester@example.invalid",
}


@pytest.fixture(autouse=True)
def isolated_git(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """No global or system git config leaks in; the identity comes from the environment."""
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(home / "gitconfig"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path_factory.getbasetemp()))
    for key, value in IDENTITY.items():
        monkeypatch.setenv(key, value)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A git repository with one commit holding ``keep.txt``, ``edit.txt`` and ``gone.txt``."""
    names = ("keep.txt", "edit.txt", "gone.txt")
    return git_repo(tmp_path / "repo", {name: f"{name} original\n" for name in names}, "initial")


@pytest.fixture
def plain_dir(tmp_path: Path) -> Path:
    """A working directory outside any git repository, with a few files."""
    root = tmp_path / "plain"
    root.mkdir()
    (root / "keep.txt").write_text("keep\n")
    (root / "edit.txt").write_text("edit\n")
    (root / "sub").mkdir()
    (root / "sub" / "gone.txt").write_text("gone\n")
    return root


def no_evidence(workdir: Path, label: str) -> str:
    """The failure reason of the node ``implement`` (labelled ``label``, its task "Fix the login
    bug") when it left no work evidence in ``workdir``."""
    return (
        "No work evidence produced. The node must either:\n"
        "  1. Modify files (results in a commit)\n"
        "  2. Create an evidence file at .orchestrator/evidence/implement.json\n"
        "  3. Declare expects_no_changes=true in the node\n"
        "\n"
        f"Node: implement ({label})\n"
        "Task: Fix the login bug\n"
        f"Work tree: {workdir.resolve()}"
    )
