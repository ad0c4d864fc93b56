"""Context fidelity: which mode a codergen execution runs with, what it carries to the model,
and how the carried values show in its trace, its marks and reuse."""

from __future__ import annotations

from pathlib import Path

from freshness_magic.engine.context import Context
from freshness_magic.engine.dot_parser import parse_dot
from freshness_magic.engine.fidelity import FidelityMode, Resolved, carry, resolve
from freshness_magic.engine.marks import MarkKind, node_marks
from freshness_magic.engine.model import Node
from freshness_magic.engine.outcome import Outcome, StageStatus
from freshness_magic.engine.run import Run
from freshness_magic.engine.trace import Trace, graph_definitions
from freshness_magic.freshness.extension import run_marks
from freshness_magic.session import open_run, resume_run
from freshness_magic.views.details import execution_lines

CHAIN = """digraph f {
  graph [goal="Ship it"%s]
  start [shape=Mdiamond]
  plan  [prompt="plan", source_files="plan.txt", freshness="warn"]
  t     [prompt="T", fidelity="truncate"]
  c     [prompt="C"]
  done  [shape=Msquare]
  start -> plan -> t -> c -> done
}
"""


class Model:
    """A python backend: ``plan`` shares the text of plan.txt as ``context.plan``; every node's
    whole input (carried context, then prompt) is kept by node."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.seen: dict[str, list[str]] = {}

    def __call__(self, node: Node, prompt: str, context: Context) -> str | Outcome:
        self.seen.setdefault(node.id, []).append(prompt)
        if node.id == "plan":
            text = (self.folder / "plan.txt").read_text()
            return Outcome(status=StageStatus.SUCCESS, context_updates={"context.plan": text})
        return f"answer of {node.id}"


def by_node(run: Run) -> dict[str, Trace]:
    return {t.node_id: t for t in run.traces}


def marked(run: Run) -> tuple[set[str], set[str]]:
    marks = run_marks(run)
    return (
        {n for n, m in marks.items() if m.kind is MarkKind.STALE},
        {n for n, m in marks.items() if m.kind is MarkKind.OUTDATED},
    )


# ----------------------------------------------------------------- resolution


def test_edge_beats_node_beats_graph_beats_compact(tmp_path: Path) -> None:
    dot = """digraph r {
      graph [default_fidelity="summary:low"]
      start [shape=Mdiamond]
      a [prompt="A", fidelity="truncate"]
      b [prompt="B"]
      c [prompt="C", fidelity="truncate"]
      done [shape=Msquare]
      start -> a -> b
      b -> c [fidelity="full"]
      c -> done
    }"""
    run = open_run(dot, workdir=tmp_path)
    run.run()
    t = by_node(run)
    assert [(n, t[n].fidelity, t[n].edge) for n in "abc"] == [
        ("a", "truncate", "start->a"),
        ("b", "summary:low", "a->b"),
        ("c", "full", "b->c"),
    ]
    assert t["start"].fidelity == "" and t["done"].fidelity == ""  # no model, no fidelity
    graph = parse_dot(dot.replace('default_fidelity="summary:low"', 'label="x"'))
    assert resolve(graph, graph.nodes["b"], None).mode is FidelityMode.COMPACT
    assert resolve(graph, graph.nodes["b"], None).source == "default"
    edge = graph.outgoing("b")[0]
    assert resolve(graph, graph.nodes["c"], edge).source == "edge b->c"


def test_the_edge_taken_decides_not_any_incoming_edge(tmp_path: Path) -> None:
    dot = """digraph r {
      start [shape=Mdiamond]
      a [shape=parallelogram, tool_command="echo go"]
      x [prompt="X"]
      done [shape=Msquare]
      start -> a
      a -> x [condition="context.tool.output=stop", fidelity="truncate"]
      a -> x [condition="context.tool.output=go", fidelity="summary:high"]
      a -> done
      x -> done
    }"""
    run = open_run(dot, workdir=tmp_path)
    run.run()
    assert (by_node(run)["x"].fidelity, by_node(run)["x"].edge) == ("summary:high", "a->x")


# ----------------------------------------------------------------- what each mode carries


def _context() -> Context:
    return Context(
        {
            "graph.goal": "Ship it",
            "outcome": "success",
            "last_stage": "plan",
            "last_response": "planned",
            "tool.output": "ok",
            "human.gate.label": "[Y] Yes",
            "context.plan": "two steps",
            "context.risk": {"level": 2},
            "internal.retry_count.plan": 0,
            "current_node": "x",
        }
    )


def _carried(mode: FidelityMode) -> str:
    graph = parse_dot('digraph g { start [shape=Mdiamond] x [prompt="X"] }')
    resolved = Resolved(mode, "node")
    return carry(resolved, graph, graph.nodes["x"], _context()).preamble


def test_each_mode_carries_its_own_text() -> None:
    assert _carried(FidelityMode.TRUNCATE) == "Goal: Ship it"
    assert (
        _carried(FidelityMode.COMPACT) == '- context.plan: two steps\n- context.risk: {"level": 2}'
    )
    assert _carried(FidelityMode.SUMMARY_LOW) == (
        "The pipeline's goal: Ship it. The last stage, plan, ended with outcome success. "
        "Shared values: context.plan, context.risk."
    )
    said = "The pipeline's goal: Ship it. The last stage, plan, ended with outcome success."
    assert _carried(FidelityMode.SUMMARY_MEDIUM) == (
        f"{said}\n\nValues:\n"
        '- context.plan: two steps\n- context.risk: {"level": 2}\n'
        "- tool.output: ok\n- last_response: planned"
    )
    # high: every value that is not bookkeeping (a gate's answer too)
    assert _carried(FidelityMode.SUMMARY_HIGH) == (
        f"{said}\n\nValues:\n"
        '- context.plan: two steps\n- context.risk: {"level": 2}\n'
        "- human.gate.label: [Y] Yes\n- tool.output: ok\n- last_response: planned"
    )
    # the same values give the same text
    assert _carried(FidelityMode.SUMMARY_HIGH) == _carried(FidelityMode.SUMMARY_HIGH)


def test_summaries_are_bounded() -> None:
    graph = parse_dot('digraph g { start [shape=Mdiamond] x [prompt="X"] }')
    context = Context({f"context.k{i:03}": "v" * 5000 for i in range(100)})
    sizes = {
        mode: len(carry(Resolved(mode, "node"), graph, graph.nodes["x"], context).preamble)
        for mode in FidelityMode
        if mode is not FidelityMode.FULL
    }
    assert sizes[FidelityMode.SUMMARY_LOW] <= 2400 + 40
    assert sizes[FidelityMode.SUMMARY_MEDIUM] <= 6000 + 40
    assert sizes[FidelityMode.SUMMARY_HIGH] <= 12000 + 40
    assert sizes[FidelityMode.COMPACT] < 20 * 260
    assert sizes[FidelityMode.TRUNCATE] == 0  # no goal in this context


def test_the_model_gets_the_carried_context_and_context_md_records_it(tmp_path: Path) -> None:
    (tmp_path / "plan.txt").write_text("v1")
    model = Model(tmp_path)
    run = open_run(CHAIN % "", workdir=tmp_path, backend=model)
    run.run()
    nodes = run.run_dir / "nodes"
    assert (nodes / "c" / "prompt.md").read_text() == "C"  # the prompt stays the prompt
    transcript = (nodes / "c" / "context.md").read_text()
    assert transcript == (
        "# Carried context\n\n<!-- how much was carried: compact (from default) -->\n\n"
        "- context.plan: v1\n"
    )
    # the model gets the same without the comment
    assert model.seen["c"] == ["# Carried context\n\n- context.plan: v1\n\n# Prompt\n\nC"]
    assert (nodes / "t" / "context.md").read_text().endswith("\n\nGoal: Ship it\n")
    assert not (nodes / "plan" / "context.md").exists()  # nothing shared before it: the prompt
    assert model.seen["plan"] == ["plan"]


# ----------------------------------------------------------------- traces and marks


def test_a_truncate_node_is_not_marked_a_compact_one_is(tmp_path: Path) -> None:
    (tmp_path / "plan.txt").write_text("v1")
    run = open_run(CHAIN % "", workdir=tmp_path, backend=Model(tmp_path))
    run.run()
    t = by_node(run)
    assert {(r.key, r.writer) for r in t["t"].reads} == {("graph.goal", None)}
    assert {(r.key, r.writer) for r in t["c"].reads} == {
        ("context.*", None),
        ("context.plan", t["plan"].step),
    }
    assert execution_lines(run.traces, "c")["read"] == [
        "which context.* keys were set (its fidelity carries them): context.plan",
        f"context.plan = 'v1', from plan (step {t['plan'].step})",
    ]
    assert marked(run) == (set(), set())
    (tmp_path / "plan.txt").write_text("v2")
    # plan's input changed: c carried plan's value to its model, t never saw it
    assert marked(run) == ({"plan"}, {"c"})


def test_editing_the_fidelity_makes_the_node_stale_by_its_definition(tmp_path: Path) -> None:
    (tmp_path / "plan.txt").write_text("v1")
    dot = CHAIN % ""
    run = open_run(dot, workdir=tmp_path, backend=Model(tmp_path))
    run.run()
    same = graph_definitions(parse_dot(dot), tmp_path)
    assert node_marks(run.traces, {}, same) == {}
    edited = parse_dot(dot.replace('t     [prompt="T", fidelity="truncate"]', 't [prompt="T"]'))
    marks = node_marks(run.traces, {}, graph_definitions(edited, tmp_path))
    assert {n: m.kind for n, m in marks.items()} == {"t": MarkKind.STALE}
    assert marks["t"].definition
    # an edge's fidelity counts for the executions that came by that edge
    by_edge = parse_dot(
        dot.replace(
            "start -> plan -> t -> c -> done",
            'start -> plan -> t\n t -> c [fidelity="full"]\n c -> done',
        )
    )
    marks = node_marks(run.traces, {}, graph_definitions(by_edge, tmp_path))
    assert {n: m.kind for n, m in marks.items()} == {"c": MarkKind.STALE}
    graph_wide = parse_dot(dot.replace('goal="Ship it"', 'goal="Ship it", default_fidelity="full"'))
    marks = node_marks(run.traces, {}, graph_definitions(graph_wide, tmp_path))
    assert {n: m.kind for n, m in marks.items()} == {"plan": MarkKind.STALE, "c": MarkKind.STALE}


# ----------------------------------------------------------------- full: threads and resume

THREAD = """digraph th {
  graph [goal="Ship it", default_fidelity="full"]
  start [shape=Mdiamond]
  a [prompt="A"]
  b [prompt="B"]
  c [prompt="C"]
  d [prompt="D", thread_id="review"]
  done [shape=Msquare]
  start -> a -> b -> c -> d -> done
}
"""


def test_full_nodes_continue_one_thread_and_a_named_one_starts_its_own(tmp_path: Path) -> None:
    model = Model(tmp_path)
    run = open_run(THREAD, workdir=tmp_path, backend=model)
    run.run()
    assert run.result().status == "completed"
    assert model.seen["a"] == ["A"]  # the thread is empty: the prompt alone
    b_text = model.seen["b"][0]
    assert b_text.endswith(
        "## Earlier in thread `start`\n\n### a (user)\n\nA\n\n### a (assistant)\n\n"
        "answer of a\n\n# Prompt\n\nB"
    )
    c_text = model.seen["c"][0]
    assert "### b (assistant)\n\nanswer of b" in c_text and "### a (user)" in c_text
    assert model.seen["d"] == ["D"]  # thread "review" has no earlier messages
    thread = run.context["thread.start"]
    assert [e["node"] for e in thread] == ["a", "b", "c"]
    assert run.context["llm.c"]["thread"] == "start"
    assert run.context["thread.review"] == [{"node": "d", "prompt": "D", "response": "answer of d"}]
    t = by_node(run)
    # c read b's facts (which thread b was in) and the thread b's exchange left
    assert {(r.key, r.writer) for r in t["c"].reads} == {
        ("llm.b", t["b"].step),
        ("thread.start", t["b"].step),
    }


def test_the_first_node_of_a_resumed_run_runs_summary_high_once(tmp_path: Path) -> None:
    dot = """digraph th {
      graph [goal="Ship it", default_fidelity="full", thread_id="main"]
      start [shape=Mdiamond]
      a [prompt="A"]
      b [prompt="B"]
      gate [shape=hexagon, label="Go on?"]
      c2 [prompt="C2"]
      c [prompt="C"]
      done [shape=Msquare]
      start -> a -> b -> gate
      gate -> c2 [label="[Y] Yes"]
      c2 -> c -> done
    }"""
    first = open_run(dot, workdir=tmp_path, backend=Model(tmp_path))
    first.run()
    assert first.pending_gate is not None
    folder = first.run_dir
    first.close()
    model = Model(tmp_path)
    again = resume_run(folder, backend=model)
    again.answer("gate", "Y")
    again.run()
    assert again.result().status == "completed"
    t = by_node(again)
    assert (t["c2"].fidelity, t["c"].fidelity) == ("summary:high", "full")
    assert "full degraded on resume" in (folder / "nodes" / "c2" / "context.md").read_text()
    assert model.seen["c2"][0].startswith("# Carried context")
    assert "The pipeline's goal: Ship it." in model.seen["c2"][0]
    assert "### b (assistant)" not in model.seen["c2"][0]
    # full again after the one degraded hop (which, not in the session, added nothing to it)
    assert "### b (assistant)" in model.seen["c"][0]
    assert [e["node"] for e in again.context["thread.main"]] == ["a", "b", "c"]
    again.close()


# ----------------------------------------------------------------- reuse stays exact


def test_reuse_follows_what_each_mode_carried(tmp_path: Path) -> None:
    (tmp_path / "plan.txt").write_text("v1")
    model = Model(tmp_path)
    first = open_run(CHAIN % "", workdir=tmp_path, backend=model)
    first.run()
    first.close()
    again = open_run(CHAIN % "", workdir=tmp_path, backend=model, reuse=True)
    again.run()
    again.close()
    assert {n: len(v) for n, v in model.seen.items()} == {"plan": 1, "t": 1, "c": 1}
    # a reused execution reads what the one it was taken from read, fidelity reads included
    for node in ("t", "c"):
        ran, reused = by_node(first)[node], by_node(again)[node]
        assert again.node_outcomes[node].reused_from is not None
        assert [(r.key, r.fingerprint) for r in reused.reads] == [
            (r.key, r.fingerprint) for r in ran.reads
        ]
        assert reused.absent == ran.absent
    (tmp_path / "plan.txt").write_text("v2")
    third = open_run(CHAIN % "", workdir=tmp_path, backend=model, reuse=True)
    third.run()
    # plan read a changed file and wrote another shared value: c, which carried it, runs
    # again; t, which carried only the goal, is reused
    assert {n: len(v) for n, v in model.seen.items()} == {"plan": 2, "t": 1, "c": 2}
    assert model.seen["c"][1].endswith("- context.plan: v2\n\n# Prompt\n\nC")
    reused = {n for n, o in third.node_outcomes.items() if o.reused_from is not None}
    assert reused == {"t"}
    # a new shared value changes what compact carries: c is not reused
    third.close()
