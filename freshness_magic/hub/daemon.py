"""The hub process and its control: ``start``, ``stop``, ``status`` for one working directory.

One hub per working directory: the process holds an exclusive ``flock`` on
``.freshness/hub.lock`` for its whole life and records its pid in ``.freshness/hub.pid``. Whether a
hub runs is decided by the lock (a crashed hub leaves a pid file but no lock), and ``stop`` only
signals a pid that holds that lock (checked in ``/proc/locks`` when available) and runs this module.

The process (``python -m freshness_magic.hub.daemon --workdir DIR``) watches the tree with
watchfiles: one non-recursive watcher on the root and one recursive watcher on the top-level folders
that are not skipped, so ``.venv``, ``.git`` or ``node_modules`` never cost a watch. The watcher is
a hint; a full stat sweep is the truth and runs at start-up, after a watcher error, after an event
batch larger than ``--overflow-threshold`` (watchfiles does not report inotify queue overflows, so
a burst is treated as one), when a ``.gitignore`` changes, every ``--sweep-interval`` seconds, and
on ``SIGUSR1``. ``SIGTERM``/``SIGINT`` end it after the current transaction.

POSIX only (``fcntl.flock``, signals): where ``fcntl`` is missing no hub can run, ``status`` says
so and ``start`` raises :class:`HubError`; importing this module still works.

A hub started with ``--owner-pid`` (the notebook passes its kernel's pid) also ends, within a
fraction of a second, once that process has exited: a hub never outlives the kernel that
started it. The owner is identified by pid and start time, so a reused pid does not keep it.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import importlib.util
import os
import queue
import signal
import sqlite3
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from freshness_magic.atomicio import ensure_ignored_dir, loads_bounded, write_json_atomic
from freshness_magic.errors import HubError
from freshness_magic.freshness.skipped import SKIPPED_DIRS
from freshness_magic.hub.ignore import IgnoreRules
from freshness_magic.hub.indexer import Indexer
from freshness_magic.hub.lock import LOCK_NAME, lock_held
from freshness_magic.hub.owner import Owner
from freshness_magic.hub.store import (
    connect_reader,
    connect_writer,
    db_path,
    get_meta,
    set_meta,
    state_dir,
)

PID_NAME = "hub.pid"
LOG_NAME = "hub.log"
EXIT_ALREADY_RUNNING = 3
EXIT_OWNER_GONE = 4
_WATCH_ERROR = "error"


@dataclass(frozen=True, slots=True)
class HubStatus:
    """What ``hub status`` reports; ``running`` comes from the lock, the rest from the store."""

    workdir: str
    running: bool
    pid: int | None = None
    caught_up: bool = False
    last_seq: int = 0
    last_sweep: float = 0.0
    files: int = 0
    symbols: int = 0
    already_running: bool = False

    def render(self) -> str:
        if not self.running:
            return f"no hub running for {self.workdir}"
        state = "caught up" if self.caught_up else "catching up"
        sweep = (
            time.strftime("%H:%M:%S", time.localtime(self.last_sweep)) if self.last_sweep else "-"
        )
        prefix = "hub already running" if self.already_running else "hub running"
        return (
            f"{prefix} for {self.workdir} (pid {self.pid}, {state}): {self.files} files, "
            f"{self.symbols} symbols, change seq {self.last_seq}, last sweep {sweep}"
        )

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


# -- lock and pid file ---------------------------------------------------------------------------


def read_pid(workdir: str | Path) -> int | None:
    try:
        data = loads_bounded((state_dir(workdir) / PID_NAME).read_text(encoding="utf-8"))
        return int(data["pid"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _lock_owner_pids(lock_file: Path) -> set[int] | None:
    """Pids holding an flock on ``lock_file`` per ``/proc/locks``; None when that is unknowable."""
    try:
        st = lock_file.stat()
        text = Path("/proc/locks").read_text()
    except OSError:
        return None
    wanted = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    owners = set()
    for line in text.splitlines():
        fields = line.split()
        if "->" in fields:
            continue
        if len(fields) >= 6 and fields[1] == "FLOCK" and fields[5] == wanted:
            with contextlib.suppress(ValueError):
                owners.add(int(fields[4]))
    return owners or None


def _is_hub_process(pid: int) -> bool:
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return True
    return b"freshness_magic.hub.daemon" in cmdline


def _reap(pid: int) -> None:
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)


# -- control -------------------------------------------------------------------------------------


def status(workdir: str | Path) -> HubStatus:
    """The hub's state for ``workdir`` (never starts or stops anything)."""
    root = str(Path(workdir).resolve())
    if not lock_held(root):
        return HubStatus(root, False)
    pid = read_pid(root)
    values: dict[str, object] = {}
    if db_path(root).exists():
        try:
            conn = connect_reader(root)
            try:
                values = {
                    "caught_up": get_meta(conn, "caught_up") == "1"
                    and get_meta(conn, "pid") == str(pid),
                    "last_seq": int(get_meta(conn, "last_seq", "0")),
                    "last_sweep": float(get_meta(conn, "last_sweep", "0") or 0),
                    "files": conn.execute("SELECT count(*) FROM files").fetchone()[0],
                    "symbols": conn.execute("SELECT count(*) FROM symbols").fetchone()[0],
                }
            finally:
                conn.close()
        except (HubError, ValueError, sqlite3.Error):
            values = {}
    return HubStatus(root, True, pid, **values)  # type: ignore[arg-type]


def start(
    workdir: str | Path,
    *,
    timeout: float = 600.0,
    extra_args: Sequence[str] = (),
    owner_pid: int | None = None,
) -> HubStatus:
    """Start the hub for ``workdir`` in the background and wait until it has caught up.

    A hub that already runs is reported (``already_running=True``), not started twice (and
    keeps the lifetime it was started with). With ``owner_pid`` the hub stops when that
    process ends.
    """
    root = Path(workdir).resolve()
    if not root.is_dir():
        raise HubError(f"{root}: not a folder; pass --workdir with the project's working directory")
    if importlib.util.find_spec("fcntl") is None:
        raise HubError("the Node State Hub needs POSIX file locks (fcntl), which this system lacks")
    current = status(root)
    if current.running:
        return HubStatus(**{**current.to_dict(), "already_running": True})  # type: ignore[arg-type]
    folder = ensure_ignored_dir(state_dir(root))
    log_path = folder / LOG_NAME
    owner = ["--owner-pid", str(owner_pid)] if owner_pid is not None else []
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "freshness_magic.hub.daemon",
                "--workdir",
                str(root),
                *owner,
                *extra_args,
            ],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            cwd=root,
            start_new_session=True,
            close_fds=True,
        )
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        code = proc.poll()
        if code is not None:
            if code == EXIT_ALREADY_RUNNING:
                current = status(root)
                return HubStatus(**{**current.to_dict(), "already_running": True})  # type: ignore[arg-type]
            raise HubError(
                f"the hub for {root} exited with code {code} while starting; "
                f"last log lines:\n{_tail(log_path)}"
            )
        current = status(root)
        if current.running and current.pid == proc.pid and current.caught_up:
            return current
        time.sleep(0.05)
    raise HubError(
        f"the hub for {root} (pid {proc.pid}) did not finish its first sweep within "
        f"{timeout:.0f} s; it keeps running; check `python -m freshness_magic hub status` "
        f"or {log_path}"
    )


def stop(workdir: str | Path, *, timeout: float = 15.0) -> HubStatus:
    """Stop the hub of ``workdir`` (only the process that holds its lock) and wait for it."""
    root = Path(workdir).resolve()
    folder = state_dir(root)
    if not lock_held(root):
        with contextlib.suppress(OSError):
            (folder / PID_NAME).unlink()
        return HubStatus(str(root), False)
    pid = read_pid(root)
    if pid is None:
        raise HubError(
            f"a process holds {folder / LOCK_NAME} but {folder / PID_NAME} is missing or "
            "unreadable; find it with `fuser` and stop it yourself"
        )
    owners = _lock_owner_pids(folder / LOCK_NAME)
    if (owners is not None and pid not in owners) or not _is_hub_process(pid):
        raise HubError(
            f"refusing to signal pid {pid}: it does not hold the hub lock of {root} "
            "or is not a hub process"
        )
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        _reap(pid)
        if not lock_held(root):
            return HubStatus(str(root), False, pid)
        time.sleep(0.02)
    os.kill(pid, signal.SIGKILL)
    for _ in range(250):
        _reap(pid)
        if not lock_held(root):
            return HubStatus(str(root), False, pid)
        time.sleep(0.02)
    raise HubError(f"the hub for {root} (pid {pid}) did not stop after SIGTERM and SIGKILL")


def _tail(path: Path, lines: int = 10) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


# -- the process ---------------------------------------------------------------------------------


class _Watch(threading.Thread):
    """One watchfiles watcher feeding a queue; sets ``ready`` once it is watching."""

    def __init__(
        self, paths: list[str], recursive: bool, out: queue.Queue[object], step_ms: int
    ) -> None:
        super().__init__(daemon=True, name=f"hub-watch-{'r' if recursive else 'root'}")
        self.paths = paths
        self.recursive = recursive
        self.out = out
        self.step_ms = step_ms
        self.ready = threading.Event()
        self.stop_event = threading.Event()

    def run(self) -> None:
        from watchfiles import watch

        try:
            for changes in watch(
                *self.paths,
                recursive=self.recursive,
                stop_event=self.stop_event,
                yield_on_timeout=True,
                rust_timeout=200,
                debounce=max(self.step_ms * 5, 100),
                step=self.step_ms,
                raise_interrupt=False,
                ignore_permission_denied=True,
            ):
                self.ready.set()
                if changes:
                    self.out.put(changes)
        except Exception as exc:
            self.out.put((_WATCH_ERROR, repr(exc)))
        finally:
            self.ready.set()


class Hub:
    """The running hub: watchers, sweeps and the update loop for one tree."""

    def __init__(
        self,
        root: Path,
        *,
        sweep_interval: float = 300.0,
        overflow_threshold: int = 10_000,
        step_ms: int = 20,
        owner: Owner | None = None,
    ) -> None:
        self.root = root
        self.owner = owner
        self.conn = connect_writer(root)
        self.ignore = IgnoreRules(root)
        self.indexer = Indexer(root, self.conn, self.ignore)
        self.sweep_interval = sweep_interval
        self.overflow_threshold = overflow_threshold
        self.step_ms = step_ms
        self.events: queue.Queue[object] = queue.Queue()
        self.stop_event = threading.Event()
        self.sweep_event = threading.Event()
        self._root_watch: _Watch | None = None
        self._tree_watch: _Watch | None = None
        self._top_dirs: list[str] = []

    def log(self, message: str) -> None:
        print(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} hub[{os.getpid()}]: {message}", flush=True)

    def _set_caught_up(self, value: bool) -> None:
        set_meta(self.conn, "caught_up", "1" if value else "0")

    def _top_level_dirs(self) -> list[str]:
        found = []
        with contextlib.suppress(OSError):
            for entry in os.scandir(self.root):
                if entry.is_dir(follow_symlinks=False) and not self.ignore.skip_dir(entry.name):
                    found.append(entry.path)
        return sorted(found)

    def _start_watchers(self) -> None:
        self._stop_watchers()
        self._top_dirs = self._top_level_dirs()
        self._root_watch = _Watch([str(self.root)], False, self.events, self.step_ms)
        self._root_watch.start()
        watches = [self._root_watch]
        if self._top_dirs:
            self._tree_watch = _Watch(self._top_dirs, True, self.events, self.step_ms)
            self._tree_watch.start()
            watches.append(self._tree_watch)
        for watch in watches:
            watch.ready.wait(10)

    def _restart_tree_watch(self) -> None:
        if self._tree_watch is not None:
            self._tree_watch.stop_event.set()
            self._tree_watch.join(5)
            self._tree_watch = None
        self._top_dirs = self._top_level_dirs()
        if self._top_dirs:
            self._tree_watch = _Watch(self._top_dirs, True, self.events, self.step_ms)
            self._tree_watch.start()
            self._tree_watch.ready.wait(10)

    def _stop_watchers(self) -> None:
        for watch in (self._root_watch, self._tree_watch):
            if watch is not None:
                watch.stop_event.set()
        for watch in (self._root_watch, self._tree_watch):
            if watch is not None:
                watch.join(5)
        self._root_watch = self._tree_watch = None

    def full_sweep(self, reason: str, *, mark: bool) -> None:
        """Reconcile the whole tree; with ``mark`` the store says "not caught up" meanwhile."""
        if mark:
            self._set_caught_up(False)
        started = time.monotonic()
        count = self.indexer.sweep()
        self._set_caught_up(True)
        self.log(f"sweep ({reason}): {count} changes in {time.monotonic() - started:.2f} s")

    def handle_batch(self, batch: list[object]) -> None:
        """Apply one drained set of watcher outputs (changes or error markers)."""
        paths: set[str] = set()
        total = 0
        error = None
        for item in batch:
            if isinstance(item, tuple) and item and item[0] == _WATCH_ERROR:
                error = item[1]
                continue
            for _change, raw in item:  # type: ignore[attr-defined]
                total += 1
                rel = self._relative(raw)
                if rel is not None:
                    paths.add(rel)
        if error is not None:
            if not self.root.is_dir():
                self.log(f"watcher error {error}; {self.root} is gone; stopping")
                self.stop_event.set()
                return
            self.log(f"watcher error {error}; restarting watchers")
            self._start_watchers()
            self.full_sweep("watcher error", mark=True)
            return
        if total > self.overflow_threshold:
            self.full_sweep(f"overflow: {total} events in one batch", mark=True)
            return
        if not paths:
            return
        if any(p.rsplit("/", 1)[-1] == ".gitignore" for p in paths):
            self.full_sweep(".gitignore changed", mark=False)
            return
        if any("/" not in p for p in paths) and self._top_level_dirs() != self._top_dirs:
            self._restart_tree_watch()
        self.indexer.update(paths)

    def _relative(self, raw: str) -> str | None:
        try:
            rel = Path(raw).relative_to(self.root).as_posix()
        except ValueError:
            return None
        if rel in ("", ".") or any(part in SKIPPED_DIRS for part in rel.split("/")):
            return None
        return rel

    def _guarded(self, action: Callable[[], None]) -> None:
        """Run one update; on an unexpected error log it and rebuild the truth with a sweep.

        A second failure in a row ends the process (clients then fall back to hashing).
        """
        try:
            action()
        except Exception:
            self.log("update failed:\n" + traceback.format_exc())
            if not self.root.is_dir():
                self.log(f"{self.root} is gone; stopping")
                self.stop_event.set()
                return
            time.sleep(1.0)
            self._start_watchers()
            self.full_sweep("recovering from an error", mark=True)

    def run(self) -> None:
        self._set_caught_up(False)
        set_meta(self.conn, "pid", str(os.getpid()))
        self._start_watchers()
        self.full_sweep("start-up", mark=True)
        next_sweep = time.monotonic() + self.sweep_interval
        while not self.stop_event.is_set():
            if self.owner is not None and not self.owner.alive():
                self.log(f"owner process {self.owner.pid} ended; stopping")
                break
            try:
                first = self.events.get(timeout=0.2)
            except queue.Empty:
                first = None
                if not db_path(self.root).exists():
                    self.log(f"{db_path(self.root)} (or its folder) was removed; stopping")
                    break
            if self.stop_event.is_set():
                break
            if first is not None:
                batch = [first]
                with contextlib.suppress(queue.Empty):
                    while True:
                        batch.append(self.events.get_nowait())
                self._guarded(functools.partial(self.handle_batch, batch))
            if self.sweep_event.is_set():
                self.sweep_event.clear()
                self.full_sweep("requested (SIGUSR1)", mark=True)
                next_sweep = time.monotonic() + self.sweep_interval
            elif time.monotonic() >= next_sweep:
                self.full_sweep("periodic", mark=False)
                next_sweep = time.monotonic() + self.sweep_interval

    def close(self) -> None:
        self._stop_watchers()
        with contextlib.suppress(Exception):
            self._set_caught_up(False)
        self.conn.close()


def _acquire_lock(folder: Path) -> int | None:
    import fcntl  # POSIX only; start() refuses earlier where it is missing

    fd = os.open(folder / LOCK_NAME, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    for _ in range(50):
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except BlockingIOError:
            time.sleep(0.02)
    os.close(fd)
    return None


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the hub process."""
    parser = argparse.ArgumentParser(prog="python -m freshness_magic.hub.daemon")
    parser.add_argument("--workdir", default=".")
    parser.add_argument("--sweep-interval", type=float, default=300.0)
    parser.add_argument("--overflow-threshold", type=int, default=10_000)
    parser.add_argument("--step-ms", type=int, default=20)
    parser.add_argument(
        "--owner-pid", type=int, default=None, help="stop when this process has ended"
    )
    args = parser.parse_args(argv)
    root = Path(args.workdir).resolve()
    owner = Owner.of(args.owner_pid) if args.owner_pid is not None else None
    if owner is not None and not owner.alive():
        print(f"owner process {owner.pid} is not running; not starting", file=sys.stderr)
        return EXIT_OWNER_GONE
    folder = ensure_ignored_dir(state_dir(root))
    lock_fd = _acquire_lock(folder)
    if lock_fd is None:
        print(f"hub already running for {root} (pid {read_pid(root)})", file=sys.stderr)
        return EXIT_ALREADY_RUNNING
    pid_file = folder / PID_NAME
    try:
        write_json_atomic(
            pid_file,
            {
                "pid": os.getpid(),
                "workdir": str(root),
                "started_at": time.time(),
                "owner_pid": args.owner_pid,
            },
        )
        hub = Hub(
            root,
            sweep_interval=args.sweep_interval,
            overflow_threshold=args.overflow_threshold,
            step_ms=args.step_ms,
            owner=owner,
        )
        signal.signal(signal.SIGTERM, lambda *_: hub.stop_event.set())
        signal.signal(signal.SIGINT, lambda *_: hub.stop_event.set())
        signal.signal(signal.SIGUSR1, lambda *_: hub.sweep_event.set())
        try:
            hub.run()
        finally:
            hub.close()
            hub.log("stopped")
    finally:
        if read_pid(root) == os.getpid():
            with contextlib.suppress(OSError):
                pid_file.unlink()
        os.close(lock_fd)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
