"""One driver per run directory: an exclusive lock (a dead driver's tool is reaped by
:func:`freshness_magic.engine.handlers.tool.reap_survivors`, called under this lock).

Whoever drives a run (CLI, notebook, Python API) holds ``driver.lock`` in its run directory with
an OS lock (``fcntl.flock`` where it exists, else an exclusive-create file with the holder's pid);
the file names the holder's pid, host and program (:func:`program`: a Jupyter kernel, IPython,
the CLI, another Python process) so a second driver's error and ``status`` can say who it is
(a file from before ``program`` was written reads as an unnamed process), and a clean release
adds ``released``. The kernel drops an flock when its process dies, so a dead driver's lock is
taken over without a step; the fallback takes over a lock whose pid is no longer alive on this
host. Within one process the lock
is shared: resuming a run again in the same process (a notebook cell, a script) does not block on
itself, and the object that opened it last drives it; an older one is refused from then on
(:meth:`~.store.RunStore.check_driver`), so two objects never write one run. Readers
(``status``, ``evidence``, ``check``) never take it.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
import threading
import time
import weakref
from pathlib import Path
from typing import Any

from freshness_magic import pathsafety
from freshness_magic.atomicio import loads_bounded
from freshness_magic.errors import RunError

try:
    import fcntl
except ImportError:
    fcntl = None  # type: ignore[assignment]

LOCK_FILE = "driver.lock"
PGID_FILE = "pgid"


def pid_alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, killed and not yet reaped by its parent, does not: the
    kernel already dropped its locks)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            return handle.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except (OSError, IndexError):
        return True


class HeldLock:
    """An open, locked lock file; closing the descriptor releases the lock."""

    def __init__(self, fd: int, path: Path, info: dict[str, Any]) -> None:
        self.fd = fd
        self.path = path
        self.driver: weakref.ref[object] | None = None
        """The object of this process that drives the run now: the one that opened it last."""
        self._finalizer = weakref.finalize(self, _release, fd, path, fcntl is None, info)

    def release(self) -> None:
        self._finalizer()

    def renew(self) -> None:
        """Lock the file again after it was removed (with its run directory) while held, so
        that no other process takes a new one; RunBusyError if one already has. Nothing to do
        while the file held is still the one at the path."""
        with contextlib.suppress(OSError):
            if os.stat(self.path).st_ino == os.fstat(self.fd).st_ino:
                return
        fd, info = _lock_fd(self.path)
        old = self._finalizer.detach()
        if old is not None:
            with contextlib.suppress(OSError):
                os.close(old[2][0])
        self.fd = fd
        self._finalizer = weakref.finalize(self, _release, fd, self.path, fcntl is None, info)


def _release(fd: int, path: Path, by_file: bool, info: dict[str, Any]) -> None:
    """Close the lock; a clean release also writes ``released`` (epoch seconds) into the file
    first, while still holding it: a holder that lives on (a kernel after ``%pipeline reset``)
    is then not named as the driver. A holder that dies writes nothing and is found dead by
    its pid, as before. Only the process that locked writes (not a forked child's copy)."""
    if not by_file and info.get("pid") == os.getpid():
        with contextlib.suppress(OSError):
            _write_holder(fd, {**info, "released": time.time()})
    with contextlib.suppress(OSError):
        os.close(fd)
    if by_file:
        with contextlib.suppress(OSError):
            path.unlink()


class RunLocks:
    """The run directory locks this process holds, shared by every Run object on one folder."""

    def __init__(self) -> None:
        self._held: weakref.WeakValueDictionary[Path, HeldLock] = weakref.WeakValueDictionary()
        self._guard = threading.Lock()

    def acquire(self, run_dir: Path) -> tuple[HeldLock, bool]:
        """The lock of ``run_dir`` and whether it was taken now (False: shared with another
        Run object of this process).

        RunError naming the holder's pid and host when another live process drives the run.
        """
        path = run_dir.resolve() / LOCK_FILE
        with self._guard:
            held = self._held.get(path)
            if held is not None:
                return held, False
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, info = _lock_fd(path)
            held = HeldLock(fd, path, info)
            self._held[path] = held
            return held, True


def _holder(path: Path) -> dict[str, Any]:
    try:
        data = loads_bounded(path.read_text(encoding="utf-8") or "{}")
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


PROGRAMS = {
    "ipykernel": "an IPython kernel",
    "ipython": "an IPython session",
    "freshness-magic": "freshness-magic",
    "python": "a Python process",
}
"""The values of ``program`` in ``driver.lock`` and how messages name them."""

NOTEBOOK_PROGRAMS = frozenset({"ipykernel", "ipython"})
"""Holders where ``%pipeline`` drives runs: one may hold a run open idle between actions."""


def program() -> str:
    """What kind of process this is, for ``driver.lock`` (a key of :data:`PROGRAMS`): a Jupyter
    kernel keeps a run open between cells, so whoever finds it locked is told where to act.
    Read from what is already imported: nothing is imported to find out."""
    if "ipykernel" in sys.modules:
        return "ipykernel"
    ipython = sys.modules.get("IPython")
    if ipython is not None and getattr(ipython, "get_ipython", lambda: None)() is not None:
        return "ipython"
    if "freshness_magic.cli" in sys.modules:
        return "freshness-magic"
    return "python"


def program_name(holder: dict[str, Any]) -> str | None:
    """How a message names the program of a ``driver.lock`` record; None when the record does
    not say (an older file) or says something unknown."""
    return PROGRAMS.get(str(holder.get("program")))


class RunBusyError(RunError):
    """Another live process holds the run directory's lock; ``holder`` is its ``driver.lock``
    record (pid, host, since, and program when it wrote one), ``run_dir`` the directory."""

    def __init__(self, message: str, run_dir: Path, holder: dict[str, Any]) -> None:
        super().__init__(message)
        self.run_dir = run_dir
        self.holder = holder


def _busy(path: Path) -> RunBusyError:
    """The refusal, naming the holder (which may take a moment to write its name after locking;
    until then the file holds nothing or a previous, dead holder)."""
    who = _holder(path)
    for _ in range(40):
        pid = who.get("pid")
        written = isinstance(pid, int) and "released" not in who  # the holder wrote its name
        if written and (who.get("host") != socket.gethostname() or pid_alive(int(pid or 0))):
            break
        time.sleep(0.025)
        who = _holder(path)
    name = program_name(who)
    named = f"{name}, " if name else ""
    return RunBusyError(
        f"run directory {path.parent} is driven by another process ({named}pid "
        f"{who.get('pid', '?')} on host {who.get('host', '?')}); wait for it to finish or stop "
        "it — status, evidence and check still work",
        path.parent,
        who,
    )


def _lock_fd(path: Path) -> tuple[int, dict[str, Any]]:
    """Open and lock ``path`` and write the holder's pid, host and program into it; the
    descriptor and what was written."""
    if fcntl is not None:
        fd = pathsafety.open_for_write(path, os.O_RDWR | os.O_CREAT)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise _busy(path) from None
    else:
        fd = _create_exclusive(path)
    info = {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "since": time.time(),
        "program": program(),
    }
    _write_holder(fd, info)
    return fd, info


def _write_holder(fd: int, info: dict[str, Any]) -> None:
    data = (json.dumps(info, sort_keys=True) + "\n").encode("utf-8")
    os.lseek(fd, 0, os.SEEK_SET)
    os.write(fd, data)
    os.ftruncate(fd, len(data))


def _create_exclusive(path: Path) -> int:
    for _ in range(2):
        try:
            return pathsafety.open_for_write(path, os.O_RDWR | os.O_CREAT | os.O_EXCL)
        except FileExistsError:
            who = _holder(path)
            pid = who.get("pid")
            same_host = who.get("host") == socket.gethostname()
            if isinstance(pid, int) and same_host and not pid_alive(pid):
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()
                continue
            raise _busy(path) from None
    raise _busy(path)


PROCESS_LOCKS = RunLocks()
"""This process's run directory locks (a lock is per process, so its table is too)."""


def released_cleanly(run_dir: Path) -> bool:
    """Whether the last driver of ``run_dir`` let go of its lock itself (it wrote ``released``),
    rather than dying with it held (a kill): what a node left started then means differs."""
    return "released" in _holder(run_dir / LOCK_FILE)


def live_driver(run_dir: Path) -> dict[str, Any] | None:
    """Who drives ``run_dir`` right now, read without taking the lock: the holder's pid, host,
    ``since`` (epoch seconds) and ``program`` (when it wrote one) when its process is alive on
    this host, else None.

    A lock let go of cleanly says so (``released``: its holder, a kernel say, may live on); one
    whose holder died keeps its name, so the pid is checked; a holder on another host cannot be
    checked from here and counts as not driving.
    """
    who = _holder(run_dir / LOCK_FILE)
    pid = who.get("pid")
    if not isinstance(pid, int) or who.get("host") != socket.gethostname():
        return None
    if "released" in who:  # let go of by a process that may live on
        return None
    if pid == os.getpid() or not pid_alive(pid):
        return None
    return who
