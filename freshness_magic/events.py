"""The event vocabularies of a session: the engine's events plus those of freshness and evidence.

The engine knows only its own :class:`~freshness_magic.engine.events.EventType`. A run learns the
others from its extensions' ``event_kinds()`` (:func:`freshness_magic.session.default_extensions`);
this module composes the same set for reading events outside a run (``events.jsonl`` of a past
run, tests), so a stored ``type`` string maps back to the same enum member either way.
"""

from __future__ import annotations

from freshness_magic.engine.events import EventKinds
from freshness_magic.evidence.events import EvidenceEvent
from freshness_magic.freshness.events import FreshnessEvent

__all__ = ["session_event_kinds"]


def session_event_kinds() -> EventKinds:
    """The engine's events, then freshness's, then evidence's (the order a session run has)."""
    return EventKinds(FreshnessEvent, EvidenceEvent)
