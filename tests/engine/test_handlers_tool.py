"""The tool handler with real subprocesses: output capture, exit codes, timeouts, groups."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from freshness_magic.engine.context import Context
from freshness_magic.engine.handlers import tool
from freshness_magic.engine.handlers.base import StepEnv
from freshness_magic.engine.handlers.tool import ToolHandler
from freshness_magic.engine.model import Graph, Node
from freshness_magic.engine.outcome import Outcome, StageStatus
from freshness_magic.engine.pipeline import load_pipeline
from freshness_magic.engine.run import Run
from tests.pipelines import one_tool
from tests.processes import group_alive
from tests.waiting import wait_until


def run_tool(
    tmp_path: Path, command: str | None, *, deadline: float | None = None, **attrs: str
) -> Outcome:
    node_attrs = dict(attrs)
    if command is not None:
        node_attrs["tool_command"] = command
    node = Node("lint", node_attrs)
    graph = Graph(name="g", nodes={"lint": node})
    env = StepEnv(graph=graph, run_dir=tmp_path / "run", workdir=tmp_path, deadline=deadline)
    return ToolHandler(kill_grace=0.5).execute(node, Context(), env)


def process_gone(pid: int) -> bool:
    """True when ``pid`` no longer exists or is a zombie awaiting its reaper."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def test_success_captures_stdout_in_workdir(tmp_path: Path) -> None:
    (tmp_path / "data.txt").write_text("hello\n")
    outcome = run_tool(tmp_path, "cat data.txt; echo warn >&2")
    assert outcome.status is StageStatus.SUCCESS
    assert outcome.context_updates["tool.output"] == "hello"
    assert outcome.context_updates["tool.exit_code"] == 0
    folder = tmp_path / "run" / "nodes" / "lint"
    assert (folder / "stdout.txt").read_text() == "hello\n"
    assert (folder / "stderr.txt").read_text() == "warn\n"


def test_long_stdout_is_truncated_with_pointer_to_file(tmp_path: Path) -> None:
    outcome = run_tool(tmp_path, "python3 -c \"print('y' * 10000)\"")
    text = outcome.context_updates["tool.output"]
    assert text.endswith("\n" + "y" * 3999)  # the last 4,000 bytes, without the line break
    assert "first 6001 bytes not shown" in text and "stdout.txt" in text
    assert len((tmp_path / "run/nodes/lint/stdout.txt").read_text()) == 10001


def test_nonzero_exit_reports_code_and_stderr_tail(tmp_path: Path) -> None:
    command = "for i in $(seq 1 30); do echo line$i >&2; done; exit 3"
    outcome = run_tool(tmp_path, command)
    assert outcome.status is StageStatus.FAIL
    assert "exit code 3" in outcome.failure_reason
    assert "line30" in outcome.failure_reason
    assert "line11\n" in outcome.failure_reason
    assert "line10\n" not in outcome.failure_reason
    assert outcome.context_updates["tool.exit_code"] == 3


def test_missing_command_is_fail_with_hint(tmp_path: Path) -> None:
    outcome = run_tool(tmp_path, None)
    assert outcome.status is StageStatus.FAIL
    assert "tool_command" in outcome.failure_reason


def test_timeout_kills_the_whole_process_group(tmp_path: Path) -> None:
    command = "sleep 300 & echo $! > grandchild.pid; echo started; wait"
    outcome = run_tool(tmp_path, command, timeout="1s")
    assert outcome.status is StageStatus.FAIL
    assert "timed out after 1s" in outcome.failure_reason
    pid = int((tmp_path / "grandchild.pid").read_text())
    wait_until(lambda: process_gone(pid), "the tool's background child killed", timeout=5)
    assert outcome.context_updates["tool.output"] == "started"


def test_run_deadline_limits_the_command(tmp_path: Path) -> None:
    outcome = run_tool(tmp_path, "sleep 300", deadline=time.monotonic() + 0.3)
    assert outcome.status is StageStatus.FAIL
    assert "timed out" in outcome.failure_reason


def test_later_attempts_keep_earlier_output(tmp_path: Path) -> None:
    node = Node("lint", {"tool_command": "echo run"})
    graph = Graph(name="g", nodes={"lint": node})
    handler = ToolHandler()
    for attempt in (1, 2):
        env = StepEnv(graph=graph, run_dir=tmp_path / "run", workdir=tmp_path, attempt=attempt)
        handler.execute(node, Context(), env)
    names = sorted(p.name for p in (tmp_path / "run/nodes/lint").iterdir())
    assert names == ["stderr.attempt2.txt", "stderr.txt", "stdout.attempt2.txt", "stdout.txt"]
    assert os.path.getsize(tmp_path / "run/nodes/lint/stdout.attempt2.txt") == 4


def test_command_sees_where_it_runs(tmp_path: Path) -> None:
    outcome = run_tool(
        tmp_path, 'echo "$FRESHNESS_NODE_ID $FRESHNESS_ATTEMPT $FRESHNESS_STAGE_DIR"'
    )
    node_id, attempt, stage_dir = outcome.context_updates["tool.output"].split()
    assert (node_id, attempt) == ("lint", "1")
    assert Path(stage_dir) == tmp_path / "run" / "nodes" / "lint"


def test_timeout_inside_a_run_reports_the_tool_failure(tmp_path: Path) -> None:
    source = one_tool(
        "sleep 300 & echo $! > grandchild.pid; echo partial; wait", node="slow", more='timeout="1s"'
    )
    run = Run(load_pipeline(source), workdir=tmp_path)
    result = run.run()
    assert result.status == "failed"
    outcome = result.node_outcomes["slow"]
    assert "timed out after 1s" in outcome.failure_reason
    assert "process group killed" in outcome.failure_reason
    assert result.context["tool.output"] == "partial"
    pid = int((tmp_path / "grandchild.pid").read_text())
    wait_until(lambda: process_gone(pid), "the tool's background child killed", timeout=5)


def test_the_output_in_the_context_has_no_trailing_line_break_as_with_dollar_parens(
    tmp_path: Path,
) -> None:
    """`condition="context.tool.output=pass"` held for no `echo pass`: the value was "pass\\n"."""
    outcome = run_tool(tmp_path, "printf 'two\\nlines\\r\\n\\n'")
    assert outcome.context_updates["tool.output"] == "two\nlines"
    assert (tmp_path / "run/nodes/lint/stdout.txt").read_bytes() == b"two\nlines\r\n\n"


def test_ctrl_c_just_after_the_start_still_ends_the_group(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Ctrl-C may land while the driver notes the group it just started, before it waits on
    it: the group is ended there too, not left running once the command has exited. Here the
    interrupt comes while the driver reads the process's start time, once the command has
    written its group id (what a loaded machine does between two lines of the driver)."""
    started = tmp_path / "pgid.txt"

    def interrupted(pid: int) -> str | None:
        wait_until(
            lambda: started.exists() and started.read_text().strip(), "tool started", timeout=120
        )
        raise KeyboardInterrupt

    monkeypatch.setattr(tool, "_start_time", interrupted)
    with pytest.raises(KeyboardInterrupt):
        run_tool(tmp_path, "echo $$ > pgid.txt; exec sleep 60")
    assert not group_alive(int(started.read_text()))
