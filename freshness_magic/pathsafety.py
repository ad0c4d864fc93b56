"""Path safety for the project's own state: nothing is written through a symbolic link.

The state folders ``.freshness/`` and ``.orchestrator/`` live inside the user's work tree, where
anyone (or anything) can replace a folder with a link to somewhere else. Every writer of state
checks the path first: from the state folder down to the file, no component may be a symbolic
link (checked with ``lstat``, and files are opened with ``O_NOFOLLOW``), so a link gives a
one-line :class:`~freshness_magic.errors.UnsafePathError` and nothing is written outside.
Names that become path components (node ids) are checked with :func:`check_component`.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

from freshness_magic.errors import UnsafePathError

STATE_DIR_NAMES: frozenset[str] = frozenset({".freshness", ".orchestrator"})
"""Folder names whose whole subtree is the project's state (never written through a link)."""

SAFE_COMPONENT_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
"""A node id as the parser accepts it: one plain folder or file name, never ``..`` or ``/``."""

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


def _link_message(link: Path) -> str:
    try:
        target = os.readlink(link)
    except OSError:
        target = "?"
    return (
        f"{link} is a symbolic link (to {target}); freshness_magic writes its state only into "
        "real folders inside the work tree: remove the link and run again"
    )


def check_state_path(path: str | os.PathLike[str]) -> Path:
    """``path`` made absolute, after checking it reaches no symbolic link inside a state folder.

    Components from the first ``.freshness``/``.orchestrator`` down to ``path`` itself are
    checked with ``lstat``; a path outside any state folder (a ``--runs-dir`` elsewhere) has
    only its last component checked. Missing components are fine: they are created as folders.
    """
    target = Path(os.path.abspath(path))
    parts = target.parts
    start = next((i for i, name in enumerate(parts) if name in STATE_DIR_NAMES), len(parts) - 1)
    current = Path(*parts[:start]) if start else Path(parts[0])
    for name in parts[start:]:
        current = current / name
        try:
            mode = os.lstat(current).st_mode
        except (FileNotFoundError, NotADirectoryError):
            break
        if stat.S_ISLNK(mode):
            raise UnsafePathError(_link_message(current))
    return target


def make_state_dir(folder: str | os.PathLike[str]) -> Path:
    """Create ``folder`` (and parents) after checking no state component is a symbolic link."""
    path = check_state_path(folder)
    path.mkdir(parents=True, exist_ok=True)
    check_state_path(path)
    return path


def open_for_write(path: str | os.PathLike[str], flags: int, mode: int = 0o644) -> int:
    """``os.open`` of a state file that refuses a link as the file itself (``O_NOFOLLOW``)."""
    target = check_state_path(path)
    try:
        return os.open(target, flags | _NOFOLLOW, mode)
    except OSError as exc:
        if os.path.islink(target):
            raise UnsafePathError(_link_message(target)) from exc
        raise


def check_component(name: str, what: str = "node id") -> str:
    """``name`` when it can be one path component of a state folder; else UnsafePathError."""
    if not isinstance(name, str) or not SAFE_COMPONENT_RE.match(name):
        raise UnsafePathError(
            f"{what} {name!r} cannot name a file or folder of the run: it must match "
            "[A-Za-z_][A-Za-z0-9_]* (no '/', '.' or '..'); rename it"
        )
    return name
