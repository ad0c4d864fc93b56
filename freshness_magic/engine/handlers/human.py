"""The ``wait.human`` handler (spec §4.6, docs/ARCHITECTURE.md).

A gate never blocks a kernel: without an interviewer that can answer now, the handler returns
WAITING with the question and the run pauses until ``Run.answer``. Questions, choices and the
accelerator grammar live in :mod:`freshness_magic.engine.gates`.
"""

from __future__ import annotations

import dataclasses
import time

from freshness_magic.engine.context import Context
from freshness_magic.engine.gates import (
    answer_outcome,
    default_choice_of,
    gate_question,
    match_choice,
    valid_choices_text,
)
from freshness_magic.engine.handlers.base import StepEnv
from freshness_magic.engine.interviewers import Answer, Interviewer
from freshness_magic.engine.model import Node
from freshness_magic.engine.outcome import Outcome, Question, StageStatus


def _within_deadline(question: Question, deadline: float | None) -> Question:
    """The question with a timeout that ends at the node's deadline.

    The run abandons a handler a little after its deadline; answering the timeout (default
    choice) at the deadline keeps ``human.default_choice`` meaningful for gates with a
    ``timeout``.
    """
    if deadline is None:
        return question
    limit = max(deadline - time.monotonic(), 0.0)
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
            return answer_outcome(question, default, timed_out=True)
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
