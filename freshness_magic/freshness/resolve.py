"""Resolve ``source_files`` entries (paths and globs, ``**`` included) against a working directory.

Entries are re-resolved at every check so that new and removed glob matches count as changes.
A plain path is always tracked, existing or not (so a deletion is seen; a folder named this
way is reported ``unknown`` with the advice to write ``folder/**``); a glob contributes the
regular files (or symlinks to them) it matches. ``*``, ``?`` and ``[..]`` never match a leading
dot and ``**`` never descends into hidden folders (``.git``, ``.freshness``), as in the shell.

What may be read is decided by :mod:`freshness_magic.pathsafety` (real paths inside the work
tree, symlinked folders never followed out of it nor around a loop, repeated ``**`` counted
once, unreadable folders reported): its refusals become :class:`Unresolved` entries, reported
``unknown`` with the reason. This module adds what freshness needs on top: one
:class:`Resolution` per node, and reuse of a resolution whose folders did not change.
"""

from __future__ import annotations

import os
from bisect import bisect_left
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import islice

from freshness_magic.freshness.hashing import RACY_WINDOW_NS
from freshness_magic.pathsafety import (
    OUTSIDE_LINK,
    FolderMemo,
    Listing,
    Refused,
    Walker,
    WorkTree,
    is_glob,
)

__all__ = ["OUTSIDE_LINK", "Resolution", "Resolver", "Unresolved", "is_glob"]

Unresolved = Refused
"""An entry that could not be resolved to files, and why (reported as ``unknown``)."""


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


_Held = tuple[list[str], list[tuple[str, bool, int]], frozenset[str]]
"""A folder's entries as a listing gives them: file names, sub-folders (name, link, inode) and
the names of files that are links."""
_NO_LINKS: frozenset[str] = frozenset()


class _Recorded:
    """A resolution another process made and the folders it rests on (``Resolver.remember``);
    its sorted key list is made once, when first used."""

    def __init__(
        self,
        folders: dict[str, tuple[int, ...]],
        files: Iterable[str],
        literal: frozenset[str],
        unresolved: Sequence[Unresolved],
    ):
        self.folders = folders
        self._files = files
        self._literal = literal
        self._unresolved = unresolved
        self._made: Resolution | None = None

    @property
    def literal_keys(self) -> frozenset[str]:
        """The keys the entries name as plain paths (tracked whether they exist or not)."""
        return self._literal

    def resolution(self) -> Resolution:
        if self._made is None:
            self._made = Resolution(sorted(self._files), self._literal, list(self._unresolved))
        return self._made

    def held(self, workdir: str, changed: Sequence[str], files: bool = True) -> dict[str, _Held]:
        """What each recorded folder but ``changed`` held for these entries: the files found in
        it (literal paths left out: they are tracked whether a glob finds them or not; none at
        all without ``files``) and the recorded folders in it, none a link (a folder holding a
        link is never recorded). The entries find the same files there as in a listing: the
        names left out are ones no entry matched or walked into."""
        skip = set(changed)
        found: dict[str, tuple[list[str], list[tuple[str, bool, int]]]] = {
            folder: ([], []) for folder in self.folders if folder not in skip
        }
        for folder, key in self.folders.items():
            parent, _, name = folder.rpartition("/")
            place = found.get(parent or "/")
            if place is not None and name:
                place[1].append((name, False, key[1]))
        if files:
            inside = workdir + "/"
            literal = self._literal
            for path in self._files:
                cut = path.rfind("/")
                if path[:1] == "/":
                    folder = path[:cut] or "/"
                else:
                    folder = inside + path[:cut] if cut >= 0 else workdir
                place = found.get(folder)
                if place is not None and path not in literal:
                    place[0].append(path[cut + 1 :])
        return {folder: (names, dirs, _NO_LINKS) for folder, (names, dirs) in found.items()}

    def files_in(self, workdir: str, folder: str) -> list[str]:
        """The recorded keys of the files directly in ``folder`` (found by bisecting the sorted
        keys: the keys below a folder are one run of them)."""
        if folder == workdir:
            prefix = ""
        elif folder.startswith(workdir + "/"):
            prefix = folder[len(workdir) + 1 :] + "/"
        else:  # outside the work tree: keys are absolute
            prefix = folder.rstrip("/") + "/"
        keys = self.resolution().files
        if not prefix:
            return [key for key in keys if "/" not in key]
        start = bisect_left(keys, prefix)
        below = []
        for key in islice(keys, start, None):
            if not key.startswith(prefix):
                break
            below.append(key)
        cut = len(prefix)
        return [key for key in below if "/" not in key[cut:]]


class Resolver:
    """Resolves entries against ``workdir``; ``allow_outside`` (True, or folders) admits others."""

    def __init__(
        self, workdir: str | os.PathLike[str], allow_outside: bool | Iterable[str] = False
    ):
        self.tree = WorkTree(workdir, allow_outside)
        self.workdir = self.tree.workdir
        self._folders: dict[str, FolderMemo] = {}
        self._resolved: dict[tuple[str, ...], tuple[Resolution, tuple[str, ...]]] = {}
        self._recorded: dict[tuple[str, ...], _Recorded] = {}
        self._served: dict[tuple[str, ...], dict[str, tuple[int, ...]]] = {}

    def remember(
        self,
        entries: Sequence[str],
        folders: Mapping[str, Sequence[int]],
        files: Iterable[str],
        literal: frozenset[str],
        unresolved: Sequence[Unresolved],
    ) -> None:
        """Take a resolution of ``entries`` that another process made (a checkpointed snapshot:
        its keys ``files``, ``literal`` and ``unresolved``) with the folders it rests on
        (:meth:`folder_keys`): a pass uses it, without listing a folder, while none of them
        changed. ``files`` is read only then."""
        keys = {folder: tuple(key) for folder, key in folders.items()}
        self._recorded[tuple(entries)] = _Recorded(keys, files, literal, unresolved)

    def folder_keys(self, entries: Sequence[str]) -> dict[str, tuple[int, ...]] | None:
        """The folders the resolution of ``entries`` by the pass just made rests on, each with
        its key and the filesystem time it was listed at (what :meth:`remember` takes); None
        when one of them is not remembered (it holds links or could not be listed) or the
        pass did not remember folders (no filesystem time given)."""
        memo_key = tuple(entries)
        recorded = self._recorded.get(memo_key)
        if recorded is not None:
            return recorded.folders
        previous = self._resolved.get(memo_key)
        if previous is None:
            return None
        served = self._served.get(memo_key, {})
        found: dict[str, tuple[int, ...]] = {}
        for folder in previous[1]:
            key = served.get(folder)
            if key is None:
                memo = self._folders.get(folder)
                if memo is None:
                    return None
                key = memo.recorded()
            found[folder] = key
        return found

    def key_folders(self, entries: Sequence[str], resolution: Resolution) -> set[str] | None:
        """The folders (workdir-relative, ``''`` the workdir) that hold every key of
        ``resolution``, the pass just made of ``entries``, and maybe no key: those it rests on
        (:meth:`folder_keys`) and those of its literal paths. None when that is not known, or
        a key or folder lies outside the workdir."""
        rests_on = self.folder_keys(entries)
        if rests_on is None:
            return None
        inside = self.workdir + "/"
        found: set[str] = set()
        for folder in rests_on:
            if folder == self.workdir:
                found.add("")
            elif folder.startswith(inside):
                found.add(folder[len(inside) :])
            else:
                return None
        for key in resolution.literal:
            if key.startswith("/"):
                return None
            found.add(key.rpartition("/")[0])
        return found

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
            self._recorded.pop(memo_key, None)
            return previous[0]
        recorded = self._recorded.pop(memo_key, None)
        if recorded is not None:
            changed = listing.changed_since(recorded.folders)
            if not changed:
                self._recorded[memo_key] = recorded
                return recorded.resolution()
            # only the changed are listed; the others give their sub-folders, and their files
            # only when the listed folders show that the files differ
            listing.held = recorded.held(self.workdir, changed, files=False)
            resolution, consulted, served = self._walk(entries, listing)
            if self._same(recorded, resolution, consulted, served):
                resolution = recorded.resolution()
            else:
                listing.held = recorded.held(self.workdir, changed)
                resolution, consulted, served = self._walk(entries, listing)
        else:
            resolution, consulted, served = self._walk(entries, listing)
        self._resolved[memo_key] = (resolution, tuple(consulted))
        if recorded is not None and served:
            self._served[memo_key] = {folder: recorded.folders[folder] for folder in served}
        else:
            self._served.pop(memo_key, None)
        return resolution

    def _walk(
        self, entries: Sequence[str], listing: Listing
    ) -> tuple[Resolution, set[str], set[str]]:
        """A resolution by ``listing`` (its :attr:`~Listing.held` taken, then cleared) with the
        folders it consulted and those the held entries served."""
        listing.track = set()
        listing.served = set()
        try:
            return self._resolve(entries, listing), listing.track, listing.served
        finally:
            listing.track = None
            listing.held = None
            listing.served = set()

    def _same(
        self, recorded: _Recorded, walked: Resolution, consulted: set[str], served: set[str]
    ) -> bool:
        """Whether a walk whose unchanged folders gave no files (``walked``) shows that the
        entries still resolve to the recorded files, so no folder's files are gathered.

        A folder is reached the same way whatever the files of the folders on its path (a walk
        enters folders by their names), so the unchanged folders it reached still give the
        recorded files. What remains to compare: every recorded folder reached again (none
        removed on the way), the same refusals, and in the folders listed again exactly the
        recorded files (a new folder's files, if any, make a difference)."""
        if (
            not recorded.folders.keys() <= consulted
            or walked.literal != recorded.literal_keys
            or walked.unresolved != recorded.resolution().unresolved
        ):
            return False
        expected = set(walked.literal)
        for folder in consulted - served:
            if folder in recorded.folders:
                expected.update(recorded.files_in(self.workdir, folder))
        return len(walked.files) == len(expected) and expected.issuperset(walked.files)

    def _resolve(self, entries: Sequence[str], listing: Listing) -> Resolution:
        files: dict[str, None] = {}
        literal: set[str] = set()
        unresolved: dict[str, Unresolved] = {}
        for raw in entries:
            entry = raw.strip()
            if not entry:
                continue
            located = self.tree.locate(entry)
            if isinstance(located, Refused):
                unresolved.setdefault(entry, located)
                continue
            if not is_glob(located.rel):
                refused = self.tree.check_path(entry, located)
                if refused is not None:
                    unresolved[entry] = refused
                else:
                    key = self.tree.key(located, located.rel)
                    files[key] = None
                    literal.add(key)
                continue
            walker = Walker(listing, located.base, located.rel.split("/"), self.tree)
            if located.outside:
                files.update(dict.fromkeys(self.tree.key(located, f) for f in walker.files()))
            else:  # inside, a file's key is its relative path (100,000 of them: no call each)
                files.update(dict.fromkeys(walker.files()))
            for found, reason in walker.problems.items():
                key = self.tree.key(located, found)
                unresolved.setdefault(key, Unresolved(key, reason))
        return Resolution(sorted(files), frozenset(literal), list(unresolved.values()))

    def resolve_many(
        self, nodes: Mapping[str, Sequence[str]], fs_now_ns: int | None = None
    ) -> dict[str, Resolution]:
        """Resolve several nodes in one pass, listing each folder once.

        ``fs_now_ns`` (the snapshot's filesystem time) lets a node whose folders are all unchanged
        since an earlier pass keep its resolution (see :class:`Listing`); without it every folder
        is read again.
        """
        listing = (
            Listing(self._folders, fs_now_ns, RACY_WINDOW_NS)
            if fs_now_ns is not None
            else Listing()
        )
        return {node_id: self.resolve(entries, listing) for node_id, entries in nodes.items()}

    def absolute(self, key: str) -> str:
        """The filesystem path of a resolved key."""
        return self.tree.absolute(key)
