"""A run held open by a Jupyter kernel, seen from the command line: a real kernel (started with
``jupyter_client``) runs a pipeline to a gate and keeps the run (and its driver lock) between
cells; ``status`` and ``resume`` in other processes say it is idle at the gate and where to act,
and after ``%pipeline reset`` there the command line drives the run."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

from jupyter_client.blocking.client import BlockingKernelClient
from jupyter_client.manager import KernelManager

from tests.kernels import execute, running_kernel
from tests.pipelines import GO_GATE, SLOW_TOOL
from tests.processes import cli, cli_process, group_alive, waiting_run
from tests.waiting import wait_until

GATED = f"%%pipeline g\n{GO_GATE}"


def refusal(client: BlockingKernelClient, code: str) -> str:
    """Run ``code`` in the kernel, which must refuse it with a UsageError: its message."""
    reply = client.execute_interactive(code, output_hook=lambda message: None, timeout=120)
    content = reply["content"]
    assert (content["status"], content.get("ename")) == ("error", "UsageError"), content
    return str(content["evalue"])


def test_a_kernel_idle_at_a_gate_is_named_with_where_to_act_until_it_lets_go(
    tmp_path: Path, kernel: tuple[KernelManager, BlockingKernelClient]
) -> None:
    _, client = kernel
    execute(client, "%load_ext freshness_magic")
    execute(client, GATED)
    assert "waiting" in execute(client, "%pipeline run")
    pid = int(execute(client, "import os; print(os.getpid())"))
    (run_dir,) = (tmp_path / ".freshness" / "runs").iterdir()
    lock = json.loads((run_dir / "driver.lock").read_text())
    assert (lock["pid"], lock["program"]) == (pid, "ipykernel")

    status = cli("status", str(run_dir), cwd=tmp_path)
    assert status.returncode == 3, status.stderr
    first, *rest = status.stdout.splitlines()
    assert first.startswith(
        f"run {run_dir.name}: waiting; held open by an IPython kernel (pid {pid}, since "
    )
    assert first.endswith("), idle and waiting at gate 'review'"), first
    assert "running" not in status.stdout and "driven now" not in status.stdout
    assert rest[-1] == (
        "note: answer it there (%pipeline resume review --choice KEY), or leave the run there "
        f"(%pipeline reset) to resume it: python -m freshness_magic resume {run_dir}"
    )
    driver = json.loads(cli("status", str(run_dir), "--json", cwd=tmp_path).stdout)["driver"]
    assert (driver["pid"], driver["program"]) == (pid, "ipykernel")

    refused = cli("resume", str(run_dir), "--answer", "review=Y", cwd=tmp_path)
    assert refused.returncode == 2 and refused.stdout == ""
    assert refused.stderr.startswith(
        f"python -m freshness_magic resume: run directory {run_dir} is held open by an IPython "
        f"kernel (pid {pid}, since "
    ), refused.stderr
    assert refused.stderr.rstrip().endswith(
        "), idle and waiting at gate 'review': answer it there (%pipeline resume review "
        "--choice KEY), or leave the run there (%pipeline reset) to resume it here"
    ), refused.stderr

    # a second kernel (a terminal trial): "wait for it to finish" would wait for ever
    with running_kernel(tmp_path) as (_, other):
        execute(other, "%load_ext freshness_magic")
        said = refusal(other, GATED.replace("%%pipeline g", "%%pipeline g --resume"))
        assert said.startswith(f"run directory {run_dir} is held open by an IPython kernel (pid ")
        assert said.endswith(
            "idle and waiting at gate 'review': answer it there (%pipeline resume review "
            "--choice KEY), or leave the run there (%pipeline reset) to resume it here"
        ), said

    execute(client, "%pipeline reset")  # the kernel lives on; its lock is let go of
    released = json.loads((run_dir / "driver.lock").read_text())
    assert released["pid"] == pid and released["released"] >= released["since"]
    status = cli("status", str(run_dir), cwd=tmp_path)
    assert status.stdout.splitlines()[0] == f"run {run_dir.name}: waiting", status.stdout
    assert "held open" not in status.stdout and "note:" not in status.stdout
    assert "driver" not in json.loads(cli("status", str(run_dir), "--json", cwd=tmp_path).stdout)
    done = cli_process("resume", str(run_dir), "--answer", "review=Y", cwd=tmp_path)  # its lock
    assert done.returncode == 0, done.stderr
    assert json.loads((run_dir / "driver.lock").read_text())["program"] == "freshness-magic"


def test_runs_held_idle_by_a_kernel_get_no_note_that_they_are_running(
    tmp_path: Path, kernel: tuple[KernelManager, BlockingKernelClient]
) -> None:
    """A trial: the command line warned "another run of release_sync is running here" for runs
    a kernel only held idle, one of them completed. A held run that runs no node (waiting at a
    gate, or completed) runs nothing beside a new one, so no note."""
    _, client = kernel
    execute(client, "%load_ext freshness_magic")
    execute(client, GATED)
    assert "waiting" in execute(client, "%pipeline run")
    (tmp_path / "g.dot").write_text(GO_GATE)
    beside = cli("run", "g.dot", "--to", "review", cwd=tmp_path)
    assert beside.returncode == 3, beside.stderr  # paused before the gate
    assert "another run" not in beside.stderr, beside.stderr
    execute(client, "%pipeline resume review --choice Y")
    assert "completed" in execute(client, "%pipeline status")
    after = cli("run", "g.dot", "--to", "review", cwd=tmp_path)
    assert after.returncode == 3, after.stderr
    assert "another run" not in after.stderr, after.stderr


OLD_HOLDER = r"""
import fcntl, json, os, socket, sys, time
fd = os.open(os.path.join(sys.argv[1], "driver.lock"), os.O_RDWR | os.O_CREAT)
fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
os.ftruncate(fd, 0)
old = {"pid": os.getpid(), "host": socket.gethostname(), "since": time.time()}
os.write(fd, json.dumps(old).encode())
print("locked", flush=True)
sys.stdin.read()
"""


def test_a_lock_file_without_its_program_still_names_its_holder_and_excludes(
    tmp_path: Path,
) -> None:
    """A holder of an older version writes no ``program``: it is named by pid, as before."""
    run_dir = waiting_run(tmp_path, GO_GATE, "g.dot")
    holder = subprocess.Popen(
        [sys.executable, "-c", OLD_HOLDER, str(run_dir)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        status = cli("status", str(run_dir), cwd=tmp_path)
        first = status.stdout.splitlines()[0]
        assert first.startswith(f"run {run_dir.name}: driven now by pid {holder.pid} (since ")
        assert first.endswith(", waiting at gate 'review'); its last checkpoint says waiting")
        refused = cli("resume", str(run_dir), "--answer", "review=Y", cwd=tmp_path)
        assert refused.returncode == 2
        assert (
            f"is driven by another process (pid {holder.pid} on host {socket.gethostname()}); "
            "wait for it to finish or stop it"
        ) in refused.stderr
    finally:
        holder.communicate("", timeout=60)
    done = cli("resume", str(run_dir), "--answer", "review=Y", cwd=tmp_path)
    assert done.returncode == 0, done.stderr


def test_a_kernel_restart_stops_the_tool_its_view_was_running(tmp_path: Path) -> None:
    """The tool outlived the restart, finished its work unwatched, and the re-run notebook's Run
    did it again: a JupyterLab trial found `work` in work.log twice."""
    with running_kernel(tmp_path) as (manager, client):
        execute(client, "%load_ext freshness_magic")
        execute(client, "%%pipeline slow\n" + SLOW_TOOL)
        # as the view's Run button does: the action in a background thread, the kernel idle
        execute(
            client, "import threading; threading.Thread(target=slow.run_to, daemon=True).start()"
        )
        started = tmp_path / "pgid.txt"
        wait_until(lambda: started.exists() and started.read_text().strip(), "the tool starts")
        pgid = int(started.read_text())
        assert group_alive(pgid)
        manager.restart_kernel(now=False)
        wait_until(lambda: not group_alive(pgid), "the tool stops with its kernel", timeout=10)
    assert not (tmp_path / "work.log").exists()
    (run_dir,) = (tmp_path / ".freshness" / "runs").iterdir()
    status = cli("status", str(run_dir), cwd=tmp_path)
    assert status.returncode == 3, status.stdout + status.stderr
    assert "work" in status.stdout and "still runs" not in status.stdout
