"""Typed run events (spec §9.6 plus gate, checkpoint and freshness events) and the event bus.

Every state change of a run is an :class:`Event`. Listeners (the widget, the CLI progress display,
the evidence writer) subscribe to the run's :class:`EventBus`; a listener that raises is logged and
skipped so a broken display can never break a run. When the bus has a log path every event is also
appended to ``events.jsonl`` (one JSON object per line, crash-safe appends).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Any

from freshness_magic.atomicio import append_jsonl

log = logging.getLogger(__name__)

EVENT_FORMAT = 1
"""The ``v`` of every ``events.jsonl`` line (docs/FORMATS.md, schemas/event.schema.json)."""


class EventType(StrEnum):
    """Event names; the value is what ``events.jsonl`` stores in ``type``."""

    PIPELINE_STARTED = "pipeline_started"
    PIPELINE_RESUMED = "pipeline_resumed"
    PIPELINE_COMPLETED = "pipeline_completed"
    PIPELINE_FAILED = "pipeline_failed"
    PIPELINE_PAUSED = "pipeline_paused"
    PIPELINE_RESTARTED = "pipeline_restarted"
    """A ``loop_restart`` edge moved the run into a fresh run directory."""
    STAGE_STARTED = "stage_started"
    STAGE_COMPLETED = "stage_completed"
    STAGE_FAILED = "stage_failed"
    STAGE_RETRYING = "stage_retrying"
    STAGE_INTERRUPTED = "stage_interrupted"
    """A node was stopped (Stop, a kernel interrupt); the run is paused and can go on."""
    STAGE_SKIPPED = "stage_skipped"
    """A node returned SKIPPED (recorded as visited, not as its outcome: spec §5.2)."""
    STAGE_OUTPUT = "stage_output"
    """A chunk of a running node's output (tool stdout/stderr, a streamed model response)."""
    RUN_RETRIED = "run_retried"
    """A failed or stopped run was re-armed at a node (``Run.retry``)."""
    DEAD_END = "dead_end"
    """A non-exit node succeeded with no eligible edge: the run ends there (spec §3.2 step 6)."""
    EDGE_SELECTED = "edge_selected"
    GOAL_GATE_REDIRECT = "goal_gate_redirect"
    GATE_WAITING = "gate_waiting"
    GATE_ANSWERED = "gate_answered"
    CHECKPOINT_SAVED = "checkpoint_saved"
    CHECKPOINT_CORRUPT = "checkpoint_corrupt"
    PARALLEL_STARTED = "parallel_started"
    PARALLEL_BRANCH_STARTED = "parallel_branch_started"
    PARALLEL_BRANCH_COMPLETED = "parallel_branch_completed"
    PARALLEL_COMPLETED = "parallel_completed"
    STALE_INPUT = "stale_input"
    INPUT_DRIFT = "input_drift"
    BASELINE_ACCEPTED = "baseline_accepted"
    EVIDENCE_RECORDED = "evidence_recorded"
    HANDLER_EVENT = "handler_event"
    """A handler reported an event whose name is not one of the above (kept in ``data.name``)."""

    @classmethod
    def coerce(cls, name: str | EventType) -> EventType:
        """Accept a member, its value or its name (any case); unknown names -> HANDLER_EVENT."""
        if isinstance(name, EventType):
            return name
        lowered = str(name).strip().lower()
        for member in cls:
            if lowered in (member.value, member.name.lower()):
                return member
        return cls.HANDLER_EVENT


def utc_now_iso() -> str:
    """The current UTC time as ISO 8601 with milliseconds and a ``Z`` suffix."""
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass(frozen=True)
class Event:
    """One thing that happened in a run; ``seq`` orders the events of a run from 1."""

    type: EventType
    run_id: str
    seq: int
    timestamp: str
    node_id: str | None = None
    data: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "v": EVENT_FORMAT,
            "type": self.type.value,
            "run_id": self.run_id,
            "seq": self.seq,
            "timestamp": self.timestamp,
            "node_id": self.node_id,
            "data": dict(self.data),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Event:
        return cls(
            type=EventType.coerce(str(data.get("type", ""))),
            run_id=str(data.get("run_id", "")),
            seq=int(data.get("seq", 0)),
            timestamp=str(data.get("timestamp", "")),
            node_id=data.get("node_id"),
            data=dict(data.get("data") or {}),
        )


Listener = Callable[[Event], None]


class EventBus:
    """Delivers events to listeners in subscription order and logs them to ``events.jsonl``."""

    def __init__(self, run_id: str, log_path: Path | None = None, *, seq: int = 0) -> None:
        self.run_id = run_id
        self.log_path = log_path
        self._seq = seq
        self._listeners: list[Listener] = []
        self._lock = threading.RLock()

    @property
    def seq(self) -> int:
        """The sequence number of the last emitted event (0 before the first)."""
        return self._seq

    def rebind(self, run_id: str, log_path: Path | None, *, seq: int | None = None) -> None:
        """Point the bus at another run id and log (resume, ``loop_restart``); keeps listeners."""
        with self._lock:
            self.run_id = run_id
            self.log_path = log_path
            if seq is not None:
                self._seq = seq

    def subscribe(self, listener: Listener) -> Listener:
        """Add ``listener``; returns it so it can be used as a decorator."""
        with self._lock:
            self._listeners.append(listener)
        return listener

    def unsubscribe(self, listener: Listener) -> None:
        """Remove ``listener``; unknown listeners are ignored."""
        with self._lock:
            if listener in self._listeners:
                self._listeners.remove(listener)

    def emit(
        self,
        event_type: EventType | str,
        node_id: str | None = None,
        data: dict[str, Any] | None = None,
    ) -> Event:
        """Create the next event, append it to the log, then deliver it to every listener."""
        with self._lock:
            self._seq += 1
            kind = EventType.coerce(event_type)
            payload = dict(data or {})
            if kind is EventType.HANDLER_EVENT and not isinstance(event_type, EventType):
                payload.setdefault("name", str(event_type))
            event = Event(kind, self.run_id, self._seq, utc_now_iso(), node_id, payload)
            if self.log_path is not None:
                append_jsonl(self.log_path, event.to_dict(), fsync=False)
            listeners = list(self._listeners)
        for listener in listeners:
            try:
                listener(event)
            except Exception:
                log.exception("event listener %r raised on %s; skipped", listener, event.type.value)
        return event
