"""Human gates: accelerators, questions, defaults, answer matching and the handler's paths."""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest

from freshness_magic.engine.context import Context
from freshness_magic.engine.events import Event
from freshness_magic.engine.gates import (
    answer_outcome,
    gate_question,
    match_choice,
    normalize_label,
    parse_accelerator,
)
from freshness_magic.engine.handlers.base import StepEnv
from freshness_magic.engine.handlers.builtin import default_registry
from freshness_magic.engine.handlers.human import WaitForHumanHandler
from freshness_magic.engine.interviewers import (
    Answer,
    AnswerKind,
    ConsoleInterviewer,
    QueueInterviewer,
)
from freshness_magic.engine.model import Edge, Graph, Node
from freshness_magic.engine.outcome import Outcome, StageStatus
from freshness_magic.engine.pipeline import load_pipeline
from freshness_magic.engine.run import Run


def gate_graph(labels: list[tuple[str, str]], **gate_attrs: str) -> Graph:
    graph = Graph(name="g")
    graph.nodes["approve"] = Node(
        "approve", {"shape": "hexagon", "label": "Ship it?", **gate_attrs}
    )
    for index, (target, label) in enumerate(labels):
        graph.nodes.setdefault(target, Node(target))
        attrs = {"label": label} if label else {}
        graph.edges.append(Edge("approve", target, attrs, index=index))
    return graph


STANDARD = [("done", "[Y] Yes, ship"), ("draft", "N) No, redo"), ("abort", "A - Abort")]


@pytest.mark.parametrize(
    ("label", "expected"),
    [
        ("[Y] Yes, deploy", ("Y", "Yes, deploy")),
        ("Y) Yes, deploy", ("Y", "Yes, deploy")),
        ("Y - Yes, deploy", ("Y", "Yes, deploy")),
        ("Yes, deploy", ("Y", "Yes, deploy")),
        ("  [n]  no ", ("n", "no")),
        ("3) Third", ("3", "Third")),
        ("Re-run - later", ("R", "Re-run - later")),
        ("", ("", "")),
    ],
)
def test_parse_accelerator_styles(label: str, expected: tuple[str, str]) -> None:
    assert parse_accelerator(label) == expected


@pytest.mark.parametrize("label", ["[ Y ] Yes", "[Y] Yes", "Y ) Yes", "Y) Yes", "Y - Yes"])
def test_one_accelerator_grammar_for_choices_and_edge_labels(label: str) -> None:
    """Spec §4.6: a gate's choice key and edge routing read the same accelerator."""
    key, text = parse_accelerator(label)
    assert (key, text) == ("Y", "Yes")
    assert normalize_label(label) == "yes"


def test_question_choices_follow_edge_order_and_use_target_without_label() -> None:
    graph = gate_graph([*STANDARD, ("later", "")])
    question = gate_question(graph, graph.nodes["approve"])
    assert question.text == "Ship it?"
    assert [(c.key, c.label, c.target) for c in question.choices] == [
        ("Y", "[Y] Yes, ship", "done"),
        ("N", "N) No, redo", "draft"),
        ("A", "A - Abort", "abort"),
        ("l", "later", "later"),
    ]
    assert question.default is None


@pytest.mark.parametrize("default", ["draft", "n", "N) No, redo", "no, redo", "DRAFT"])
def test_default_choice_by_target_key_or_label(default: str) -> None:
    graph = gate_graph(STANDARD, **{"human.default_choice": default})
    assert gate_question(graph, graph.nodes["approve"]).default == "draft"


def test_unknown_default_is_ignored() -> None:
    graph = gate_graph(STANDARD, **{"human.default_choice": "nowhere"})
    assert gate_question(graph, graph.nodes["approve"]).default is None


def test_gate_timeout_from_node_attributes() -> None:
    graph = gate_graph(STANDARD, **{"human.timeout": "2m"})
    assert gate_question(graph, graph.nodes["approve"]).timeout_seconds == 120.0
    graph = gate_graph(STANDARD, timeout="5s")
    assert gate_question(graph, graph.nodes["approve"]).timeout_seconds == 5.0


@pytest.mark.parametrize(
    ("answer", "target"),
    [
        ("y", "done"),
        ("N", "draft"),
        ("abort", "abort"),
        ("[Y] Yes, ship", "done"),
        ("yes, ship", "done"),
        ("  No, redo ", "draft"),
        ("a - abort", "abort"),
    ],
)
def test_match_choice_accepts_key_label_and_target(answer: str, target: str) -> None:
    graph = gate_graph(STANDARD)
    choice = match_choice(gate_question(graph, graph.nodes["approve"]), answer)
    assert choice is not None and choice.target == target


@pytest.mark.parametrize("answer", ["", "maybe", "x", "Yes"])
def test_match_choice_rejects_anything_else(answer: str) -> None:
    graph = gate_graph(STANDARD)
    assert match_choice(gate_question(graph, graph.nodes["approve"]), answer) is None


def test_answer_outcome_sets_gate_keys_and_routing() -> None:
    graph = gate_graph(STANDARD)
    question = gate_question(graph, graph.nodes["approve"])
    outcome = answer_outcome(question, question.choices[1])
    assert outcome.status is StageStatus.SUCCESS
    assert outcome.preferred_label == "N) No, redo"
    assert outcome.suggested_next_ids == ["draft"]
    assert outcome.context_updates == {
        "human.gate.selected": "N",
        "human.gate.label": "N) No, redo",
    }


def run_gate(graph: Graph, tmp_path: Path, handler: WaitForHumanHandler) -> Outcome:
    env = StepEnv(graph=graph, run_dir=tmp_path, workdir=tmp_path)
    return handler.execute(graph.nodes["approve"], Context(), env)


def test_without_interviewer_the_gate_waits_with_its_question(tmp_path: Path) -> None:
    graph = gate_graph(STANDARD, **{"human.default_choice": "Y"})
    outcome = run_gate(graph, tmp_path, WaitForHumanHandler())
    assert outcome.status is StageStatus.WAITING
    assert outcome.question is not None
    assert outcome.question.node_id == "approve"
    assert outcome.question.default == "done"
    assert [c.target for c in outcome.question.choices] == ["done", "draft", "abort"]


def test_gate_without_edges_fails(tmp_path: Path) -> None:
    outcome = run_gate(gate_graph([]), tmp_path, WaitForHumanHandler(QueueInterviewer(["y"])))
    assert outcome.status is StageStatus.FAIL
    assert outcome.failure_reason == "No outgoing edges for human gate"


def test_interviewer_answers_route_the_gate(tmp_path: Path) -> None:
    interviewer = QueueInterviewer(["a", "draft"])
    handler = WaitForHumanHandler(interviewer)
    graph = gate_graph(STANDARD)
    first = run_gate(graph, tmp_path, handler)
    second = run_gate(graph, tmp_path, handler)
    third = run_gate(graph, tmp_path, handler)
    assert first.suggested_next_ids == ["abort"]
    assert first.context_updates["human.gate.selected"] == "A"
    assert second.suggested_next_ids == ["draft"]
    assert third.status is StageStatus.WAITING


def test_timeout_uses_default_or_retries(tmp_path: Path) -> None:
    with_default = gate_graph(STANDARD, **{"human.default_choice": "abort"})
    outcome = run_gate(
        with_default, tmp_path, WaitForHumanHandler(QueueInterviewer([Answer.timeout()]))
    )
    assert outcome.status is StageStatus.SUCCESS
    assert outcome.suggested_next_ids == ["abort"]
    assert outcome.notes.startswith("No answer: took the default")

    outcome = run_gate(
        gate_graph(STANDARD), tmp_path, WaitForHumanHandler(QueueInterviewer([AnswerKind.TIMEOUT]))
    )
    assert outcome.status is StageStatus.RETRY
    assert outcome.failure_reason == "human gate timeout, no default"


def test_skip_fails_and_unmatched_answer_waits(tmp_path: Path) -> None:
    graph = gate_graph(STANDARD)
    skipped = run_gate(graph, tmp_path, WaitForHumanHandler(QueueInterviewer([Answer.skipped()])))
    assert skipped.status is StageStatus.FAIL
    unmatched = run_gate(graph, tmp_path, WaitForHumanHandler(QueueInterviewer(["maybe"])))
    assert unmatched.status is StageStatus.WAITING
    assert "maybe" in unmatched.notes and "Y ([Y] Yes, ship -> done)" in unmatched.notes


GATE_PIPELINE = """
digraph review {
  start [shape=Mdiamond]
  approve [shape=hexagon, label="Ship it?", "human.default_choice"="N"]
  ship [prompt="ship"]
  redo [prompt="redo"]
  done [shape=Msquare]
  start -> approve
  approve -> ship [label="[Y] Yes"]
  approve -> redo [label="[N] No, redo"]
  ship -> done
  redo -> done
}
"""


def test_gate_in_a_run_waits_then_routes_on_the_answer(tmp_path: Path) -> None:
    run = Run(load_pipeline(GATE_PIPELINE), workdir=tmp_path)
    result = run.run()
    assert result.status == "waiting"
    assert result.pending_gate is not None
    assert result.pending_gate.default == "redo"
    run.answer("approve", "y")
    result = run.run()
    assert result.completed_nodes == ["start", "approve", "ship", "done"]
    assert result.context["human.gate.selected"] == "Y"
    assert result.context["human.gate.label"] == "[Y] Yes"


def test_gate_in_a_run_asks_the_interviewer_and_reports_events(tmp_path: Path) -> None:
    run = Run(
        load_pipeline(GATE_PIPELINE),
        workdir=tmp_path,
        registry=default_registry(interviewer=QueueInterviewer([Answer.timeout()])),
    )
    events: list[Event] = []
    run.events.subscribe(events.append)
    result = run.run()
    assert result.completed_nodes == ["start", "approve", "redo", "done"]
    names = [e.data.get("name") for e in events if e.node_id == "approve"]
    assert "interview_started" in names and "interview_timeout" in names


def test_gate_timeout_in_a_run_takes_the_default_from_the_console(tmp_path: Path) -> None:
    source = GATE_PIPELINE.replace(
        '"human.default_choice"="N"', '"human.default_choice"="N", timeout="1s"'
    )
    read_fd, write_fd = os.pipe()
    with os.fdopen(read_fd) as silent, os.fdopen(write_fd, "w"):
        console = ConsoleInterviewer(silent, io.StringIO())
        run = Run(
            load_pipeline(source), workdir=tmp_path, registry=default_registry(interviewer=console)
        )
        result = run.run()
    assert result.completed_nodes == ["start", "approve", "redo", "done"]
    assert result.context["human.gate.selected"] == "N"
