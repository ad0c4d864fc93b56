"""What a handler call shipped to a Dask worker reads is recorded as a local call's would be.

The same pipeline runs in this process and on a real 2-worker Dask cluster; their traces' reads
(keys, fingerprints, writers, branch parts), their marks after an upstream change, and what reuse
takes from an earlier run must be the same.
"""

from __future__ import annotations

import concurrent.futures
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from freshness_magic.cluster.daskcluster import DaskCluster
from freshness_magic.engine import RunState
from freshness_magic.engine.marks import MarkKind
from freshness_magic.engine.remote import RemoteCall, RemoteResult, run_remote
from freshness_magic.engine.run import Run
from freshness_magic.engine.trace import Trace
from freshness_magic.freshness.extension import run_marks
from freshness_magic.session import open_run, resume_run
from freshness_magic.views.details import execution_lines
from tests.processes import cli

SHIPPED = """digraph shipped {
  graph [goal="Ship the docs"]
  start     [shape=Mdiamond]
  draft     [shape=parallelogram, tool_command="cat core.py", source_files="core.py",
             freshness="warn"]
  fan       [shape=component]
  cli_docs  [shape=parallelogram, tool_command="cat docs/cli.md", source_files="docs/cli.md",
             freshness="warn"]
  api_docs  [prompt="Check @docs/api.md against {tool.output}", source_files="docs/api.md",
             freshness="warn"]
  changelog [prompt="Review the changelog for $goal"]
  docs_join [shape=tripleoctagon]
  summary   [prompt="Summarise {parallel.fan_in.best_id} of {tool.output} ({missing.key})"]
  docs_gate [shape=hexagon, label="Docs ok?"]
  docs_fix  [prompt="Fix the docs: {human.gate.label}"]
  publish   [prompt="Publish for $goal: {last_response}"]
  kind      [shape=parallelogram, tool_command="echo minor"]
  done      [shape=Msquare]
  start -> draft -> fan
  fan -> cli_docs -> docs_join
  fan -> api_docs -> docs_join
  fan -> changelog -> docs_join
  docs_join -> summary -> docs_gate
  docs_gate -> docs_fix [label="[F] Fix"]
  docs_gate -> publish [label="[A] Approve", fidelity="summary:low"]
  docs_fix -> fan
  publish -> kind -> done
}
"""
SHIPPED_NODES = {
    "draft",
    "cli_docs",
    "api_docs",
    "changelog",
    "summary",
    "docs_fix",
    "publish",
    "kind",
}
"""The nodes whose handler call goes to the cluster (tools and codergen)."""
STALE = {"draft"}
OUTDATED = {"api_docs", "docs_join", "summary", "publish"}
"""After ``core.py`` changes: ``draft`` read it; the prompts of ``api_docs`` (a branch) and
``summary`` expand its ``tool.output``; the fan-in reads ``api_docs``'s result; ``publish`` reads
the response of the ``summary`` that read it. ``cli_docs``, ``changelog``, ``docs_fix``, the gate
and ``kind`` read nothing of it."""


def workdir(tmp_path: Path) -> Path:
    (tmp_path / "docs").mkdir(parents=True)
    (tmp_path / "docs" / "cli.md").write_text("cli v1\n")
    (tmp_path / "docs" / "api.md").write_text("api v1\n")
    (tmp_path / "core.py").write_text("x = 1\n")
    (tmp_path / "shipped.dot").write_text(SHIPPED)
    return tmp_path


def finish(run: Run) -> Run:
    """Run to the gate, loop once ([F]), approve ([A]), run to the end."""
    run.run()
    run.answer("docs_gate", "F")
    run.run()
    run.answer("docs_gate", "A")
    result = run.run()
    assert result.state is RunState.COMPLETED, result.summary()
    return run


ReadRow = tuple[str, str, str | None, str | None, str | None, Any]


def reads_by_execution(
    traces: list[Trace],
) -> dict[tuple[str, int], tuple[list[ReadRow], list[str]]]:
    """Each execution (node, its n-th run) -> its reads (key, fingerprint, writer node, branch,
    parallel node, value) and absent keys; writers named by node and pass, not by step (branch
    nodes take steps in the order their threads finish)."""
    names: dict[int, str] = {}
    seen: dict[str, int] = {}
    keyed: dict[tuple[str, int], Trace] = {}
    for trace in sorted(traces, key=lambda t: t.step or 0):
        count = seen.get(trace.node_id, 0)
        seen[trace.node_id] = count + 1
        assert trace.step is not None
        names[trace.step] = f"{trace.node_id}#{count}"
        keyed[(trace.node_id, count)] = trace

    def name(step: int | None) -> str | None:
        return None if step is None else names[step]

    return {
        at: (
            sorted(
                (r.key, r.fingerprint, name(r.writer), r.part, name(r.via), repr(r.value))
                for r in trace.reads
            ),
            sorted(trace.absent),
        )
        for at, trace in keyed.items()
    }


def run_both(tmp_path: Path, cluster: DaskCluster) -> tuple[list[Trace], Run]:
    """The pipeline run in this process, then on the cluster, under the same run id in the same
    folder (the local run's folder moved aside): values naming run files are equal. The local
    run's traces and the shipped run (open: the caller closes it)."""
    work = workdir(tmp_path)
    runs = work / ".freshness" / "runs"
    local = finish(open_run(work / "shipped.dot", workdir=work, run_id="same"))
    local.close()
    (runs / "same").rename(runs / "local")
    shipped = open_run(work / "shipped.dot", workdir=work, run_id="same", executor=cluster)
    return list(local.traces), finish(shipped)


def ran_on_workers(run: Run, cluster: DaskCluster) -> set[str]:
    """The nodes whose executions name a worker of ``cluster`` as where they ran."""
    names = set(cluster.workers().values())
    found = set()
    for node in run.graph.nodes:
        status = run.run_dir / "nodes" / node / "status.json"
        if status.exists():
            updates = json.loads(status.read_text())["context_updates"]
            if updates.get(f"worker.{node}", {}).get("worker") in names:
                found.add(node)
    return found


def test_a_shipped_execution_reads_what_a_local_one_reads(
    tmp_path: Path, dask_cluster: DaskCluster
) -> None:
    local, shipped = run_both(tmp_path, dask_cluster)
    try:
        assert ran_on_workers(shipped, dask_cluster) == SHIPPED_NODES
        here = reads_by_execution(local)
        there = reads_by_execution(list(shipped.traces))
        assert there == here
        # Not equal by having nothing: the shipped executions read, with the writers as the
        # driver knew them.
        summary, absent = there[("summary", 1)]
        # (``context.*``: which shared values its compact fidelity found set, no writer)
        assert [(r[0], r[2], r[3]) for r in summary] == [
            ("context.*", None, None),
            ("parallel.fan_in.best_id", "docs_join#1", None),
            ("tool.output", "draft#0", None),
        ]
        assert "missing.key" in absent
        assert [(r[0], r[2]) for r in there[("api_docs", 0)][0]] == [
            ("context.*", None),
            ("tool.output", "draft#0"),
        ]
        # publish came by an edge whose fidelity (summary:low, resolved on the driver) reads
        # the goal, the last stage and its outcome as well
        assert [(r[0], r[2]) for r in there[("publish", 0)][0]] == [
            ("context.*", None),
            ("graph.goal", None),
            ("last_response", "summary#1"),
            ("last_stage", "summary#1"),
            ("outcome", "docs_gate#1"),
        ]
        assert [(r[0], r[2]) for r in there[("docs_fix", 0)][0]] == [
            ("context.*", None),
            ("human.gate.label", "docs_gate#0"),
        ]
        parts = sorted((r[3], r[2]) for r in there[("docs_join", 0)][0])
        assert parts == [
            ("api_docs", "api_docs#0"),
            ("changelog", "changelog#0"),
            ("cli_docs", "cli_docs#0"),
        ]
    finally:
        shipped.close()


def marked(run: Run) -> tuple[set[str], set[str]]:
    marks = run_marks(run)
    return (
        {n for n, m in marks.items() if m.kind is MarkKind.STALE},
        {n for n, m in marks.items() if m.kind is MarkKind.OUTDATED},
    )


def status_sets(work: Path, run_dir: Path) -> tuple[set[str], set[str]]:
    status = json.loads(cli("status", str(run_dir), "--json", cwd=work).stdout)
    states = {n: v["state"] for n, v in status["nodes"].items()}
    return (
        {n for n, s in states.items() if s == "stale"},
        {n for n, s in states.items() if s == "outdated"},
    )


def test_a_changed_upstream_value_marks_shipped_readers_as_local_ones(
    tmp_path: Path, dask_cluster: DaskCluster
) -> None:
    work = workdir(tmp_path)
    local = finish(open_run(work / "shipped.dot", workdir=work))
    shipped = finish(open_run(work / "shipped.dot", workdir=work, executor=dask_cluster))
    try:
        assert marked(local) == marked(shipped) == (set(), set())
        (work / "core.py").write_text("x = 2\n")
        assert marked(local) == (STALE, OUTDATED)
        assert marked(shipped) == (STALE, OUTDATED)
        why = run_marks(shipped)["summary"].because()
        assert why.startswith("`summary` read ")
        assert why.endswith("`tool.output` of `draft` (step 2), whose input `core.py` changed")
        # The same chain (branch nodes take steps in the order their threads finish).
        assert re.sub(r"step \d+", "step N", why) == re.sub(
            r"step \d+", "step N", run_marks(local)["summary"].because()
        )
    finally:
        local.close()
        shipped.close()
    assert status_sets(work, local.run_dir) == (STALE, OUTDATED)
    assert status_sets(work, shipped.run_dir) == (STALE, OUTDATED)


def reused(run: Run) -> set[str]:
    """The nodes whose first execution in ``run`` was taken from an earlier one (a loop's next
    pass may reuse the pass before it, in any run)."""
    lines = (run.run_dir / "evidence.jsonl").read_text(encoding="utf-8").splitlines()
    first: dict[str, dict[str, Any]] = {}
    for line in lines:
        record = json.loads(line)
        first.setdefault(record["nodeId"], record)
    return {n for n, r in first.items() if "reused_from" in r["outcome"]["engine"]}


def test_reuse_of_a_shipped_node_verifies_what_it_read(
    tmp_path: Path, dask_cluster: DaskCluster
) -> None:
    work = workdir(tmp_path)

    def again(executor: object) -> Run:
        run = finish(open_run(work / "shipped.dot", workdir=work, executor=executor, reuse=True))
        run.close()
        return run

    again(dask_cluster)
    # Nothing changed: every reusable node is taken from the first run (tools that declare
    # their inputs, codergen nodes), on the cluster as here.
    unchanged = {"draft", "cli_docs", "api_docs", "changelog", "summary", "docs_fix", "publish"}
    assert reused(again(dask_cluster)) == unchanged
    assert reused(again(None)) == unchanged
    # ``core.py`` changes: ``draft`` runs; the prompts that expand its output (``api_docs``,
    # ``summary``) read a different value and run; the rest is taken from before (``publish``
    # too: the simulated response of the new summary is the same text). A shipped node's
    # reads are verified as a local node's are, whichever recorded them.
    (work / "core.py").write_text("x = 2\n")
    assert reused(again(dask_cluster)) == {"cli_docs", "changelog", "docs_fix", "publish"}
    (work / "core.py").write_text("x = 3\n")
    assert reused(again(None)) == {"cli_docs", "changelog", "docs_fix", "publish"}
    (work / "core.py").write_text("x = 2\n")  # back to what the shipped run saw: all reused
    assert reused(again(dask_cluster)) == unchanged


class OlderWorkers(concurrent.futures.Executor):
    """Runs each call as a worker of an older version would: the result carries no reads."""

    def __init__(self) -> None:
        self.pool = concurrent.futures.ThreadPoolExecutor(max_workers=4)

    def submit(  # type: ignore[override]
        self, fn: Callable[[RemoteCall], RemoteResult], call: RemoteCall
    ) -> concurrent.futures.Future[RemoteResult]:
        assert fn is run_remote

        def older() -> RemoteResult:
            result = run_remote(call)
            return RemoteResult(result.outcome, result.events, result.worker)

        return self.pool.submit(older)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        self.pool.shutdown(wait=wait, cancel_futures=cancel_futures)


def test_a_worker_that_reports_no_reads_leaves_no_mark_falsely_absent(tmp_path: Path) -> None:
    work = workdir(tmp_path)
    workers = OlderWorkers()
    try:
        run = finish(open_run(work / "shipped.dot", workdir=work, executor=workers, reuse=True))
        run.close()
        traces = {t.node_id: t for t in run.traces}
        summary = traces["summary"]
        assert summary.reads_unknown
        assert {r.key for r in summary.reads} >= {"tool.output", "parallel.fan_in.best_id"}
        assert not traces["docs_join"].reads_unknown  # the fan-in ran on the driver
        (work / "core.py").write_text("x = 2\n")
        stale, outdated = marked(run)
        assert stale == STALE
        assert outdated >= OUTDATED  # at least what a reporting worker's run would mark
        assert run_marks(run)["summary"].because().startswith("`summary` may have read ")
        shown = execution_lines(list(run.traces), "summary")["read"]
        assert shown[0].startswith("(its worker did not report what it read")
        assert status_sets(work, run.run_dir) == (stale, outdated)
        restored = resume_run(run.run_dir)  # kept in the journal
        assert {t.node_id for t in restored.traces if t.reads_unknown} == SHIPPED_NODES
        restored.close()
        # An execution whose reads are not known cannot be verified: never reused.
        (work / "core.py").write_text("x = 1\n")
        second = finish(open_run(work / "shipped.dot", workdir=work, executor=workers, reuse=True))
        second.close()
        assert reused(second) == set()
    finally:
        workers.shutdown()


class LosesTheFirstCall(concurrent.futures.Executor):
    """Runs every call; the first call of ``node`` runs on its worker, but its result never
    comes back (the connection to the worker drops): the driver must count none of its reads."""

    def __init__(self, node: str) -> None:
        self.node = node
        self.lost = 0
        self.pool = concurrent.futures.ThreadPoolExecutor(max_workers=2)

    def submit(  # type: ignore[override]
        self, fn: Callable[[RemoteCall], RemoteResult], call: RemoteCall
    ) -> concurrent.futures.Future[RemoteResult]:
        lose = call.node.id == self.node and not self.lost
        self.lost += lose

        def work() -> RemoteResult:
            result = fn(call)
            if lose:
                raise ConnectionError("the worker's connection dropped")
            return result

        return self.pool.submit(work)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        self.pool.shutdown(wait=wait, cancel_futures=cancel_futures)


RETRIED = """digraph retried {
  start   [shape=Mdiamond]
  draft   [shape=parallelogram, tool_command="cat core.py"]
  summary [prompt="Attempt {internal.retry_count.summary} at {tool.output}", max_retries=1]
  done    [shape=Msquare]
  start -> draft -> summary -> done
}
"""


def test_a_lost_call_counts_none_of_its_reads_the_retry_that_came_back_does(
    tmp_path: Path,
) -> None:
    (tmp_path / "core.py").write_text("x = 1\n")
    workers = LosesTheFirstCall("summary")
    try:
        with open_run(RETRIED, workdir=tmp_path, executor=workers) as run:
            assert run.run().state is RunState.COMPLETED
            traces = {t.node_id: t for t in run.traces}
            events = (run.run_dir / "events.jsonl").read_text()
    finally:
        workers.shutdown()
    assert workers.lost == 1 and "the worker's connection dropped" in events
    summary = traces["summary"]
    # The lost attempt ran with no retry count set (it would have noted the key absent); only
    # the second attempt, which came back, counts: it read the count 1.
    assert [(r.key, r.value, r.writer) for r in summary.reads] == [
        ("internal.retry_count.summary", 1, None),
        ("tool.output", "x = 1", traces["draft"].step),
        ("context.*", [], None),
    ]
    assert "internal.retry_count.summary" not in summary.absent
    assert not summary.reads_unknown
