"""The ``wait.human`` handler (spec §4.6, DESIGN §4 item 5): gates, choices and answers.

Choices come from the gate's outgoing edges in declaration order. A gate never blocks a kernel:
without an interviewer that can answer now, the handler returns WAITING with the question and the
run pauses until ``Run.answer`` (which uses :func:`match_choice` and :func:`answer_outcome`).
"""

from __future__ import annotations

import dataclasses
import re
import time

from freshness_magic.engine.context import Context
from freshness_magic.engine.handlers.base import StepEnv
from freshness_magic.engine.interviewers import Answer, Interviewer
from freshness_magic.engine.model import Graph, Node, parse_duration
from freshness_magic.engine.outcome import Choice, Outcome, Question, StageStatus

_ACCELERATOR_PATTERNS = (
    re.compile(r"^\s*\[(\w)\]\s*(.*)$", re.DOTALL),  # [K] Label
    re.compile(r"^\s*(\w)\)\s*(.*)$", re.DOTALL),  # K) Label
    re.compile(r"^\s*(\w)\s+-\s+(.*)$", re.DOTALL),  # K - Label
)


def parse_accelerator(label: str) -> tuple[str, str]:
    """The accelerator key and the label text without it: ``[Y] Yes`` -> ``("Y", "Yes")``.

    Recognises ``[K] x``, ``K) x`` and ``K - x``; otherwise the key is the first non-blank
    character and the text is the whole label.
    """
    for pattern in _ACCELERATOR_PATTERNS:
        match = pattern.match(label)
        if match:
            return match.group(1), match.group(2).strip()
    stripped = label.strip()
    return (stripped[:1], stripped)


def _gate_timeout(node: Node) -> float | None:
    raw = node.get("human.timeout")
    if raw:
        return parse_duration(raw)
    return node.timeout


def gate_question(graph: Graph, node: Node) -> Question:
    """The question a gate asks: label as text, one choice per outgoing edge, the default."""
    choices = tuple(
        Choice(key=parse_accelerator(label)[0], label=label, target=edge.target)
        for edge in graph.outgoing(node.id)
        for label in (edge.label or edge.target,)
    )
    question = Question(
        node_id=node.id,
        text=node.attrs.get("label") or "Select an option:",
        choices=choices,
        timeout_seconds=_gate_timeout(node),
    )
    wanted = node.get("human.default_choice").strip()
    if wanted:
        default = match_choice(question, wanted)
        if default is not None:
            question = Question(
                node_id=question.node_id,
                text=question.text,
                choices=question.choices,
                default=default.target,
                timeout_seconds=question.timeout_seconds,
            )
    return question


def match_choice(question: Question, answer: str) -> Choice | None:
    """The choice an answer names: accelerator key, target id, full label or label text.

    Matching ignores case and surrounding blanks; the kinds are tried in that order, so a key
    wins over a one-letter target id, and within a kind the first edge in declaration order wins.
    """
    wanted = answer.strip().casefold()
    if not wanted:
        return None
    tests = (
        lambda c: c.key.casefold() == wanted,
        lambda c: c.target.casefold() == wanted,
        lambda c: c.label.strip().casefold() == wanted,
        lambda c: parse_accelerator(c.label)[1].casefold() == wanted,
    )
    for test in tests:
        for choice in question.choices:
            if test(choice):
                return choice
    return None


def default_choice_of(question: Question) -> Choice | None:
    """The choice the question's default (a target id) points at, if any."""
    if question.default is None:
        return None
    for choice in question.choices:
        if choice.target == question.default:
            return choice
    return None


def _display(choice: Choice) -> str:
    """``[K] label``, without repeating a key the label already starts with."""
    key, _text = parse_accelerator(choice.label)
    if key == choice.key and choice.label != _text:
        return choice.label
    return f"[{choice.key}] {choice.label}"


def answer_outcome(question: Question, choice: Choice) -> Outcome:
    """SUCCESS routed to the chosen edge, with the ``human.gate.*`` keys set."""
    return Outcome(
        status=StageStatus.SUCCESS,
        preferred_label=choice.label,
        suggested_next_ids=[choice.target],
        context_updates={
            "human.gate.selected": choice.key,
            "human.gate.label": choice.label,
        },
        notes=f"Human selected {_display(choice)} -> {choice.target}",
    )


def valid_choices_text(question: Question) -> str:
    """``Y (Yes -> done), N (No -> draft)``: for messages that list what may be answered."""
    return ", ".join(f"{c.key} ({c.label} -> {c.target})" for c in question.choices)


def _within_deadline(question: Question, deadline: float | None) -> Question:
    """The question with a timeout that ends a little before the node's deadline.

    The run abandons a handler at its deadline; answering the timeout (default choice) just
    before it keeps ``human.default_choice`` meaningful for gates with a ``timeout``.
    """
    if deadline is None:
        return question
    remaining = max(deadline - time.monotonic(), 0.0)
    limit = remaining - min(1.0, remaining * 0.1)
    if question.timeout_seconds is not None and question.timeout_seconds <= limit:
        return question
    return dataclasses.replace(question, timeout_seconds=limit)


class WaitForHumanHandler:
    """Asks the interviewer, or returns WAITING with the question when none can answer now."""

    def __init__(self, interviewer: Interviewer | None = None) -> None:
        self.interviewer = interviewer

    def execute(self, node: Node, context: Context, env: StepEnv) -> Outcome:
        question = gate_question(env.graph, node)
        if not question.choices:
            return Outcome(
                status=StageStatus.FAIL, failure_reason="No outgoing edges for human gate"
            )
        waiting = Outcome(
            status=StageStatus.WAITING,
            question=question,
            notes=f"Waiting for a human answer at {node.id}",
        )
        if self.interviewer is None:
            return waiting
        env.emit("interview_started", {"node": node.id, "question": question.to_dict()})
        started = time.monotonic()
        answer = self.interviewer.ask(_within_deadline(question, env.deadline))
        report = {"node": node.id, "duration": time.monotonic() - started}
        if answer is None:
            env.emit("interview_deferred", report)
        elif answer.is_timeout:
            env.emit("interview_timeout", report)
        else:
            env.emit("interview_completed", {**report, "answer": str(answer.value)})
        return self._resolve(question, answer, waiting)

    @staticmethod
    def _resolve(question: Question, answer: Answer | None, waiting: Outcome) -> Outcome:
        if answer is None:
            return waiting
        if answer.is_timeout:
            default = default_choice_of(question)
            if default is None:
                return Outcome(
                    status=StageStatus.RETRY, failure_reason="human gate timeout, no default"
                )
            return answer_outcome(question, default)
        if answer.is_skipped:
            return Outcome(status=StageStatus.FAIL, failure_reason="human skipped interaction")
        choice = match_choice(question, str(answer.value))
        if choice is None:
            waiting.notes = (
                f"Answer {answer.value!r} matches no choice of {question.node_id}; "
                f"valid choices: {valid_choices_text(question)}"
            )
            return waiting
        return answer_outcome(question, choice)
