"""Resolve ``source_files`` entries (paths and globs, ``**`` included) against a working directory.

Entries are re-resolved at every check so that new and removed glob matches count as changes.
A plain path is always tracked, existing or not (so a deletion is seen; a folder named this
way is reported ``unknown`` with the advice to write ``folder/**``); a glob contributes the
regular files (or symlinks to them) it matches. ``*``, ``?`` and ``[..]`` never match a leading
dot and ``**`` never descends into hidden folders (``.git``, ``.freshness``), as in the shell;
repeated ``**`` segments count as one (``**/**/*.py`` is ``**/*.py``).

What is read must lie in the working directory, judged by real paths: an entry that leaves it
(an absolute path elsewhere, ``..`` escaping it, ``~``, which is never expanded) and a symlinked
file or folder whose target lies outside are *unresolved* and reported ``unknown`` with the
reason, unless the caller allowed the outside folder. Symlinked folders inside are followed,
except into a folder already on the current path, so loops end. A folder a glob cannot list
(permission denied) is reported ``unknown`` too, rather than contributing nothing.
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from freshness_magic.freshness.walk import OUTSIDE_LINK, DirKey, Listing, Walker, is_glob

__all__ = ["OUTSIDE_LINK", "Resolution", "Resolver", "Unresolved", "is_glob"]

TILDE = (
    "starts with '~', which is not expanded (a home folder is outside the working directory); "
    "write the path relative to the working directory"
)


@dataclass(frozen=True, slots=True)
class Unresolved:
    """An entry that could not be resolved to files, and why (reported as ``unknown``)."""

    entry: str
    reason: str


@dataclass
class Resolution:
    """The files one node's entries resolve to, as keys relative to the working directory.

    Keys are POSIX paths relative to the working directory, or absolute paths for entries outside
    it that were explicitly allowed. ``literal`` holds the keys named by a plain path, which are
    tracked even when missing.
    """

    files: list[str] = field(default_factory=list)
    literal: frozenset[str] = frozenset()
    unresolved: list[Unresolved] = field(default_factory=list)


class Resolver:
    """Resolves entries against ``workdir``; ``allow_outside`` (True, or folders) admits others."""

    def __init__(
        self, workdir: str | os.PathLike[str], allow_outside: bool | Iterable[str] = False
    ):
        self.workdir = os.path.abspath(os.fspath(workdir))
        self._real_workdir = os.path.realpath(self.workdir)
        if isinstance(allow_outside, bool):
            self._allow_all = allow_outside
            self._allowed: tuple[str, ...] = ()
        else:
            self._allow_all = False
            self._allowed = tuple(os.path.abspath(os.fspath(p)) for p in allow_outside)
        self._real_roots = (self._real_workdir, *(os.path.realpath(p) for p in self._allowed))
        self._folders: dict[str, tuple[DirKey, int]] = {}
        self._resolved: dict[tuple[str, ...], tuple[Resolution, tuple[str, ...]]] = {}

    def resolve(self, entries: Sequence[str], listing: Listing | None = None) -> Resolution:
        """Resolve one node's entries against the folders as they are now.

        With a persistent listing (see :meth:`resolve_many`) the previous resolution of the same
        entries is returned as is when every folder it consulted is provably unchanged.
        """
        listing = listing or Listing()
        if not listing.persistent:
            return self._resolve(entries, listing)
        memo_key = tuple(entries)
        previous = self._resolved.get(memo_key)
        if previous is not None and listing.unchanged(previous[1]):
            return previous[0]
        listing.track = set()
        try:
            resolution = self._resolve(entries, listing)
            consulted = listing.track
        finally:
            listing.track = None
        self._resolved[memo_key] = (resolution, tuple(consulted))
        return resolution

    def _resolve(self, entries: Sequence[str], listing: Listing) -> Resolution:
        files: dict[str, None] = {}
        literal: set[str] = set()
        unresolved: dict[str, Unresolved] = {}
        for raw in entries:
            entry = raw.strip()
            if not entry:
                continue
            located = self._locate(entry)
            if isinstance(located, Unresolved):
                unresolved.setdefault(entry, located)
                continue
            base, rel, absolute = located
            if not is_glob(rel):
                full = os.path.join(base, rel) if rel else base
                key = full if absolute else rel
                if rel in ("", "."):
                    unresolved[entry] = Unresolved(
                        entry, "is the working directory; write '**' for its files"
                    )
                elif not self.inside(os.path.realpath(full)):
                    unresolved[entry] = Unresolved(entry, OUTSIDE_LINK)
                else:
                    files[key] = None
                    literal.add(key)
                continue
            walker = Walker(listing, base, rel.split("/"), self.inside)
            for found in walker.files():
                files[os.path.join(base, found) if absolute else found] = None
            for found, reason in walker.problems:
                key = os.path.join(base, found) if absolute else found
                unresolved.setdefault(key, Unresolved(key, reason))
        return Resolution(sorted(files), frozenset(literal), list(unresolved.values()))

    def inside(self, real: str) -> bool:
        """Whether a real path lies in the working directory (or an allowed outside folder)."""
        if self._allow_all:
            return True
        for root in self._real_roots:
            if real == root or real.startswith(root.rstrip("/") + "/"):
                return True
        return False

    def resolve_many(
        self, nodes: Mapping[str, Sequence[str]], fs_now_ns: int | None = None
    ) -> dict[str, Resolution]:
        """Resolve several nodes in one pass, listing each folder once.

        ``fs_now_ns`` (the snapshot's filesystem time) lets a node whose folders are all unchanged
        since an earlier pass keep its resolution (see :class:`Listing`); without it every folder
        is read again.
        """
        listing = Listing(self._folders, fs_now_ns) if fs_now_ns is not None else Listing()
        return {node_id: self.resolve(entries, listing) for node_id, entries in nodes.items()}

    def absolute(self, key: str) -> str:
        """The filesystem path of a resolved key."""
        return key if os.path.isabs(key) else os.path.join(self.workdir, key)

    def _locate(self, entry: str) -> tuple[str, str, bool] | Unresolved:
        """(base folder, relative pattern, is-outside) for an entry, or why it is refused."""
        if entry.startswith("~"):
            return Unresolved(entry, TILDE)
        if os.path.isabs(entry):
            normal = posixpath.normpath(entry)
            for root in (self.workdir, self._real_workdir):
                if normal == root or normal.startswith(root.rstrip("/") + "/"):
                    return self.workdir, posixpath.relpath(normal, root), False
            return self._outside(entry, normal)
        normal = posixpath.normpath(entry)
        if normal == ".." or normal.startswith("../"):
            return self._outside(entry, posixpath.normpath(posixpath.join(self.workdir, normal)))
        return self.workdir, "" if normal == "." else normal, False

    def _outside(self, entry: str, normal: str) -> tuple[str, str, bool] | Unresolved:
        allowed = self._allow_all or any(
            normal == root or normal.startswith(root.rstrip("/") + "/") for root in self._allowed
        )
        if not allowed:
            return Unresolved(entry, "outside the working directory (not allowed)")
        return "/", normal.lstrip("/"), True
