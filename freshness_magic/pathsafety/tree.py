"""Inputs: what a path names inside the work tree, judged by real paths.

:class:`WorkTree` decides where an input entry (a ``source_files`` path or glob) points and
whether what it reaches may be read: an entry that leaves the work tree (an absolute path
elsewhere, ``..`` escaping it, ``~``, which is never expanded) and a symbolic link whose real
path lies outside are refused with the reason (reported ``unknown``), unless the caller allowed
the outside folder. Links are resolved with ``realpath``, so ``notes.txt -> ../outside/x`` and
``../outside/x`` get the same answer.
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Iterable
from dataclasses import dataclass

OUTSIDE_LINK = "symlink to outside the work tree"
OUTSIDE_ENTRY = "outside the working directory (not allowed)"
TILDE = (
    "starts with '~', which is not expanded (a home folder is outside the working directory); "
    "write the path relative to the working directory"
)
WHOLE_TREE = "is the working directory; write '**' for its files"
UNREADABLE = "folder unreadable"
"""Start of the reason for a folder a glob cannot list (``folder unreadable: <why>``)."""


@dataclass(frozen=True, slots=True)
class Refused:
    """An input entry or path that may not be read, and why (reported as ``unknown``)."""

    entry: str
    reason: str


@dataclass(frozen=True, slots=True)
class Located:
    """Where an entry points: ``rel`` (POSIX, maybe a glob) below ``base``.

    ``outside``: the entry names an allowed folder outside the work tree; its keys are absolute.
    """

    base: str
    rel: str
    outside: bool


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def pipeline_path_problem(
    name: str, base: str | os.PathLike[str], workdir: str | os.PathLike[str]
) -> str | None:
    """Why a path a pipeline names may not be read or written, or None when it may.

    The one rule for every path a pipeline makes the product use (a prompt file, a
    ``source_files`` entry, a file a node is told to write): it lies in the work tree at
    ``workdir``. ``name`` is relative to ``base`` (the pipeline file's folder, or the work
    tree) unless absolute. Refused: ``~`` (never expanded), a path that leaves the work tree
    by its entry (absolute elsewhere, ``..``), and one that leaves it through a symbolic link.
    """
    if name.startswith("~"):
        return TILDE
    tree = WorkTree(workdir)
    path = posixpath.normpath(os.path.join(os.path.abspath(os.fspath(base)), name))
    if not (_under(path, tree.workdir) or _under(path, tree.real_workdir)):
        return OUTSIDE_ENTRY
    if tree.escapes(path):
        return OUTSIDE_LINK
    return None


class WorkTree:
    """The work tree at ``workdir`` (plus ``allow_outside``: True, or extra folders to admit)."""

    def __init__(
        self, workdir: str | os.PathLike[str], allow_outside: bool | Iterable[str] = False
    ) -> None:
        self.workdir = os.path.abspath(os.fspath(workdir))
        self.real_workdir = os.path.realpath(self.workdir)
        if isinstance(allow_outside, bool):
            self._allow_all = allow_outside
            self._allowed: tuple[str, ...] = ()
        else:
            self._allow_all = False
            self._allowed = tuple(os.path.abspath(os.fspath(p)) for p in allow_outside)
        self._real_roots = (self.real_workdir, *(os.path.realpath(p) for p in self._allowed))

    def contains(self, real: str) -> bool:
        """Whether a real path lies in the work tree (or an allowed outside folder)."""
        return self._allow_all or any(_under(real, root) for root in self._real_roots)

    def escapes(self, path: str) -> bool:
        """Whether ``path`` (a link, or a path through one) really lies outside (never read)."""
        return not self.contains(os.path.realpath(path))

    def locate(self, entry: str) -> Located | Refused:
        """Where ``entry`` points, or why it is refused (``~``, outside and not allowed)."""
        if entry.startswith("~"):
            return Refused(entry, TILDE)
        normal = posixpath.normpath(entry)
        if os.path.isabs(entry):
            for root in (self.workdir, self.real_workdir):
                if _under(normal, root):
                    return Located(self.workdir, posixpath.relpath(normal, root), False)
            return self._outside(entry, normal)
        if normal == ".." or normal.startswith("../"):
            return self._outside(entry, posixpath.normpath(posixpath.join(self.workdir, normal)))
        return Located(self.workdir, "" if normal == "." else normal, False)

    def check_path(self, entry: str, located: Located) -> Refused | None:
        """Why a plain (non-glob) located path may not be tracked, or None when it may.

        A missing path is fine (its appearance is a change); one whose real path is outside
        (through a link anywhere on the way) is refused.
        """
        if located.rel in ("", "."):
            return Refused(entry, WHOLE_TREE)
        if self.escapes(self.join(located)):
            return Refused(entry, OUTSIDE_LINK)
        return None

    def join(self, located: Located, rel: str | None = None) -> str:
        """The filesystem path of ``rel`` (default: the entry itself) below ``located.base``."""
        rel = located.rel if rel is None else rel
        return os.path.join(located.base, rel) if rel else located.base

    def key(self, located: Located, rel: str) -> str:
        """The key a file found at ``rel`` gets: relative inside, absolute when outside."""
        return os.path.join(located.base, rel) if located.outside else rel

    def absolute(self, key: str) -> str:
        """The filesystem path of a key."""
        return key if os.path.isabs(key) else os.path.join(self.workdir, key)

    def _outside(self, entry: str, normal: str) -> Located | Refused:
        if not (self._allow_all or any(_under(normal, root) for root in self._allowed)):
            return Refused(entry, OUTSIDE_ENTRY)
        return Located("/", normal.lstrip("/"), True)
