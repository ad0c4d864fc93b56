"""A driver killed between any two writes of a node's end (a parallel branch's or the main
path's) never runs a node again whose end was journaled, and leaves exactly one evidence record
per journaled execution; a kill before the journal record runs it again (at-least-once). The
resumed run's traces are those of an uninterrupted run: an ended branch's trace is journaled
with its end, and the fan-in reads each branch's result from that branch's last node.

The kills are not timed: ``freshness_magic.faults`` stops the driver (SIGKILL) just before its
N-th state write, counted in a trace of a first run, so every window between two writes of a
node's end is hit exactly (docs/ARCHITECTURE.md, "Kill windows").
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from freshness_magic import faults
from freshness_magic.engine import RunState
from freshness_magic.engine.checkpoint import load_checkpoint
from freshness_magic.engine.trace import Trace
from freshness_magic.session import resume_run
from tests.engine.runkit import trace_shape
from tests.forkserver import RUN_MODULES, ForkServer

REPO = Path(__file__).resolve().parents[2]

FAN_OUT = """digraph f {
  start [shape=Mdiamond]
  fan   [shape=component, max_parallel=1]
  a     [shape=parallelogram, tool_command="echo a >> ran.txt"]
  b     [shape=parallelogram, tool_command="echo b >> ran.txt"]
  b2    [shape=parallelogram, tool_command="echo b2 >> ran.txt"]
  join  [shape=tripleoctagon]
  after [shape=parallelogram, tool_command="echo after >> ran.txt"]
  done  [shape=Msquare]
  start -> fan
  fan -> a -> join
  fan -> b -> b2 -> join
  join -> after -> done
}"""
TOOLS = ("a", "b", "b2", "after")

DRIVE = """
import sys
from freshness_magic.session import open_run
run = open_run(open(sys.argv[1]).read(), workdir=sys.argv[2])
run.run()
print(run.state.value)
"""


@pytest.fixture(scope="module")
def drivers() -> Iterator[ForkServer]:
    """Where the driver processes come from: each is a process of its own, killed for real."""
    with ForkServer(RUN_MODULES) as server:  # what DRIVE imports
        yield server


def drive(
    drivers: ForkServer, workdir: Path, trace: Path, fault: str | None = None
) -> subprocess.CompletedProcess[str]:
    (workdir / "pipeline.dot").write_text(FAN_OUT)
    env = {**os.environ, "PYTHONPATH": str(REPO), faults.TRACE_ENV: str(trace)}
    env.pop(faults.FAULT_ENV, None)
    if fault is not None:
        env[faults.FAULT_ENV] = fault
    argv = ["-c", str(workdir / "pipeline.dot"), str(workdir)]
    return drivers.run(argv, code=DRIVE, cwd=workdir, env=env)


def writes(trace: Path) -> list[tuple[str, str]]:
    return [tuple(line.split("\t", 1)) for line in trace.read_text().splitlines()]  # type: ignore[misc]


def tool_windows(trace: list[tuple[str, str]]) -> dict[str, tuple[int, int]]:
    """Per tool node: (its group id written, its end's journal record), as 1-based write
    numbers. A kill at a write after the first and up to the second (that record not written)
    finds the tool run and its end not journaled."""
    found = {}
    for tool in TOOLS:
        started = next(
            i for i, (_, path) in enumerate(trace, 1) if path.endswith(f"/nodes/{tool}/pgid")
        )
        journal = next(
            i for i, (site, _) in enumerate(trace, 1) if i > started and site == faults.JOURNAL
        )
        found[tool] = (started, journal)
    return found


@pytest.fixture(scope="module")
def reference_folder(tmp_path_factory: pytest.TempPathFactory, drivers: ForkServer) -> Path:
    """The folder of a whole run, not killed (branches one at a time: the order is fixed)."""
    folder = tmp_path_factory.mktemp("reference")
    done = drive(drivers, folder, folder / "trace")
    assert done.returncode == 0 and done.stdout.strip() == "completed", done.stderr
    return folder


@pytest.fixture(scope="module")
def reference(reference_folder: Path) -> list[tuple[str, str]]:
    """The writes of a whole run, in order."""
    return writes(reference_folder / "trace")


def traces_of(workdir: Path) -> list[Trace]:
    """The traces of the one run in ``workdir``, as its checkpoint holds them."""
    [run_dir] = (workdir / ".freshness" / "runs").iterdir()
    data, _ = load_checkpoint(run_dir)
    return [Trace.from_dict(t, data["run_id"]) for t in data["traces"]]


def test_an_uninterrupted_run_traces_every_branch_node(reference_folder: Path) -> None:
    traces = {t.node_id: t for t in traces_of(reference_folder)}
    assert set(traces) == {"start", "fan", "a", "b", "b2", "join", "after", "done"}
    fan = traces["fan"].step
    assert [traces[n].within for n in ("a", "b", "b2")] == [fan, fan, fan]
    assert traces["b2"].cause == traces["b"].step  # b's outcome led to b2 in its branch
    assert {r.part: r.writer for r in traces["join"].reads} == {
        "a": traces["a"].step,
        "b": traces["b2"].step,  # a branch's result is its last node's
    }


def test_the_trace_sees_each_write_of_a_nodes_end(reference: list[tuple[str, str]]) -> None:
    """A node's end is journaled before its status file and its evidence record."""
    for tool, (_, journal) in tool_windows(reference).items():
        later = [path for _, path in reference[journal:]]
        status = later.index(next(p for p in later if p.endswith(f"/nodes/{tool}/status.json")))
        record = later.index(next(p for p in later if p.endswith("/evidence.jsonl")))
        assert status >= 0 and record >= 0, tool


@pytest.mark.slow
def test_a_kill_between_any_two_writes_of_a_nodes_end_runs_no_journaled_node_again(
    reference: list[tuple[str, str]], reference_folder: Path, tmp_path: Path, drivers: ForkServer
) -> None:
    windows = tool_windows(reference)
    uninterrupted = trace_shape(traces_of(reference_folder))
    first = windows["a"][0] + 1
    last = windows["after"][1] + 6
    # A kill at a tool's group id (the command started, running or not) is a kill while its
    # handler runs: whether it has finished is up to the machine, so that write is left out.
    during = {started for started, _ in windows.values()}
    for kill_at in sorted(set(range(first, min(last, len(reference)) + 1)) - during):
        workdir = tmp_path / f"kill{kill_at}"
        workdir.mkdir()
        killed = drive(drivers, workdir, tmp_path / f"trace{kill_at}", f"{kill_at}:kill")
        assert killed.returncode == -signal.SIGKILL, (kill_at, killed.stderr)
        [run_dir] = (workdir / ".freshness" / "runs").iterdir()
        run = resume_run(run_dir)
        run.run()
        assert run.state is RunState.COMPLETED, (kill_at, run.failure_reason)
        run.close()
        ran = Counter((workdir / "ran.txt").read_text().split())
        for tool, (started, journal) in windows.items():
            twice = started < kill_at <= journal  # it ran, its end was not journaled
            assert ran[tool] == (2 if twice else 1), (kill_at, tool, ran, reference[kill_at - 1])
        log = [json.loads(line) for line in (run_dir / "evidence.jsonl").read_text().splitlines()]
        records = Counter(r["nodeId"] for r in log)
        assert records == Counter(run.completed_nodes), (kill_at, reference[kill_at - 1], records)
        assert all(n == 1 for n in records.values()), (kill_at, records)
        # the same executions, steps, causes, reads and writers as a run never killed
        assert trace_shape(run.traces) == uninterrupted, (kill_at, reference[kill_at - 1])
