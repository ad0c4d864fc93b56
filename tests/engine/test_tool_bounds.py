"""The tool handler's bounds: memory, streamed output, stopping on request, surviving groups."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from freshness_magic.engine.context import Context
from freshness_magic.engine.handlers.base import StepEnv
from freshness_magic.engine.handlers.tool import PGID_FILE, ToolHandler, reap_survivor
from freshness_magic.engine.model import Graph, Node
from freshness_magic.engine.outcome import StageStatus
from freshness_magic.errors import RunError
from tests.pipelines import one_tool
from tests.processes import group_alive
from tests.waiting import wait_until

PEAK_RSS_SCRIPT = """
import resource, sys
from pathlib import Path
from freshness_magic.engine.context import Context
from freshness_magic.engine.handlers.base import StepEnv
from freshness_magic.engine.handlers.tool import ToolHandler
from freshness_magic.engine.model import Graph, Node

tmp = Path(sys.argv[1])
node = Node("loud", {"tool_command": sys.argv[2]})
env = StepEnv(graph=Graph(name="g", nodes={"loud": node}), run_dir=tmp / "run", workdir=tmp)
outcome = ToolHandler().execute(node, Context(), env)
assert outcome.status.value == "success", outcome.failure_reason
print(len(outcome.context_updates["tool.output"]))
# ru_maxrss survives exec, so it may show the forking parent's size; VmHWM is this image's peak.
status = Path("/proc/self/status")
peak = [line.split()[1] for line in status.read_text().splitlines() if line.startswith("VmHWM")]
print(peak[0] if peak else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def step_env(tmp_path: Path, node: Node, **kwargs: Any) -> StepEnv:
    graph = Graph(name="g", nodes={node.id: node})
    return StepEnv(graph=graph, run_dir=tmp_path / "run", workdir=tmp_path, **kwargs)


def test_a_tool_printing_200_mb_keeps_the_driver_small(tmp_path: Path) -> None:
    size = 200 * 1024 * 1024
    command = f"head -c {size} /dev/zero | tr '\\\\0' x"
    done = subprocess.run(
        [sys.executable, "-c", PEAK_RSS_SCRIPT, str(tmp_path), command],
        capture_output=True,
        text=True,
        check=True,
    )
    context_chars, peak_kib = (int(line) for line in done.stdout.split())
    assert (tmp_path / "run/nodes/loud/stdout.txt").stat().st_size == size
    assert context_chars < 5000
    # The whole output read into memory would be >= 200 MiB (twice that decoded).
    assert peak_kib < 120 * 1024, f"peak RSS {peak_kib} KiB"


def test_output_is_streamed_as_bounded_stage_output_events(tmp_path: Path) -> None:
    events: list[tuple[str, dict[str, Any]]] = []
    command = "echo first; sleep 0.5; head -c 100000 /dev/zero | tr '\\\\0' y; echo; echo oops >&2"
    node = Node("t", {"tool_command": command})
    env = step_env(tmp_path, node, emit=lambda kind, data: events.append((kind, data)))
    outcome = ToolHandler().execute(node, Context(), env)
    assert outcome.status is StageStatus.SUCCESS
    assert {kind for kind, _ in events} == {"stage_output"}
    stdout = [data["text"] for _, data in events if data["stream"] == "stdout"]
    assert stdout[0] == "first\n"
    assert all(len(text) <= 8192 + 64 for text in stdout)
    assert any("bytes not shown" in text for text in stdout)
    assert [d["text"] for _, d in events if d["stream"] == "stderr"] == ["oops\n"]


def test_cancel_stops_the_tool_group_and_reports_interrupted(tmp_path: Path) -> None:
    node = Node("t", {"tool_command": "sleep 300 & echo $! > child.pid; wait"})
    env = step_env(tmp_path, node)
    handler = ToolHandler(kill_grace=0.5)
    result: list[Any] = []
    worker = threading.Thread(target=lambda: result.append(handler.execute(node, Context(), env)))
    worker.start()
    pgid_file = tmp_path / "run/nodes/t" / PGID_FILE
    wait_until(lambda: (tmp_path / "child.pid").exists() and pgid_file.exists(), "the tool started")
    pgid = json.loads(pgid_file.read_text())["pgid"]
    env.cancel.set()
    worker.join(30)
    assert not worker.is_alive()
    outcome = result[0]
    assert outcome.status is StageStatus.FAIL
    assert outcome.failure_reason == "interrupted"
    wait_until(lambda: not group_alive(pgid), "the tool's process group is gone")
    assert not pgid_file.exists()


def test_reap_survivor_stops_a_group_left_by_a_killed_driver(tmp_path: Path) -> None:
    driver = subprocess.Popen(
        [
            sys.executable,
            "-c",
            PEAK_RSS_SCRIPT.replace('"success"', '"never"'),
            str(tmp_path),
            "sleep 300",
        ]
    )
    pgid_file = tmp_path / "run/nodes/loud" / PGID_FILE
    wait_until(pgid_file.exists, "the tool recorded its process group")
    pgid = json.loads(pgid_file.read_text())["pgid"]
    os.kill(driver.pid, signal.SIGKILL)
    driver.wait()
    assert group_alive(pgid)
    message = reap_survivor(tmp_path / "run/nodes/loud", grace=0.5)
    assert message is not None and f"process group {pgid}" in message
    wait_until(lambda: not group_alive(pgid), "the tool's process group is gone")
    assert not pgid_file.exists()
    assert reap_survivor(tmp_path / "run/nodes/loud") is None


def test_reap_survivor_leaves_a_group_whose_driver_lives(tmp_path: Path) -> None:
    sleeper = subprocess.Popen(["sleep", "300"], start_new_session=True)
    driver = subprocess.Popen(["sleep", "300"])
    try:
        folder = tmp_path / "nodes" / "n"
        folder.mkdir(parents=True)
        (folder / PGID_FILE).write_text(
            json.dumps({"pgid": sleeper.pid, "driver_pid": driver.pid, "host": os.uname().nodename})
        )
        message = reap_survivor(folder)
        assert (
            message is not None
            and f"still watched by the process that started it (pid {driver.pid})" in message
        )
        assert sleeper.poll() is None
    finally:
        for process in (sleeper, driver):
            process.kill()
            process.wait()


@pytest.mark.parametrize("bad", ["../../x", "a/b", "..", "", "x.y"])
def test_node_dir_refuses_ids_that_leave_the_run_directory(tmp_path: Path, bad: str) -> None:
    node = Node(bad, {"tool_command": "echo escaped"})
    env = step_env(tmp_path / "deep" / "er", node)
    with pytest.raises(RunError, match="cannot name a folder of the run"):
        ToolHandler().execute(node, Context(), env)
    assert not list(tmp_path.rglob("stdout.txt"))


def test_a_run_logs_the_streamed_output_of_its_tool(tmp_path: Path) -> None:
    from freshness_magic.engine.pipeline import load_pipeline
    from freshness_magic.engine.run import Run

    source = one_tool("echo one; sleep 0.4; echo two >&2", node="loud")
    run = Run(load_pipeline(source), workdir=tmp_path)
    assert run.run().status == "completed"
    lines = (run.run_dir / "events.jsonl").read_text().splitlines()
    outputs = [json.loads(line) for line in lines if '"stage_output"' in line]
    assert [(e["node_id"], e["data"]["stream"], e["data"]["text"]) for e in outputs] == [
        ("loud", "stdout", "one\n"),
        ("loud", "stderr", "two\n"),
    ]
