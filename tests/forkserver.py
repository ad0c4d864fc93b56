"""Driver processes forked from one interpreter that has imported the package already.

A test that starts a driver dozens of times (to kill it at each write of a step, to refuse each
write, to resume it) spent most of each start on the interpreter's start-up and the package's
imports. A :class:`ForkServer` pays those once: each :meth:`ForkServer.start` forks a child of
it, a real process of its own (its own pid, exit code and signals, the folder and environment
the test gives, standard input from ``/dev/null``, standard output and error kept in files), so
a SIGKILL or a refused write ends that child alone, as it would a ``python`` started for it. A
child exits as an interpreter does: ``SystemExit``'s code, 1 after a printed traceback, the
``atexit`` functions run and the output flushed. Tests of start-up itself, or of what a new
interpreter imports, start one instead.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]

RUN_MODULES = (
    "freshness_magic.session",
    "freshness_magic.engine.pipeline",
    "freshness_magic.engine.handlers.builtin",
    "freshness_magic.engine.validation.validator",
    "freshness_magic.freshness.extension",
    "freshness_magic.evidence.extension",
    "freshness_magic.hub.extension",
    "freshness_magic.backends.registry",
)
"""What a script that opens and runs a pipeline (``session.open_run``) imports."""
CLI_MODULES = ("freshness_magic.cli", *RUN_MODULES)
"""What ``python -m freshness_magic run`` imports (``resume``, ``status`` and ``check`` fewer)."""

SERVER = r"""
import atexit, json, os, runpy, sys, traceback

for name in sys.argv[1:]:
    try:
        __import__(name)
    except ImportError:  # only time is lost: the child imports what it needs
        pass


def child(request):
    code = 1
    try:
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        for fd, path, flags in (
            (0, os.devnull, os.O_RDONLY),
            (1, request["stdout"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC),
            (2, request["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC),
        ):
            opened = os.open(path, flags, 0o644)
            os.dup2(opened, fd)  # also closes the server's request and reply pipes here
            os.close(opened)
        sys.stdin = open(os.devnull)
        sys.argv = request["argv"]
        if request.get("module"):
            runpy.run_module(request["module"], run_name="__main__", alter_sys=True)
        elif request.get("path"):
            runpy.run_path(request["path"], run_name="__main__")
        else:
            exec(compile(request["code"], "<string>", "exec"), {"__name__": "__main__"})
        code = 0
    except SystemExit as stop:
        if stop.code is None or isinstance(stop.code, int):
            code = stop.code or 0
        else:
            print(stop.code, file=sys.stderr)
    except BaseException:
        traceback.print_exc()
    try:
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code)


def reply(message):
    os.write(1, (json.dumps(message) + "\n").encode())


for line in sys.stdin.buffer:
    request = json.loads(line)
    pid = os.fork()
    if pid == 0:
        child(request)
    reply({"pid": pid})
    _, status = os.waitpid(pid, 0)
    reply({"returncode": os.waitstatus_to_exitcode(status)})
"""


class ForkServer:
    """One interpreter with ``preload`` imported, forking the processes :meth:`start` asks for,
    one at a time. Close it (or use it as a context manager) to end it.

    Preload only modules the child would import anyway (some code looks at ``sys.modules``: the
    run lock names its holder by whether ``freshness_magic.cli`` or IPython is loaded); a name
    that no longer imports costs time, not correctness."""

    def __init__(self, preload: Sequence[str] = CLI_MODULES) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-c", SERVER, *preload],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env={**os.environ, "PYTHONPATH": str(REPO)},
        )
        self.folder = Path(tempfile.mkdtemp(prefix="forkserver-"))
        self.pending = b""
        self.started = 0
        self.current: Forked | None = None

    def __enter__(self) -> ForkServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self.current is not None and self.current.returncode is None:
            self.current.kill()
            self.current.wait(timeout=60)
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.close()
        self.process.wait(timeout=60)
        self.process.stdout.close()
        for path in self.folder.iterdir():
            path.unlink()
        self.folder.rmdir()

    def start(
        self,
        argv: Sequence[str],
        *,
        cwd: Path,
        env: Mapping[str, str],
        code: str | None = None,
        path: str | None = None,
        module: str | None = None,
    ) -> Forked:
        """A child that runs ``code`` (as ``python -c``), the script at ``path`` or ``module``
        (as ``python -m``) with ``sys.argv`` = ``argv``, in ``cwd`` with exactly ``env``."""
        if self.current is not None and self.current.returncode is None:
            raise RuntimeError("the fork server runs one child at a time: wait for the last one")
        self.started += 1
        out = self.folder / f"{self.started}.out"
        err = self.folder / f"{self.started}.err"
        request = {
            "argv": list(argv),
            "cwd": str(cwd),
            "env": dict(env),
            "code": code,
            "path": path,
            "module": module,
            "stdout": str(out),
            "stderr": str(err),
        }
        assert self.process.stdin is not None
        self.process.stdin.write((json.dumps(request) + "\n").encode())
        self.process.stdin.flush()
        started = self.reply(60)
        if started is None:
            raise RuntimeError("the fork server did not start a child within 60 s")
        self.current = Forked(self, int(started["pid"]), list(argv), out, err)
        return self.current

    def run(
        self, argv: Sequence[str], *, timeout: float = 120, **how: Any
    ) -> subprocess.CompletedProcess[str]:
        """:meth:`start`, then its end, as ``subprocess.run`` with captured text output."""
        child = self.start(argv, **how)
        out, err = child.communicate(timeout=timeout)
        assert child.returncode is not None
        return subprocess.CompletedProcess(child.args, child.returncode, out, err)

    def reply(self, timeout: float | None) -> dict[str, Any] | None:
        """The server's next reply line, or None when none came within ``timeout`` seconds."""
        assert self.process.stdout is not None
        fd = self.process.stdout.fileno()
        deadline = None if timeout is None else time.monotonic() + timeout
        while b"\n" not in self.pending:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                return None
            chunk = os.read(fd, 4096)
            if not chunk:
                raise RuntimeError(f"the fork server ended (exit {self.process.wait()})")
            self.pending += chunk
        line, _, self.pending = self.pending.partition(b"\n")
        message: dict[str, Any] = json.loads(line)
        return message


class Forked:
    """A child of a :class:`ForkServer`, used as a ``subprocess.Popen`` with captured text
    output: ``pid``, ``returncode`` (negative: the signal that ended it), ``poll``, ``wait``,
    ``kill``, ``communicate``."""

    def __init__(self, server: ForkServer, pid: int, args: list[str], out: Path, err: Path):
        self.server = server
        self.pid = pid
        self.args = args
        self.out = out
        self.err = err
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            self._ended(self.server.reply(0))
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            ended = self.server.reply(timeout)
            if ended is None:
                raise subprocess.TimeoutExpired(self.args, timeout or 0)
            self._ended(ended)
        assert self.returncode is not None
        return self.returncode

    def kill(self) -> None:
        if self.returncode is None:
            with contextlib.suppress(ProcessLookupError):  # ended, not yet reported
                os.kill(self.pid, signal.SIGKILL)

    def communicate(self, timeout: float | None = None) -> tuple[str, str]:
        self.wait(timeout)
        return self.out.read_text(), self.err.read_text()

    def _ended(self, message: dict[str, Any] | None) -> None:
        if message is not None:
            self.returncode = int(message["returncode"])
