"""Folders that never hold a user's source: tool state, caches and virtual environments.

The evidence snapshot (outside git) and the hub's walk both skip exactly these, so "what counts
as the project's files" has one definition.
"""

from __future__ import annotations

import os

SKIPPED_DIRS: frozenset[str] = frozenset(
    {
        ".git",
        ".hg",
        ".svn",
        ".freshness",
        ".orchestrator",
        "node_modules",
        "__pycache__",
        ".venv",
        "venv",
        ".tox",
        ".nox",
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
        ".ipynb_checkpoints",
    }
)
"""Folder names skipped wherever they are; folders holding a ``pyvenv.cfg`` are skipped too."""


def is_venv(folder: str | os.PathLike[str]) -> bool:
    """Whether ``folder`` is a virtual environment (it holds ``pyvenv.cfg``)."""
    return os.path.isfile(os.path.join(folder, "pyvenv.cfg"))
