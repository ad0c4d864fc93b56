"""The ``tool`` handler (spec §4.10, docs/ARCHITECTURE.md): run ``tool_command`` with a timeout.

The command runs through the shell in the run's working directory, in its own process group so
a timeout or a stop (``env.cancel``) ends everything it started (SIGTERM, a grace period that
ends early once only zombies are left in the group, then SIGKILL to the group); so does a
KeyboardInterrupt in the driver at any moment once the command has started (a Ctrl-C before
the wait began once left it running after the command exited).
stdout and stderr go straight to files in the node's folder, so memory stays bounded however
much the command prints: the handler only reads the files' tails, for
``STAGE_OUTPUT`` events (at most every :data:`EMIT_INTERVAL` seconds, at most
:data:`EMIT_CHUNK_BYTES` each) and for the context (the last ``output_chars`` bytes of stdout).

``tool.output`` is that stdout without its trailing line breaks, as a shell's ``$(command)``
gives it (decision): ``condition="context.tool.output=pass"`` then holds for ``echo pass``,
which the exact bytes never would. The exact bytes stay in ``tool.stdout_file``.

While the command runs its process group id is in ``nodes/<id>/pgid``; a driver killed meanwhile
leaves it there, and :func:`reap_survivor` (called on resume) stops a group that outlived it.
The command sees ``FRESHNESS_NODE_ID``, ``FRESHNESS_STAGE_DIR`` (the node's folder),
``FRESHNESS_RUN_DIR``, ``FRESHNESS_RUN_ID`` and ``FRESHNESS_ATTEMPT`` in its environment.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from freshness_magic import atomicio, pathsafety
from freshness_magic.engine.context import TOOL_KEYS, Context
from freshness_magic.engine.events import EventType
from freshness_magic.engine.handlers.base import StepEnv
from freshness_magic.engine.model import Node
from freshness_magic.engine.outcome import Outcome, StageStatus
from freshness_magic.engine.runlock import pid_alive
from freshness_magic.engine.visible import visible

OUTPUT_CONTEXT_CHARS = 4000
STDERR_TAIL_LINES = 20
STDERR_TAIL_BYTES = 16384
KILL_GRACE_SECONDS = 2.0
EMIT_INTERVAL = 0.2
"""Least time between two ``STAGE_OUTPUT`` events of one stream."""
EMIT_CHUNK_BYTES = 8192
"""Most bytes of one ``STAGE_OUTPUT`` event; more output since the last one is skipped."""
POLL_SECONDS = 0.05
PGID_FILE = "pgid"
INTERRUPTED = "interrupted"


def _read_tail(path: Path, limit: int) -> tuple[str, int]:
    """The last ``limit`` bytes of ``path`` as text, and how many bytes came before them."""
    try:
        with path.open("rb") as handle:
            size = handle.seek(0, os.SEEK_END)
            start = max(0, size - limit)
            handle.seek(start)
            return handle.read(limit).decode("utf-8", "replace"), start
    except OSError:
        return "", 0


LABEL_CHARS = 80
"""How much of a multi-line command a note or failure reason quotes."""


def command_label(command: str) -> str:
    """The command as notes and failure reasons quote it: as written when it is one line; a
    script of several lines folded onto one and cut at :data:`LABEL_CHARS` (with its line count),
    so a progress line or the summary does not end at its first line's open quote."""
    stripped = command.strip()
    if "\n" not in stripped:
        return command
    folded = " ".join(stripped.split())
    if len(folded) > LABEL_CHARS:
        folded = folded[: LABEL_CHARS - 1].rstrip() + "…"
    return f"{folded} ({stripped.count(chr(10)) + 1} lines)"


STDERR_SECTION = "\nstderr (last "
"""Where a failure reason's stderr lines begin (``stderr (last 20 lines):`` on its own line)."""


def reason_ends(reason: str) -> tuple[str, str]:
    """A failure reason as a one-line summary shows it: the text before a tool's stderr section,
    on one line, and that section's last line ('' when there is none), which is usually the
    error itself (``AssertionError: 2 != 3``)."""
    head, section, stderr = reason.partition(STDERR_SECTION)
    lines = [line for line in stderr.splitlines()[1:] if line.strip()] if section else []
    return " ".join(head.split()), lines[-1].strip() if lines else ""


def _keep_group_id(path: Path, record: dict[str, Any]) -> None:
    """Write ``nodes/<id>/pgid`` for a started command. A command that removed the run
    directory already (``git clean -x``, ``rm -rf .freshness``) leaves no folder to write it in,
    and a full disk may refuse it: the command still runs and ends as usual; only a kill of this
    driver would not find it."""
    try:
        atomicio.write_atomic(path, json.dumps(record) + "\n")
    except OSError:  # gone, or refused (a full disk): the next state write reports that
        return


def _tail_lines(text: str, lines: int) -> str:
    return "\n".join(text.rstrip("\n").splitlines()[-lines:])


def kill_group(pgid: int, process: subprocess.Popen[bytes] | None, grace: float) -> None:
    """SIGTERM the process group, wait ``grace`` seconds for the leader, then SIGKILL it all."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGTERM)
    if process is not None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=grace)
    else:
        end = time.monotonic() + grace
        while time.monotonic() < end and _group_alive(pgid):
            time.sleep(POLL_SECONDS)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)
    if process is not None:
        process.wait()


def _group_alive(pgid: int) -> bool:
    """Whether a process of group ``pgid`` still runs. Zombies do not (as for ``pid_alive``):
    a killed tool's orphans are reaped by the system's init, which may take a second or more,
    and a stop should not wait for that."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return _runs_in_group(pgid)


def _runs_in_group(pgid: int) -> bool:
    """Whether ``/proc`` (Linux) lists a process of group ``pgid`` that is not a zombie; True
    where it cannot tell."""
    try:
        pids = [name for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return True
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat", "rb") as handle:
                state, _ppid, group = handle.read().rsplit(b")", 1)[1].split()[:3]
        except (OSError, ValueError):
            continue  # ended meanwhile
        if int(group) == pgid and state != b"Z":
            return True
    return False


def _start_time(pid: int) -> str | None:
    """The kernel's start time of ``pid`` (Linux ``/proc``), to tell a reused pid apart."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            return handle.read().rsplit(b")", 1)[1].split()[19].decode()
    except (OSError, IndexError):
        return None


@dataclass(frozen=True, slots=True)
class _RecordedGroup:
    """A ``nodes/<id>/pgid`` file as read, with what is true of its processes now."""

    pgid: int
    driver: int
    driver_alive: bool
    """Its driver still runs on this host (it is not ours to stop)."""
    orphan_alive: bool
    """The group still runs on this host and its leader is the recorded process (no pid reuse)."""


def _recorded_group(path: Path) -> _RecordedGroup:
    """Read ``path``; raises OSError, or ValueError/KeyError/TypeError for a damaged file."""
    data = atomicio.loads_bounded(path.read_bytes(), what=str(path))
    pgid, driver = int(data["pgid"]), int(data["driver_pid"])
    host, started = str(data.get("host", "")), data.get("started")
    same_host = host == socket.gethostname()
    driver_alive = same_host and driver != os.getpid() and pid_alive(driver)
    leader_start = _start_time(pgid)
    reused = started is not None and leader_start is not None and leader_start != started
    return _RecordedGroup(
        pgid, driver, driver_alive, same_host and not reused and _group_alive(pgid)
    )


def reap_survivor(
    node_dir: str | os.PathLike[str],
    grace: float = KILL_GRACE_SECONDS,
    driver_ending: float = 0.0,
) -> str | None:
    """Stop a tool process group left running by a driver that died; a message, or None.

    Reads ``node_dir/pgid``. Nothing to do (None) when there is no file or the group is gone.
    A group whose driver still runs on this host is left alone (the message says so); one whose
    leader is a different process than recorded (pid reused) is not touched. Otherwise the group
    gets SIGTERM, ``grace`` seconds, then SIGKILL. The file is removed unless the driver lives.
    ``driver_ending``: how long to wait for a driver the caller knows was killed (a lost cluster
    worker) to finish exiting; its connections close before the kernel has ended it.
    """
    path = Path(node_dir) / PGID_FILE
    try:
        group = _recorded_group(path)
        end = time.monotonic() + driver_ending
        while group.driver_alive and time.monotonic() < end:
            time.sleep(POLL_SECONDS)
            group = _recorded_group(path)
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        with contextlib.suppress(OSError):
            path.unlink()
        return f"removed unreadable {path} ({exc}); no process group stopped"
    if group.driver_alive:
        return (
            f"the tool of {path.parent.name} (process group {group.pgid}) is still watched by "
            f"the process that started it (pid {group.driver}); not stopped"
        )
    message: str | None = None
    if group.orphan_alive:
        kill_group(group.pgid, None, grace)
        message = (
            f"stopped the tool of node '{path.parent.name}' (process group {group.pgid}) that "
            f"outlived the process that started it (pid {group.driver})"
        )
    with contextlib.suppress(OSError):
        path.unlink()
    return message


def reap_survivors(run_dir: str | os.PathLike[str], grace: float = KILL_GRACE_SECONDS) -> list[str]:
    """:func:`reap_survivor` for every node folder of a run (parallel branches run several)."""
    messages = []
    for pgid_file in sorted(Path(run_dir).glob(f"nodes/*/{PGID_FILE}")):
        message = reap_survivor(pgid_file.parent, grace)
        if message is not None:
            messages.append(message)
    return messages


def orphaned_tools(run_dir: str | os.PathLike[str]) -> list[str]:
    """What :func:`reap_survivors` would stop, in words, touching nothing: the tools of a run
    whose driver was killed (``kill -9``, a lost kernel) and that still run on their own."""
    found = []
    for pgid_file in sorted(Path(run_dir).glob(f"nodes/*/{PGID_FILE}")):
        try:
            group = _recorded_group(pgid_file)
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if group.orphan_alive and not group.driver_alive:
            found.append(
                f"the tool of node '{pgid_file.parent.name}' (process group {group.pgid}) "
                f"still runs, although the process that started it (pid {group.driver}: the "
                "run's driver, or a cluster worker) is gone; resume stops it first"
            )
    return found


class _Follower:
    """Follows a growing output file and emits its new text as bounded STAGE_OUTPUT events."""

    def __init__(self, stream: str, path: Path, env: StepEnv) -> None:
        self.stream, self.path, self.env = stream, path, env
        self.sent = 0
        self.last = 0.0

    def flush(self, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self.last < EMIT_INTERVAL:
            return
        try:
            size = self.path.stat().st_size
        except OSError:
            return
        if size <= self.sent:
            return
        start = max(self.sent, size - EMIT_CHUNK_BYTES)
        with self.path.open("rb") as handle:
            handle.seek(start)
            chunk = handle.read(size - start)
        text = chunk.decode("utf-8", "replace")
        if start > self.sent:
            text = f"[... {start - self.sent} bytes not shown ...]\n{text}"
        self.sent, self.last = size, now
        self.env.emit(EventType.STAGE_OUTPUT, {"stream": self.stream, "text": text})


class ToolHandler:
    """Runs a node's ``tool_command``; non-zero exit, timeout or a stop is FAIL with the details."""

    portable = True
    """The command can run on any worker that sees the work directory (see engine/dispatch.py)."""

    def __init__(
        self,
        output_chars: int = OUTPUT_CONTEXT_CHARS,
        stderr_tail_lines: int = STDERR_TAIL_LINES,
        kill_grace: float = KILL_GRACE_SECONDS,
    ) -> None:
        self.output_chars = output_chars
        self.stderr_tail_lines = stderr_tail_lines
        self.kill_grace = kill_grace

    def _limits(self, node: Node, env: StepEnv) -> tuple[float | None, float | None, float]:
        """(timeout to report, time to wait for the command, SIGTERM grace).

        Under a run deadline the command runs until the deadline, and the SIGTERM grace fits in
        half of the run's slack past it, so this handler reports the timeout with the command's
        output before the run gives up on it.
        """
        if env.deadline is None:
            return node.timeout, node.timeout, self.kill_grace
        remaining = max(env.deadline - time.monotonic(), 0.0)
        reported = node.timeout if node.timeout is not None else remaining
        return reported, remaining, min(self.kill_grace, env.slack / 2)

    def execute(self, node: Node, context: Context, env: StepEnv) -> Outcome:
        command = node.tool_command.strip()
        if not command:
            return Outcome(
                status=StageStatus.FAIL,
                failure_reason=(
                    f'node {node.id!r} has no tool_command; add tool_command="..." to it '
                    "(a shell command run in the working directory)"
                ),
            )
        stage_dir = env.node_dir(node.id)
        suffix = "" if env.attempt <= 1 else f".attempt{env.attempt}"
        stdout_path = stage_dir / f"stdout{suffix}.txt"
        stderr_path = stage_dir / f"stderr{suffix}.txt"
        timeout, wait_for, grace = self._limits(node, env)
        started = time.monotonic()
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
        for path in (stdout_path, stderr_path):  # new files: a link to the old keeps its bytes
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
        out = pathsafety.open_for_write(stdout_path, flags)
        try:
            err = pathsafety.open_for_write(stderr_path, flags)
        except BaseException:
            os.close(out)
            raise
        process: subprocess.Popen[bytes] | None = None
        try:  # a Ctrl-C from here on, even before the wait's own guard, ends the group too
            try:
                process = subprocess.Popen(
                    command,
                    shell=True,
                    cwd=env.workdir,
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=err,
                    start_new_session=True,
                    env=self._environment(node, env, stage_dir),
                )
            except OSError as exc:
                return Outcome(
                    status=StageStatus.FAIL,
                    failure_reason=f"cannot start tool_command of {node.id!r} in "
                    f"{env.workdir}: {exc}",
                )
            finally:
                os.close(out)
                os.close(err)
            ending = self._wait(process, env, stdout_path, stderr_path, stage_dir, wait_for, grace)
        except BaseException:
            if process is not None:
                kill_group(process.pid, process, 0)
            raise
        elapsed = time.monotonic() - started
        shown = command_label(command)
        stdout, skipped = _read_tail(stdout_path, self.output_chars)
        stderr, _ = _read_tail(stderr_path, STDERR_TAIL_BYTES)
        values = (
            self._context_output(stdout, skipped, stdout_path),
            process.returncode,
            str(stdout_path),
            str(stderr_path),
        )
        updates: dict[str, Any] = dict(zip(TOOL_KEYS, values, strict=True))
        if ending == INTERRUPTED:
            return Outcome(
                status=StageStatus.FAIL,
                context_updates=updates,
                failure_reason=INTERRUPTED,
                notes=f"stopped on request after {elapsed:.2f}s (process group killed): {shown}",
            )
        if ending == "timeout":
            return Outcome(
                status=StageStatus.FAIL,
                context_updates=updates,
                failure_reason=(
                    f"timed out after {round(timeout or 0, 2):g}s: {shown} "
                    f"(process group killed; output in {stage_dir})"
                ),
            )
        if process.returncode != 0:
            reason = f"exit code {process.returncode}: {shown}"
            tail = visible(_tail_lines(stderr, self.stderr_tail_lines))
            if tail:
                reason += f"{STDERR_SECTION}{self.stderr_tail_lines} lines):\n{tail}"
            return Outcome(status=StageStatus.FAIL, context_updates=updates, failure_reason=reason)
        return Outcome(
            status=StageStatus.SUCCESS,
            context_updates=updates,
            notes=f"Tool completed in {elapsed:.2f}s: {shown}",
        )

    def _wait(
        self,
        process: subprocess.Popen[bytes],
        env: StepEnv,
        stdout_path: Path,
        stderr_path: Path,
        stage_dir: Path,
        wait_for: float | None,
        grace: float,
    ) -> str:
        """Wait for the command, streaming its output; "exited", "timeout" or "interrupted"."""
        pgid_file = stage_dir / PGID_FILE
        record: dict[str, Any] = {
            "pgid": process.pid,
            "driver_pid": os.getpid(),
            "host": socket.gethostname(),
            "started": _start_time(process.pid),
        }
        followers = [_Follower("stdout", stdout_path, env), _Follower("stderr", stderr_path, env)]
        end = None if wait_for is None else time.monotonic() + wait_for
        ending = "exited"
        try:
            _keep_group_id(pgid_file, record)
            while True:
                remaining = None if end is None else end - time.monotonic()
                if remaining is not None and remaining <= 0:
                    ending = "timeout"
                    kill_group(process.pid, process, grace)
                    break
                step = POLL_SECONDS if remaining is None else min(POLL_SECONDS, remaining)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    process.wait(timeout=step)
                    break
                if env.cancel.is_set():
                    ending = INTERRUPTED
                    kill_group(process.pid, process, grace)
                    break
                for follower in followers:
                    follower.flush()
        except BaseException:
            kill_group(process.pid, process, 0)
            raise
        finally:
            with contextlib.suppress(OSError):
                pgid_file.unlink()
        for follower in followers:
            follower.flush(force=True)
        return ending

    @staticmethod
    def _environment(node: Node, env: StepEnv, stage_dir: Path) -> dict[str, str]:
        """The caller's environment plus where the command is in the run (for its own files)."""
        return {
            **os.environ,
            "FRESHNESS_NODE_ID": node.id,
            "FRESHNESS_STAGE_DIR": str(stage_dir),
            "FRESHNESS_RUN_DIR": str(env.run_dir),
            "FRESHNESS_RUN_ID": env.run_dir.name,
            "FRESHNESS_ATTEMPT": str(env.attempt),
        }

    @staticmethod
    def _context_output(tail: str, skipped: int, path: Path) -> str:
        tail = tail.rstrip("\r\n")
        if not skipped:
            return tail
        return f"[... first {skipped} bytes not shown (truncated); full output in {path}]\n{tail}"
