"""Where a run stands: its state, what one step did, and the run's result (shared by every view).

``StepResult`` and ``RunResult`` carry the failure reason, the failed node and a dead end with
the conditions tried, so the CLI, the notebook and scripts explain a stop the same way.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from freshness_magic.engine.edges import EdgeStep
from freshness_magic.engine.outcome import Outcome, Question, StageStatus
from freshness_magic.engine.routing import DeadEnd


class RunState(StrEnum):
    """Where a run is: not started, inside a step, at a gate, stopped early, or finished."""

    READY = "ready"
    RUNNING = "running"
    WAITING = "waiting"
    PAUSED = "paused"
    COMPLETED = "completed"
    FAILED = "failed"

    @property
    def finished(self) -> bool:
        return self in (RunState.COMPLETED, RunState.FAILED)


class Durability(StrEnum):
    """How a run's writes reach the disk.

    DURABLE (default): each step's journal record is fsynced (one fsync per step); the step's
    other files (events, node status, evidence) are written atomically without their own fsync,
    so a killed process loses nothing and a power loss can lose only those files' last seconds.
    STRICT: every file is fsynced as it is written. NONE: nothing is fsynced (tests, scratch).
    """

    DURABLE = "durable"
    STRICT = "strict"
    NONE = "none"


@dataclass
class StepResult:
    """What one ``step()`` (or ``answer()``) did; also the record of one branch node."""

    node_id: str | None
    """The node executed (or answered); None when nothing could be executed."""
    outcome: Outcome | None
    attempts: int
    duration: float
    """Seconds spent executing the node (retries and backoff included)."""
    next_node: str | None
    reason: str
    """Why the run goes to ``next_node`` (edge selection, failure routing) or why it stopped."""
    state: RunState
    """The run's state after this step."""
    executed: bool = True
    """False when the step executed nothing (run finished, or waiting at a gate)."""
    edge_step: EdgeStep = EdgeStep.NONE
    """What decided the next node (a §3.3 selection step, failure routing, goal gate, join)."""
    interrupted: bool = False
    """The node was stopped (``Run.interrupt``, a kernel interrupt); it runs again on resume."""
    dead_end: DeadEnd | None = None
    branch_of: str | None = None
    """For a node run inside a parallel branch: the parallel node."""

    @property
    def failure_reason(self) -> str:
        """Why the node failed, else why the run stopped failing here (empty otherwise)."""
        if self.outcome is not None and self.outcome.status is StageStatus.FAIL:
            return self.outcome.failure_reason or self.reason
        if self.state is RunState.FAILED:
            return self.reason
        return ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "node_id": self.node_id,
            "outcome": self.outcome.to_dict() if self.outcome is not None else None,
            "attempts": self.attempts,
            "duration": self.duration,
            "next_node": self.next_node,
            "reason": self.reason,
            "state": self.state.value,
            "executed": self.executed,
            "edge_step": self.edge_step.value,
            "interrupted": self.interrupted,
            "failure_reason": self.failure_reason or None,
            "dead_end": self.dead_end.to_dict() if self.dead_end is not None else None,
            "branch_of": self.branch_of,
        }

    def __str__(self) -> str:
        if not self.executed or self.outcome is None:
            return self.reason
        if self.interrupted:
            return f"{self.node_id}: interrupted after {self.duration:.2f}s ({self.reason})"
        status = self.outcome.status.value
        nxt = f" -> {self.next_node}" if self.next_node else ""
        text = f"{self.node_id}: {status} in {self.duration:.2f}s{nxt} ({self.reason})"
        if self.outcome.status is StageStatus.FAIL and self.outcome.failure_reason:
            first = self.outcome.failure_reason.splitlines()[0]
            if first not in self.reason:
                text += f": {first}"
        return text


@dataclass
class RunResult:
    """Where a run stands after ``run()``; ``to_dict`` is the CLI's ``--json`` output."""

    state: RunState
    run_dir: Path
    completed_nodes: list[str]
    node_outcomes: dict[str, Outcome]
    next_node: str | None
    pending_gate: Question | None
    context: dict[str, Any]
    failure_reason: str = ""
    failed_node: str | None = None
    """The node whose failure ended the run (None when it did not fail at a node)."""
    dead_end: DeadEnd | None = None
    """Set when the run completed at a non-exit node with no eligible edge (§3.2 step 6)."""
    interrupted_node: str | None = None
    """The node that was stopped; the run is paused there and a step runs it again."""
    restarts: int = 0
    """How many times a ``loop_restart`` edge moved the run to a fresh run directory (its
    ``completed_nodes`` are those since the last one)."""

    @property
    def status(self) -> str:
        """``completed``, ``failed``, ``waiting`` or ``paused``."""
        if self.state in (RunState.COMPLETED, RunState.FAILED, RunState.WAITING):
            return self.state.value
        return "paused"

    def summary(self) -> str:
        """One line a person reads: how the run ended or where it stands."""
        if self.state is RunState.FAILED:
            where = f" at '{self.failed_node}'" if self.failed_node else ""
            return f"failed{where}: {self.failure_reason}"
        if self.state is RunState.COMPLETED:
            if self.dead_end is not None:
                return f"completed, {self.dead_end.describe()}"
            return "completed"
        if self.state is RunState.WAITING and self.pending_gate is not None:
            return f"waiting at gate '{self.pending_gate.node_id}': {self.pending_gate.text}"
        if self.interrupted_node is not None:
            node = self.interrupted_node
            return f"paused: '{node}' was interrupted; it runs again when the run goes on"
        return f"paused before '{self.next_node}'" if self.next_node else "paused"

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "summary": self.summary(),
            "run_dir": str(self.run_dir),
            "completed_nodes": list(self.completed_nodes),
            "node_outcomes": {
                node_id: {
                    "status": o.status.value,
                    "notes": o.notes,
                    "failure_reason": o.failure_reason,
                    **({"reused_from": o.reused_from.to_dict()} if o.reused_from else {}),
                }
                for node_id, o in self.node_outcomes.items()
            },
            "next_node": self.next_node,
            "pending_gate": (
                self.pending_gate.to_dict() if self.pending_gate is not None else None
            ),
            "context": self.context,
            "failure_reason": self.failure_reason or None,
            "failed_node": self.failed_node,
            "dead_end": self.dead_end.to_dict() if self.dead_end is not None else None,
            "interrupted_node": self.interrupted_node,
            "restarts": self.restarts,
        }
