"""A state write the system refuses (a full disk, a read-only folder, a lost permission, a
quota) at any point of a step is one line naming the file and what to do, never a traceback;
what is already on disk stays intact and the run resumes once the write can be made.

The refusal is injected through ``freshness_magic.faults`` at each write of a run in turn (the
writes enumerated by a first, traced run), so every write site of a step is hit.
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from freshness_magic import faults
from tests.forkserver import ForkServer
from tests.processes import REPO, cli

PIPELINE = """digraph p {
  start [shape=Mdiamond]
  tool  [shape=parallelogram, tool_command="echo tool >> ran.txt"]
  done  [shape=Msquare]
  start -> tool -> done
}
"""


@pytest.fixture(scope="module")
def drivers() -> Iterator[ForkServer]:
    """Where the driver processes come from: each is a process of its own, as a refused write
    stops it."""
    with ForkServer() as server:
        yield server


def run_cli(
    drivers: ForkServer, workdir: Path, *args: str, fault: str | None = None
) -> subprocess.CompletedProcess[str]:
    """``python -m freshness_magic ARGS`` in a process of its own, its writes traced."""
    env = {**os.environ, "PYTHONPATH": str(REPO), faults.TRACE_ENV: str(workdir / "trace")}
    env.pop(faults.FAULT_ENV, None)
    if fault is not None:
        env[faults.FAULT_ENV] = fault
    return drivers.run(["-m", *args], module="freshness_magic", cwd=workdir, env=env)


@pytest.fixture(scope="module")
def tool_step(tmp_path_factory: pytest.TempPathFactory, drivers: ForkServer) -> range:
    """The write numbers of the tool node's step: from its step marker (the first write of
    the step) to the journal record of the step after it."""
    folder = tmp_path_factory.mktemp("reference")
    (folder / "p.dot").write_text(PIPELINE)
    done = run_cli(drivers, folder, "run", "p.dot")
    assert done.returncode == 0, done.stderr
    writes = (folder / "trace").read_text().splitlines()
    first = next(i for i, w in enumerate(writes, 1) if "/tool.running." in w)
    end = next(i for i, w in enumerate(writes, 1) if i > first and "/nodes/done/" in w)
    return range(first, end)


@pytest.mark.slow
@pytest.mark.parametrize("code", ["ENOSPC", "EROFS", "EACCES", "EDQUOT"])
def test_a_refused_write_at_any_point_of_a_step_is_one_line_and_the_run_resumes(
    tmp_path: Path, tool_step: range, code: str, drivers: ForkServer
) -> None:
    points = tool_step if code == "ENOSPC" else [tool_step[len(tool_step) // 2]]
    message = os.strerror(getattr(errno, code))
    for at in points:
        workdir = tmp_path / f"{code}-{at}"
        workdir.mkdir()
        (workdir / "p.dot").write_text(PIPELINE)
        refused = run_cli(drivers, workdir, "run", "p.dot", fault=f"{at}:{code}")
        site = (workdir / "trace").read_text().splitlines()[at - 1]
        said = [line for line in refused.stderr.splitlines() if line.strip()]
        assert "Traceback" not in refused.stderr, (at, site, refused.stderr)
        assert len(said) <= 1, (at, site, said)  # one line, or none (a node failed, said so)
        if said:
            assert message in said[0] or message.lower() in said[0], (at, site, said)
        if refused.returncode == 1:  # the node failed with the refusal as its reason
            assert message in refused.stdout, (at, site, refused.stdout)
        [run_dir] = (workdir / ".freshness" / "runs").iterdir()
        again = cli("resume", str(run_dir), cwd=workdir)
        if again.returncode == 1:  # failed at the node: retry it once the write can be made
            again = cli("resume", str(run_dir), "--retry", cwd=workdir)
        assert again.returncode == 0, (at, site, refused.stdout, again.stdout, again.stderr)
        ran = Counter((workdir / "ran.txt").read_text().split())
        assert ran["tool"] in (1, 2), (at, site, ran)
        if at > tool_step[0] + 2:  # its step's records and status are whole after the resume
            log = (run_dir / "evidence.jsonl").read_text().splitlines()
            assert Counter(json.loads(x)["nodeId"] for x in log)["done"] == 1, (at, site)


@pytest.mark.slow
def test_status_after_a_refused_write_tells_it_from_a_kill(
    tmp_path: Path, tool_step: range, drivers: ForkServer
) -> None:
    """A driver that stopped on a refused write let go of its run: ``status`` never calls that
    a kill, and names at most the one node that was running."""
    for at in tool_step:
        workdir = tmp_path / f"at-{at}"
        workdir.mkdir()
        (workdir / "p.dot").write_text(PIPELINE)
        run_cli(drivers, workdir, "run", "p.dot", fault=f"{at}:ENOSPC")
        site = (workdir / "trace").read_text().splitlines()[at - 1]
        [run_dir] = (workdir / ".freshness" / "runs").iterdir()
        status = cli("status", str(run_dir), cwd=workdir)
        assert "killed?" not in status.stdout, (at, site, status.stdout)
        notes = [line for line in status.stdout.splitlines() if "was running when" in line]
        assert len(notes) <= 1, (at, site, notes)
        for note in notes:
            assert "stopped on an error before its end was saved" in note, (at, site, note)
        as_json = json.loads(cli("status", str(run_dir), "--json", cwd=workdir).stdout)
        assert as_json.get("cut_off_by") in (None, "error"), (at, site, as_json)


def test_status_after_a_kill_still_says_killed(
    tmp_path: Path, tool_step: range, drivers: ForkServer
) -> None:
    """The same point of the step with the driver killed outright: the lock was never let go."""
    at = tool_step[len(tool_step) // 2]
    (tmp_path / "p.dot").write_text(PIPELINE)
    run_cli(drivers, tmp_path, "run", "p.dot", fault=f"{at}:kill")
    [run_dir] = (tmp_path / ".freshness" / "runs").iterdir()
    status = cli("status", str(run_dir), "--json", cwd=tmp_path)
    as_json = json.loads(status.stdout)
    if as_json.get("cut_off_nodes"):
        assert as_json["cut_off_by"] == "kill"
        text = cli("status", str(run_dir), cwd=tmp_path).stdout
        assert "without saving (killed?)" in text
