"""One driver per run directory: concurrent resumes, a killed holder's
lock taken over, read-only commands while locked, a dead driver's tool reaped on resume."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from freshness_magic.atomicio import read_jsonl
from freshness_magic.engine import Run, RunState
from freshness_magic.errors import RunError
from tests.pipelines import gate_to_tools
from tests.waiting import wait_until

REPO = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(REPO)}

WAIT_FOR_GO = "touch started; while [ ! -f go ]; do sleep 0.05; done"
GATED = gate_to_tools(
    "Go?",
    {
        "[Y] Yes": ("yes", f"{WAIT_FOR_GO}; echo yes >> ran.txt"),
        "[N] No": ("no", f"{WAIT_FOR_GO}; echo no >> ran.txt"),
    },
    node="gate",
)


def cli(*args: str, cwd: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "freshness_magic", *args],
        cwd=cwd,
        env=ENV,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def waiting_run(tmp_path: Path) -> Path:
    (tmp_path / "g.dot").write_text(GATED)
    first = cli("run", "g.dot", "--workdir", str(tmp_path), "--json", cwd=tmp_path)
    out, err = first.communicate(timeout=120)
    assert first.returncode == 3, err
    return Path(json.loads(out)["run_dir"])


def test_two_concurrent_resumes_at_a_gate_one_drives_the_other_is_refused(
    tmp_path: Path,
) -> None:
    run_dir = waiting_run(tmp_path)
    procs = [
        cli("resume", str(run_dir), "--answer", f"gate={answer}", cwd=tmp_path)
        for answer in ("Y", "N")
    ]
    wait_until(
        lambda: (tmp_path / "started").exists() and any(p.poll() is not None for p in procs),
        "one resume to drive the tool and the other to give up",
        timeout=120,
    )
    (tmp_path / "go").touch()
    results = [(p.wait(timeout=120), *p.communicate(timeout=10)) for p in procs]
    winners = [r for r in results if r[0] == 0]
    losers = [r for r in results if r[0] != 0]
    assert len(winners) == 1 and len(losers) == 1, results
    message = losers[0][2].strip()
    assert "\n" not in message, message
    assert "driven by another process" in message and socket.gethostname() in message
    assert "pid " in message
    ran = (tmp_path / "ran.txt").read_text().split()
    assert len(ran) == 1
    seqs = [r["seq"] for r in read_jsonl(run_dir / "events.jsonl")]
    assert len(seqs) == len(set(seqs))
    answered = [r for r in read_jsonl(run_dir / "events.jsonl") if r["type"] == "gate_answered"]
    assert len(answered) == 1
    assert Run.resume(run_dir).state is RunState.COMPLETED


HOLDER = r"""
import sys, time
from freshness_magic.engine.run import Run
run = Run.resume(sys.argv[1])
print("locked", flush=True)
time.sleep(120)
"""


def test_a_second_driver_is_refused_readers_work_and_a_killed_holders_lock_is_taken_over(
    tmp_path: Path,
) -> None:
    run_dir = waiting_run(tmp_path)
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(run_dir)],
        env=ENV,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(RunError, match=rf"pid {holder.pid} on host"):
            Run.resume(run_dir)
        status = cli("status", str(run_dir), "--json", cwd=tmp_path)
        out, err = status.communicate(timeout=60)
        assert status.returncode == 3, err
        assert json.loads(out)["status"] == "waiting"
    finally:
        holder.kill()
        holder.communicate(timeout=60)
    assert holder.returncode == -signal.SIGKILL
    again = Run.resume(run_dir)
    lock = json.loads((run_dir / "driver.lock").read_text())
    assert lock["pid"] == os.getpid() and lock["host"] == socket.gethostname()
    assert again.state is RunState.WAITING


def test_resuming_again_in_the_same_process_shares_the_lock(tmp_path: Path) -> None:
    run_dir = waiting_run(tmp_path)
    first = Run.resume(run_dir)
    second = Run.resume(run_dir)
    assert first.state is second.state is RunState.WAITING
    first.close()
    second.close()


NO_FCNTL = "import sys\nsys.modules['fcntl'] = None  # as on a system without fcntl\n"
TRY_RESUME = r"""
import sys
from freshness_magic.engine.run import Run
from freshness_magic.errors import RunError
try:
    Run.resume(sys.argv[1])
except RunError as exc:
    print(exc)
    sys.exit(5)
print("resumed")
"""


def test_without_fcntl_the_lock_file_itself_excludes_and_a_dead_holder_is_taken_over(
    tmp_path: Path,
) -> None:
    run_dir = waiting_run(tmp_path)

    def python(code: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [sys.executable, "-c", NO_FCNTL + code, str(run_dir)],
            env=ENV,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    holder = python(HOLDER)
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "locked"
        second = python(TRY_RESUME)
        out, err = second.communicate(timeout=60)
        assert second.returncode == 5, err
        assert f"pid {holder.pid} on host {socket.gethostname()}" in out
    finally:
        holder.kill()
        holder.communicate(timeout=60)
    third = python(TRY_RESUME)
    out, err = third.communicate(timeout=60)
    assert third.returncode == 0 and out.strip() == "resumed", out + err
    assert not (run_dir / "driver.lock").exists(), "released when the holder ended"


def _state(pid: int) -> str:
    """The process state letter of ``pid`` from /proc (Z: ended, not yet reaped)."""
    return (Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split() or ["?"])[0]


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc")
def test_status_does_not_name_a_killed_driver_its_parent_has_not_reaped(tmp_path: Path) -> None:
    """A driver killed with SIGKILL stays a zombie until its parent waits for it; it drives
    nothing (the kernel dropped its lock), so status must not say it does."""
    run_dir = waiting_run(tmp_path)
    driver = cli("resume", str(run_dir), "--answer", "gate=Y", cwd=tmp_path)
    try:
        wait_until(lambda: (tmp_path / "started").exists(), "the tool of node 'yes' to start")
        os.kill(driver.pid, signal.SIGKILL)
        wait_until(lambda: _state(driver.pid) == "Z", "the killed driver to be a zombie")
        status = cli("status", str(run_dir), cwd=tmp_path)
        out, _ = status.communicate(timeout=60)
        assert out.startswith(f"run {run_dir.name}: ") and "driven now" not in out, out
        assert _state(driver.pid) == "Z"  # still not reaped while status looked
    finally:
        (tmp_path / "go").touch()
        driver.communicate(timeout=60)


def test_a_node_started_before_a_pause_or_a_takeover_is_not_named_as_cut_off(
    tmp_path: Path,
) -> None:
    """A trial's SIGTERM at an `--ask` prompt paused the run from its last checkpoint (the
    signal came outside the engine's handling); `status` then called the gate "running when its
    driver stopped without saving (killed?)". A pause, or a driver taking the run over, ends
    what had started."""
    from freshness_magic.engine.activity import activity
    from freshness_magic.engine.events import EventType

    run_dir = waiting_run(tmp_path)
    run = Run.resume(run_dir)
    run.events.emit(EventType.STAGE_STARTED, "yes")  # it had started when the stop came
    assert activity(run_dir).running == ["yes"]
    run.close()
    again = Run.resume(run_dir)  # the CLI reopens the run from its checkpoint this way
    assert activity(run_dir).running == []
    again.events.emit(EventType.STAGE_STARTED, "yes")
    again.events.emit(EventType.PIPELINE_PAUSED, "yes", {"reason": "stopped", "next_node": "yes"})
    assert activity(run_dir).running == []
    again.close()
