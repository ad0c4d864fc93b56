"""State paths: nothing of ours is written, or read back, through a symbolic link.

The state folders ``.freshness/`` and ``.orchestrator/`` live inside the user's work tree, where
anyone (or anything) can replace a folder with a link to somewhere else. Every writer of state
checks the path first: from the state folder down to the file, no component may be a symbolic
link (``lstat`` per component; missing folders are created one at a time and checked again), and
files are opened with ``O_NOFOLLOW``. A link is a one-line
:class:`~freshness_magic.errors.UnsafePathError` and nothing is written outside. A path outside
any state folder (a ``--runs-dir`` elsewhere) has only its last component checked.

Within a run's step the checks are remembered (:class:`~.statedirs.StateDirs`, installed by
:func:`remembering`): a folder verified once is confirmed by one ``lstat`` of the folder itself,
so a step's dozens of writes do not re-walk every component each time.
"""

from __future__ import annotations

import contextlib
import contextvars
import errno
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from freshness_magic.errors import NotAFolderError, UnsafePathError
from freshness_magic.ids import MAX_NODE_ID, NODE_ID_RE

if TYPE_CHECKING:
    from freshness_magic.pathsafety.statedirs import StateDirs

STATE_DIR_NAMES: frozenset[str] = frozenset({".freshness", ".orchestrator"})
"""Folder names whose whole subtree is the project's state (never written through a link)."""

SAFE_COMPONENT_RE = NODE_ID_RE
"""A node id as the parser accepts it: one plain folder or file name, never ``..`` or ``/``."""
MAX_COMPONENT = MAX_NODE_ID

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_READ_FLAGS = os.O_RDONLY | _NOFOLLOW | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
"""O_NONBLOCK: a FIFO planted where a state file should be must not block the reader."""


_DIRS: contextvars.ContextVar[StateDirs | None] = contextvars.ContextVar("state_dirs", default=None)


@contextlib.contextmanager
def remembering(dirs: StateDirs) -> Iterator[StateDirs]:
    """State paths checked in this block (this thread) are remembered in ``dirs`` (one per run)."""
    token = _DIRS.set(dirs)
    try:
        yield dirs
    finally:
        _DIRS.reset(token)


def _link_message(link: str | os.PathLike[str]) -> str:
    try:
        target = os.readlink(link)
    except OSError:
        target = "?"
    return (
        f"{link} is a symbolic link (to {target}), which could lead outside the work tree; "
        "freshness_magic keeps its state only in real folders inside the work tree: remove "
        "the link and run again"
    )


def _first_checked(parts: tuple[str, ...]) -> int:
    """Index of the first component to check: the first state folder, else the last name."""
    for index, name in enumerate(parts):
        if name in STATE_DIR_NAMES:
            return index
    return len(parts) - 1


def _verify(path: str, *, create: bool) -> None:
    """Check (with ``create``: make) every component of ``path`` from its state folder down.

    Without ``create`` a missing component ends the check (it will be created as a folder), and
    the last component may be a file. With ``create`` every component must become a folder. A
    component that must be a folder and is a file (or lies under one) is a
    :class:`NotAFolderError` naming it, raised here once for every writer of state (and before
    a run begins), and the file is left as it is.
    """
    dirs = _DIRS.get()
    if dirs is not None and dirs.confirm(path):
        # The common case within a step: the folder itself is remembered and still the same,
        # confirmed before taking the path apart (a path not written as remembered, say with a
        # doubled separator, misses here and is confirmed component by component below).
        return
    parts = Path(path).parts
    start = _first_checked(parts)
    index = len(parts)
    if dirs is not None:
        while index > start and not dirs.confirm(os.path.join(*parts[:index])):
            index -= 1
        if index == len(parts):
            return
    else:
        index = start
    if create and index == start and start > 0:
        above = os.path.join(*parts[:start])
        try:
            os.makedirs(above, exist_ok=True)
        except (FileExistsError, NotADirectoryError):
            raise NotAFolderError(first_non_folder(above)) from None
    for position in range(index, len(parts)):
        current = os.path.join(*parts[: position + 1])
        if dirs is not None:
            dirs.walked += 1
        try:
            info = os.lstat(current)
        except (FileNotFoundError, NotADirectoryError):
            if not create:
                return
            with contextlib.suppress(FileExistsError):
                os.mkdir(current)
            info = os.lstat(current)
        if stat.S_ISLNK(info.st_mode):
            raise UnsafePathError(_link_message(current))
        if stat.S_ISDIR(info.st_mode):
            if dirs is not None:
                dirs.verified[current] = (info.st_dev, info.st_ino)
        elif create or position < len(parts) - 1:  # a file where a state folder goes
            raise NotAFolderError(current)


def first_non_folder(path: str) -> str:
    """The first component of ``path`` that exists and is not a folder (``path`` if none is)."""
    parts = Path(path).parts
    for position in range(1, len(parts) + 1):
        current = os.path.join(*parts[:position])
        if os.path.lexists(current) and not os.path.isdir(current):
            return current
    return path


def workdir_problem(path: Path) -> str | None:
    """Why ``path`` cannot be a working directory: it, or the nearest of its parents that
    exists, is not a folder. None for a folder, or a missing one that can be created there."""
    for folder in (path, *path.parents):
        if folder.is_dir():
            return None
        if folder.exists():
            return (
                f"{folder} is a file, not a folder; give a folder (a missing one is created "
                "by the first step)"
            )
    return None


def check_state_path(path: str | os.PathLike[str]) -> Path:
    """``path`` made absolute, after checking it reaches no symbolic link inside a state folder.

    Components from the first ``.freshness``/``.orchestrator`` down to ``path`` itself are
    checked with ``lstat``; missing ones are fine (they are created as folders).
    """
    target = os.path.abspath(path)
    _verify(target, create=False)
    return Path(target)


def make_state_dir(folder: str | os.PathLike[str]) -> Path:
    """Create ``folder`` (and parents), each new component checked to be a real folder."""
    target = os.path.abspath(folder)
    _verify(target, create=True)
    return Path(target)


def state_file(path: str | os.PathLike[str]) -> Path:
    """A state file's absolute path with its folder made (and checked); the file not yet.

    The caller opens the file itself with ``O_NOFOLLOW`` (:func:`open_for_write`) or replaces
    it by a rename (a rename replaces a link, it never writes through one).
    """
    target = os.path.abspath(path)
    _verify(os.path.dirname(target), create=True)
    return Path(target)


def refuse_link(path: str | os.PathLike[str]) -> os.stat_result | None:
    """``lstat`` of a state file (None when absent); UnsafePathError when it is a link."""
    try:
        info = os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    if stat.S_ISLNK(info.st_mode):
        raise UnsafePathError(_link_message(path))
    return info


def open_for_write(path: str | os.PathLike[str], flags: int, mode: int = 0o644) -> int:
    """``os.open`` of a state file in a checked folder, refusing a link as the file itself."""
    target = state_file(path)
    try:
        return os.open(target, flags | _NOFOLLOW, mode)
    except OSError as exc:
        if os.path.islink(target):
            raise UnsafePathError(_link_message(target)) from exc
        raise


def open_for_read(path: str | os.PathLike[str]) -> int:
    """``os.open`` (read-only) of a state file reached through no link; never blocks on a FIFO.

    Raises FileNotFoundError when absent, UnsafePathError when a component is a link.
    """
    target = check_state_path(path)
    try:
        fd = os.open(target, _READ_FLAGS)
    except OSError as exc:
        if os.path.islink(target):
            raise UnsafePathError(_link_message(target)) from exc
        raise
    if stat.S_ISDIR(os.fstat(fd).st_mode):
        os.close(fd)
        raise IsADirectoryError(
            errno.EISDIR, "is a folder where the run keeps a file; move it away", str(target)
        )
    return fd


def open_state(path: str | os.PathLike[str]) -> BinaryIO:
    """A state file opened for binary reading, reached through no link (:func:`open_for_read`)."""
    return os.fdopen(open_for_read(path), "rb")


def read_state(path: str | os.PathLike[str]) -> bytes:
    """The whole content of a state file reached through no link (:func:`open_for_read`)."""
    with open_state(path) as handle:
        return handle.read()


def check_component(name: str, what: str = "node id") -> str:
    """``name`` when it can be one path component of a state folder; else UnsafePathError."""
    if not isinstance(name, str) or not SAFE_COMPONENT_RE.match(name):
        raise UnsafePathError(
            f"{what} {name!r} cannot name a file or folder of the run: it must match "
            "[A-Za-z_][A-Za-z0-9_]* (no '/', '.' or '..'); rename it"
        )
    if len(name) > MAX_COMPONENT:
        raise UnsafePathError(
            f"{what} {name[:20]}… cannot name a file or folder of the run: it has {len(name)} "
            f"characters, at most {MAX_COMPONENT}; rename it"
        )
    return name
