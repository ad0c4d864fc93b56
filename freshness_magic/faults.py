"""The named write sites of state files, and the test hook that injects a fault at one of them.

Every writer of a state file (``atomicio``'s, the run journal's) calls :func:`reached` just
before it writes. Nothing happens unless the environment names a trace file
(:data:`TRACE_ENV`): then each reached site appends one line ``<site>\\t<path>`` to it, and
:data:`FAULT_ENV` = ``N:ACTION`` makes the N-th traced write (counted from the trace's lines, so
across threads) do ACTION instead of writing:

- ``kill``: SIGKILL this process (a crash between the write before and this one);
- an errno name (``ENOSPC``, ``EROFS``, ``EACCES``, ``EDQUOT``): raise that :class:`OSError`
  for the path, as a full disk, a read-only folder or a lost permission would.

The environment carries the hook, not a module variable: it reaches every thread and a
subprocess (as git's ``GIT_TEST_*`` variables do), and a process without it pays one lookup per
write. Tests and ``benchmarks/bench_reliability.py`` use it to enumerate a step's writes and to
stop the driver between any two of them.
"""

from __future__ import annotations

import errno
import os
import signal

TRACE_ENV = "FRESHNESS_MAGIC_TEST_WRITES"
"""A file to which every reached write site appends a line (tests only)."""
FAULT_ENV = "FRESHNESS_MAGIC_TEST_FAULT"
"""``N:ACTION``: what the N-th traced write does instead of writing (tests only)."""

ATOMIC = "atomic"
"""A whole file replaced (``atomicio.write_atomic``: status, evidence files, snapshots, ...)."""
APPEND = "append"
"""A line appended to a log (``atomicio.append_jsonl``: ``events.jsonl``, ``evidence.jsonl``)."""
JOURNAL = "journal"
"""A record appended to the run's journal (the commit point of a step)."""


def reached(site: str, path: str | os.PathLike[str]) -> None:
    """Called by a writer just before it writes ``path``; see the module docstring."""
    trace = os.environ.get(TRACE_ENV)
    if not trace:
        return
    line = f"{site}\t{os.fspath(path)}\n".encode("utf-8", "surrogateescape")
    fd = os.open(trace, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
        end = os.lseek(fd, 0, os.SEEK_CUR)  # this write's own end, whatever other threads do
        number, _, action = os.environ.get(FAULT_ENV, "").partition(":")
        if not number.isdigit():
            return
        count = os.pread(fd, end, 0).count(b"\n")
    finally:
        os.close(fd)
    if count != int(number):
        return
    if action == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    code = getattr(errno, action, None)
    if isinstance(code, int):
        raise OSError(code, os.strerror(code), os.fspath(path))
