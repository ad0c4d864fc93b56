"""Taking snapshots: resolve entries, stat and hash the files (through the stat cache), ask git.

One snapshot covers any number of nodes: folders are listed once, each file is looked at once
(grouped by folder and opened relative to the folder's descriptor, which saves a path lookup
per file), and git runs once, in the background while files are hashed.
"""

from __future__ import annotations

import errno
import os
import stat as stat_module
import time
from collections.abc import Callable, Mapping, Sequence

from freshness_magic.freshness.baseline import HASH, NONE, STAT, Baseline, FileRecord
from freshness_magic.freshness.git import GitStatus, GitTier
from freshness_magic.freshness.hashing import HashingError, StatKey, hash_file
from freshness_magic.freshness.resolve import Resolution, Resolver
from freshness_magic.freshness.statcache import StatCache, filesystem_now_ns

ResolveHook = Callable[[Mapping[str, Resolution]], None]
"""Called after resolving and before hashing (lets tests change files in between)."""

_MISSING = FileRecord(existed=False, method=NONE)
_DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0)


def _kind_name(mode: int) -> str:
    if stat_module.S_ISDIR(mode):
        return "a folder"
    if stat_module.S_ISFIFO(mode):
        return "a FIFO"
    if stat_module.S_ISSOCK(mode):
        return "a socket"
    if stat_module.S_ISCHR(mode) or stat_module.S_ISBLK(mode):
        return "a device"
    return "not a regular file"


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
    ):
        self.resolver = resolver
        self.git = git
        self.state_dir = state_dir
        self.hash_size_limit = hash_size_limit
        self.cache = cache or StatCache()
        self.after_resolve = after_resolve

    def seed(self, baseline: Baseline) -> None:
        """Fill the stat cache from a (checkpointed) baseline so a new process skips hashing."""
        for key, rec in baseline.files.items():
            if rec.digest is not None and rec.stat is not None:
                self.cache.store(
                    self.resolver.absolute(key), rec.stat, rec.digest, baseline.fs_time_ns
                )

    def take(
        self, nodes: Mapping[str, Sequence[str]], kind: str, *, with_git: bool = True
    ) -> dict[str, Baseline]:
        """Snapshot the files of ``nodes`` (node id -> entries) as baselines of ``kind``."""
        fs_now = filesystem_now_ns(self.state_dir)
        taken_at = time.time()
        pending = self.git.start_status() if with_git and self.git.available else None
        resolutions = self.resolver.resolve_many(nodes)
        if self.after_resolve is not None:
            self.after_resolve(resolutions)
        keys: dict[str, None] = {}
        for res in resolutions.values():
            keys.update(dict.fromkeys(res.files))
        records = self.observe(list(keys), fs_now)
        status: GitStatus | None = pending.result() if pending is not None else None
        if status is not None:
            records = {
                k: r.with_git(status.state(k)) if r.existed and not os.path.isabs(k) else r
                for k, r in records.items()
            }
        return {
            node_id: Baseline(
                node_id=node_id,
                entries=tuple(nodes[node_id]),
                kind=kind,
                taken_at=taken_at,
                fs_time_ns=fs_now,
                files={k: records[k] for k in res.files},
                literal=res.literal,
                unresolved=list(res.unresolved),
                head=status.head if status is not None else None,
                git=status is not None,
            )
            for node_id, res in resolutions.items()
        }

    def observe(self, keys: Sequence[str], fs_now: int) -> dict[str, FileRecord]:
        """A record per key, grouped by folder so each file is opened relative to its folder."""
        groups: dict[str, list[tuple[str, str]]] = {}
        for key in keys:
            folder, _, name = self.resolver.absolute(key).rpartition("/")
            groups.setdefault(folder or "/", []).append((key, name))
        records: dict[str, FileRecord] = {}
        for folder, members in groups.items():
            try:
                dir_fd = os.open(folder, _DIR_FLAGS)
            except OSError as exc:
                for key, _name in members:
                    records[key] = self._folder_failed(exc)
                continue
            try:
                for key, name in members:
                    records[key] = self._observe_one(folder + "/" + name, name, dir_fd, fs_now)
            finally:
                os.close(dir_fd)
        return records

    def _folder_failed(self, exc: OSError) -> FileRecord:
        if exc.errno in (errno.ENOENT, errno.ENOTDIR):
            return _MISSING
        return FileRecord(existed=True, method=NONE, note=f"folder unreadable: {exc.strerror}")

    def _observe_one(self, path: str, name: str, dir_fd: int, fs_now: int) -> FileRecord:
        cache = self.cache
        limit = self.hash_size_limit
        cached_entry = cache.has(path)
        if cached_entry or limit is not None:
            try:
                key = StatKey.of(os.stat(name, dir_fd=dir_fd))
            except FileNotFoundError:
                cache.forget(path)
                return _MISSING
            except OSError as exc:
                return FileRecord(existed=True, method=NONE, note=f"cannot stat: {exc.strerror}")
            if not key.is_regular_file:
                return FileRecord(True, key, None, NONE, f"is {_kind_name(key.mode)}", False)
            if limit is not None and key.size > limit:
                return FileRecord(
                    True,
                    key,
                    None,
                    STAT,
                    f"too large to hash ({key.size} bytes > limit {limit}); compared by stat",
                )
            digest = cache.lookup(path, key) if cached_entry else None
            if digest is not None:
                return FileRecord(True, key, digest)
        try:
            fh = hash_file(name, dir_fd=dir_fd)
        except FileNotFoundError:
            cache.forget(path)
            return _MISSING
        except HashingError as exc:
            return self._not_hashable(name, dir_fd, str(exc))
        except OSError as exc:
            return self._unreadable(name, dir_fd, exc)
        cache.store(path, fh.stat, fh.digest, fs_now)
        return FileRecord(True, fh.stat, fh.digest)

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


__all__ = ["HASH", "NONE", "STAT", "Snapshotter"]
