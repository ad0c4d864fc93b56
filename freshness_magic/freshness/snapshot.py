"""Taking snapshots: resolve entries, stat and hash the files (through the stat cache), ask git.

One snapshot covers any number of nodes: folders are listed once, each file is looked at once
(grouped by folder and opened relative to the folder's descriptor, which saves a path lookup
per file), and git runs once, in the background while files are hashed. A snapshot of many files
shares them with a :mod:`hashworker` process kept beside the snapshotter, which looks at the
files at the end of the list on the second core (see :class:`_Share`).
"""

from __future__ import annotations

import errno
import os
import re
import stat as stat_module
import threading
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import repeat
from typing import Protocol

from freshness_magic.freshness.baseline import HASH, NONE, STAT, Baseline, FileRecord
from freshness_magic.freshness.git import GitStatus, GitTier
from freshness_magic.freshness.hashing import HashingError, StatKey, hash_file_at
from freshness_magic.freshness.hashworker import DIGEST_SIZE, FAILED
from freshness_magic.freshness.resolve import Resolution, Resolver
from freshness_magic.freshness.statcache import RACY_WINDOW_NS, StatCache, filesystem_now_ns
from freshness_magic.freshness.workerclient import (
    WORKER_TIMEOUT_S,
    HashWorker,
    override,
)
from freshness_magic.gcpause import cyclic_gc_paused

ResolveHook = Callable[[Mapping[str, Resolution]], None]
"""Called after resolving and before hashing (lets tests change files in between)."""


class HashSource(Protocol):
    """Known digests (the Node State Hub): consulted on a stat-cache miss, before hashing.

    ``file_hash(key, stat_key)`` returns the digest of the workdir-relative ``key`` only if it
    is known for exactly that stat key (and not racily clean); None means "hash it yourself".
    """

    def file_hash(self, path: str, stat_key: StatKey) -> str | None: ...


WORKER_MIN_FILES = 4000
"""Snapshots of at least this many files share them with a :mod:`hashworker` process."""
WORKER_SHARE = 0.45
"""The part of a large snapshot's files given to the worker (from the end of the list)."""
MAX_WORKER_FAILURES = 2
"""After this many failed workers a snapshotter does all files itself."""

_MISSING = FileRecord(existed=False, method=NONE)
_HEX_DIGESTS = re.compile(r"[0-9a-f]*")
_Members = tuple[list[str], list[str]]
"""The files of one folder: their keys and, in the same order, their names in the folder."""
_DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0)


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


@dataclass(eq=False)
class _Share:
    """The worker's share of one list of keys, as the snapshotter sees it.

    ``expect[i]`` is the record whose stat key the worker remembers for the share's i-th file
    (None: it remembers none, so it hashes and reports the file at the next scan); ``pending``
    holds the overrides the next scan request carries (None: re-hash, for racily clean files).
    """

    groups: dict[str, _Members]
    head: list[tuple[str, _Members]]
    """What the snapshotter does itself: the files before the share (a folder may be split)."""
    folders: list[tuple[str, _Members]]
    keys: list[str]
    expect: list[FileRecord | None]
    pending: dict[int, StatKey | None] = field(default_factory=dict)

    def member(self, index: int) -> tuple[str, str, str]:
        """(folder, key, name) of the share's ``index``-th file."""
        for folder, (keys, names) in self.folders:
            if index < len(keys):
                return folder, keys[index], names[index]
            index -= len(keys)
        raise IndexError(index)


class Snapshotter:
    """Observes files for one working directory; keeps the stat cache between snapshots.

    ``worker_min_files``: snapshots of at least this many files (hashed in full, no hash source
    in use) share them with a :mod:`hashworker` process; 0 never starts one; None: the
    module's :data:`WORKER_MIN_FILES`. ``worker_argv`` replaces the worker's command (tests start
    broken ones). :meth:`close` ends the worker; so does dropping the snapshotter.
    """

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
        worker_min_files: int | None = None,
        worker_argv: Sequence[str] | None = None,
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
        self.worker_min_files = WORKER_MIN_FILES if worker_min_files is None else worker_min_files
        self.worker_argv = worker_argv
        self.worker_timeout = WORKER_TIMEOUT_S
        self.worker_failures = 0
        self._worker: HashWorker | None = None
        self._share: _Share | None = None
        self._last_size: int | None = None
        self.last_shared = 0
        """How many files of the last snapshot the worker looked at (0: none)."""

    def close(self) -> None:
        """End the worker process, if one runs (a later large snapshot starts another)."""
        with self._lock:
            worker, self._worker, self._share = self._worker, None, None
            if worker is not None:
                worker.close()

    def seed(self, baseline: Baseline) -> None:
        """Fill the stat cache from a (checkpointed) baseline so a new process skips hashing."""
        for key, rec in baseline.files.items():
            if rec.digest is not None and rec.stat is not None:
                self.cache.store(key, rec, baseline.fs_time_ns)

    def take(
        self, nodes: Mapping[str, Sequence[str]], kind: str, *, with_git: bool = True
    ) -> dict[str, Baseline]:
        """Snapshot the files of ``nodes`` (node id -> entries) as baselines of ``kind``.

        Snapshots are serialised (a widget thread may ask for a report while a step runs): the
        caches they share are never updated by two snapshots at once.
        """
        with self._lock, cyclic_gc_paused():
            return self._take(nodes, kind, with_git=with_git)

    def _take(
        self, nodes: Mapping[str, Sequence[str]], kind: str, *, with_git: bool
    ) -> dict[str, Baseline]:
        fs_now = filesystem_now_ns(self.state_dir)
        taken_at = time.time()
        if self._worker is not None and self._worker.owner != os.getpid():
            self._worker = self._share = None  # a forked copy: the worker is the parent's
        if self._worker is None and self._expect_large(nodes):
            # Started before git: while git runs, both cores are busy and starting takes longer.
            self._start_worker()  # it starts on the other core while the folders are listed
        pending = self.git.start_status() if with_git and self.git.available else None
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
            records = self.observe(keys, fs_now)
        except BaseException:
            if pending is not None:
                pending.cancel()
            raise
        status: GitStatus | None = pending.result() if pending is not None else None
        baselines = {}
        for node_id, res in resolutions.items():
            if len(resolutions) == 1 and list(records) == res.files:
                files = records  # one node, same order: no second dict of 20,000 entries
            else:
                files = {k: records[k] for k in res.files}
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
            )
        return baselines

    def observe(self, keys: Sequence[str], fs_now: int) -> dict[str, FileRecord]:
        """A record per key, grouped by folder so each file is opened relative to its folder.

        The hot loop of every check: a cached record whose stat key is unchanged (and not racily
        clean) is returned as is, without reading the file. Large snapshots give the files at the
        end to the worker and do the others meanwhile.
        """
        groups = self._groups(keys)
        source = self.hash_source
        if source is not None:
            available = getattr(source, "available", None)
            if callable(available) and not available():
                source = None  # asked once per snapshot, not once per file
        self._last_size = len(keys)
        self.last_shared = 0
        share = None
        if source is None and self.hash_size_limit is None and self._large(len(keys)):
            share = self._scan_share(groups, fs_now)
        elif self._share is None and self._worker is not None:
            self.close()  # started for a snapshot that turned out small
        records: dict[str, FileRecord] = {}
        for folder, members in groups.items() if share is None else share.head:
            self._observe_members(folder, members, fs_now, records, source)
        if share is not None:
            self._collect_share(share, fs_now, records)
        return records

    def _observe_members(
        self,
        folder: str,
        members: _Members,
        fs_now: int,
        records: dict[str, FileRecord],
        source: HashSource | None,
    ) -> None:
        try:
            dir_fd = os.open(self._folder_path(folder), _DIR_FLAGS)
        except OSError as exc:
            failed = self._folder_failed(exc)
            for key in members[0]:
                records[key] = failed
            return
        try:
            self._observe_folder(members, dir_fd, fs_now, records, source)
        finally:
            os.close(dir_fd)

    def _folder_path(self, folder: str) -> str:
        """The filesystem path of a group's folder ('' is the working directory)."""
        if not folder:
            return self.resolver.workdir
        if folder.startswith("/"):
            return folder
        return self.resolver.workdir + "/" + folder

    # -- the worker ------------------------------------------------------------------------

    def _large(self, size: int) -> bool:
        return 0 < self.worker_min_files <= size and self.worker_failures < MAX_WORKER_FAILURES

    def _expect_large(self, nodes: Mapping[str, Sequence[str]]) -> bool:
        """Whether this snapshot will likely be large (then the worker starts before resolving)."""
        if self.hash_size_limit is not None:
            return False
        if self._last_size is not None:
            return self._large(self._last_size)
        return self._large(self.worker_min_files) and any(
            "**" in entry for entries in nodes.values() for entry in entries
        )

    def _start_worker(self) -> HashWorker | None:
        worker = HashWorker.start(self.worker_argv, self.worker_timeout)
        if worker is None:
            self.worker_failures += 1
            return None
        weakref.finalize(self, worker.close)
        self._worker, self._share = worker, None
        return worker

    def _lose_worker(self) -> None:
        self.worker_failures += 1
        self.close()

    def _scan_share(self, groups: dict[str, _Members], fs_now: int) -> _Share | None:
        """Hand the worker its share of ``groups`` and start its scan; None if it cannot."""
        worker = self._worker or self._start_worker()
        if worker is None:
            return None
        share = self._share
        if share is None or share.groups is not groups:
            share = self._new_share(groups)
            if not share.keys:
                return None  # too few files to share
            plan = [(self._folder_path(folder), names) for folder, (_k, names) in share.folders]
            if not worker.plan(plan):
                self._lose_worker()
                return None
            self._share = share
        body = b"".join(override(index, key) for index, key in share.pending.items())
        share.pending = {}
        if not worker.scan(body):
            self._lose_worker()
            return None
        return share

    def _new_share(self, groups: dict[str, _Members]) -> _Share:
        """The last :data:`WORKER_SHARE` of the files of ``groups`` (one folder may be split).

        Cached records that are not racily clean become the worker's expected stat keys, so
        files already hashed are only stat-ed.
        """
        items = list(groups.items())
        wanted = int(sum(len(m[0]) for _f, m in items) * WORKER_SHARE)
        head: list[tuple[str, _Members]] = []
        folders: list[tuple[str, _Members]] = []
        for folder, (group_keys, names) in reversed(items):
            cut = max(0, len(group_keys) - wanted)
            if cut:
                head.append((folder, (group_keys[:cut], names[:cut])))
            if cut < len(group_keys):
                folders.append((folder, (group_keys[cut:], names[cut:])))
            wanted -= len(group_keys) - cut
        head.reverse()
        folders.reverse()
        keys = [key for _folder, members in folders for key in members[0]]
        trusted = self.cache.trusted
        expect: list[FileRecord | None] = [None] * len(keys)
        pending: dict[int, StatKey | None] = {}
        for index, key in enumerate(keys):
            record = trusted(key)
            if record is not None and record.digest is not None:
                expect[index] = record
                pending[index] = record.stat
        return _Share(groups, head, folders, keys, expect, pending)

    def _collect_share(self, share: _Share, fs_now: int, records: dict[str, FileRecord]) -> None:
        """Records for the share from the worker's reports (the unreported keep their record).

        Files the worker could not hash are done here; an answer that is not believable (a
        digest that is not hex, a file left out that had to be reported) costs the worker and
        the share is done here in full.
        """
        worker = self._worker
        answer = worker.reports(len(share.keys)) if worker is not None else None
        if answer is None or _HEX_DIGESTS.fullmatch(answer.digests) is None:
            self._observe_share_here(share, fs_now, records)
            return
        keys, expect, pending = share.keys, share.expect, share.pending
        indexes = answer.indexes
        cache = self.cache
        # Built with map and zip (C loops): a first snapshot gets thousands of reports.
        stat_keys = list(map(tuple.__new__, repeat(StatKey), answer.keys))
        digests = answer.digests
        hashed = list(
            map(
                tuple.__new__,
                repeat(FileRecord),
                zip(
                    repeat(True),
                    stat_keys,
                    [digests[at : at + DIGEST_SIZE] for at in range(0, len(digests), DIGEST_SIZE)],
                    repeat(HASH),
                    repeat(""),
                    repeat(True),
                ),
            )
        )
        reported = list(map(keys.__getitem__, indexes))
        cache.records.update(zip(reported, hashed, strict=True))
        cache.verified.update(dict.fromkeys(reported, fs_now))
        for index, record in zip(indexes, hashed, strict=True):
            expect[index] = record
        horizon = fs_now - RACY_WINDOW_NS
        for index, stat_key in zip(indexes, stat_keys, strict=True):
            if stat_key[4] >= horizon:
                pending[index] = None  # racily clean: the next scan hashes it again
        failed: set[int] = set()
        if FAILED in answer.flags:
            failed = {i for i, flag in zip(indexes, answer.flags, strict=True) if flag == FAILED}
            for index in failed:
                expect[index] = None
                cache.forget(keys[index])
        if expect.count(None) != len(failed):  # it left out a file it had to report
            for key in keys:
                cache.forget(key)
            self._observe_share_here(share, fs_now, records)
            return
        # Unreported files keep their record; the Nones are failures, filled in below.
        records.update(zip(keys, expect, strict=True))  # type: ignore[arg-type]
        self.last_shared = len(keys)
        redo: dict[str, _Members] = {}
        for index in sorted(failed):
            folder, key, name = share.member(index)
            again = redo.setdefault(folder, ([], []))
            again[0].append(key)
            again[1].append(name)
        for folder, members in redo.items():
            self._observe_members(folder, members, fs_now, records, None)

    def _observe_share_here(
        self, share: _Share, fs_now: int, records: dict[str, FileRecord]
    ) -> None:
        self._lose_worker()
        for folder, members in share.folders:
            self._observe_members(folder, members, fs_now, records, None)

    def _groups(self, keys: Sequence[str]) -> dict[str, _Members]:
        """Keys grouped by folder; reused while the key list stays the same.

        Sorted keys of one folder mostly follow each other, so the folder's lists are looked up
        only when the folder changes.
        """
        last = self._last_groups
        if last is not None and last[0] == keys:
            return last[1]
        groups: dict[str, _Members] = {}
        current: str | None = None
        group_keys: list[str] = []
        group_names: list[str] = []
        for key in keys:
            folder, _, name = key.rpartition("/")
            if not folder and key[:1] == "/":
                folder = "/"
            if folder != current:
                members = groups.get(folder)
                if members is None:
                    groups[folder] = members = ([], [])
                group_keys, group_names = members
                current = folder
            group_keys.append(key)
            group_names.append(name)
        self._last_groups = (list(keys), groups)
        return groups

    def _observe_folder(
        self,
        members: _Members,
        dir_fd: int,
        fs_now: int,
        records: dict[str, FileRecord],
        source: HashSource | None,
    ) -> None:
        cache = self.cache
        cached_records, verified = cache.records, cache.verified
        limit = self.hash_size_limit
        stat = os.stat
        racy_ns = RACY_WINDOW_NS
        plain = limit is None and source is None
        get = cached_records.get
        for key, name in zip(*members, strict=True):
            cached = get(key)
            if cached is not None or not plain:
                try:
                    st = stat(name, dir_fd=dir_fd)
                except FileNotFoundError:
                    cache.forget(key)
                    records[key] = _MISSING
                    continue
                except OSError as exc:
                    records[key] = FileRecord(
                        True, None, None, NONE, f"cannot stat: {exc.strerror}"
                    )
                    continue
                if cached is not None:
                    known = cached.stat
                    mtime_ns = st.st_mtime_ns
                    if (
                        mtime_ns == known[4]
                        and mtime_ns < verified[key] - racy_ns
                        and st.st_ctime_ns == known[5]
                        and st.st_size == known[3]
                        and st.st_ino == known[1]
                        and st.st_mode == known[2]
                        and st.st_dev == known[0]
                    ):
                        records[key] = cached
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
                    known = source.file_hash(key, skey)
                    if known is not None:
                        record = FileRecord(True, skey, known)
                        cached_records[key] = record
                        verified[key] = fs_now
                        records[key] = record
                        continue
            try:
                digest, skey = hash_file_at(name, dir_fd)
            except FileNotFoundError:
                cache.forget(key)
                records[key] = _MISSING
                continue
            except HashingError as exc:
                records[key] = self._not_hashable(name, dir_fd, str(exc))
                continue
            except OSError as exc:
                records[key] = self._unreadable(name, dir_fd, exc)
                continue
            record = tuple.__new__(FileRecord, (True, skey, digest, HASH, "", True))
            cached_records[key] = record
            verified[key] = fs_now  # verified at this snapshot's time
            records[key] = record

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
