"""Typed run events (spec §9.6 plus gate and checkpoint events), their vocabularies and the bus.

Every state change of a run is an :class:`Event`. Listeners (the widget, the CLI progress display,
the evidence writer) subscribe to the run's :class:`EventBus`; a listener that raises is logged and
skipped so a broken display can never break a run. When the bus has a log path every event is also
appended to ``events.jsonl`` (one JSON object per line, crash-safe appends).

The vocabulary is open but typed. The engine's own events are :class:`EventType`; a package outside
the engine (freshness, evidence) defines its own ``StrEnum`` and a run's extensions declare it
(``event_kinds()``), so the run's bus knows it. :class:`EventKinds` is the set one bus or reader
knows: it maps a stored ``type`` string back to its member, so every comparison stays an enum
comparison. It is immutable and composed by whoever composes a session, never a global registry.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from types import MappingProxyType
from typing import Any, cast

from freshness_magic.atomicio import append_jsonl, read_jsonl
from freshness_magic.errors import EventKindError, StateFileError

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
    PIPELINE_EDITED = "pipeline_edited"
    """The run was carried over to an edited pipeline (``Run.carry_over``)."""
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
    HANDLER_EVENT = "handler_event"
    """A reported name that no known vocabulary has (the name is kept in ``data.name``)."""

    @classmethod
    def coerce(cls, name: str | EventType) -> EventType:
        """Accept a member, its value or its name (any case); unknown names -> HANDLER_EVENT."""
        return cast(EventType, ENGINE_EVENTS.coerce(name))


EventKind = StrEnum
"""The type of ``Event.type``: a member of :class:`EventType` or of a registered vocabulary."""


class EventKinds:
    """The event vocabularies a bus or a reader knows: :class:`EventType` first, then ``enums``.

    Immutable (compose a new one for more vocabularies). Two vocabularies may not share a stored
    name (the ``type`` string must map back to one member), so that raises
    :class:`~freshness_magic.errors.EventKindError` when the set is composed, not when a run is
    half way through.
    """

    __slots__ = ("_by_name", "enums")

    def __init__(self, *enums: type[StrEnum]) -> None:
        vocabularies: tuple[type[StrEnum], ...] = tuple(dict.fromkeys((EventType, *enums)))
        by_name: dict[str, StrEnum] = {}
        for enum in vocabularies:
            for member in enum:
                for key in (member.value, member.name.lower()):
                    other = by_name.setdefault(key, member)
                    if other is not member:
                        raise EventKindError(
                            f"event name {key!r} is both {type(other).__name__}.{other.name} and "
                            f"{enum.__name__}.{member.name}; rename one of them so events.jsonl "
                            "can tell them apart"
                        )
        self.enums: tuple[type[StrEnum], ...] = vocabularies
        self._by_name: Mapping[str, StrEnum] = MappingProxyType(by_name)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, EventKinds) and other.enums == self.enums

    def __hash__(self) -> int:
        return hash(self.enums)

    def __repr__(self) -> str:
        return f"EventKinds({', '.join(e.__name__ for e in self.enums)})"

    def coerce(self, name: str | StrEnum) -> EventKind:
        """The member ``name`` stands for: a member of a known vocabulary as is; a string by value
        or member name (any case); a string nobody knows -> ``EventType.HANDLER_EVENT``.

        A member of a vocabulary this set does not hold raises :class:`EventKindError`: it was
        meant as that event, and reading the log back would not know it.
        """
        if isinstance(name, StrEnum):
            if type(name) in self.enums:
                return name
            raise EventKindError(
                f"event type {type(name).__name__}.{name.name} is not known to this run "
                f"({self!r}); have the extension that emits it list {type(name).__name__} in its "
                "event_kinds()"
            )
        return self._by_name.get(str(name).strip().lower(), EventType.HANDLER_EVENT)

    def event_from_dict(self, data: Mapping[str, Any]) -> Event:
        """The :class:`Event` of one ``events.jsonl`` line; an unknown ``type`` becomes
        ``HANDLER_EVENT`` with the stored name in ``data.name`` (as :meth:`EventBus.emit` does)."""
        stored = str(data.get("type", ""))
        kind = self.coerce(stored)
        raw = data.get("data")
        payload = dict(raw) if isinstance(raw, Mapping) else {}
        if kind is EventType.HANDLER_EVENT and stored != EventType.HANDLER_EVENT.value:
            payload.setdefault("name", stored)
        try:
            seq = int(data.get("seq", 0))
        except (TypeError, ValueError):
            raise StateFileError(
                f"event {stored!r}: seq {data.get('seq')!r} is not a whole number"
            ) from None
        return Event(
            type=kind,
            run_id=str(data.get("run_id", "")),
            seq=seq,
            timestamp=str(data.get("timestamp", "")),
            node_id=None if data.get("node_id") is None else str(data["node_id"]),
            data=payload,
        )

    def read(self, path: Path) -> Iterator[Event]:
        """The events of an ``events.jsonl`` file, in order; a torn or damaged line is skipped
        with a warning (as :func:`~freshness_magic.atomicio.read_jsonl` does)."""
        for record in read_jsonl(path):
            try:
                yield self.event_from_dict(record)
            except StateFileError as exc:
                log.warning("%s: damaged event skipped (%s)", path, exc)


ENGINE_EVENTS = EventKinds()
"""The engine's vocabulary alone (what a bus knows when no extension adds one)."""


def utc_now_iso() -> str:
    """The current UTC time as ISO 8601 with milliseconds and a ``Z`` suffix."""
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass(frozen=True)
class Event:
    """One thing that happened in a run; ``seq`` orders the events of a run from 1."""

    type: EventKind
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


Listener = Callable[[Event], None]


class EventBus:
    """Delivers events to listeners in subscription order and logs them to ``events.jsonl``.

    ``kinds`` are the vocabularies it accepts (default: the engine's alone).
    """

    def __init__(
        self,
        run_id: str,
        log_path: Path | None = None,
        *,
        seq: int = 0,
        kinds: EventKinds = ENGINE_EVENTS,
    ) -> None:
        self.run_id = run_id
        self.kinds = kinds
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
        event_type: EventKind | str,
        node_id: str | None = None,
        data: dict[str, Any] | None = None,
    ) -> Event:
        """Create the next event, append it to the log, then deliver it to every listener.

        ``event_type`` is a member of one of :attr:`kinds` or a name (a handler's report: see
        :meth:`EventKinds.coerce`); a member of another vocabulary raises EventKindError.
        """
        kind = self.kinds.coerce(event_type)
        payload = dict(data or {})
        if kind is EventType.HANDLER_EVENT and not isinstance(event_type, StrEnum):
            payload.setdefault("name", str(event_type))
        with self._lock:
            self._seq += 1
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
