"""Our end of the :mod:`hashworker` helper process: start it, hand it a share, read its reports.

Every failure (it cannot start, dies, answers garbage or nothing within the timeout) marks the
worker dead and returns None; the snapshotter then does the share itself, so a broken helper
costs time, never a wrong record.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import select
import struct
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass

import xxhash

from freshness_magic.freshness import hashworker
from freshness_magic.freshness.hashworker import (
    COUNT,
    KEY,
    OVERRIDE,
    PLAN,
    REPORT_SIZE,
    REQUEST,
    SCAN,
)

WORKER_TIMEOUT_S = 120.0
"""A worker that neither answers nor ends this long after a scan request is given up."""
_PIPE_BYTES = 1 << 20
"""Pipe size asked for, so a 10,000-file share is sent and answered without waiting."""


@dataclass(frozen=True)
class Reports:
    """What one scan reported, column by column (see :mod:`hashworker`)."""

    indexes: tuple[int, ...]
    flags: bytes
    keys: list[tuple[int, int, int, int, int, int]]
    digests: str
    """The hex digests one after the other, :data:`hashworker.DIGEST_SIZE` characters each."""


def worker_command() -> list[str]:
    """The command that starts a :mod:`hashworker` with this interpreter and this package."""
    xxhash_dir = os.path.dirname(os.path.dirname(os.path.abspath(xxhash.__file__)))
    return [sys.executable, "-S", "-E", hashworker.__file__, xxhash_dir]


class HashWorker:
    """A running :mod:`hashworker`; dropping it (or :meth:`close`) ends the process."""

    def __init__(self, process: subprocess.Popen[bytes], timeout: float):
        assert process.stdin is not None and process.stdout is not None
        self.process = process
        self.timeout = timeout
        self.owner = os.getpid()
        """The process that started it; a forked child must not talk to it."""
        self._in = process.stdin.fileno()
        self._out = process.stdout.fileno()
        self.alive = True
        import fcntl  # POSIX only, like the helper itself (start() returns None elsewhere)

        for fd in (self._in, self._out):
            with contextlib.suppress(OSError):  # a smaller pipe only means more round trips
                fcntl.fcntl(fd, getattr(fcntl, "F_SETPIPE_SZ", 1031), _PIPE_BYTES)
        os.set_blocking(self._in, False)

    @classmethod
    def start(
        cls, argv: Sequence[str] | None = None, timeout: float = WORKER_TIMEOUT_S
    ) -> HashWorker | None:
        """Start a worker (``argv`` defaults to :func:`worker_command`); None if it cannot."""
        if os.name != "posix" or importlib.util.find_spec("fcntl") is None:
            return None
        try:
            process = subprocess.Popen(
                list(argv) if argv is not None else worker_command(),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                bufsize=0,
            )
        except OSError:
            return None
        return cls(process, timeout)

    def plan(self, folders: Sequence[tuple[str, Sequence[str]]]) -> bool:
        """Give the worker its share: (absolute folder, names) in order; forgets old keys."""
        return self._send(PLAN, hashworker.encode_plan(folders))

    def scan(self, overrides: bytes) -> bool:
        """Start a scan of the share; ``overrides`` are :data:`OVERRIDE` records (see there)."""
        return self._send(SCAN, overrides)

    def reports(self, share_size: int) -> Reports | None:
        """What the scan started last reported, or None (worker dead, stuck or garbled)."""
        head = self._receive(COUNT.size)
        if head is None:
            return None
        (count,) = COUNT.unpack(head)
        body = self._receive(count * REPORT_SIZE) if count <= share_size else None
        if body is None:
            self._dead()
            return None
        flags_at = 4 * count
        keys_at = flags_at + count
        digests_at = keys_at + KEY.size * count
        indexes = struct.unpack_from(f"<{count}I", body)
        try:
            digests = body[digests_at:].decode("ascii")
        except UnicodeDecodeError:
            self._dead()
            return None
        if indexes and max(indexes) >= share_size:
            self._dead()
            return None
        keys = list(KEY.iter_unpack(body[keys_at:digests_at]))
        return Reports(indexes, body[flags_at:keys_at], keys, digests)

    def close(self) -> None:
        """End the worker at once (it holds nothing worth waiting for) and reap it.

        In a forked child only the child's copies of the pipes are closed: the worker belongs
        to the parent.
        """
        self.alive = False
        mine = os.getpid() == self.owner
        if mine and self.process.poll() is None:
            with contextlib.suppress(OSError):
                self.process.kill()
        for stream in (self.process.stdin, self.process.stdout):
            with contextlib.suppress(OSError):
                if stream is not None:
                    stream.close()
        if mine:
            self.process.wait()

    def _dead(self) -> None:
        self.close()

    def _send(self, operation: int, body: bytes) -> bool:
        if not self.alive:
            return False
        view = memoryview(REQUEST.pack(operation, len(body)) + body)
        try:
            while view:
                if not select.select([], [self._in], [], self.timeout)[1]:
                    self._dead()
                    return False
                try:
                    view = view[os.write(self._in, view) :]
                except BlockingIOError:
                    continue
        except (OSError, ValueError):
            self._dead()
            return False
        return True

    def _receive(self, size: int) -> bytes | None:
        parts = []
        try:
            while size:
                if not select.select([self._out], [], [], self.timeout)[0]:
                    self._dead()
                    return None
                chunk = os.read(self._out, min(size, _PIPE_BYTES))
                if not chunk:
                    self._dead()
                    return None
                parts.append(chunk)
                size -= len(chunk)
        except (OSError, ValueError):
            self._dead()
            return None
        return b"".join(parts)


def override(index: int, key: Sequence[int] | None) -> bytes:
    """One :data:`OVERRIDE` record: expect ``key`` for file ``index`` (None: hash it anyway)."""
    if key is None:
        return OVERRIDE.pack(index, 0, 0, 0, 0, 0, 0, 0)
    return OVERRIDE.pack(index, 1, *key)
