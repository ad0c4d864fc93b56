"""Resolve ``source_files`` entries (paths and globs, ``**`` included) against a working directory.

Entries are re-resolved at every check so that new and removed glob matches count as changes.
A plain path is always tracked, existing or not (so a deletion is seen; a folder named this
way is reported ``unknown`` with the advice to write ``folder/**``); a glob contributes the
regular files (or symlinks to them) it matches. Entries that leave the working directory (an
absolute path elsewhere, or ``..`` escaping it) are *unresolved* and reported ``unknown`` unless
the caller allowed them. ``*``, ``?`` and ``[..]`` never match a leading dot and ``**`` never
descends into hidden folders (``.git``, ``.freshness``), as in the shell. Symlinked folders are
followed, except into a folder that is already on the current path, so loops end.
"""

from __future__ import annotations

import fnmatch
import os
import posixpath
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from freshness_magic.freshness.statcache import RACY_WINDOW_NS

_MAGIC = re.compile(r"[*?[]")
_MAX_DEPTH = 64
"""Backstop against pathological symlink structures the ancestor check cannot see."""


def is_glob(entry: str) -> bool:
    """Whether ``entry`` contains glob syntax (``*``, ``?``, ``[``)."""
    return _MAGIC.search(entry) is not None


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


_DirKey = tuple[int, int, int, int, int]
_Entries = tuple[list[str], list[tuple[str, bool, int]]]


class _Listing:
    """Folder listings for one resolution pass (one ``scandir`` per folder and pass).

    A listing is (file names, sub-folders as (name, is_symlink, inode)); files include symlinks
    to regular files, folders include symlinks to folders; other entries are left out. With a
    ``persist`` dict (kept by the resolver between passes) a folder whose own stat is unchanged
    since an earlier pass, and not inside the racy window, reuses that listing: adding, removing
    or renaming an entry always changes the folder's mtime. Folders holding symlinks are always
    re-read (a link's target can change kind without touching the folder).
    """

    def __init__(
        self, persist: dict[str, tuple[_DirKey, _Entries, int]] | None = None, fs_now_ns: int = 0
    ) -> None:
        self._cache: dict[str, _Entries] = {}
        self._persist = persist
        self._fs_now_ns = fs_now_ns
        self._reread: set[str] = set()
        self.track: set[str] | None = None
        """When set, every folder consulted is added (what a resolution depends on)."""

    @property
    def persistent(self) -> bool:
        return self._persist is not None

    def _persisted(self, folder: str) -> tuple[_DirKey | None, _Entries | None]:
        """(the folder's key now, its persisted listing if still valid)."""
        assert self._persist is not None
        try:
            st = os.stat(folder)
        except OSError:
            return None, None
        key = (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_ctime_ns, st.st_size)
        hit = self._persist.get(folder)
        if hit is not None and hit[0] == key and key[2] < hit[2] - RACY_WINDOW_NS:
            return key, hit[1]
        return key, None

    def unchanged(self, folders: Iterable[str]) -> bool:
        """Whether every folder still has the listing persisted by an earlier pass."""
        if self._persist is None:
            return False
        for folder in folders:
            if folder in self._reread:
                return False
            if folder in self._cache:
                continue
            _key, hit = self._persisted(folder)
            if hit is None:
                return False
            self._cache[folder] = hit
        return True

    def entries(self, folder: str) -> _Entries:
        if self.track is not None:
            self.track.add(folder)
        cached = self._cache.get(folder)
        if cached is not None:
            return cached
        key: _DirKey | None = None
        if self._persist is not None:
            key, hit = self._persisted(folder)
            if hit is not None:
                self._cache[folder] = hit
                return hit
            self._reread.add(folder)
        files: list[str] = []
        dirs: list[tuple[str, bool, int]] = []
        links = False
        try:
            with os.scandir(folder) as it:
                for entry in it:
                    try:
                        if entry.is_file():
                            files.append(entry.name)
                            links = links or entry.is_symlink()
                        elif entry.is_dir():
                            link = entry.is_symlink()
                            links = links or link
                            dirs.append((entry.name, link, entry.inode()))
                        elif entry.is_symlink():
                            links = True
                    except OSError:
                        continue
        except OSError:
            pass
        result = (files, dirs)
        self._cache[folder] = result
        if self._persist is not None and key is not None:
            if links:
                self._persist.pop(folder, None)
            else:
                self._persist[folder] = (key, result, self._fs_now_ns)
        return result


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
        self._folders: dict[str, tuple[_DirKey, _Entries, int]] = {}
        self._resolved: dict[tuple[str, ...], tuple[Resolution, tuple[str, ...]]] = {}

    def resolve(self, entries: Sequence[str], listing: _Listing | None = None) -> Resolution:
        """Resolve one node's entries against the folders as they are now.

        With a persistent listing (see :meth:`resolve_many`) the previous resolution of the same
        entries is returned as is when every folder it consulted is provably unchanged.
        """
        listing = listing or _Listing()
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

    def _resolve(self, entries: Sequence[str], listing: _Listing) -> Resolution:
        files: dict[str, None] = {}
        literal: set[str] = set()
        unresolved: list[Unresolved] = []
        for raw in entries:
            entry = raw.strip()
            if not entry:
                continue
            located = self._locate(entry)
            if isinstance(located, Unresolved):
                unresolved.append(located)
                continue
            base, rel, absolute = located
            if not is_glob(rel):
                full = os.path.join(base, rel) if rel else base
                key = full if absolute else rel
                if rel in ("", "."):
                    unresolved.append(
                        Unresolved(entry, "is the working directory; write '**' for its files")
                    )
                    continue
                files[key] = None
                literal.add(key)
                continue
            for found in _match(listing, base, rel.split("/")):
                files[os.path.join(base, found) if absolute else found] = None
        return Resolution(sorted(files), frozenset(literal), unresolved)

    def resolve_many(
        self, nodes: Mapping[str, Sequence[str]], fs_now_ns: int | None = None
    ) -> dict[str, Resolution]:
        """Resolve several nodes in one pass, listing each folder once.

        ``fs_now_ns`` (the snapshot's filesystem time) lets unchanged folders reuse their listing
        from an earlier pass (see :class:`_Listing`); without it every folder is read again.
        """
        listing = _Listing(self._folders, fs_now_ns) if fs_now_ns is not None else _Listing()
        return {node_id: self.resolve(entries, listing) for node_id, entries in nodes.items()}

    def absolute(self, key: str) -> str:
        """The filesystem path of a resolved key."""
        return key if os.path.isabs(key) else os.path.join(self.workdir, key)

    def _locate(self, entry: str) -> tuple[str, str, bool] | Unresolved:
        """(base folder, relative pattern, is-outside) for an entry, or why it is refused."""
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


def _segment_matcher(segment: str) -> re.Pattern[str]:
    return re.compile(fnmatch.translate(segment))


def _match(listing: _Listing, base: str, segments: list[str]) -> Iterator[str]:
    """Relative paths of regular files under ``base`` matching the ``/``-split pattern."""
    matchers: list[re.Pattern[str] | None] = [
        None if s == "**" or not is_glob(s) else _segment_matcher(s) for s in segments
    ]
    base_key = _dir_key(base)
    yield from _walk(listing, base, "", segments, matchers, 0, [base_key] if base_key else [])


def _dir_key(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


def _walk(
    listing: _Listing,
    base: str,
    rel: str,
    segments: list[str],
    matchers: list[re.Pattern[str] | None],
    index: int,
    ancestors: list[tuple[int, int]],
) -> Iterator[str]:
    folder = os.path.join(base, rel) if rel else base
    segment = segments[index]
    last = index == len(segments) - 1
    prefix = f"{rel}/" if rel else ""
    if segment == "**":
        if last:
            yield from _all_files(listing, folder, prefix, ancestors)
            return
        yield from _walk(listing, base, rel, segments, matchers, index + 1, ancestors)
        for name, link, inode in listing.entries(folder)[1]:
            if name[0] == ".":
                continue
            key = _child_key(folder, name, link, inode, ancestors)
            if key is None:
                continue
            ancestors.append(key)
            yield from _walk(listing, base, prefix + name, segments, matchers, index, ancestors)
            ancestors.pop()
        return
    matcher = matchers[index]
    if matcher is None:
        listing.entries(folder)  # the child's existence and kind show in this folder's key
        path = os.path.join(folder, segment)
        if last:
            if os.path.isfile(path):
                yield prefix + segment
        elif os.path.isdir(path):
            key = _dir_key(path)
            if key is not None and key not in ancestors and len(ancestors) < _MAX_DEPTH:
                ancestors.append(key)
                yield from _walk(
                    listing, base, prefix + segment, segments, matchers, index + 1, ancestors
                )
                ancestors.pop()
        return
    hidden_ok = segment.startswith(".")
    files, dirs = listing.entries(folder)
    if last:
        for name in files:
            if (name[0] != "." or hidden_ok) and matcher.match(name):
                yield prefix + name
        return
    for name, link, inode in dirs:
        if (name[0] == "." and not hidden_ok) or not matcher.match(name):
            continue
        key = _child_key(folder, name, link, inode, ancestors)
        if key is None:
            continue
        ancestors.append(key)
        yield from _walk(listing, base, prefix + name, segments, matchers, index + 1, ancestors)
        ancestors.pop()


def _child_key(
    folder: str, name: str, link: bool, inode: int, ancestors: list[tuple[int, int]]
) -> tuple[int, int] | None:
    """The (dev, inode) of a subfolder, or None when entering it would loop or go too deep."""
    if len(ancestors) >= _MAX_DEPTH:
        return None
    if link:
        key = _dir_key(os.path.join(folder, name))
        if key is None or key in ancestors:
            return None
        return key
    dev = ancestors[-1][0] if ancestors else 0
    return (dev, inode)


def _all_files(
    listing: _Listing, folder: str, prefix: str, ancestors: list[tuple[int, int]]
) -> list[str]:
    """Every regular file below ``folder`` (hidden names skipped), for a trailing ``**``."""
    found: list[str] = []
    stack: list[tuple[str, str, list[tuple[int, int]]]] = [(folder, prefix, ancestors)]
    while stack:
        current, pre, chain = stack.pop()
        files, dirs = listing.entries(current)
        found.extend([pre + name for name in files if name[0] != "."])
        for name, link, inode in dirs:
            if name[0] == ".":
                continue
            key = _child_key(current, name, link, inode, chain)
            if key is not None:
                stack.append((current + "/" + name, f"{pre}{name}/", [*chain, key]))
    return found
