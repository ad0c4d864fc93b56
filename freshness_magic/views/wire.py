"""What the widget sends its page beside the graph: the graph and gate values, node details,
playground keys, evidence rows and their expanded records, text cut to size. Pure functions of
a frame or of the pipeline's read-only view, with no widget runtime: ``notebook/widget.py`` only
puts these values into its traits.
"""

from __future__ import annotations

import bisect
import json
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from freshness_magic.engine.model import Graph, Node
from freshness_magic.engine.state import RunState
from freshness_magic.views.model import Span, parse_time
from freshness_magic.views.render import Layout
from freshness_magic.views.state import (
    STALE_GLYPH,
    STATE_STYLES,
    NodeState,
    NodeView,
    legend_items,
)
from freshness_magic.views.text import choice_text, evidence_row

if TYPE_CHECKING:
    from freshness_magic.views.frame import ViewFrame
    from freshness_magic.views.pipeline_view import PipelineView


def short(text: str, limit: int) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def clock_time(timestamp: str) -> str:
    """``HH:MM:SS`` of an ISO timestamp (the full one is in the record)."""
    return timestamp[11:19] if len(timestamp) >= 19 and timestamp[10] in "T " else timestamp


def evidence_summary_row(seq: int, record: Mapping[str, Any]) -> list[Any]:
    """One compact evidence row: sequence number, clock time, node, status, method, summary."""
    row = evidence_row(record)
    return [
        seq,
        clock_time(row["time"]),
        row["node"],
        row["status"],
        row["method"],
        short(row["summary"], 64),
    ]


def to_json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), default=str)


def node_details(pipeline: PipelineView, node_id: str, view: NodeView) -> dict[str, Any]:
    """A node's details: the pipeline's ``details(node)`` plus its state and attributes."""
    node = pipeline.require_node(node_id)
    data: dict[str, Any] = {"state": view.state.value, "why": view.why}
    data.update(pipeline.details(node_id))
    data.setdefault("attributes", dict(node.attrs))
    return data


def context_keys(pipeline: PipelineView, limit: int = 200) -> list[list[str]]:
    """The run context's keys with short values (the playground lists and completes them)."""
    keys = [["outcome", ""], ["preferred_label", ""]]
    run = pipeline.live_run
    if run is not None:
        for key, value in sorted(run.context.items())[:limit]:
            keys.append([f"context.{key}", short(repr(value), 60)])
    return keys


def graph_value(graph: Graph, layout: Layout) -> dict[str, Any]:
    """What the page gets once per structure: the SVG, the nodes in index order, the exit nodes
    (the Run to list starts at one) and the start node (the Home and End keys go to them), the
    goal, the legend of the states this pipeline can show
    and, per state, its legend entries (for a state shown that the legend did not list; stale
    has two), and each state's mark (drawn in the node's corner)."""
    return {
        "svg": layout.svg,
        "nodes": layout.nodes,
        "exits": [node_id for node_id in layout.nodes if graph.is_exit(node_id)],
        "start": start.id if (start := graph.start_node()) is not None else None,
        "name": graph.name,
        "goal": graph.goal,
        "legend": legend_items(layout.states),
        "describe": {state.value: legend_items([state]) for state in STATE_STYLES},
        "glyphs": {
            **{state.value: style.glyph for state, style in STATE_STYLES.items()},
            **{f"stale:{kind.value}": glyph for kind, glyph in STALE_GLYPH.items()},
        },
    }


IRREVERSIBLE_WORDS = (
    "deploy", "release", "ship", "publish", "push", "merge", "delete", "remove", "drop",
    "destroy", "purge", "send", "email", "pay", "upload", "tag", "prod", "production", "migrate",
)  # fmt: skip
"""Words in a node's id or label that say its act is hard to take back once it has run."""

_WORDS = re.compile(r"[a-z]+")


def irreversible_reason(node: Node | None) -> str:
    """Why a gate's choice that goes on to ``node`` needs a second click, or ``""``.

    A node looks irreversible when it runs a shell command (a tool node: what it does outside the
    run, the run cannot undo) or when its id or label names an act such as deploy, publish or
    delete. The view asks for a confirming click instead of offering an Undo: the answer is
    written to the journal and the evidence log at once and the run goes straight on to the
    next node, so there is no moment at which undoing would be safe.
    """
    if node is None:
        return ""
    if node.tool_command:
        command = " ".join(node.tool_command.split())
        shown = command if len(command) <= 60 else command[:59] + "…"
        return f"runs a command: {shown}"
    words = set(_WORDS.findall(f"{node.id} {node.label}".lower().replace("_", " ")))
    named = [word for word in IRREVERSIBLE_WORDS if word in words]
    return f"is named for an act that is hard to undo ({named[0]})" if named else ""


def gate_value(frame: ViewFrame) -> dict[str, Any]:
    """The waiting gate for the gate panel: question, one entry per choice, what it approves,
    the note on changed inputs upstream of it (``""`` when none), and which time it asks (a
    loop that comes back at once would otherwise look as if the answer did nothing)."""
    gate = frame.gate
    if gate is None:
        return {}
    graph = frame.graph
    choices = [
        {
            "key": c.key,
            "label": c.label,
            "target": c.target,
            "text": choice_text(c),
            "confirm": irreversible_reason(graph.nodes.get(c.target)),
        }
        for c in gate.choices
    ]
    return {
        "node": gate.node_id,
        "question": gate.text,
        "choices": choices,
        "approving": dict(frame.approving),
        "note": frame.gate_note,
        "visit": frame.gate_visit,
    }


class ActiveTime:
    """How long a run has been at work: the time its steps cover, from its evidence records and
    the attempts a Stop or an interrupt cut short (also seen from their events, so a run of an
    older version, whose stopped attempts left no record, counts them too).

    Each record spans ``duration_seconds`` up to its ``timestamp``; the spans are merged, so the
    nodes of parallel branches (inside their parallel node's span) are not counted twice, and
    the time a run waited at a gate or sat paused between sessions is not counted at all. The
    log is the run's, on disk, so the total goes on across ``%pipeline resume`` and kernel
    restarts. Records are folded in as they come (a view refreshes at every step): each costs
    a search among the merged spans, not a pass over the whole log.
    """

    def __init__(self) -> None:
        self._starts: list[float] = []
        self._ends: list[float] = []
        self._seen = 0
        self._first: object = None
        self._stopped: Sequence[Span] = ()
        self._stopped_seen = 0
        self.seconds = 0.0

    def update(self, records: Sequence[Mapping[str, Any]], stopped: Sequence[Span] = ()) -> float:
        """Fold in the records after the ones seen (a log only grows), and the spans of stopped
        attempts after those seen (:attr:`ViewModel.stopped`); the total seconds.

        Records of another log (a new run: its first record is another object), or another list
        of stopped spans, start again.
        """
        first = records[0] if records else None
        if (
            first is not self._first
            or len(records) < self._seen
            or stopped is not self._stopped
            or len(stopped) < self._stopped_seen
        ):
            self._starts, self._ends, self.seconds = [], [], 0.0
            self._seen = self._stopped_seen = 0
            self._first, self._stopped = first, stopped
        for record in records[self._seen :]:
            span = _span(record)
            if span is not None:
                self._add(*span)
        for start, end in stopped[self._stopped_seen :]:
            if end > start:
                self._add(start, end)
        self._seen, self._stopped_seen = len(records), len(stopped)
        return self.seconds

    def before(self, moment: float) -> float:
        """The seconds covered before ``moment``: while a node runs since ``moment``, its own
        span covers the rest, and the page counts it on (the branches a parallel node has
        finished lie inside its span and are not counted again)."""
        later = bisect.bisect_left(self._starts, moment)  # the first span starting at or after
        covered = self.seconds - sum(self._ends[later:]) + sum(self._starts[later:])
        if later and self._ends[later - 1] > moment:
            covered -= self._ends[later - 1] - moment
        return covered

    def _add(self, start: float, end: float) -> None:
        first = bisect.bisect_left(self._ends, start)  # the first span ending at or after start
        last = bisect.bisect_right(self._starts, end)  # after the last span starting by end
        if first < last:
            start, end = min(start, self._starts[first]), max(end, self._ends[last - 1])
            self.seconds -= sum(self._ends[first:last]) - sum(self._starts[first:last])
        self._starts[first:last] = [start]
        self._ends[first:last] = [end]
        self.seconds += end - start


def _span(record: Mapping[str, Any]) -> tuple[float, float] | None:
    outcome = record.get("outcome")
    engine = outcome.get("engine") if isinstance(outcome, dict) else None
    duration = engine.get("duration_seconds") if isinstance(engine, dict) else None
    end = parse_time(record.get("timestamp"))
    if isinstance(duration, int | float) and duration > 0 and end is not None:
        return end - float(duration), end
    return None


def active_seconds(records: Sequence[Mapping[str, Any]], stopped: Sequence[Span] = ()) -> float:
    """:class:`ActiveTime` of a whole log (and stopped attempts) at once."""
    return ActiveTime().update(records, stopped)


def run_value(frame: ViewFrame, now: float, active: ActiveTime | None = None) -> dict[str, Any]:
    """The run line above the graph: state, progress, the run's active time (from ``active``,
    else from its evidence log), and the running node with how long it has run at ``now``
    (wall clock); while a node runs the page counts both on from there."""
    views = frame.views
    if active is None:
        active = ActiveTime()
        active.update(frame.evidence, frame.stopped)
    done = frame.nodes_run
    total = max(len(frame.graph.nodes), 1)
    if frame.state is RunState.COMPLETED:
        done = total
    running = next((n for n, v in views.items() if v.state is NodeState.RUNNING), "")
    started = views[running].details.get("started_at") if running else None
    running_for = max(now - started, 0.0) if isinstance(started, int | float) else 0.0
    elapsed = active.before(started) if isinstance(started, int | float) else active.seconds
    return {
        "state": frame.state_name,
        "line": frame.status_line,
        "elapsed": round(elapsed, 1),
        "done": min(done, total),
        "total": total,
        "running": running,
        "running_for": round(running_for, 1),
        "next": frame.next_node or "",
        "backend": frame.backend,
        "can_stop": True,
        "can_retry": True,
    }
