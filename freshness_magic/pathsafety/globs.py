"""Walking folders for input globs: folder listings and the matcher of one glob.

:class:`Listing` lists each folder once per resolution pass (and remembers which folders are
unchanged between passes); :class:`Walker` matches one glob's segments against the listings and
reports what it must not or cannot look into, each reported ``unknown`` with its reason:

- a symbolic link (file or folder) whose real path is outside the work tree is never read and
  never followed (``src/r -> /`` is one line of report, not a walk of ``/proc``);
- a symlinked folder inside is followed, except into a folder already on the current path
  (compared by device and inode), so loops end; a depth bound backs this up;
- a folder that cannot be listed (permission denied) is ``folder unreadable: <why>``;
- a run of ``**`` segments is one ``**`` (same matches; each extra one multiplied the work).
"""

from __future__ import annotations

import errno
import fnmatch
import os
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import NamedTuple

from freshness_magic.pathsafety import is_glob
from freshness_magic.pathsafety.tree import OUTSIDE_LINK, UNREADABLE, WorkTree

_MAX_DEPTH = 64
"""Backstop against pathological symlink structures the ancestor check cannot see."""


DirKey = tuple[int, int, int, int, int]
Entries = tuple[list[str], list[tuple[str, bool, int]], frozenset[str]]
_NO_LINKS: frozenset[str] = frozenset()


class FolderMemo(NamedTuple):
    """A folder as an earlier pass listed it: its key, that pass's filesystem time, its file
    names (joined by NUL: one string per folder, not one per file) and its sub-folders."""

    key: DirKey
    listed_at: int
    files: str
    dirs: list[tuple[str, bool, int]]

    def recorded(self) -> tuple[int, ...]:
        """The key and the listing time (what :meth:`Listing.changed_since` takes)."""
        return (*self.key, self.listed_at)


class Listing:
    """Folder listings for one resolution pass (one ``scandir`` per folder and pass).

    A listing is (file names, sub-folders as (name, is_symlink, inode), the names of the files
    that are symlinks); files include symlinks to regular files, folders include symlinks to
    folders; other entries are left out. A folder that cannot be listed (other than missing) is
    empty, with its error in ``errors``. With a ``persist`` dict (kept by the resolver between
    passes) the stat key of every listed folder is remembered, so that :meth:`unchanged` can
    tell that a folder still has the entries it had: adding, removing or renaming an entry
    always changes the folder's mtime, unless inside the racy window (``racy_ns`` before the
    pass's filesystem time ``fs_now_ns``, given by the caller). The names are remembered too
    (one string per folder), so a pass that finds some folders changed lists only those and
    takes the others from memory: a tool writing one output file no longer makes every folder
    of a ``**`` be listed again. Folders holding symlinks, or that cannot be listed, are never
    remembered (a link's target can change kind without touching the folder).
    """

    def __init__(
        self,
        persist: dict[str, FolderMemo] | None = None,
        fs_now_ns: int = 0,
        racy_ns: int = 0,
    ) -> None:
        self._cache: dict[str, Entries] = {}
        self._persist = persist
        self._fs_now_ns = fs_now_ns
        self._racy_ns = racy_ns
        self._same: set[str] = set()
        self.errors: dict[str, str] = {}
        """Folder -> why it could not be listed (permission denied, ...)."""
        self.track: set[str] | None = None
        """When set, every folder consulted is added (what a resolution depends on)."""
        self.held: Mapping[str, Entries] | None = None
        """What folders known unchanged held for the resolution under way (an earlier
        process's record of the same entries, ``Resolver.remember``): taken instead of a
        listing, by that resolution only (another's entries may need what it left out)."""
        self.served: set[str] = set()
        """The folders :attr:`held` gave, for the resolution under way."""

    @property
    def persistent(self) -> bool:
        return self._persist is not None

    def unchanged(self, folders: Iterable[str]) -> bool:
        """Whether every folder provably has the entries it had at an earlier pass."""
        if self._persist is None:
            return False
        return all(self._remembered(folder) is not None for folder in folders)

    def changed_since(self, folders: Mapping[str, Sequence[int]]) -> list[str]:
        """The folders of ``folders`` (folder -> its key, then the filesystem time it was listed
        at: what :meth:`FolderMemo.recorded` gives, kept by another process) that may not hold
        the entries they had then, by the rule of :meth:`unchanged` (all of them without a
        persistent listing)."""
        if self._persist is None:
            return list(folders)
        changed = []
        for folder, recorded in folders.items():
            key = _folder_key(folder)
            if key is None or key != tuple(recorded[:5]) or key[2] >= recorded[5] - self._racy_ns:
                changed.append(folder)
        return changed

    def _remembered(self, folder: str) -> FolderMemo | None:
        """The memo of ``folder`` when the folder provably has not changed since (one stat per
        folder and pass, however many nodes share it); None when it must be listed."""
        memo = self._persist.get(folder) if self._persist is not None else None
        if memo is None:
            return None
        if folder not in self._same:
            key = _folder_key(folder)
            if key is None or key != memo.key or key[2] >= memo.listed_at - self._racy_ns:
                return None
            self._same.add(folder)
        return memo

    def entries(self, folder: str) -> Entries:
        if self.track is not None:
            self.track.add(folder)
        cached = self._cache.get(folder)
        if cached is not None:
            return cached
        memo = self._remembered(folder)
        if memo is not None:
            names = memo.files.split("\0") if memo.files else []
            remembered = (names, memo.dirs, _NO_LINKS)
            self._cache[folder] = remembered
            return remembered
        held = self.held.get(folder) if self.held is not None else None
        if held is not None:
            self.served.add(folder)
            return held
        key = _folder_key(folder) if self._persist is not None else None
        files: list[str] = []
        dirs: list[tuple[str, bool, int]] = []
        linked: list[str] = []
        links = False
        try:
            with os.scandir(folder) as it:
                for entry in it:
                    try:
                        if entry.is_file(follow_symlinks=False):  # most entries: one test
                            files.append(entry.name)
                        elif entry.is_file():
                            files.append(entry.name)
                            if entry.is_symlink():
                                linked.append(entry.name)
                        elif entry.is_dir():
                            link = entry.is_symlink()
                            links = links or link
                            dirs.append((entry.name, link, entry.inode()))
                        elif entry.is_symlink():
                            links = True
                    except OSError:
                        continue
        except OSError as exc:
            if exc.errno not in (errno.ENOENT, errno.ENOTDIR):
                self.errors[folder] = exc.strerror or str(exc)
                key = None
        result = (files, dirs, frozenset(linked) if linked else _NO_LINKS)
        self._cache[folder] = result
        if self._persist is not None:
            if links or linked or key is None:
                self._persist.pop(folder, None)
            else:
                self._persist[folder] = FolderMemo(key, self._fs_now_ns, "\0".join(files), dirs)
        return result


def collapse(segments: list[str]) -> list[str]:
    """The segments with each run of ``**`` made one (same matches, a fraction of the cost)."""
    out: list[str] = []
    for segment in segments:
        if segment == "**" and out and out[-1] == "**":
            continue
        out.append(segment)
    return out


def _folder_key(folder: str) -> DirKey | None:
    """What changes when a folder's entries change: (dev, inode, mtime, ctime, size)."""
    try:
        st = os.stat(folder)
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_ctime_ns, st.st_size)


def _dir_key(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


_Chain = list[tuple[int, int]]


class Walker:
    """One glob's walk below ``base``: the files it matches and what it could not look into.

    ``problems`` maps relative paths to reasons for symlinks whose real path is outside (never
    read, never followed) and for folders that cannot be listed; both are reported ``unknown``.
    """

    def __init__(self, listing: Listing, base: str, segments: list[str], tree: WorkTree) -> None:
        self.listing = listing
        self.base = base
        self.segments = collapse(segments)
        self.matchers: list[re.Pattern[str] | None] = [
            None if s == "**" or not is_glob(s) else re.compile(fnmatch.translate(s))
            for s in self.segments
        ]
        self.tree = tree
        self.problems: dict[str, str] = {}
        """Relative path -> why it was not read (each path once)."""

    def files(self) -> list[str]:
        """Relative paths of the regular files under ``base`` matching the pattern (a lone
        ``**`` without a generator per level: 100,000 paths pass through no ``yield``)."""
        base_key = _dir_key(self.base)
        ancestors = [base_key] if base_key else []
        if self.segments == ["**"]:
            return self._all_files(self.base, "", ancestors)
        return list(self._walk("", 0, ancestors))

    def _entries(self, folder: str, rel: str) -> Entries:
        entries = self.listing.entries(folder)
        error = self.listing.errors.get(folder)
        if error is not None:
            self.problems.setdefault(rel or ".", f"{UNREADABLE}: {error}")
        return entries

    def _escapes(self, path: str, rel: str) -> bool:
        """Whether the symlink ``path`` points outside (then it is reported, never read)."""
        if not self.tree.escapes(path):
            return False
        self.problems.setdefault(rel, OUTSIDE_LINK)
        return True

    def _walk(self, rel: str, index: int, ancestors: _Chain) -> Iterator[str]:
        folder = os.path.join(self.base, rel) if rel else self.base
        segment = self.segments[index]
        last = index == len(self.segments) - 1
        prefix = f"{rel}/" if rel else ""
        if segment == "**":
            if last:
                yield from self._all_files(folder, prefix, ancestors)
                return
            yield from self._walk(rel, index + 1, ancestors)
            for name, link, inode in self._entries(folder, rel)[1]:
                if name[0] == ".":
                    continue
                key = self._child_key(folder, prefix + name, link, inode, ancestors)
                if key is None:
                    continue
                ancestors.append(key)
                yield from self._walk(prefix + name, index, ancestors)
                ancestors.pop()
            return
        matcher = self.matchers[index]
        if matcher is None:
            self._entries(folder, rel)  # the child's existence and kind show in this folder's key
            path = os.path.join(folder, segment)
            if os.path.islink(path) and self._escapes(path, prefix + segment):
                return
            if last:
                if os.path.isfile(path):
                    yield prefix + segment
            elif os.path.isdir(path):
                key = _dir_key(path)
                if key is not None and key not in ancestors and len(ancestors) < _MAX_DEPTH:
                    ancestors.append(key)
                    yield from self._walk(prefix + segment, index + 1, ancestors)
                    ancestors.pop()
            return
        hidden_ok = segment.startswith(".")
        files, dirs, linked = self._entries(folder, rel)
        if last:
            for name in files:
                if (name[0] != "." or hidden_ok) and matcher.match(name):
                    if (
                        linked
                        and name in linked
                        and self._escapes(folder + "/" + name, prefix + name)
                    ):
                        continue
                    yield prefix + name
            return
        for name, link, inode in dirs:
            if (name[0] == "." and not hidden_ok) or not matcher.match(name):
                continue
            key = self._child_key(folder, prefix + name, link, inode, ancestors)
            if key is None:
                continue
            ancestors.append(key)
            yield from self._walk(prefix + name, index + 1, ancestors)
            ancestors.pop()

    def _child_key(
        self, folder: str, rel: str, link: bool, inode: int, ancestors: _Chain
    ) -> tuple[int, int] | None:
        """The (dev, inode) of a subfolder; None when entering it would escape, loop or go deep."""
        if len(ancestors) >= _MAX_DEPTH:
            return None
        if link:
            path = folder + "/" + rel.rpartition("/")[2]
            if self._escapes(path, rel):
                return None
            key = _dir_key(path)
            if key is None or key in ancestors:
                return None
            return key
        dev = ancestors[-1][0] if ancestors else 0
        return (dev, inode)

    def _all_files(self, folder: str, prefix: str, ancestors: _Chain) -> list[str]:
        """Every regular file below ``folder`` (hidden names skipped), for a trailing ``**``."""
        found: list[str] = []
        stack: list[tuple[str, str, _Chain]] = [(folder, prefix, ancestors)]
        while stack:
            current, pre, chain = stack.pop()
            files, dirs, linked = self._entries(current, pre.rstrip("/"))
            if linked:
                files = [
                    name
                    for name in files
                    if name not in linked or not self._escapes(current + "/" + name, pre + name)
                ]
            found.extend([pre + name for name in files if name[0] != "."])
            for name, link, inode in dirs:
                if name[0] == ".":
                    continue
                key = self._child_key(current, pre + name, link, inode, chain)
                if key is not None:
                    stack.append((current + "/" + name, f"{pre}{name}/", [*chain, key]))
        return found
