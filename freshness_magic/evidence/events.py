"""The events evidence adds to a run (``events.jsonl`` ``type`` values, docs/FORMATS.md).

The run knows them because :class:`~freshness_magic.evidence.extension.EvidenceExtension` lists
this vocabulary in ``event_kinds()``; readers outside a run get it from
:func:`freshness_magic.events.session_event_kinds`.
"""

from __future__ import annotations

from enum import StrEnum


class EvidenceEvent(StrEnum):
    """Evidence event names; the value is what ``events.jsonl`` stores in ``type``."""

    EVIDENCE_RECORDED = "evidence_recorded"
    """A step's evidence record was written (``.orchestrator/evidence/`` and ``evidence.jsonl``)."""
