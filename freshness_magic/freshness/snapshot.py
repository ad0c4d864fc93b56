"""Taking snapshots: resolve entries, stat and hash the files (through the stat cache), ask git.

One snapshot covers any number of nodes: folders are listed once, each file is looked at once
(grouped by folder and opened relative to the folder's descriptor, which saves a path lookup
per file), and git runs once, in the background while files are hashed. A first look in a git
work tree takes the blob ids git's index holds for clean tracked files instead of reading them
(:mod:`.gitindex`), and while the index holds HEAD's tree (one ``git rev-parse`` names it) it
tells their git status as well, so no ``git status`` runs unless some files are untracked or
otherwise beyond the index. Hashing
stays in this process: a helper process that hashed part of the files on the second core was
measured slower than none at 20,000 and 100,000 files on a 2-core machine
(``benchmarks/bench_freshness.py``), and so was a worker process sharing a re-check's stat calls
(0.98x of none at 20,000 files, and a loss in a one-shot ``freshness-magic check``, which paid
for starting it): a re-check stats every file here.
"""

from __future__ import annotations

import errno
import os
import stat as stat_module
import struct
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import NamedTuple, Protocol, cast

from freshness_magic.freshness.baseline import (
    BLOB_LAYOUT,
    HASHED_LAYOUT,
    NONE,
    STAT,
    STAT_LAYOUT,
    Baseline,
    FileRecord,
    FileView,
    IndexMatch,
    hashed_records,
)
from freshness_magic.freshness.git import GitStatus, GitTier
from freshness_magic.freshness.gitindex import GitIndex
from freshness_magic.freshness.hashing import (
    RACY_WINDOW_NS,
    HashingError,
    StatKey,
    digest_file_at,
    pack_files_at,
)
from freshness_magic.freshness.resolve import OUTSIDE_LINK, Resolution, Resolver
from freshness_magic.freshness.statcache import StatCache, filesystem_now_ns

ResolveHook = Callable[[Mapping[str, Resolution]], None]
"""Called after resolving and before hashing (lets tests change files in between)."""


class Settled(NamedTuple):
    """What a look at files is told before it starts (``gitvouch.StatusVouch.settle``)."""

    records: FileView
    """The records of the files known unchanged, not looked at (git vouched for them): the
    snapshot's own, not copied."""
    edited: frozenset[str] = frozenset()
    """Files git found changed since the records the look would trust their stat against
    (another stat or content, or gone): they are read, whatever their stat."""


Settle = Callable[[Mapping[str, Sequence[str]], int, "set[str] | None"], Settled]
"""Given the keys of each node, the snapshot's filesystem time and the folders holding every
one of those keys (``Resolver.key_folders``; None: not known), what the look is told."""


class HashSource(Protocol):
    """Known digests (the Node State Hub): consulted on a stat-cache miss, before hashing.

    ``file_hash(key, stat_key)`` returns the digest of the workdir-relative ``key`` only if it
    is known for exactly that stat key (and not racily clean); None means "hash it yourself".
    """

    def file_hash(self, path: str, stat_key: StatKey) -> str | None: ...


HashSources = Callable[[str], HashSource | None]
"""Makes the hash source of a working directory (None: there is none). Freshness does not know
where known digests come from: the layer that composes the packages (``session.py``, a CLI
command) passes the hub's ``HubHashSource``; without one, every file is hashed here."""


_MISSING = FileRecord(existed=False, method=NONE)
_Members = list[str]
_S_IFMT, _S_IFREG = 0o170000, 0o100000
DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0)


def name_start(folder: str) -> int:
    """Where a file's name starts in its snapshot key (``folder/name``; '' is the workdir)."""
    return 1 if folder == "/" else len(folder) + 1 if folder else 0


_MTIME, _MTIME_AT = struct.Struct("<q"), 32


def _kind_name(mode: int) -> str:
    if stat_module.S_ISDIR(mode):
        return "a folder (write 'folder/**' to track the files in it)"
    if stat_module.S_ISFIFO(mode):
        return "a FIFO"
    if stat_module.S_ISSOCK(mode):
        return "a socket"
    if stat_module.S_ISCHR(mode) or stat_module.S_ISBLK(mode):
        return "a device"
    return "not a regular file"


def _known(source: HashSource, key: str, stat_key: StatKey) -> FileRecord | None:
    """The record of a file whose digest ``source`` knows; None: hash it here.

    A digest that is not hex text (a damaged store) counts as unknown.
    """
    digest = source.file_hash(key, stat_key)
    if digest is None:
        return None
    try:
        return FileRecord(True, stat_key, digest)
    except ValueError:
        return None


def _group(keys: Sequence[str]) -> dict[str, _Members]:
    """Keys grouped by folder. Sorted keys of one folder mostly follow each other, so the
    folder's list is looked up only when the folder changes."""
    groups: dict[str, _Members] = {}
    current: str | None = None
    members: _Members = []
    for key in keys:
        folder = key.rpartition("/")[0]
        if not folder and key[:1] == "/":
            folder = "/"
        if folder != current:
            members = groups.setdefault(folder, [])
            current = folder
        members.append(key)
    return groups


class Snapshotter:
    """Observes files for one working directory; keeps the stat cache between snapshots."""

    def __init__(
        self,
        resolver: Resolver,
        git: GitTier,
        state_dir: str,
        *,
        hash_size_limit: int | None = None,
        cache: StatCache | None = None,
        after_resolve: ResolveHook | None = None,
        hash_source: HashSource | None = None,
    ):
        self.resolver = resolver
        self.git = git
        self.state_dir = state_dir
        self.hash_size_limit = hash_size_limit
        self.cache = cache or StatCache()
        self.after_resolve = after_resolve
        self.hash_source = hash_source
        self._last_groups: tuple[list[str], dict[str, _Members]] | None = None
        self._lock = threading.RLock()
        self.blob_ids = False
        """Whether files are hashed as git blob ids: once records came from git's index, so
        that a file is compared with its earlier record like with like."""
        self._seeds: list[tuple[Mapping[str, FileRecord], int]] = []
        """Seeded records not yet in the stat cache, each set with its racy horizon."""
        self._seeded: set[str] = set()
        """Keys whose seeded records went to the stat cache already (:meth:`_seed_keys`)."""

    def seed(self, baseline: Baseline) -> None:
        """Fill the stat cache from a (checkpointed) baseline so a new process skips hashing.

        The records enter the cache as their files are first looked at (:meth:`_seed_cache`):
        a report that git vouches for most files looks at few of them. Snapshots sharing one
        set of records (a completion snapshot read back with no differences) are seeded once,
        at the latest time they were verified.
        """
        horizon = baseline.fs_time_ns - RACY_WINDOW_NS
        for at, (files, seen) in enumerate(self._seeds):
            if files is baseline.files:
                self._seeds[at] = (files, max(seen, horizon))
                break
        else:
            self._seeds.append((baseline.files, horizon))
        if not self.blob_ids:
            unhashed, blob_size = STAT_LAYOUT.size, BLOB_LAYOUT.size
            files = baseline.files
            self.blob_ids = any(
                len(packed) == blob_size
                for rec in (files[key] for key in files)  # one at a time: most stop at the first
                if (packed := rec[0]) is not None and len(packed) != unhashed
            )

    def _seed_cache(
        self, keys: Sequence[str] | None = None, out_of_date: frozenset[str] = frozenset()
    ) -> None:
        """Put the seeded records of ``keys`` (None: of every file) in the stat cache, in the
        order seeded: a hashed record verified outside the racy window is kept, a racy one
        forgotten (the rule of :meth:`StatCache.store`), one the cache holds stays. With
        ``keys``, the seeds of ``out_of_date`` (files known changed since) are dropped instead."""
        if not self._seeds:
            return
        if keys is not None:
            self._seeded.update(out_of_date)
            self._seed_keys(keys)
            return
        seeds, self._seeds = self._seeds, []
        done, self._seeded = self._seeded, set()
        for files, horizon in seeds:
            self._seed_files(files, horizon, done)

    def _seed_keys(self, keys: Sequence[str]) -> None:
        """:meth:`_seed_cache` for a few keys; the rest stay seeded for a later look."""
        mtime_of, unhashed = _MTIME.unpack_from, STAT_LAYOUT.size
        records = self.cache.records
        done = self._seeded
        for files, horizon in self._seeds:
            get = files.get
            for key in keys:
                if key in done:
                    continue
                rec = get(key)
                if (
                    rec is None
                    or records.get(key) is rec
                    or (packed := rec[0]) is None
                    or len(packed) == unhashed
                ):
                    continue
                if mtime_of(packed, _MTIME_AT)[0] < horizon:
                    records[key] = rec
                else:
                    records.pop(key, None)
        done.update(keys)

    def _seed_files(self, files: Mapping[str, FileRecord], horizon: int, done: set[str]) -> None:
        """:meth:`_seed_cache` for every key of ``files`` but those in ``done``."""
        mtime_of, unhashed = _MTIME.unpack_from, STAT_LAYOUT.size
        records = self.cache.records
        known = records.get
        if not records and not done:  # a new process: nothing to forget, one pass
            hashed = trusted = {
                key: rec
                for key, rec in files.items()
                if (packed := rec[0]) is not None
                and len(packed) != unhashed
                and mtime_of(packed, _MTIME_AT)[0] < horizon
            }
        else:  # a record without a digest has nothing to trust; one the cache holds stays
            hashed = {
                key: rec
                for key, rec in files.items()
                if known(key) is not rec
                and (packed := rec[0]) is not None
                and len(packed) != unhashed
                and key not in done
            }
            trusted = {  # the racy rule of StatCache.store
                key: rec for key, rec in hashed.items() if mtime_of(rec[0], _MTIME_AT)[0] < horizon
            }
        records.update(trusted)
        if len(trusted) < len(hashed):
            for key in hashed.keys() - trusted.keys():
                records.pop(key, None)

    def take(
        self,
        nodes: Mapping[str, Sequence[str]],
        kind: str,
        *,
        with_git: bool = True,
        settle: Settle | None = None,
    ) -> dict[str, Baseline]:
        """Snapshot the files of ``nodes`` (node id -> entries) as baselines of ``kind``;
        ``settle`` names the records of files not to look at (see :data:`Settle`).

        Snapshots are serialised (a widget thread may ask for a report while a step runs): the
        caches they share are never updated by two snapshots at once.
        """
        with self._lock:
            return self._take(nodes, kind, with_git=with_git, settle=settle)

    def _take(
        self,
        nodes: Mapping[str, Sequence[str]],
        kind: str,
        *,
        with_git: bool,
        settle: Settle | None = None,
    ) -> dict[str, Baseline]:
        fs_now = filesystem_now_ns(self.state_dir)
        taken_at = time.time()
        asks_git = with_git and self.git.available
        if settle is None or asks_git:
            self._seed_cache()  # every file may be looked at (and git's index read for them)
        pending = None
        try:
            resolutions = self.resolver.resolve_many(nodes, fs_now)
            if self.after_resolve is not None:
                self.after_resolve(resolutions)
            if len(resolutions) == 1:
                keys: Sequence[str] = next(iter(resolutions.values())).files
            else:
                union: dict[str, None] = {}
                for res in resolutions.values():
                    union.update(dict.fromkeys(res.files))
                keys = list(union)
            git_index = self._git_index(keys, fs_now - RACY_WINDOW_NS) if asks_git else None
            if asks_git and (git_index is None or git_index.head is None):
                # on the other core while files are read; by name for a few files (a step's)
                pending = self.git.start_status(keys)
            settled = None
            if settle is not None:
                resolved = {n: r.files for n, r in resolutions.items()}
                settled = settle(resolved, fs_now, self._key_folders(nodes, resolutions))
            records = self.observe(keys, fs_now, git_index, settled)
        except BaseException:
            if pending is not None:
                pending.cancel()
            raise
        status: GitStatus | None = None
        if pending is not None:
            status = pending.result()
        elif git_index is not None:
            status = self._status_through(git_index, records)
        baselines = {}
        folders = {  # what another process may list again from (a check's look is not kept)
            entries: self.resolver.folder_keys(entries) if kind != "current" else None
            for entries in {tuple(nodes[node_id]) for node_id in resolutions}
        }
        claim = None  # the index's entries and the files not their entry's (IndexMatch)
        if git_index is not None and kind != "current":
            claim = git_index.entries_id(), (records.keys() - git_index.matched) | git_index.recent
        for node_id, res in resolutions.items():
            # one node: the same keys, no second dict of 20,000 entries
            files = records if len(resolutions) == 1 else {k: records[k] for k in res.files}
            match = IndexMatch.of(claim[0], files, claim[1]) if claim is not None else None
            states = {}
            if status is not None:
                states = {k: v for k, v in status.entries.items() if k in files}
            baselines[node_id] = Baseline(
                node_id=node_id,
                entries=tuple(nodes[node_id]),
                kind=kind,
                taken_at=taken_at,
                fs_time_ns=fs_now,
                files=files,
                literal=res.literal,
                unresolved=list(res.unresolved),
                head=status.head if status is not None else None,
                git=status is not None,
                git_states=states,
                folders=folders[tuple(nodes[node_id])],
                index_match=match,
            )
        return baselines

    def observe(
        self,
        keys: Sequence[str],
        fs_now: int,
        git_index: GitIndex | None = None,
        settled: Settled | None = None,
    ) -> Mapping[str, FileRecord]:
        """A record per key, grouped by folder so each file is opened relative to its folder.

        The hot loop of every check: a cached record whose stat key is unchanged (and not racily
        clean) is returned as is, without reading the file. With ``git_index`` (a first capture)
        clean tracked files take their blob ids from git's index. The files in ``settled`` are
        not looked at: they get the record given there; its edited files are not given the
        seeded record to compare their stat with.
        """
        source = self.hash_source
        if source is not None:
            available = getattr(source, "available", None)
            if callable(available) and not available():
                source = None  # asked once per snapshot, not once per file
        self.blob_ids = self.blob_ids or git_index is not None
        records: dict[str, FileRecord] = {}
        if settled is not None and settled.records:  # only the others are looked at
            vouched = settled.records
            rest = [key for key in keys if key not in vouched.shared and key not in vouched.own]
            self._seed_cache(rest, out_of_date=settled.edited)
            looked: dict[str, FileRecord] = {}
            for folder, members in _group(rest).items():
                self._observe_members(folder, members, fs_now, looked, source, git_index)
            return vouched.with_own(looked)
        self._seed_cache()
        for folder, members in self._groups(keys).items():
            self._observe_members(folder, members, fs_now, records, source, git_index)
        return records

    def _key_folders(
        self, nodes: Mapping[str, Sequence[str]], resolutions: Mapping[str, Resolution]
    ) -> set[str] | None:
        """The folders holding every key of ``resolutions`` (``Resolver.key_folders``); None:
        not known for one of the nodes."""
        found: set[str] = set()
        for node_id, resolution in resolutions.items():
            folders = self.resolver.key_folders(nodes[node_id], resolution)
            if folders is None:
                return None
            found |= folders
        return found

    def _git_index(self, keys: Sequence[str], claim_before_ns: int) -> GitIndex | None:
        """git's index, when a look at ``keys`` has enough files the stat cache does not know
        to pay for reading it (a stat per file costs more than the count); the snapshot claims
        the entries of files changed before ``claim_before_ns`` (:class:`IndexMatch`)."""
        known = self.cache.records
        unknown = sum(1 for key in keys if key not in known)
        if not unknown:
            return None
        top, prefix = self.git.top_level, self.git.prefix
        return GitIndex.read(top, prefix, unknown, claim_before_ns=claim_before_ns)

    def _status_through(
        self, index: GitIndex, records: Mapping[str, FileRecord]
    ) -> GitStatus | None:
        """git's status of ``records`` as the index tells it (:meth:`GitIndex.states`), with
        one git call for the files only git can tell about, if any (None: that call failed)."""
        states, ask = index.states(records)
        if ask:
            asked = self.git.status(ask)
            if asked is None:
                return None
            states.update((key, asked.entries[key]) for key in ask if key in asked.entries)
        return GitStatus(index.head, states)

    def _observe_members(
        self,
        folder: str,
        members: _Members,
        fs_now: int,
        records: dict[str, FileRecord],
        source: HashSource | None,
        index: GitIndex | None,
    ) -> None:
        if index is not None and not index.folder_usable(folder):
            index = None
        try:
            dir_fd = os.open(self._folder_path(folder), DIR_FLAGS)
        except OSError as exc:
            failed = self._folder_failed(exc)
            for key in members:
                records[key] = failed
            return
        try:
            self._observe_folder(folder, members, dir_fd, fs_now, records, source, index)
        finally:
            os.close(dir_fd)

    def _folder_path(self, folder: str) -> str:
        """The filesystem path of a group's folder ('' is the working directory)."""
        if not folder:
            return self.resolver.workdir
        if folder.startswith("/"):
            return folder
        return self.resolver.workdir + "/" + folder

    def _groups(self, keys: Sequence[str]) -> dict[str, _Members]:
        """Keys grouped by folder; reused while the key list stays the same.

        Sorted keys of one folder mostly follow each other, so the folder's list is looked up
        only when the folder changes.
        """
        last = self._last_groups
        if last is not None and last[0] == keys:
            return last[1]
        groups = _group(keys)
        self._last_groups = (list(keys), groups)
        return groups

    def _observe_folder(
        self,
        folder: str,
        members: _Members,
        dir_fd: int,
        fs_now: int,
        records: dict[str, FileRecord],
        source: HashSource | None,
        index: GitIndex | None,
    ) -> None:
        """Records of one folder's files; new hashes enter the cache unless racily clean."""
        cached_records = self.cache.records
        cut = name_start(folder)
        plain = self.hash_size_limit is None and source is None and index is None
        if plain and not any(map(cached_records.__contains__, members)):
            hashing, names = members, [key[cut:] for key in members]  # a first look: hash all
        else:
            hashing, names = self._triage(members, cut, dir_fd, fs_now, records, source, index)
        if not hashing:
            return
        layout = BLOB_LAYOUT if self.blob_ids else HASHED_LAYOUT
        found = pack_files_at(names, dir_fd, layout, blob=self.blob_ids)
        horizon = fs_now - RACY_WINDOW_NS
        if not found.failed and found.newest_mtime_ns < horizon:  # the common case, in bulk
            made = hashed_records(cast(list[bytes], found.results))
            records.update(zip(hashing, made, strict=True))
            cached_records.update(zip(hashing, made, strict=True))
            return
        forget = cached_records.pop
        for key, name, result in zip(hashing, names, found.results, strict=True):
            if isinstance(result, OSError):
                records[key] = self._failed(key, name, dir_fd, result)
                continue
            record = FileRecord.hashed(result)
            if cast(int, record.mtime_ns) < horizon:
                cached_records[key] = record
            else:  # racily clean: hashed again at the next look
                forget(key, None)
            records[key] = record

    def _triage(
        self,
        members: _Members,
        cut: int,
        dir_fd: int,
        fs_now: int,
        records: dict[str, FileRecord],
        source: HashSource | None,
        index: GitIndex | None,
    ) -> tuple[list[str], list[str]]:
        """Record the files a stat settles (unchanged, in git's index, not hashable, known to
        ``source``); return the keys and names of those left to hash, their places in
        ``records`` held in order."""
        cache = self.cache
        cached_records = cache.records
        forget = cached_records.pop
        limit = self.hash_size_limit
        stat = os.stat
        horizon = fs_now - RACY_WINDOW_NS
        plain = limit is None and source is None and index is None
        index_blob = index.blob if index is not None else None
        get = cached_records.get
        pack_stat = STAT_LAYOUT.pack
        pack_blob = BLOB_LAYOUT.pack
        hashing: list[str] = []
        names: list[str] = []
        for key in members:
            name = key[cut:]
            cached = get(key)
            if cached is not None or not plain:
                try:
                    st = stat(name, dir_fd=dir_fd)
                except FileNotFoundError:
                    forget(key, None)
                    records[key] = _MISSING
                    continue
                except OSError as exc:
                    records[key] = FileRecord(
                        True, None, None, NONE, f"cannot stat: {exc.strerror}"
                    )
                    continue
                # A record starts with its packed stat key.
                if cached is not None and cached[0].startswith(
                    pack_stat(
                        st.st_dev, st.st_ino, st.st_mode, st.st_size, st.st_mtime_ns, st.st_ctime_ns
                    )
                ):
                    records[key] = cached
                    continue
                if (
                    index_blob is not None
                    and st.st_mode & _S_IFMT == _S_IFREG
                    and (limit is None or st.st_size <= limit)
                ):
                    blob = index_blob(key, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)
                    if blob is not None:
                        mtime = st.st_mtime_ns
                        indexed = FileRecord.hashed(
                            pack_blob(
                                st.st_dev,
                                st.st_ino,
                                st.st_mode,
                                st.st_size,
                                mtime,
                                st.st_ctime_ns,
                                blob,
                            )
                        )
                        if mtime < horizon:
                            cached_records[key] = indexed
                        else:
                            forget(key, None)
                        records[key] = indexed
                        continue
                skey = StatKey.of(st)
                if not skey.is_regular_file:
                    records[key] = FileRecord(
                        True, skey, None, NONE, f"is {_kind_name(skey.mode)}", False
                    )
                    continue
                if limit is not None and skey.size > limit:
                    records[key] = FileRecord(
                        True,
                        skey,
                        None,
                        STAT,
                        f"too large to hash ({skey.size} bytes > limit {limit}); compared by stat",
                    )
                    continue
                if source is not None and not key.startswith("/"):
                    record = _known(source, key, skey)
                    if record is not None:
                        cache.store(key, record, fs_now)
                        records[key] = record
                        continue
            hashing.append(key)
            names.append(name)
            records[key] = _MISSING  # holds the key's place in the order until it is hashed
        return hashing, names

    def _failed(self, key: str, name: str, dir_fd: int, exc: OSError) -> FileRecord:
        """The record of a file that could not be hashed; it leaves the stat cache."""
        if isinstance(exc, HashingError):
            return self._not_hashable(name, dir_fd, str(exc))
        self.cache.records.pop(key, None)
        if isinstance(exc, FileNotFoundError):
            return _MISSING
        if exc.errno == errno.ELOOP:  # a link (O_NOFOLLOW): never cached
            return self._through_link(key, name, dir_fd)
        return self._unreadable(name, dir_fd, exc)

    def _through_link(self, key: str, name: str, dir_fd: int) -> FileRecord:
        """A file reached through a symbolic link, read only if its real path is still inside.

        Resolving already left out links leading outside; this catches one changed between
        resolving and hashing, so an outside file's content is never read.
        """
        if self.resolver.tree.escapes(self.resolver.absolute(key)):
            return FileRecord(existed=True, method=NONE, note=OUTSIDE_LINK)
        try:
            digest, st = digest_file_at(name, dir_fd, blob=self.blob_ids)
        except FileNotFoundError:
            return _MISSING
        except HashingError as exc:
            return self._not_hashable(name, dir_fd, str(exc))
        except OSError as exc:
            return self._unreadable(name, dir_fd, exc)
        return FileRecord.of_stat(st, digest)

    def index_claim(self, snapshot: Baseline) -> IndexMatch | None:
        """A claim for ``snapshot`` on git's index as it is now (:class:`IndexMatch`): its
        records that hold their entry's blob id, in an entry git compares like any other and
        changed before the snapshot by the racy window (``GitIndex.holding``); None when the
        index cannot be used or most records are not their entry's."""
        if not self.git.available:
            return None
        index = GitIndex.read(self.git.top_level, self.git.prefix, with_head=False)
        if index is None:
            return None
        held = index.holding(snapshot.files, snapshot.fs_time_ns - RACY_WINDOW_NS)
        return IndexMatch.of(index.entries_id(), snapshot.files, snapshot.files.keys() - held)

    def relook(self, key: str, blob: bool) -> FileRecord | None:
        """The file at ``key`` now, digested as git's blob id (``blob``) or as xxh3_128, so a
        record from git's index is compared like with like; None when it cannot be read (the
        comparison then sees two kinds of digest and calls the file changed). Links are not
        followed here: a blob id never came from one."""
        try:
            digest, st = digest_file_at(
                self.resolver.absolute(key), follow_symlinks=False, blob=blob
            )
        except OSError:
            return None
        return FileRecord.of_stat(st, digest)

    def _folder_failed(self, exc: OSError) -> FileRecord:
        if exc.errno in (errno.ENOENT, errno.ENOTDIR):
            return _MISSING
        return FileRecord(existed=True, method=NONE, note=f"folder unreadable: {exc.strerror}")

    def _not_hashable(self, name: str, dir_fd: int, reason: str) -> FileRecord:
        try:
            key = StatKey.of(os.stat(name, dir_fd=dir_fd))
        except OSError:
            return FileRecord(existed=True, method=NONE, note=f"vanished while read: {reason}")
        if not key.is_regular_file:
            return FileRecord(True, key, None, NONE, f"is {_kind_name(key.mode)}", False)
        return FileRecord(True, key, None, STAT, f"changed while read; compared by stat: {reason}")

    def _unreadable(self, name: str, dir_fd: int, exc: OSError) -> FileRecord:
        try:
            key = StatKey.of(os.stat(name, dir_fd=dir_fd))
        except FileNotFoundError:
            return FileRecord(
                existed=True, method=NONE, note=f"vanished while read: {exc.strerror}"
            )
        except OSError as stat_exc:
            return FileRecord(existed=True, method=NONE, note=f"cannot read: {stat_exc.strerror}")
        return FileRecord(True, key, None, STAT, f"unreadable ({exc.strerror}); compared by stat")
