"""The command line as the tests call it, and processes they start and check (process groups:
the tests that kill tools and workers).

:func:`cli` runs the command line inside the test process, as ``python -m freshness_magic``
would (its ``main``, the folder, no standard input, its output captured): most tests check what a
command says and does, and a new interpreter per call cost most of their time.
:func:`cli_process` starts a real process, for what only a process shows: start-up, signals,
exit on a closed pipe, the driver lock held by another process, file permissions.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import subprocess
import sys
import warnings
from collections.abc import Mapping
from pathlib import Path

from freshness_magic import cli as command_line

REPO = Path(__file__).resolve().parents[1]
MAIN = str(REPO / "freshness_magic" / "__main__.py")


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``python -m freshness_magic ARGS`` run in this process, in folder ``cwd``, without standard
    input; its exit code and output as a finished process's."""
    out, err = io.StringIO(), io.StringIO()
    before, argv, handlers = os.getcwd(), sys.argv, logging.root.handlers
    logging.root.handlers = []  # as in a new process: warnings reach stderr (logging's last resort)
    os.chdir(cwd)
    sys.argv = [MAIN, *args]
    try:
        with (
            open(os.devnull) as nothing,
            contextlib.redirect_stdout(out),
            contextlib.redirect_stderr(err),
            warnings.catch_warnings(),
        ):
            warnings.simplefilter("default")
            stdin, sys.stdin = sys.stdin, nothing
            try:
                code = command_line.main(list(args))
            except SystemExit as stop:
                code = stop.code if isinstance(stop.code, int) else 1
            finally:
                sys.stdin = stdin
    finally:
        logging.root.handlers = handlers
        sys.argv = argv
        os.chdir(before)
    return subprocess.CompletedProcess(
        ["python", "-m", "freshness_magic", *args], code, out.getvalue(), err.getvalue()
    )


def cli_process(
    *args: str, cwd: Path, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``python -m freshness_magic ARGS`` in a new process, this checkout first on its path, no
    standard input; ``env`` adds to (or overrides) the test's environment."""
    return _cli([], args, cwd, env)


def _cli(
    prefix: list[str], args: tuple[str, ...], cwd: Path, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*prefix, sys.executable, "-m", "freshness_magic", *args],
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})},
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )


def fresh_python(
    code: str, *, cwd: Path | None = None, env: Mapping[str, str] | None = None
) -> str:
    """What ``code`` prints (stripped) run by a new interpreter, for what only a fresh process
    shows: which modules a command imports, in which order it starts its work. Its exit status
    must be 0 (``code`` calls ``cli.main``, not ``sys.exit``, and prints the code)."""
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
        env=None if env is None else dict(env),
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout.strip()


def cli_without_privilege(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """:func:`cli` bound by file permissions as a user is: root gives up the capabilities that
    let it read and write any file (``setpriv``, from util-linux); any other user already is."""
    prefix: list[str] = []
    if os.geteuid() == 0:
        caps = "-dac_override,-dac_read_search"
        prefix = ["setpriv", "--bounding-set", caps, "--inh-caps", caps]
    return _cli(prefix, args, cwd)


def group_alive(pgid: int) -> bool:
    """Whether any process of group ``pgid`` still runs: a zombie (killed, its orphan not yet
    reaped by the system's init) does not."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    if not Path("/proc/self/stat").exists():
        return True  # no /proc to tell a zombie by
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            state, _, group = stat.read_bytes().rsplit(b")", 1)[1].split()[:3]
        except (OSError, ValueError):
            continue
        if int(group) == pgid and state != b"Z":
            return True
    return False


def waiting_run(folder: Path, dot: str, name: str = "p.dot") -> Path:
    """The run directory of ``dot``, written to ``folder/name`` and run there by :func:`cli`
    until it waits at a gate (exit 3): what a test of answering, resuming or locking starts from."""
    (folder / name).write_text(dot)
    started = cli("run", name, "--json", cwd=folder)
    assert started.returncode == 3, started.stderr
    return Path(json.loads(started.stdout)["run_dir"])


def one_line_error(proc: subprocess.CompletedProcess[str], *needles: str) -> None:
    """A refusal as the command line gives one: exit 2 and one line on stderr (no traceback)
    holding each of ``needles``."""
    stderr = proc.stderr
    assert proc.returncode == 2, stderr
    assert "Traceback" not in stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    for needle in needles:
        assert needle in lines[0]


def killed_after_quick(folder: Path) -> Path:
    """Run ``folder/p.dot`` in a driver process and SIGKILL it once the branch ``quick`` of its
    parallel node ``fan`` is journaled as ended and the branch ``slow`` runs (it appends to
    ``slow.txt``, then waits for a file ``go``); the run's folder."""
    from freshness_magic.engine.checkpoint_format import JOURNAL_FILE
    from freshness_magic.engine.context import partial_key
    from tests.waiting import wait_until

    driver = subprocess.Popen(
        [sys.executable, "-m", "freshness_magic", "run", "p.dot"],
        cwd=folder,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
    )
    runs = folder / ".freshness" / "runs"

    def quick_journaled() -> bool:
        """quick's branch journaled as ended (the parallel node's kept progress names where it
        stopped); slow starts only after that, one branch at a time."""
        journals = list(runs.glob(f"*/{JOURNAL_FILE}"))
        if not journals:
            return False
        text = journals[0].read_bytes()
        return partial_key("fan").encode() in text and b"stopped_at" in text

    try:
        wait_until(
            lambda: (folder / "slow.txt").exists() and quick_journaled(),
            "quick ended and was journaled while slow runs",
        )
    finally:
        driver.kill()
        driver.wait()
    (run_dir,) = runs.iterdir()
    return run_dir
