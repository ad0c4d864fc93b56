"""The events freshness adds to a run (``events.jsonl`` ``type`` values, docs/FORMATS.md).

The run knows them because :class:`~freshness_magic.freshness.extension.FreshnessExtension` lists
this vocabulary in ``event_kinds()``; readers outside a run get it from
:func:`freshness_magic.events.session_event_kinds`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from enum import StrEnum
from typing import Any


class FreshnessEvent(StrEnum):
    """Freshness event names; the value is what ``events.jsonl`` stores in ``type``."""

    STALE_INPUT = "stale_input"
    """A ``warn``/``block`` node's inputs changed since its baseline or its last run."""
    INPUT_DRIFT = "input_drift"
    """Inputs changed while the run was stopped (found on resume)."""
    BASELINE_ACCEPTED = "baseline_accepted"
    """Changed inputs were accepted as the new baseline (``%pipeline accept``, the context)."""


def some_files(files: Sequence[str], shown: int, total: int | None = None) -> str:
    """The first ``shown`` of ``files``, then how many more of ``total`` (default: all of
    ``files``): a change of thousands of files stays one short line."""
    count = len(files) if total is None else total
    listed = ", ".join(files[:shown])
    return listed + (f" (+{count - shown} more)" if count > shown else "")


def blocked_by(files: Sequence[str], shown: int = 3) -> str:
    """Why a ``freshness=block`` node did not run, in the words every front end uses."""
    listed = some_files(files, shown) or "its source_files"
    return f"blocked by changed inputs (freshness=block): {listed}"


def describe_stale_input(data: Mapping[str, Any], shown: int = 3) -> str:
    """A ``STALE_INPUT`` event's data in words, for progress lines (CLI and notebook alike)."""
    listed = some_files([str(f) for f in data.get("files") or ()], shown)
    if data.get("mode") == "block":
        action = "held back (freshness=block): accept the change or restore the files"
    else:
        action = "ran anyway (freshness=warn)"
    return f"inputs changed since its {data.get('since') or 'baseline'}: {listed}; {action}"


def describe_input_drift(data: Mapping[str, Any], shown: int = 3) -> list[tuple[str, str]]:
    """An ``INPUT_DRIFT`` event's data in words: (node id, what changed and what happens now)
    per node, for the lines a resume prints (CLI and notebook alike).

    A node that already ran may have outputs built on the old inputs. A node that has not run
    takes its baseline again on resume, so it runs on the new content: that is
    said here, because its ``block`` or ``warn`` check will not report this change again. A node
    a ``block`` stopped before the pause (``held``) keeps its baseline and stays stopped; the
    files it was stopped for are not drift (they were said before the pause).
    """
    since = data.get("since") or {}
    held = set(data.get("held") or ())
    lines = []
    for node_id, files in (data.get("nodes") or {}).items():
        listed = some_files([str(f) for f in files], shown)
        if since.get(node_id) == "run":
            what = f"inputs changed since it ran: {listed}; its results may be outdated"
        elif node_id in held:
            what = (
                f"inputs changed since its baseline: {listed}; freshness=block holds it back "
                "until the change is accepted"
            )
        else:
            what = (
                f"inputs changed since its baseline: {listed}; it has not run yet and will use "
                "them (its baseline is taken again now)"
            )
        lines.append((str(node_id), what))
    return lines
