"""The ``tool`` handler (spec §4.10, DESIGN §8): run ``tool_command`` with a timeout.

The command runs through the shell in the run's working directory, in its own process group so
a timeout can stop everything it started (SIGTERM, a grace period, then SIGKILL to the group).
stdout and stderr go to files in the node's folder; the context gets a truncated copy of stdout.
The command sees ``FRESHNESS_NODE_ID``, ``FRESHNESS_STAGE_DIR`` (the node's folder),
``FRESHNESS_RUN_DIR`` and ``FRESHNESS_ATTEMPT`` in its environment.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path

from freshness_magic.engine.context import Context
from freshness_magic.engine.handlers.base import StepEnv
from freshness_magic.engine.model import Node
from freshness_magic.engine.outcome import Outcome, StageStatus

OUTPUT_CONTEXT_CHARS = 4000
STDERR_TAIL_LINES = 20
KILL_GRACE_SECONDS = 2.0


def _read_text(path: Path) -> str:
    return path.read_bytes().decode("utf-8", "replace")


def _tail(text: str, lines: int) -> str:
    return "\n".join(text.rstrip("\n").splitlines()[-lines:])


def _kill_group(process: subprocess.Popen[bytes], grace: float) -> None:
    """SIGTERM the process group, wait ``grace`` seconds for the leader, then SIGKILL it all."""
    pgid = process.pid
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=grace)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)
    process.wait()


class ToolHandler:
    """Runs a node's ``tool_command``; non-zero exit or timeout is FAIL with the details."""

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

        Under a run deadline the command is stopped a little early (10 %, at most 1 s) and the
        grace fits in that margin, so this handler reports the timeout with the command's output
        before the run gives up on it.
        """
        if env.deadline is None:
            return node.timeout, node.timeout, self.kill_grace
        remaining = max(env.deadline - time.monotonic(), 0.0)
        margin = min(1.0, remaining * 0.1)
        reported = node.timeout if node.timeout is not None else remaining
        return reported, remaining - margin, min(self.kill_grace, margin / 2)

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
        with stdout_path.open("wb") as out, stderr_path.open("wb") as err:
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
            timed_out = False
            try:
                process.wait(timeout=wait_for)
            except subprocess.TimeoutExpired:
                timed_out = True
                _kill_group(process, grace)
            except BaseException:
                _kill_group(process, 0)
                raise
        elapsed = time.monotonic() - started
        stdout = _read_text(stdout_path)
        stderr = _read_text(stderr_path)
        updates = {
            "tool.output": self._context_output(stdout, stdout_path),
            "tool.exit_code": process.returncode,
            "tool.stdout_file": str(stdout_path),
            "tool.stderr_file": str(stderr_path),
        }
        if timed_out:
            return Outcome(
                status=StageStatus.FAIL,
                context_updates=updates,
                failure_reason=(
                    f"timed out after {round(timeout or 0, 2):g}s: {command} "
                    f"(process group killed; output in {stage_dir})"
                ),
            )
        if process.returncode != 0:
            reason = f"exit code {process.returncode}: {command}"
            tail = _tail(stderr, self.stderr_tail_lines)
            if tail:
                reason += f"\nstderr (last {self.stderr_tail_lines} lines):\n{tail}"
            return Outcome(status=StageStatus.FAIL, context_updates=updates, failure_reason=reason)
        return Outcome(
            status=StageStatus.SUCCESS,
            context_updates=updates,
            notes=f"Tool completed in {elapsed:.2f}s: {command}",
        )

    @staticmethod
    def _environment(node: Node, env: StepEnv, stage_dir: Path) -> dict[str, str]:
        """The caller's environment plus where the command is in the run (for its own files)."""
        return {
            **os.environ,
            "FRESHNESS_NODE_ID": node.id,
            "FRESHNESS_STAGE_DIR": str(stage_dir),
            "FRESHNESS_RUN_DIR": str(env.run_dir),
            "FRESHNESS_ATTEMPT": str(env.attempt),
        }

    def _context_output(self, stdout: str, path: Path) -> str:
        if len(stdout) <= self.output_chars:
            return stdout
        return (
            stdout[: self.output_chars]
            + f"\n[... truncated {len(stdout) - self.output_chars} chars; full output in {path}]"
        )
