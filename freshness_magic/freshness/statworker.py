"""A second process that stats half of a large re-check's files, so a check uses both cores.

A re-check of an unchanged tree is one ``stat`` per file, and in Python that call costs about
2 µs (it builds a stat result of a dozen objects): on 100,000 files the calls alone take 1.3x
``git status``, which stats on several threads in C. Threads do not help here (the GIL changes
hands around every call and costs more than it saves), so a worker process stats the second half
of the folders while this process does the first, and answers with one packed stat key per file.
The snapshot compares those keys with its cache and looks at any file whose key differs itself,
through the same path as every other file, so the worker only ever saves time.

Used only where it wins (``benchmarks/bench_freshness.py``): two or more cores, and a look at
:data:`MIN_FILES` files or more that the stat cache mostly knows (a first capture hashes every
file and gains nothing). A first look through git's index stays on one core: it needs only a
stat per clean file, and with no git process either it is within the one-core goal (sharing it
saved 10% at 100,000 files but made the capture a two-core one). A worker that fails or dies
is closed and the snapshot does its half itself; the snapshotter then works without one.

The protocol, over the worker's stdin and stdout: a request is an 8-byte little-endian length,
then groups joined by two NUL bytes, each a folder's path and its file names joined by one NUL
(names are never empty, so two NULs only part groups). The answer is an 8-byte length, then
:data:`KEY_SIZE` bytes per name in order: the packed stat key, or zeros when the stat failed.
"""

from __future__ import annotations

import contextlib
import os
import struct
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import IO, Any, NamedTuple

from freshness_magic.freshness.baseline import STAT_LAYOUT

MIN_FILES = 10_000
"""Fewest files a look hands half of to the worker (below, starting the request costs more)."""
_S_IFMT, _S_IFREG = 0o170000, 0o100000
KEY_SIZE = STAT_LAYOUT.size
FAILED = bytes(KEY_SIZE)
"""The key of a file the worker could not stat (no real file has inode and mode 0)."""
_LENGTH = struct.Struct("<Q")
DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0)


def encode_request(groups: Sequence[tuple[str, Sequence[str]]]) -> bytes:
    """The request for ``groups`` of (folder path, file names)."""
    fsencode = os.fsencode
    return b"\0\0".join(b"\0".join(map(fsencode, (folder, *names))) for folder, names in groups)


def stat_keys(request: bytes) -> bytes:
    """The answer to ``request``: each name's packed stat key (followed links), in order."""
    pack, stat = STAT_LAYOUT.pack, os.stat
    out = bytearray()
    for group in request.split(b"\0\0") if request else ():
        folder, *names = group.split(b"\0")
        try:
            dir_fd = os.open(folder, DIR_FLAGS)
        except OSError:
            out += FAILED * len(names)
            continue
        try:
            for name in names:
                try:
                    st = stat(name, dir_fd=dir_fd)
                except OSError:
                    out += FAILED
                    continue
                out += pack(
                    st.st_dev, st.st_ino, st.st_mode, st.st_size, st.st_mtime_ns, st.st_ctime_ns
                )
        finally:
            os.close(dir_fd)
    return bytes(out)


def name_start(folder: str) -> int:
    """Where a file's name starts in its snapshot key (``folder/name``; '' is the workdir)."""
    return 1 if folder == "/" else len(folder) + 1 if folder else 0


class Share(NamedTuple):
    """One look shared with the worker: folders this process looks at, folders the worker
    stats, where each of theirs starts in the answer, how many files it has, and the request."""

    mine: list[tuple[str, list[str]]]
    theirs: list[tuple[str, list[str]]]
    offsets: dict[str, int]
    their_files: int
    request: bytes


def share(groups: Mapping[str, list[str]], count: int, folder_path: Callable[[str], str]) -> Share:
    """Split ``groups`` (folder -> keys, ``count`` keys in all) in two halves by files: the
    second half of the folders goes to the worker (``folder_path`` gives a folder's path)."""
    folders = list(groups.items())
    half, seen, split = count // 2, 0, len(folders)
    for index, (_, members) in enumerate(folders):
        if seen >= half:
            split = index
            break
        seen += len(members)
    theirs = folders[split:]
    offsets, offset = {}, 0
    for folder, members in theirs:
        offsets[folder] = offset
        offset += len(members) * KEY_SIZE
    cuts = [name_start(folder) for folder, _ in theirs]
    request = encode_request(
        [
            (folder_path(folder), [key[cut:] for key in members])
            for (folder, members), cut in zip(theirs, cuts, strict=True)
        ]
    )
    return Share(folders[:split], theirs, offsets, count - seen, request)


def take_unchanged(
    members: list[str],
    answer: bytes,
    offset: int,
    cache: Mapping[str, Any],
    records: dict[str, Any],
    hold: object,
) -> list[str]:
    """Put in ``records`` each cached record whose stat key the worker saw unchanged (its key is
    at ``offset`` in ``answer``); return the other keys, which the snapshot looks at itself.
    Their places in ``records`` are held by ``hold`` so that ``records`` keeps ``members``'
    order (a one-node snapshot then uses it as it is instead of copying it in order)."""
    get = cache.get
    changed: list[str] = []
    for key in members:
        cached = get(key)
        end = offset + KEY_SIZE
        if (
            cached is not None
            and cached[0] is not None
            and cached[0].startswith(answer[offset:end])
        ):
            records[key] = cached
        else:
            records[key] = hold
            changed.append(key)
        offset = end
    return changed


def _read_exactly(stream: IO[bytes], size: int) -> bytes | None:
    data = stream.read(size)
    return data if data is not None and len(data) == size else None


def serve(requests: IO[bytes], answers: IO[bytes]) -> None:
    """Answer requests until the other end closes the pipe."""
    while True:
        header = _read_exactly(requests, _LENGTH.size)
        if header is None:
            return
        request = _read_exactly(requests, _LENGTH.unpack(header)[0])
        if request is None:
            return
        answer = stat_keys(request)
        answers.write(_LENGTH.pack(len(answer)) + answer)
        answers.flush()


def worth_a_worker() -> bool:
    """Whether this process may use two cores."""
    try:
        return len(os.sched_getaffinity(0)) >= 2
    except AttributeError:  # no sched_getaffinity (macOS)
        return (os.cpu_count() or 1) >= 2


class StatWorker:
    """The worker process of one snapshotter, started on first use."""

    def __init__(self) -> None:
        self._process: subprocess.Popen[bytes] | None = None
        self.broken = False

    def send(self, request: bytes) -> bool:
        """Hand ``request`` to the worker (started if needed); False when it cannot take it."""
        if self.broken:
            return False
        try:
            if self._process is None:
                self._process = subprocess.Popen(
                    [sys.executable, "-m", __name__],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.DEVNULL,
                )
            stdin = self._process.stdin
            assert stdin is not None
            stdin.write(_LENGTH.pack(len(request)) + request)
            stdin.flush()
        except OSError:
            self.close()
            return False
        return True

    def receive(self, expected_keys: int) -> bytes | None:
        """The answer to the request sent; None (and the worker closed) when it fails."""
        process = self._process
        if process is None or process.stdout is None:
            return None
        try:
            header = _read_exactly(process.stdout, _LENGTH.size)
            answer = None
            if header is not None and _LENGTH.unpack(header)[0] == expected_keys * KEY_SIZE:
                answer = _read_exactly(process.stdout, expected_keys * KEY_SIZE)
        except OSError:
            answer = None
        if answer is None:
            self.close()
        return answer

    def close(self) -> None:
        """Stop the worker; the snapshotter goes on without one."""
        self.broken = True
        process, self._process = self._process, None
        if process is None:
            return
        for stream in (process.stdin, process.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()
        process.kill()
        process.wait()

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None


if __name__ == "__main__":
    serve(sys.stdin.buffer, sys.stdout.buffer)
