"""The helper process that looks at a share of a large snapshot's files on the second core.

One Python process reads files at the speed of one core, and a thread does not help (every
system call hands the interpreter lock over). So for snapshots of many files the snapshotter
keeps this program running beside it (see :mod:`workerclient`) and gives it the files at the
end of the list while it does the others itself. The worker only reports what it saw; the
snapshotter decides every record and does itself whatever the worker could not do.

The worker remembers, per file of its share, the stat key it last reported (or was told to
expect). A scan stats each file and reports only those whose stat key differs from that, hashing
them first; a file it knows nothing of is hashed at once. So a re-check of an unchanged tree
sends back almost nothing.

Wire format (pipes, little endian). A request is :data:`REQUEST` (operation, body length) and a
body. ``PLAN``: the share, as blocks ``folder NUL name NUL name ...`` joined by two NULs; it
replaces the previous share and forgets every remembered key. ``SCAN``: :data:`OVERRIDE` records
(index, whether a key follows, the key) that replace remembered keys before the scan (no key:
"hash this one whatever its stat"); the reply is a count (:data:`COUNT`) and, for that many
reported files, in columns: their indexes (``uint32``), a flag byte each (hashed or failed), their
stat keys (:data:`KEY`) and their hex digests (:data:`DIGEST_SIZE` ASCII characters; zeros for a
failed file). Columns let the receiver build its records with ``map`` instead of a loop. The end
of its input ends the worker (its parent closed the pipe or died).

Started as a script (``python -S -E hashworker.py XXHASH_DIR``) rather than with ``-m``: that
skips importing the package, ``site`` and ``runpy``, so it is ready within about 10 ms; the
hashing code is the package's own :mod:`hashing`, found next to this file.
"""

from __future__ import annotations

import os
import struct
import sys
from collections.abc import Callable, Sequence

REQUEST = struct.Struct("<BI")
OVERRIDE = struct.Struct("<IBQQIQqq")
COUNT = struct.Struct("<I")
KEY = struct.Struct("<QQIQqq")
DIGEST_SIZE = 32
REPORT_SIZE = 4 + 1 + KEY.size + DIGEST_SIZE
"""Bytes per reported file, over the four columns."""
PLAN, SCAN = 1, 2
FAILED, HASHED = 0, 1

Key = tuple[int, int, int, int, int, int]
HashAt = Callable[[str, int], tuple[str, Key]]
_DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0)
_NO_DIGEST = "0" * DIGEST_SIZE
_ENCODING = sys.getfilesystemencoding()


def encode_plan(folders: Sequence[tuple[str, Sequence[str]]]) -> bytes:
    """The body of a ``PLAN`` request: (absolute folder, file names) in order."""
    return "\0\0".join("\0".join([folder, *names]) for folder, names in folders).encode(
        _ENCODING, "surrogateescape"
    )


def decode_plan(body: bytes) -> list[tuple[str, list[str]]]:
    """The (folder, names) of a ``PLAN`` body (inverse of :func:`encode_plan`)."""
    plan = []
    for block in body.decode(_ENCODING, "surrogateescape").split("\0\0"):
        folder, *names = block.split("\0")
        plan.append((folder, names))
    return plan


class Share:
    """The worker's side: its share of files and the stat key last reported for each."""

    def __init__(self, plan: list[tuple[str, list[str]]]):
        self.plan = plan
        self.known: list[Key | None] = [None] * sum(len(names) for _, names in plan)

    def override(self, body: bytes) -> None:
        known = self.known
        for index, has_key, *key in OVERRIDE.iter_unpack(body):
            if index < len(known):
                known[index] = tuple(key) if has_key else None

    def scan(self, hash_at: HashAt) -> bytes:
        """Report every file whose stat key is not the remembered one (hashed when possible)."""
        pack = KEY.pack
        stat = os.stat
        known = self.known
        indexes: list[int] = []
        flags = bytearray()
        keys: list[bytes] = []
        digests: list[str] = []
        failed_key = pack(0, 0, 0, 0, 0, 0)
        index = -1
        for folder, names in self.plan:
            try:
                dir_fd = os.open(folder, _DIR_FLAGS)
            except OSError:
                for _ in names:
                    index += 1
                    known[index] = None
                    indexes.append(index)
                    flags.append(FAILED)
                    keys.append(failed_key)
                    digests.append(_NO_DIGEST)
                continue
            try:
                for name in names:
                    index += 1
                    expected = known[index]
                    try:
                        if expected is not None:
                            st = stat(name, dir_fd=dir_fd)
                            if (
                                st.st_mtime_ns == expected[4]
                                and st.st_ctime_ns == expected[5]
                                and st.st_size == expected[3]
                                and st.st_ino == expected[1]
                                and st.st_mode == expected[2]
                                and st.st_dev == expected[0]
                            ):
                                continue
                        digest, key = hash_at(name, dir_fd)
                        packed = pack(*key)
                    except (OSError, ValueError, struct.error):
                        known[index] = None
                        indexes.append(index)
                        flags.append(FAILED)
                        keys.append(failed_key)
                        digests.append(_NO_DIGEST)
                        continue
                    known[index] = key
                    indexes.append(index)
                    flags.append(HASHED)
                    keys.append(packed)
                    digests.append(digest)
            finally:
                os.close(dir_fd)
        count = len(indexes)
        return b"".join(
            [
                COUNT.pack(count),
                struct.pack(f"<{count}I", *indexes),
                bytes(flags),
                b"".join(keys),
                "".join(digests).encode("ascii"),
            ]
        )


def _read_exact(fd: int, size: int) -> bytes | None:
    parts = []
    while size:
        chunk = os.read(fd, min(size, 1 << 20))
        if not chunk:
            return None
        parts.append(chunk)
        size -= len(chunk)
    return b"".join(parts)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def serve(in_fd: int, out_fd: int, hash_at: HashAt) -> None:
    """Answer requests until the input ends."""
    share = Share([])
    while True:
        head = _read_exact(in_fd, REQUEST.size)
        if head is None:
            return
        operation, length = REQUEST.unpack(head)
        body = _read_exact(in_fd, length) if length else b""
        if body is None:
            return
        if operation == PLAN:
            share = Share(decode_plan(body) if body else [])
        elif operation == SCAN:
            share.override(body)
            _write_all(out_fd, share.scan(hash_at))
        else:
            return


if __name__ == "__main__":
    import contextlib
    import importlib

    sys.path.append(sys.argv[1])  # where xxhash is installed: started without site (-S)
    hashing = importlib.import_module("hashing")  # sys.path[0] is this file's folder
    with contextlib.suppress(BrokenPipeError, KeyboardInterrupt):
        serve(sys.stdin.fileno(), sys.stdout.fileno(), hashing.hash_file_at)
