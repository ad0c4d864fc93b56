"""Real git repositories in tmp folders, isolated from the user's and the system's git config.

One :func:`git` for every test that drives git itself (to set a repository up, or to check what
the code under test did to it), and :func:`git_repo` for a work tree with a first commit.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from pathlib import Path

ISOLATED = {"GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
"""No global or system config: a developer's hooks, signing or identity cannot reach a test."""

IDENTITY = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.invalid",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.invalid",
}
"""Who commits when the environment names nobody (a test that sets an identity keeps its own)."""


def git(repo: Path, *args: str) -> str:
    """Run git in ``repo``; its stdout. A failure fails the test with git's message."""
    result = subprocess.run(
        ["git", "-C", str(repo), *args],
        capture_output=True,
        text=True,
        env={**IDENTITY, **os.environ, **ISOLATED},
        check=False,
    )
    assert result.returncode == 0, f"git {' '.join(args)} failed: {result.stderr}"
    return result.stdout


def git_repo(root: Path, files: Mapping[str, str], message: str) -> Path:
    """A new git work tree at ``root`` on branch ``main`` whose one commit, ``message``, holds
    ``files`` (path relative to ``root``: text)."""
    root.mkdir(parents=True)
    git(root, "init", "-q", "-b", "main")
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", message)
    return root
