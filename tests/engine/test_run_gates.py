"""Human gates (DESIGN.md §4 item 5): WAITING, answers by key/label/target, bad answers,
``human.default_choice`` and every accelerator style."""

from __future__ import annotations

from pathlib import Path

import pytest

from freshness_magic.engine import Run, RunState
from freshness_magic.engine.events import EventType
from freshness_magic.engine.handlers.builtin import default_registry
from freshness_magic.engine.interviewers import QueueInterviewer
from freshness_magic.errors import GateAnswerError, RunError
from tests.engine.runkit import graph, make_run

GATE = """digraph g {{
  start [shape=Mdiamond]
  draft [prompt="d"]
  approve [shape=hexagon, label="Ship it?" {gate_attrs}]
  done [shape=Msquare]
  start -> draft -> approve
  approve -> done [label="{yes}"]
  approve -> draft [label="{no}"]
}}"""


def gate(yes: str = "[Y] Yes", no: str = "[N] No, redo", gate_attrs: str = "") -> str:
    return GATE.format(yes=yes, no=no, gate_attrs=gate_attrs)


def test_reaching_a_gate_waits_with_the_question(tmp_path: Path) -> None:
    run = make_run(gate(), tmp_path)
    seen = []
    run.events.subscribe(lambda e: seen.append(e.type))
    result = run.run()
    assert result.state is RunState.WAITING
    assert result.status == "waiting"
    assert result.next_node == "approve"
    q = run.pending_gate
    assert q is not None and q.node_id == "approve" and q.text == "Ship it?"
    assert [(c.key, c.label, c.target) for c in q.choices] == [
        ("Y", "[Y] Yes", "done"),
        ("N", "[N] No, redo", "draft"),
    ]
    assert EventType.GATE_WAITING in seen
    assert result.completed_nodes == ["start", "draft"]
    step = run.step()
    assert not step.executed
    assert "waiting at gate 'approve'" in step.reason
    assert result.to_dict()["pending_gate"]["choices"][0] == {
        "key": "Y",
        "label": "[Y] Yes",
        "target": "done",
    }


@pytest.mark.parametrize("answer", ["Y", "y", "[Y] Yes", "Yes", "done"])
def test_answer_by_key_label_or_target(tmp_path: Path, answer: str) -> None:
    run = make_run(gate(), tmp_path)
    run.run()
    step = run.answer("approve", answer)
    assert step.next_node == "done"
    assert run.context["human.gate.selected"] == "Y"
    assert run.context["human.gate.label"] == "[Y] Yes"
    assert run.context["preferred_label"] == "[Y] Yes"
    assert run.run().state is RunState.COMPLETED


def test_answer_no_loops_back_and_waits_again(tmp_path: Path) -> None:
    run = make_run(gate(), tmp_path)
    run.run()
    run.answer("approve", "N")
    result = run.run()
    assert result.state is RunState.WAITING
    assert result.completed_nodes == ["start", "draft", "approve", "draft"]


@pytest.mark.parametrize(
    ("yes", "no", "key"),
    [
        ("[A] Accept", "[R] Reject", "A"),
        ("A) Accept", "R) Reject", "A"),
        ("A - Accept", "R - Reject", "A"),
    ],
)
def test_each_accelerator_style(tmp_path: Path, yes: str, no: str, key: str) -> None:
    run = make_run(gate(yes=yes, no=no), tmp_path)
    run.run()
    assert [c.key for c in run.pending_gate.choices] == ["A", "R"]  # type: ignore[union-attr]
    assert run.answer("approve", key.lower()).next_node == "done"


def test_bad_answer_lists_the_valid_choices(tmp_path: Path) -> None:
    run = make_run(gate(), tmp_path)
    run.run()
    with pytest.raises(GateAnswerError) as info:
        run.answer("approve", "maybe")
    message = str(info.value)
    assert "'maybe' is not a choice of gate 'approve'" in message
    assert "Y ([Y] Yes -> done), N ([N] No, redo -> draft)" in message
    assert run.state is RunState.WAITING


def test_answer_misuse_raises_run_error(tmp_path: Path) -> None:
    run = make_run(gate(), tmp_path)
    with pytest.raises(RunError, match="no human gate is waiting"):
        run.answer("approve", "Y")
    run.run()
    with pytest.raises(
        RunError, match=r"^'draft' is not a human gate; the waiting gate is 'approve'$"
    ):
        run.answer("draft", "Y")  # a trial's `resume redo --choice Y` called an LLM node a gate


@pytest.mark.parametrize("default", ["N", "[N] No, redo", "draft"])
def test_default_choice_by_key_label_or_target(tmp_path: Path, default: str) -> None:
    run = make_run(gate(gate_attrs=f', human.default_choice="{default}"'), tmp_path)
    run.run()
    assert run.pending_gate is not None and run.pending_gate.default == "draft"
    assert run.answer("approve").next_node == "draft"


def test_no_default_and_no_choice_is_an_error(tmp_path: Path) -> None:
    run = make_run(gate(), tmp_path)
    run.run()
    with pytest.raises(GateAnswerError, match="has no default choice"):
        run.answer("approve")


def test_interviewer_answers_synchronously(tmp_path: Path) -> None:
    run = Run(
        graph(gate()),
        workdir=tmp_path,
        registry=default_registry(interviewer=QueueInterviewer(["N", "Y"])),
    )
    result = run.run()
    assert result.state is RunState.COMPLETED
    assert result.completed_nodes == ["start", "draft", "approve", "draft", "approve", "done"]


def test_waiting_gate_survives_resume(tmp_path: Path) -> None:
    run = make_run(gate(), tmp_path)
    run.run()
    again = Run.resume(run.run_dir)
    assert again.state is RunState.WAITING
    assert again.pending_gate == run.pending_gate
    again.answer("approve", "Y")
    assert again.run().completed_nodes == ["start", "draft", "approve", "done"]
