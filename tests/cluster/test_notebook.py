"""The notebook with ``%config PipelineMagics.executor = "dask"``: a fan-out runs on the kernel's
cluster, the run waits at a gate, and a new kernel process resumes it to the end."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from IPython.core.interactiveshell import InteractiveShell

from tests.cluster.test_dask import evidence_log, fan_out

DOT = fan_out(4, "echo $PPID > ppid{i}.txt", after="ship")


def test_dask_executor_from_config_then_resume_in_a_new_kernel(
    shell: InteractiveShell,
    tmp_path: Path,
) -> None:
    workdir = tmp_path / "work"
    shell.run_line_magic("config", 'PipelineMagics.executor = "dask"')
    pipeline = shell.run_cell_magic("pipeline", f"fan --workdir {workdir}", DOT)
    text = str(shell.run_line_magic("pipeline", "run"))
    assert "ship" in text and "waiting" in text.lower(), text
    run = pipeline.current_run
    assert run.dispatch is not None and "LocalCluster" in run.dispatch.label
    parents = {int((workdir / f"ppid{i}.txt").read_text()) for i in range(4)}
    assert os.getpid() not in parents
    workers = {r["nodeId"]: r["outcome"]["engine"].get("worker") for r in evidence_log(run.run_dir)}
    assert all(workers[f"b{i}"] and workers[f"b{i}"]["pid"] in parents for i in range(4))
    run_dir = run.run_dir
    run.close()  # the kernel exits: its driver lock goes
    shell.run_line_magic("unload_ext", "freshness_magic")  # closes the kernel's cluster
    shell.run_line_magic("load_ext", "freshness_magic")

    script = textwrap.dedent(
        f"""
        from IPython.core.interactiveshell import InteractiveShell
        sh = InteractiveShell.instance()
        sh.run_line_magic("load_ext", "freshness_magic")
        sh.run_line_magic("config", 'PipelineMagics.executor = "dask"')
        sh.run_cell_magic("pipeline", "fan --resume --workdir {workdir}", {DOT!r})
        print(sh.run_line_magic("pipeline", "resume ship --choice Y"))
        print("STATE", sh.user_ns["fan"].current_run.state.value)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=180, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    assert "STATE completed" in done.stdout, done.stdout + done.stderr
    checkpoint_nodes = [
        json.loads(line)["node_id"]
        for line in (run_dir / "events.jsonl").read_text().splitlines()
        if json.loads(line)["type"] == "stage_completed"
    ]
    assert checkpoint_nodes[-2:] == ["ship", "done"]


def test_run_with_the_executor_option(
    shell: InteractiveShell,
    tmp_path: Path,
    dask_cluster: object,
) -> None:
    from freshness_magic.cluster.daskcluster import DaskCluster

    assert isinstance(dask_cluster, DaskCluster)
    workdir = tmp_path / "work"
    address = dask_cluster.client.scheduler.address.replace("tcp://", "dask://")
    pipeline = shell.run_cell_magic(
        "pipeline", f"fan --workdir {workdir}", fan_out(2, "echo $PPID > ppid{i}.txt")
    )
    text = str(shell.run_line_magic("pipeline", f"run --executor {address}"))
    assert "completed" in text.lower(), text
    status = str(shell.run_line_magic("pipeline", "status"))
    assert f"run on dask scheduler {dask_cluster.client.scheduler.address}" in status
    parents = {int((workdir / f"ppid{i}.txt").read_text()) for i in range(2)}
    assert parents <= set(dask_cluster.client.run(os.getpid).values())
    pipeline.current_run.close()


def test_an_unknown_executor_is_refused_when_configured(
    shell: InteractiveShell,
    magics: object,
) -> None:
    shell.run_line_magic("config", 'PipelineMagics.executor = "spark"')
    assert magics.executor == ""  # refused: the old value stays
    shell.run_line_magic("config", 'PipelineMagics.executor = "local"')
    assert magics.executor == "local"
