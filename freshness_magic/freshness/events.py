"""The events freshness adds to a run (``events.jsonl`` ``type`` values, docs/FORMATS.md).

The run knows them because :class:`~freshness_magic.freshness.extension.FreshnessExtension` lists
this vocabulary in ``event_kinds()``; readers outside a run get it from
:func:`freshness_magic.events.session_event_kinds`.
"""

from __future__ import annotations

from enum import StrEnum


class FreshnessEvent(StrEnum):
    """Freshness event names; the value is what ``events.jsonl`` stores in ``type``."""

    STALE_INPUT = "stale_input"
    """A ``warn``/``block`` node's inputs changed since its baseline or its last run."""
    INPUT_DRIFT = "input_drift"
    """Inputs changed while the run was stopped (found on resume)."""
    BASELINE_ACCEPTED = "baseline_accepted"
    """Changed inputs were accepted as the new baseline (``%pipeline accept``, the context)."""
