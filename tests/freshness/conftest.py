"""Helpers for freshness tests: real files in tmp_path and real git repositories."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

GIT_ENV = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.invalid",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.invalid",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_NOSYSTEM": "1",
}


def git(repo: Path, *args: str) -> str:
    """Run git in ``repo`` and return its stdout (raises on failure)."""
    done = subprocess.run(
        ["git", "-C", str(repo), *args],
        check=True,
        capture_output=True,
        text=True,
        env={**os.environ, **GIT_ENV},
    )
    return done.stdout


def write(root: Path, rel: str, text: str = "x") -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A git work tree with one commit holding src/a.py, src/b.py and docs/spec.md."""
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    write(root, ".gitignore", ".freshness/\n")
    write(root, "src/a.py", "a = 1\n")
    write(root, "src/b.py", "b = 1\n")
    write(root, "docs/spec.md", "# spec\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "init")
    return root


SHARED_MODULES = {"test_acceptance", "test_tracker", "test_git"}
"""Modules run twice: as is, and with every snapshot sharing its files with the helper process."""


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if metafunc.module.__name__.rsplit(".", 1)[-1] in SHARED_MODULES:
        metafunc.parametrize("snapshot_helper", ["alone", "helper"], indirect=True)


@pytest.fixture(autouse=True)
def snapshot_helper(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """``helper``: snapshots of any size use the hash worker (normally only from 4,000 files)."""
    mode = getattr(request, "param", "alone")
    if mode == "helper":
        monkeypatch.setattr("freshness_magic.freshness.snapshot.WORKER_MIN_FILES", 1)
    return str(mode)
