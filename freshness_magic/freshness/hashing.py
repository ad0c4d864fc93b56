"""Content hashes and stat keys: the one place files are fingerprinted (freshness and the hub).

Hashes are xxh3_128 hex digests, or a git blob id (SHA-1) for a file whose snapshot record came
from git's index (:mod:`.gitindex`), so that it is hashed again the same way. A file is read
with a single ``read`` when small and streamed in chunks when large; when the file's stat key
changes while a large file is being read the read is repeated, so a hash always belongs to one
consistent version of the file.

A small file read whole by one ``read`` is not stat-ed again afterwards: there is no window in
which half of it could be old. A write racing that read leaves the file's mtime inside the racy
window of the snapshot that hashed it, and every user of these hashes (freshness stat cache,
evidence snapshot, hub) re-hashes such racily clean entries on the next look.
"""

from __future__ import annotations

import hashlib
import os
import stat as stat_module
import struct
from dataclasses import dataclass
from typing import Any, NamedTuple

import xxhash

RACY_WINDOW_NS = 2_000_000_000
"""A file whose mtime lies this close to the time its hash was taken is hashed again even when
its stat key matches: a write in the same timestamp tick could have kept size and mtime. Two
seconds cover the coarsest common timestamp granularity (FAT, some network mounts). The one
racy window of freshness and evidence."""
SMALL_FILE_BYTES = 1 << 20
CHUNK_BYTES = 1 << 20
MAX_REREADS = 3
BLOB_ID_BYTES = 20
"""A git blob id (SHA-1); an xxh3_128 digest has 16 bytes."""


class StatKey(NamedTuple):
    """What a stat cache compares for equality to decide that a file is unchanged."""

    dev: int
    ino: int
    mode: int
    size: int
    mtime_ns: int
    ctime_ns: int

    @classmethod
    def of(cls, st: os.stat_result) -> StatKey:
        # tuple.__new__ skips the generated keyword-parsing __new__ (hot loop: 20,000 files).
        return tuple.__new__(
            cls, (st.st_dev, st.st_ino, st.st_mode, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
        )

    @property
    def is_regular_file(self) -> bool:
        return stat_module.S_ISREG(self.mode)


@dataclass(frozen=True, slots=True)
class FileHash:
    """A file's digest together with the stat key of the version that was hashed."""

    digest: str
    stat: StatKey


class HashingError(OSError):
    """The file changed on every attempt to read it, or is not a regular file."""


def hash_bytes(data: bytes) -> str:
    """xxh3_128 hex digest of ``data``."""
    return xxhash.xxh3_128_hexdigest(data)


def blob_id(data: bytes) -> bytes:
    """git's blob id of ``data``: SHA-1 of a ``blob <size>`` header and the content."""
    return hashlib.sha1(b"blob %d\0%b" % (len(data), data), usedforsecurity=False).digest()


def _digest_rest(fd: int, first: bytes, digest: Any = xxhash.xxh3_128_digest) -> bytes:
    """Digest of ``first`` followed by the rest of the file (it grew after its fstat)."""
    chunks = [first]
    while True:
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        chunks.append(chunk)
    return digest(b"".join(chunks))


def _digest_fd(fd: int, size: int) -> bytes:
    if size <= SMALL_FILE_BYTES:
        # One read of size + 1 bytes: a short read of a regular file means end of file.
        data = os.read(fd, size + 1)
        if len(data) <= size:
            return xxhash.xxh3_128_digest(data)
        return _digest_rest(fd, data)
    hasher = xxhash.xxh3_128()
    while True:
        chunk = os.read(fd, CHUNK_BYTES)
        if not chunk:
            break
        hasher.update(chunk)
    return hasher.digest()


def _blob_fd(fd: int, size: int) -> bytes | None:
    """Blob id of a large open file of ``size`` bytes, streamed; None when the size in its
    header would lie (the file changed size while read: read it again)."""
    hasher = hashlib.sha1(b"blob %d\0" % size, usedforsecurity=False)
    read = 0
    while chunk := os.read(fd, CHUNK_BYTES):
        read += len(chunk)
        hasher.update(chunk)
    return hasher.digest() if read == size else None


_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NONBLOCK", 0)
"""O_NONBLOCK: opening a FIFO named like a source file must not wait for a writer."""
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


_S_IFMT, _S_IFREG = 0o170000, 0o100000


def hash_file_at(
    path: str | os.PathLike[str], dir_fd: int | None = None, *, follow_symlinks: bool = True
) -> tuple[str, StatKey]:
    """(digest, stat key) of a regular file: :func:`hash_file` without the result object.

    ``dir_fd`` makes ``path`` relative to an open folder, which saves the path lookup per
    file. Same rules and errors as ``hash_file``.
    """
    raw, st = digest_file_at(path, dir_fd, follow_symlinks=follow_symlinks)
    return raw.hex(), StatKey.of(st)


_NOFOLLOW_FLAGS = _OPEN_FLAGS | _NOFOLLOW


def digest_file_at(
    path: str | os.PathLike[str],
    dir_fd: int | None = None,
    *,
    follow_symlinks: bool = True,
    blob: bool = False,
) -> tuple[bytes, os.stat_result]:
    """(raw digest, stat of the hashed version) of a regular file: :func:`hash_file` for a
    caller that keeps digests packed (a snapshot). Same rules and errors as :func:`hash_file`.
    ``blob``: the digest is git's blob id (:func:`blob_id`) instead of xxh3_128.
    """
    flags = _OPEN_FLAGS if follow_symlinks else _NOFOLLOW_FLAGS
    digest_of = blob_id if blob else xxhash.xxh3_128_digest
    for _ in range(MAX_REREADS):
        fd = os.open(path, flags, dir_fd=dir_fd)
        try:
            before = os.fstat(fd)
            if before.st_mode & _S_IFMT != _S_IFREG:
                raise HashingError(f"{os.fspath(path)}: not a regular file")
            size = before.st_size
            if size <= SMALL_FILE_BYTES:
                data = os.read(fd, size + 1)
                if len(data) <= size:
                    return digest_of(data), before
                digest: bytes | None = _digest_rest(fd, data, digest_of)
            else:
                digest = _blob_fd(fd, size) if blob else _digest_fd(fd, size)
            after = os.fstat(fd)
        finally:
            os.close(fd)
        if (
            digest is not None
            and before.st_mtime_ns == after.st_mtime_ns
            and before.st_ctime_ns == after.st_ctime_ns
            and before.st_size == after.st_size
            and before.st_ino == after.st_ino
        ):
            return digest, after
    raise HashingError(f"{os.fspath(path)}: changed while being read {MAX_REREADS} times")


class Packed(NamedTuple):
    """What :func:`pack_files_at` found in one folder."""

    results: list[bytes | OSError]
    """Per name, in order: the packed stat key and digest, or the error it raised."""
    failed: int
    """How many of the results are errors."""
    newest_mtime_ns: int
    """The latest mtime among the packed files (0 when none): whether any is racily clean."""


def pack_files_at(
    names: list[str], dir_fd: int, layout: struct.Struct, *, blob: bool = False
) -> Packed:
    """:func:`digest_file_at` of each of ``names`` in the open folder ``dir_fd``, links not
    followed, each packed by ``layout`` as (dev, ino, mode, size, mtime_ns, ctime_ns, digest).

    The loop of a first snapshot (100,000 files): a small regular file costs its four system
    calls and one ``pack``, and every other file goes through :func:`digest_file_at`.
    """
    results: list[bytes | OSError] = []
    append = results.append
    pack = layout.pack
    open_, fstat, read, close = os.open, os.fstat, os.read, os.close
    digest = blob_id if blob else xxhash.xxh3_128_digest
    failed = newest = 0
    for name in names:
        try:
            fd = open_(name, _NOFOLLOW_FLAGS, dir_fd=dir_fd)
        except OSError as exc:
            append(exc)
            failed += 1
            continue
        try:
            st = fstat(fd)
            size = st.st_size
            if st.st_mode & _S_IFMT == _S_IFREG and size <= SMALL_FILE_BYTES:
                data = read(fd, size + 1)
                if len(data) <= size:  # one read to end of file: one version (module doc)
                    mtime = st.st_mtime_ns
                    if mtime > newest:
                        newest = mtime
                    append(
                        pack(
                            st.st_dev,
                            st.st_ino,
                            st.st_mode,
                            size,
                            mtime,
                            st.st_ctime_ns,
                            digest(data),
                        )
                    )
                    continue
        except OSError as exc:
            append(exc)
            failed += 1
            continue
        finally:
            close(fd)
        try:
            raw, st = digest_file_at(name, dir_fd, follow_symlinks=False, blob=blob)
        except OSError as exc:
            append(exc)
            failed += 1
            continue
        mtime = st.st_mtime_ns
        newest = max(newest, mtime)
        append(pack(st.st_dev, st.st_ino, st.st_mode, st.st_size, mtime, st.st_ctime_ns, raw))
    return Packed(results, failed, newest)


def read_hashed(path: str | os.PathLike[str], max_bytes: int) -> tuple[bytes | None, str, StatKey]:
    """(content, digest, stat key) of a regular file; the content only up to ``max_bytes``.

    For a reader that needs the bytes too (the hub parses what it hashes): one open and one
    read instead of hashing and then reading again. The content of a larger file is None (it
    is hashed in chunks). Same rules and errors as :func:`hash_file`.
    """
    for _ in range(MAX_REREADS):
        fd = os.open(path, _OPEN_FLAGS)
        try:
            before = os.fstat(fd)
            if before.st_mode & _S_IFMT != _S_IFREG:
                raise HashingError(f"{os.fspath(path)}: not a regular file")
            size = before.st_size
            data: bytes | None = None
            if size > max_bytes:
                digest = _digest_fd(fd, size).hex()
            else:
                data = os.read(fd, size + 1)
                if len(data) <= size:  # one read to end of file: one version (module doc)
                    return data, xxhash.xxh3_128_hexdigest(data), StatKey.of(before)
                chunks = [data]
                while chunk := os.read(fd, CHUNK_BYTES):
                    chunks.append(chunk)
                data = b"".join(chunks)
                digest = xxhash.xxh3_128_hexdigest(data)
            after = os.fstat(fd)
        finally:
            os.close(fd)
        if (
            before.st_mtime_ns == after.st_mtime_ns
            and before.st_ctime_ns == after.st_ctime_ns
            and before.st_size == after.st_size
            and before.st_ino == after.st_ino
        ):
            return data, digest, StatKey.of(after)
    raise HashingError(f"{os.fspath(path)}: changed while being read {MAX_REREADS} times")


def hash_file(
    path: str | os.PathLike[str], *, follow_symlinks: bool = True, dir_fd: int | None = None
) -> FileHash:
    """Hash a regular file; raises ``OSError`` (incl. :class:`HashingError`) when it cannot.

    ``dir_fd``: ``path`` is relative to this open directory (saves the path lookup per file).
    """
    digest, key = hash_file_at(path, dir_fd, follow_symlinks=follow_symlinks)
    return FileHash(digest, key)
