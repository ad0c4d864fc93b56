"""What a handler returns (spec §5.2) and what a human gate asks (§6.2)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from freshness_magic.engine.status import OUTCOME_VALUES as OUTCOME_VALUES
from freshness_magic.engine.status import StageStatus as StageStatus
from freshness_magic.schemas import describe


@dataclass(frozen=True)
class Choice:
    """One answer of a human gate, derived from an outgoing edge."""

    key: str
    label: str
    target: str

    def to_dict(self) -> dict[str, str]:
        return {"key": self.key, "label": self.label, "target": self.target}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Choice:
        return cls(str(data["key"]), str(data["label"]), str(data["target"]))


@dataclass(frozen=True)
class Question:
    """A pending human gate: the text, the choices, and the default (a choice target id).

    ``child_gate`` is set when the question is a child pipeline's: ``node_id`` is then the
    manager node that waits for it, and the choices (whose targets are the child's nodes) are
    the child gate's. The answer goes to the child when the manager node runs again.
    """

    node_id: str
    text: str
    choices: tuple[Choice, ...]
    default: str | None = None
    timeout_seconds: float | None = None
    child_gate: str | None = None

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "node": self.node_id,
            "question": self.text,
            "choices": [c.to_dict() for c in self.choices],
            "default": self.default,
            "timeout_seconds": self.timeout_seconds,
        }
        if self.child_gate is not None:
            data["child_gate"] = self.child_gate
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Question:
        timeout = data.get("timeout_seconds")
        return cls(
            node_id=str(data["node"]),
            text=str(data["question"]),
            choices=tuple(Choice.from_dict(c) for c in data.get("choices", [])),
            default=data.get("default"),
            timeout_seconds=float(timeout) if timeout is not None else None,
            child_gate=str(data["child_gate"]) if data.get("child_gate") else None,
        )


@dataclass(frozen=True, slots=True)
class ReusedFrom:
    """Which execution a reused one was taken from: its run and its step (1-based)."""

    run_id: str
    step: int

    def to_dict(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "step": self.step}

    @classmethod
    def from_dict(cls, data: object) -> ReusedFrom | None:
        """None when ``data`` is not the shape :meth:`to_dict` writes."""
        if not isinstance(data, dict):
            return None
        run_id, step = data.get("run_id"), data.get("step")
        if not isinstance(run_id, str) or not isinstance(step, int) or isinstance(step, bool):
            return None
        return cls(run_id, step)

    def text(self) -> str:
        """``from run 20260102T030405-ab12cd, step 3`` (what ``status`` and ``why`` show)."""
        return f"from run {self.run_id}, step {self.step}"


@dataclass
class Outcome:
    """The result of executing a node; drives routing and context updates."""

    status: StageStatus = StageStatus.SUCCESS
    preferred_label: str = ""
    suggested_next_ids: list[str] = field(default_factory=list)
    context_updates: dict[str, Any] = field(default_factory=dict)
    notes: str = ""
    failure_reason: str = ""
    question: Question | None = None
    """Set with status WAITING: what the run will ask the human."""
    reused_from: ReusedFrom | None = None
    """Set when the execution was not run but taken from an earlier one (reuse)."""

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "outcome": self.status.value,
            "preferred_label": self.preferred_label,
            "suggested_next_ids": list(self.suggested_next_ids),
            "context_updates": dict(self.context_updates),
            "notes": self.notes,
            "failure_reason": self.failure_reason,
        }
        if self.question is not None:
            data["question"] = self.question.to_dict()
        if self.reused_from is not None:
            data["reused_from"] = self.reused_from.to_dict()
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Outcome:
        """Read the Appendix C status-file shape (``outcome``, ``preferred_label``, ...); the older
        name ``preferred_next_label`` is still accepted. ValueError names what is not of its
        type (``suggested_next_ids: expected an array, got a string ("b")``)."""
        if not isinstance(data, dict):
            raise ValueError(f"expected an object, got {describe(data)}")
        ids = data.get("suggested_next_ids", [])
        if not isinstance(ids, list | tuple):
            raise ValueError(f"suggested_next_ids: expected an array, got {describe(ids)}")
        updates = data.get("context_updates", {})
        if not isinstance(updates, dict):
            raise ValueError(f"context_updates: expected an object, got {describe(updates)}")
        question = data.get("question")
        return cls(
            status=StageStatus.parse(str(data.get("outcome", data.get("status", "success")))),
            preferred_label=str(data.get("preferred_label", data.get("preferred_next_label", ""))),
            suggested_next_ids=[str(i) for i in ids],
            context_updates=dict(updates),
            notes=str(data.get("notes", "")),
            failure_reason=str(data.get("failure_reason", "")),
            question=Question.from_dict(question) if isinstance(question, dict) else None,
            reused_from=ReusedFrom.from_dict(data.get("reused_from")),
        )
