"""Helpers for freshness tests: real files in tmp_path and a real git repository."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.gitrepo import git_repo


def write(root: Path, rel: str, text: str = "x") -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


REPO_FILES = {
    ".gitignore": ".freshness/\n",
    "src/a.py": "a = 1\n",
    "src/b.py": "b = 1\n",
    "docs/spec.md": "# spec\n",
}
"""What :func:`repo`'s one commit holds."""


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A git work tree with one commit holding src/a.py, src/b.py and docs/spec.md."""
    return git_repo(tmp_path / "repo", REPO_FILES, "init")
