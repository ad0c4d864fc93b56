"""Crash safety: SIGKILL a running pipeline at many points, resume in a new process, and get
exactly what an uninterrupted run gets; every snapshot left on disk parses, every journal line
but a torn last one passes its checksum, and the state read equals the state resumed from."""

from __future__ import annotations

import json
import os
import random
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from freshness_magic.engine.checkpoint import load_checkpoint
from freshness_magic.engine.checkpoint_format import (
    JOURNAL_FILE,
    history_files,
    parse_journal_line,
)
from tests.forkserver import Forked, ForkServer
from tests.waiting import wait_until

REPO = Path(__file__).resolve().parents[2]

DRIVER = r'''
import json, sys, time
from pathlib import Path
from freshness_magic.engine.handlers.builtin import default_registry
from freshness_magic.engine.interviewers import AutoApproveInterviewer
from freshness_magic.engine.outcome import Outcome, StageStatus
from freshness_magic.engine.pipeline import load_pipeline
from freshness_magic.engine.run import Run

DOT = """digraph crash {
  graph [goal="survive SIGKILL"]
  start [shape=Mdiamond]
  a [type="writer", n="1"]
  b [type="writer", n="2", max_retries=2]
  c [type="writer", n="3"]
  check [shape=diamond]
  d [type="writer", n="4", goal_gate=true]
  e [type="writer", n="5"]
  gate [shape=hexagon, label="Continue?"]
  f [type="writer", n="6"]
  g [type="writer", n="7"]
  h [type="writer", n="8"]
  done [shape=Msquare]
  start -> a -> b -> c -> check
  check -> d [condition="context.total=6"]
  check -> e [condition="context.total!=6"]
  d -> gate
  e -> gate
  gate -> f [label="[Y] Yes"]
  gate -> done [label="[N] No"]
  f -> g -> h -> done
}"""


class Writer:
    """Slow-ish, deterministic: writes a file, sums ``n`` into ``total``, b retries once."""

    def execute(self, node, context, env):
        time.sleep(0.03)
        total = int(context.get("total", 0)) + int(node.attrs["n"])
        out = env.workdir / "out" / f"{node.id}.txt"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(f"{node.id} total={total}\n")
        if node.id == "b" and env.attempt == 1:
            return Outcome(status=StageStatus.RETRY, failure_reason="first try of b")
        return Outcome(notes=f"wrote {node.id}", context_updates={"total": total,
                       f"seen.{node.id}": env.attempt})


def registry():
    reg = default_registry(interviewer=AutoApproveInterviewer())
    reg.register("writer", Writer())
    return reg


def report(run, elapsed):
    result = run.result()
    print(json.dumps({
        "elapsed": elapsed,
        "state": result.state.value,
        "completed_nodes": result.completed_nodes,
        "statuses": {k: o.status.value for k, o in result.node_outcomes.items()},
        "context": result.context,
    }, sort_keys=True))


mode, root = sys.argv[1], Path(sys.argv[2])
if mode == "start":
    run = Run(load_pipeline(DOT), workdir=root, run_id="crash", registry=registry(),
              sleep=lambda s: None)
else:
    run = Run.resume(root / ".freshness" / "runs" / "crash", registry=registry(),
                     sleep=lambda s: None)
began = time.monotonic()
run.run()
report(run, time.monotonic() - began)
'''


PRELOAD = [
    "freshness_magic.engine.handlers.builtin",
    "freshness_magic.engine.interviewers",
    "freshness_magic.engine.pipeline",
    "freshness_magic.engine.run",
    "freshness_magic.engine.validation.validator",
]
"""What :data:`DRIVER` imports."""


@pytest.fixture
def drivers() -> Iterator[ForkServer]:
    """Where the driver processes come from: each is a process of its own, killed for real."""
    with ForkServer(PRELOAD) as server:
        yield server


def python(drivers: ForkServer, driver: Path, *args: str) -> Forked:
    """``python DRIVER ARGS`` as a process of its own (forked from ``drivers``)."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return drivers.start([str(driver), *args], path=str(driver), cwd=driver.parent, env=env)


def finish(proc: Forked) -> dict[str, object]:
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    result: dict[str, object] = json.loads(out)
    return result


def assert_checkpoints_parse(run_dir: Path) -> None:
    files = [run_dir / "checkpoint.json", *history_files(run_dir)]
    for path in files:
        if path.exists():
            data = json.loads(path.read_text(encoding="utf-8"))
            assert isinstance(data, dict) and "completed_nodes" in data, path
            assert data["format"] == 2 and data["journal_offset"] >= 0, path
    lines = (run_dir / JOURNAL_FILE).read_bytes().splitlines(keepends=True)
    assert lines and parse_journal_line(lines[0]) is not None
    assert parse_journal_line(lines[0])["kind"] == "full"  # type: ignore[index]
    for line in lines[:-1]:
        assert parse_journal_line(line) is not None, line


@pytest.mark.slow
def test_sigkill_at_many_points_then_resume_matches_an_uninterrupted_run(
    tmp_path: Path, drivers: ForkServer
) -> None:
    driver = tmp_path / "driver.py"
    driver.write_text(DRIVER)
    ref_root = tmp_path / "reference"
    reference = finish(python(drivers, driver, "start", str(ref_root)))
    run_time = float(reference.pop("elapsed"))  # type: ignore[arg-type]
    assert reference["state"] == "completed"
    assert reference["completed_nodes"] == [
        "start",
        "a",
        "b",
        "c",
        "check",
        "d",
        "gate",
        "f",
        "g",
        "h",
        "done",
    ]
    ref_files = {p.name: p.read_text() for p in (ref_root / "out").iterdir()}

    rng = random.Random(20260122)
    killed_mid_run = 0
    resumed_from: set[int] = set()
    for attempt in range(15):
        root = tmp_path / f"crash{attempt}"
        run_dir = root / ".freshness" / "runs" / "crash"
        proc = python(drivers, driver, "start", str(root))
        checkpoint = run_dir / JOURNAL_FILE
        wait_until(
            lambda c=checkpoint, p=proc: c.exists() or p.poll() is not None,
            "the run to write its first checkpoint",
            timeout=60,
            pause=lambda: time.sleep(0.005),
        )
        time.sleep(rng.uniform(0.0, run_time))
        if proc.poll() is None:
            proc.kill()
            killed_mid_run += 1
        proc.communicate(timeout=60)
        assert_checkpoints_parse(run_dir)
        saved, _ = load_checkpoint(run_dir)
        resumed_from.add(len(saved["completed_nodes"]))
        resumed = finish(python(drivers, driver, "resume", str(root)))
        resumed.pop("elapsed")
        assert resumed == reference, f"kill #{attempt}"
        assert {p.name: p.read_text() for p in (root / "out").iterdir()} == ref_files
        assert_checkpoints_parse(run_dir)
    assert killed_mid_run >= 10
    assert len(resumed_from) >= 4, resumed_from
