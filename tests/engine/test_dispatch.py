"""The executor seam with a plain ``concurrent.futures`` process pool (no cluster library)."""

from __future__ import annotations

import json
import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from freshness_magic.engine import Dispatch, Run, RunState, load_pipeline
from freshness_magic.session import open_run

DOT = """digraph p {
  start [shape=Mdiamond]  done [shape=Msquare]
  fan [shape=component]  join [shape=tripleoctagon]
  a [shape=parallelogram, tool_command="echo $PPID > a.txt"]
  b [shape=parallelogram, tool_command="echo $PPID > b.txt"]
  keep [shape=parallelogram, tool_command="echo $PPID > keep.txt", executor="local"]
  start -> fan; fan -> a; fan -> b; a -> join; b -> join; join -> keep -> done
}
"""


def pool() -> ProcessPoolExecutor:
    return ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn"))


def test_a_process_pool_runs_tool_nodes_through_open_run(tmp_path: Path) -> None:
    with pool() as executor, open_run(DOT, workdir=tmp_path, executor=executor) as run:
        assert run.run().state is RunState.COMPLETED
        status = json.loads((run.run_dir / "nodes" / "a" / "status.json").read_text())
    parents = {int((tmp_path / f"{n}.txt").read_text()) for n in "ab"}
    assert os.getpid() not in parents
    assert int((tmp_path / "keep.txt").read_text()) == os.getpid()
    worker = status["context_updates"]["worker.a"]
    assert worker["executor"] == "ProcessPoolExecutor" and worker["pid"] in parents


def test_run_takes_a_dispatch_directly(tmp_path: Path) -> None:
    with pool() as executor:
        run = Run(load_pipeline(DOT), workdir=tmp_path, dispatch=Dispatch(executor, "my processes"))
        with run:
            assert run.run().state is RunState.COMPLETED
    assert int((tmp_path / "a.txt").read_text()) != os.getpid()
