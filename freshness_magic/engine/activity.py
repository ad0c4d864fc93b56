"""What a run's driver is doing now, read from the tail of its ``events.jsonl``: the nodes
started and not ended, and the gate it waits at. ``status``, ``why`` and ``resume`` say it; with
no live driver, the nodes still running are the ones a kill cut off."""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

from freshness_magic.atomicio import loads_bounded
from freshness_magic.engine.events import ENGINE_EVENTS, EventType
from freshness_magic.errors import StateFileError

EVENTS_TAIL_BYTES = 256 * 1024
"""How much of the end of ``events.jsonl`` :func:`activity` reads (a run's events file
grows with it; the nodes running now started near its end)."""


class Activity(NamedTuple):
    """What the tail of a run's ``events.jsonl`` says its driver does now."""

    running: list[str]
    """Nodes started and not yet ended (a gate that waits for an answer is not running)."""
    waiting_gate: str | None
    """The gate whose ``gate_waiting`` came after every start and answer: the driver waits."""


def activity(run_dir: Path) -> Activity:
    """The nodes running now and the gate waiting, from the tail of the run's ``events.jsonl``."""
    ended = {EventType.STAGE_COMPLETED, EventType.STAGE_FAILED, EventType.STAGE_INTERRUPTED}
    try:
        with open(run_dir / "events.jsonl", "rb") as handle:
            size = handle.seek(0, 2)
            handle.seek(max(size - EVENTS_TAIL_BYTES, 0))
            lines = handle.read().split(b"\n")[1 if size > EVENTS_TAIL_BYTES else 0 :]
    except OSError:
        return Activity([], None)
    running: dict[str, None] = {}
    waiting: str | None = None
    for raw in lines:
        try:
            record = loads_bounded(raw)
            event = ENGINE_EVENTS.event_from_dict(record) if isinstance(record, dict) else None
        except (ValueError, StateFileError):
            continue  # a torn last line
        if event is None:
            continue
        if event.type in (EventType.PIPELINE_PAUSED, EventType.PIPELINE_RESUMED):
            running.clear()  # a pause ends what ran; a driver that takes over stopped the rest
            continue
        if event.node_id is None:
            continue
        if event.type is EventType.STAGE_STARTED:
            running[event.node_id] = None
            waiting = None
        elif event.type in ended:
            running.pop(event.node_id, None)
        elif event.type is EventType.GATE_WAITING:  # its stage_started has no end: it waits
            running.pop(event.node_id, None)
            waiting = event.node_id
        elif event.type is EventType.GATE_ANSWERED:
            waiting = None
    return Activity(list(running), waiting)


CUT_OFF_BY_KILL = (
    "was running when its driver stopped without saving (killed?); resume runs it again"
)
"""A node started and never ended whose driver died holding the run (a kill, a crash)."""
CUT_OFF_BY_ERROR = (
    "was running when its driver stopped on an error before its end was saved (a write the "
    "system refused, as the driver said); resume runs it again"
)
"""A node started and never ended whose driver exited cleanly: it stopped on an error, such as
a state file it could not write (a full disk, a read-only folder)."""


class CutOff(NamedTuple):
    """The nodes a run's last driver left started and not ended, and why it stopped."""

    nodes: list[str]
    reason: str


def cut_off(run_dir: Path) -> CutOff:
    """The nodes started and never ended in ``run_dir`` (call it when no driver is live), with
    the words for them: a kill when the driver died holding its lock, an error when it let go."""
    from freshness_magic.engine.runlock import released_cleanly

    nodes = activity(run_dir).running
    reason = CUT_OFF_BY_ERROR if released_cleanly(run_dir) else CUT_OFF_BY_KILL
    return CutOff(nodes, reason)
