"""Every execution records what it read and wrote, through the context, in the run's journal."""

from __future__ import annotations

import json
from pathlib import Path

from freshness_magic.engine.checkpoint import load_checkpoint
from freshness_magic.engine.context import Context
from freshness_magic.engine.handlers.base import StepEnv
from freshness_magic.engine.model import Node
from freshness_magic.engine.outcome import Outcome
from freshness_magic.engine.run import Run
from freshness_magic.engine.trace import MAX_READS, NO_VALUE, Trace, value_fingerprint
from freshness_magic.session import open_run
from tests.engine.runkit import Scripted, make_run

FLOW = """digraph flow {
  start [shape=Mdiamond]
  a     [shape=parallelogram, tool_command="echo hi"]
  b     [prompt="use {tool.output} and {missing.key}"]
  par   [shape=component]
  left  [prompt="left sees {last_stage}"]
  right [shape=parallelogram, tool_command="echo right"]
  join  [shape=tripleoctagon]
  c     [prompt="after {parallel.fan_in.best_id}"]
  done  [shape=Msquare]
  start -> a -> b -> par
  par -> left -> join
  par -> right -> join
  join -> c
  c -> done
}
"""
A_THEN_B = """digraph d { start [shape=Mdiamond] a b done [shape=Msquare]
        start -> a -> b -> done }"""


SHARED_KEYS = ("context.*", None, None)
"""A codergen node's default (compact) fidelity consults which shared ``context.*`` values are
set: a read with no writer (reuse verifies it; it makes no mark)."""


def traces_by_node(run: Run) -> dict[str, Trace]:
    return {t.node_id: t for t in run.traces}


def reads_of(trace: Trace) -> set[tuple[str, str | None, int | None]]:
    return {(r.key, r.part, r.writer) for r in trace.reads}


def test_each_execution_reads_what_its_handler_reads(tmp_path: Path) -> None:
    (tmp_path / "p.dot").write_text(FLOW)
    run = open_run(tmp_path / "p.dot", workdir=tmp_path)
    run.run()
    steps = {t.node_id: t.step for t in run.traces}
    t = traces_by_node(run)
    assert [x.node_id for x in run.traces] == run.completed_nodes
    assert [x.step for x in run.traces] == list(range(1, len(run.completed_nodes) + 1))
    # a tool node reads nothing (its command expands no context key)
    assert t["a"].reads == []
    # a codergen node reads what its prompt expands, with the execution that wrote it
    # and which shared values its (default, compact) fidelity carries
    assert reads_of(t["b"]) == {("tool.output", None, steps["a"]), SHARED_KEYS}
    assert t["b"].reads[0].value == "hi"
    # a branch node reads its own (cloned) context: the value b wrote before the fan-out
    assert reads_of(t["left"]) == {("last_stage", None, steps["b"]), SHARED_KEYS}
    # the parallel node reads nothing; the fan-in reads each branch's result from its branch
    assert t["par"].reads == []
    assert reads_of(t["join"]) == {
        ("parallel.results", "left", steps["left"]),
        ("parallel.results", "right", steps["right"]),
    }
    assert {r.via for r in t["join"].reads} == {steps["par"]}
    assert reads_of(t["c"]) == {("parallel.fan_in.best_id", None, steps["join"]), SHARED_KEYS}
    # writes, and where each execution came from
    assert t["a"].writes["tool.output"].value == "hi"
    assert set(t["par"].writes["parallel.results"].parts or {}) == {"left", "right"}
    assert t["left"].within == steps["par"] and t["left"].branch_of == "par"
    assert t["left"].cause == steps["b"] and t["b"].cause == steps["a"]
    assert t["start"].cause is None


def test_routing_and_extension_reads_are_not_the_node_s(tmp_path: Path) -> None:
    """A condition on the edge after a node reads the context, and so does the freshness
    extension before it runs: neither is a read of the node."""
    dot = """digraph r {
      start [shape=Mdiamond]
      a [shape=parallelogram, tool_command="echo go", source_files="in.txt", freshness="warn"]
      b [prompt="plain"]
      done [shape=Msquare]
      start -> a
      a -> b [condition="context.tool.output=go"]
      a -> done
      b -> done
    }"""
    (tmp_path / "in.txt").write_text("x")
    run = open_run(dot, workdir=tmp_path)
    run.run()
    t = traces_by_node(run)
    assert run.completed_nodes == ["start", "a", "b", "done"]
    assert t["a"].reads == [] and reads_of(t["b"]) == {SHARED_KEYS}
    # the freshness extension reports the declared inputs' fingerprints
    assert set(t["a"].inputs) == {"in.txt"}
    assert len(t["a"].inputs["in.txt"]) in (32, 40)


def test_a_custom_handler_s_reads_and_writes(tmp_path: Path) -> None:
    def reader(node: Node, context: Context, env: StepEnv) -> Outcome:
        context.get("seed")  # read twice: kept once
        _ = "seed" in context
        context.get("absent")  # not there: nothing was read
        context.set("direct", 1)  # set by the handler itself
        _ = context["direct"]  # its own value: not a read
        return Outcome(context_updates={"seed": "next"})

    handler = Scripted({"a": [Outcome(context_updates={"seed": "x" * 500})], "b": [reader]})
    run = make_run(
        A_THEN_B,
        tmp_path,
        handler=handler,
    )
    run.run()
    t = traces_by_node(run)
    (read,) = t["b"].reads
    assert read.key == "seed" and read.writer == t["a"].step
    assert read.value is NO_VALUE  # long values are kept as a fingerprint only
    assert read.fingerprint == value_fingerprint("x" * 500)
    assert set(t["b"].writes) == {"direct", "seed", "outcome"}
    assert t["b"].writes["seed"].value == "next"


def test_reads_are_bounded(tmp_path: Path) -> None:
    updates = {f"k{i}": i for i in range(MAX_READS + 10)}

    def many(node: Node, context: Context, env: StepEnv) -> Outcome:
        for key in updates:
            context.get(key)
        return Outcome()

    handler = Scripted({"a": [Outcome(context_updates=updates)], "b": [many]})
    run = make_run(
        A_THEN_B,
        tmp_path,
        handler=handler,
    )
    run.run()
    b = traces_by_node(run)["b"]
    assert len(b.reads) == MAX_READS and b.truncated == 10


def test_traces_are_in_the_journal_and_survive_a_resume(tmp_path: Path) -> None:
    dot = """digraph j {
      start [shape=Mdiamond]
      a [shape=parallelogram, tool_command="echo one"]
      gate [shape=hexagon, label="go?"]
      b [prompt="got {tool.output}"]
      done [shape=Msquare]
      start -> a -> gate
      gate -> b [label="[Y] yes"]
      b -> done
    }"""
    run = open_run(dot, workdir=tmp_path)
    run.run()
    folder = run.run_dir
    before = [t.to_dict() for t in run.traces]
    run.close()
    # every record of the journal is what the snapshot holds, trace for trace
    lines = (folder / "journal.jsonl").read_text().splitlines()
    journaled = [t for line in lines for t in json.loads(line)["r"].get("traces", [])]
    assert journaled == before
    data, _ = load_checkpoint(folder)
    assert data["traces"] == before

    again = Run.resume(folder)
    assert [t.to_dict() for t in again.traces] == before
    again.answer("gate", "Y")
    again.run()
    t = traces_by_node(again)
    # the value a wrote before the resume is still known as a's
    assert reads_of(t["b"]) == {("tool.output", None, t["a"].step), SHARED_KEYS}
    assert t["gate"].cause == t["a"].step and t["b"].cause == t["gate"].step
    again.close()


def test_a_retry_asked_for_by_a_person_has_no_cause(tmp_path: Path) -> None:
    handler = Scripted({"b": ["fail", "success"]})
    run = make_run(
        A_THEN_B,
        tmp_path,
        handler=handler,
    )
    run.run()
    assert run.state.value == "failed"
    run.retry()
    run.run()
    b_runs = [t for t in run.traces if t.node_id == "b"]
    assert [t.status for t in b_runs] == ["fail", "success"]
    assert b_runs[0].cause == traces_by_node(run)["a"].step
    assert b_runs[1].cause is None
