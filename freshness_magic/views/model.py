"""The node views of one pipeline, folded from its run's events and published once per step.

The run's state (outcomes, gate, next node) is read only at step boundaries, when the pipeline
takes a :class:`RunSnapshot`; between boundaries only events are folded in (a node started, is
retrying, printed output, was interrupted or skipped, a dead end). So a view never reads a run
that is half way through a step. :meth:`ViewModel.views` is the last published state of every
node (docs/ARCHITECTURE.md) with the reason behind it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from freshness_magic.atomicio import loads_bounded
from freshness_magic.engine.events import Event, EventType
from freshness_magic.engine.model import Graph
from freshness_magic.engine.outcome import Outcome, Question, ReusedFrom, StageStatus
from freshness_magic.engine.persistence import EVENTS_FILE
from freshness_magic.engine.reach import reachable, successor_map
from freshness_magic.engine.state import RunState
from freshness_magic.engine.trace import Trace
from freshness_magic.engine.visible import visible
from freshness_magic.views.marks import NodeStale, marked, outdated_views
from freshness_magic.views.render import NodeState, NodeView
from freshness_magic.views.text import choice_text

OUTPUT_TAIL = 4000
"""Characters of a node's streamed output kept for its details."""
_FINISHED = (RunState.COMPLETED, RunState.FAILED)
_NOT_RUN = NodeView()
"""The view of every node without an outcome (views are immutable: one serves them all, so a
200-node pipeline's views are not 200 new objects at every step)."""


@dataclass(frozen=True)
class RunSnapshot:
    """The run's state at a step boundary (what the views are computed from)."""

    state: RunState = RunState.READY
    outcomes: Mapping[str, Outcome] = field(default_factory=dict)
    completed: tuple[str, ...] = ()
    gate: Question | None = None
    next_node: str | None = None
    failure_reason: str = ""
    traces: tuple[Trace, ...] = ()
    """What each execution read and wrote (the marks are derived from them)."""
    definitions: Mapping[str, str] | None = None
    """Each node's definition fingerprint now, for a run carried over to an edited pipeline
    (its executions of an edited node are stale); None: the pipeline was never edited."""

    @classmethod
    def of(cls, run: Any) -> RunSnapshot:
        from freshness_magic.engine.trace import graph_definitions

        edited = bool(getattr(run, "edited", False))
        return cls(
            traces=tuple(getattr(run, "traces", ())),
            definitions=graph_definitions(run.graph, run.workdir) if edited else None,
            state=RunState(run.state),
            outcomes=dict(run.node_outcomes),
            completed=tuple(run.completed_nodes),
            gate=run.pending_gate,
            next_node=run.next_node,
            failure_reason=str(getattr(run, "failure_reason", "") or ""),
        )


Span = tuple[float, float]
"""A stretch of wall-clock time, (start, end) in seconds since the epoch."""


def parse_time(stamp: object) -> float | None:
    """Seconds since the epoch of an ISO timestamp (``...Z`` or with an offset), else None."""
    if not isinstance(stamp, str) or not stamp:
        return None
    try:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


_STARTED = f'"{EventType.STAGE_STARTED.value}"'.encode()
_INTERRUPTED = f'"{EventType.STAGE_INTERRUPTED.value}"'.encode()


def stopped_spans(run_dir: Path) -> list[Span]:
    """When the run's stopped attempts worked: each from a node's start to its interruption
    (Stop, a kernel interrupt), read from the run's ``events.jsonl``. A stopped attempt leaves
    no evidence record, and its time is still time the run was at work."""
    started: dict[str, float] = {}
    spans: list[Span] = []
    try:
        with open(run_dir / EVENTS_FILE, "rb") as handle:
            lines = [raw for raw in handle if _STARTED in raw or _INTERRUPTED in raw]
    except OSError:
        return []
    for raw in lines:
        try:
            record = loads_bounded(raw)
        except ValueError:
            continue  # a torn last line
        if not isinstance(record, dict):
            continue
        node, at = record.get("node_id"), parse_time(record.get("timestamp"))
        if not isinstance(node, str) or at is None:
            continue
        if record.get("type") == EventType.STAGE_STARTED.value:
            started[node] = at
        elif record.get("type") == EventType.STAGE_INTERRUPTED.value and node in started:
            spans.append((started.pop(node), at))
    return spans


def _running_why(output: str) -> str:
    """A running node's tooltip: its latest streamed output line, if it printed any."""
    lines = [line for line in output.splitlines() if line.strip()]
    if not lines:
        return "running"
    last = lines[-1].strip()
    return "running: " + (last if len(last) <= 160 else "…" + last[-159:])


class ViewModel:
    """Node views of one pipeline: events folded in as they come, views published per step."""

    def __init__(self, graph: Graph) -> None:
        self.graph = graph
        self._succ: dict[str, set[str]] | None = None
        """Each node's successors, made the first time a view needs what is still ahead."""
        self._lock = threading.Lock()
        self.snapshot = RunSnapshot()
        self.stale: dict[str, NodeStale] = {}
        self.blocked: frozenset[str] = frozenset()
        self.running: tuple[str, float] | None = None
        """The node executing now and its ``time.monotonic()`` start (for a live timer)."""
        self.running_since = 0.0
        """Wall-clock start of the running node (what a view's timer counts from)."""
        self.retrying: dict[str, str] = {}
        self.branches_running: set[str] = set()
        """Nodes of parallel branches executing now (inside the parallel node's step)."""
        self.branches_done: dict[str, Outcome] = {}
        """Branch nodes finished inside the current step (the snapshot has them after it)."""
        self.interrupted: dict[str, str] = {}
        self.skipped: dict[str, str] = {}
        self.edited: dict[str, tuple[str, ...]] = {}
        """Node -> the attributes the pipeline's edits changed (``pipeline_edited`` events)."""
        self.outputs: dict[str, str] = {}
        """The tail of each node's streamed output (``stage_output`` events) in its latest
        attempt: a retry or a new visit starts it again, as the node's output files do."""
        self.dead_end: dict[str, Any] | None = None
        self.routes: dict[str, tuple[str, str]] = {}
        """Where the run went after each node's latest visit, and why (its edge_selected)."""
        self.stopped: list[Span] = []
        """When the run's stopped attempts worked (:func:`stopped_spans`; appended as a Stop
        ends one): the run's active time counts them, though they leave no evidence record."""
        self.version = 0
        self._views: dict[str, NodeView] = {}
        self._unread = False
        """A publish not yet computed: its views are computed when first read (:meth:`views`).
        Inside a step the events publish twice (the node started, its output) before the step
        boundary does, and mostly nobody reads in between: those passes over every node were
        the view's largest cost per step at 20 nodes."""
        self._outdated: tuple[tuple[Any, ...], dict[str, NodeView]] | None = None
        """The last outdated marks and what they were derived from: the events folded within a
        step republish the same traces, which need not be judged again."""
        self.publish(RunSnapshot())

    # --- folding ---------------------------------------------------------------------------------

    def fold(self, event: Event) -> bool:
        """Fold one run event in; True when the views changed and should be shown now."""
        with self._lock:
            if not self._fold_locked(event):
                return False
            self._publish_locked(self.snapshot)
        return True

    def replay(self, events: Iterable[Event], *, at_rest: bool = False) -> None:
        """Fold in many past events (a run read from disk), then publish the views once: a
        publish per event would cost a pass over every node per event. ``at_rest``: the run
        was just reopened, so nothing runs now whatever the log's last words."""
        with self._lock:
            for event in events:
                self._fold_locked(event)
            if at_rest:
                self.running = None
                self.branches_running.clear()
            self._publish_locked(self.snapshot)

    def _fold_locked(self, event: Event) -> bool:
        """:meth:`fold` without the publish; True when the views changed."""
        kind, node = event.type, event.node_id
        branch = event.data.get("branch_of") is not None
        if kind is EventType.PIPELINE_EDITED:
            self._current_locked()  # the published views are those before the edit
            for node_id, names in dict(event.data.get("edited") or {}).items():
                known = self.edited.get(str(node_id), ())
                self.edited[str(node_id)] = tuple(dict.fromkeys([*known, *map(str, names)]))
            return False
        if kind is EventType.STAGE_STARTED and node is not None:
            if branch:
                self.branches_running.add(node)
            else:
                self.running = (node, time.monotonic())
                self.running_since = time.time()
            self.interrupted.pop(node, None)
            self.skipped.pop(node, None)
            self.outputs.pop(node, None)  # a node's output is its latest visit's
            self.routes.pop(node, None)
        elif kind is EventType.STAGE_RETRYING and node is not None:
            self.retrying[node] = str(event.data.get("failure_reason") or "retry requested")
            self.outputs.pop(node, None)  # and of its latest attempt
        elif kind in (EventType.STAGE_COMPLETED, EventType.STAGE_FAILED) and branch:
            self.branches_running.discard(str(node))
            self.branches_done[str(node)] = Outcome(
                status=StageStatus.parse(str(event.data.get("status", "fail"))),
                failure_reason=str(event.data.get("failure_reason") or ""),
                notes=str(event.data.get("notes") or ""),
                reused_from=ReusedFrom.from_dict(event.data.get("reused_from")),
            )
        elif kind is EventType.STAGE_INTERRUPTED and node is not None:
            self.interrupted[node] = str(event.data.get("reason") or "interrupted")
            worked, at = event.data.get("duration"), parse_time(event.timestamp)
            if isinstance(worked, int | float) and at is not None:
                self.stopped.append((at - worked, at))
            self.branches_running.discard(node)
            if not branch:
                self.running = None
        elif kind is EventType.STAGE_SKIPPED and node is not None:
            self.skipped[node] = str(event.data.get("notes") or "skipped")
        elif kind is EventType.STAGE_OUTPUT and node is not None:
            text = self.outputs.get(node, "") + visible(str(event.data.get("text", "")))
            self.outputs[node] = text[-OUTPUT_TAIL:]
            if node not in self.branches_running and (
                self.running is None or self.running[0] != node
            ):
                return False  # shown live only on a running node (its tooltip)
        elif kind is EventType.DEAD_END:
            self.dead_end = dict(event.data)
        elif kind is EventType.EDGE_SELECTED and node is not None:
            self.routes[node] = (str(event.data.get("target")), str(event.data.get("reason")))
            return False  # nothing drawn changes: ``why`` reads it
        else:
            return False
        return True

    def load_stopped(self, spans: list[Span]) -> None:
        """Take the stopped attempts of the run as its event log has them (a reopened run)."""
        with self._lock:
            self.stopped = spans

    def mark_interrupted(self, node_id: str, reason: str) -> None:
        """Record that ``node_id`` was stopped (the run's own event may not say so)."""
        with self._lock:
            self._current_locked()  # the published views are those before the stop
            self.interrupted[node_id] = reason
            self.running = None

    # --- publishing -----------------------------------------------------------------------------

    def publish(
        self,
        snapshot: RunSnapshot,
        stale: Mapping[str, NodeStale] | None = None,
        blocked: frozenset[str] | None = None,
    ) -> None:
        """Take the run's state at a step boundary (and the freshness) and recompute the views."""
        with self._lock:
            self.running = None
            self.branches_running.clear()
            self.branches_done.clear()
            if stale is not None:
                self.stale = dict(stale)
            if blocked is not None:
                self.blocked = blocked
            for node_id in list(self.retrying):
                if node_id in snapshot.outcomes:
                    del self.retrying[node_id]
            self._publish_locked(snapshot)

    def _publish_locked(self, snapshot: RunSnapshot) -> None:
        self.snapshot = snapshot
        self._unread = True
        self.version += 1

    def _current_locked(self) -> dict[str, NodeView]:
        """The views of the last publish, computed now if they were not yet. Whatever changes a
        state the views read without publishing calls this first, so a view computed late is
        the one it would have been at its publish."""
        if self._unread:
            self._views = self._compute()
            self._unread = False
        return self._views

    def views(self) -> dict[str, NodeView]:
        """The last published view of every node (a fresh dict the caller may keep)."""
        with self._lock:
            return dict(self._current_locked())

    # --- the rules ------------------------------------------------------------------------------

    def _compute(self) -> dict[str, NodeView]:
        snap = self.snapshot
        nxt = snap.next_node if snap.state not in (*_FINISHED, RunState.WAITING) else None
        if snap.state is RunState.READY and nxt is None:  # before the first step
            start = self.graph.start_node()
            nxt = start.id if start is not None else None
        ahead: set[str] = set()
        if self._needs_ahead(snap):
            if self._succ is None:
                self._succ = successor_map(self.graph)
            if nxt is not None:
                ahead = reachable(self._succ, [nxt]) | {nxt}
            if snap.gate is not None:
                ahead |= reachable(self._succ, [snap.gate.node_id]) | {snap.gate.node_id}
        outdated = self._outdated_views(snap)
        running = self.running[0] if self.running is not None else None
        result: dict[str, NodeView] = {}
        for node_id in self.graph.nodes:
            view = self._outcome_view(node_id, snap.outcomes.get(node_id))
            if node_id in self.skipped and node_id not in snap.outcomes:
                view = NodeView(NodeState.SKIPPED, why=self.skipped[node_id])
            elif node_id not in snap.outcomes and self._never_reached(node_id, snap, ahead):
                view = NodeView(NodeState.SKIPPED, why="not on the path taken")
            if snap.gate is not None and snap.gate.node_id == node_id:
                choices = ", ".join(choice_text(c) for c in snap.gate.choices)
                view = NodeView(NodeState.WAITING, why=f"{snap.gate.text} [{choices}]")
            elif node_id == running:
                retry = self.retrying.get(node_id)
                state = NodeState.RETRYING if retry else NodeState.RUNNING
                view = NodeView(
                    state,
                    why=retry or _running_why(self.outputs.get(node_id, "")),
                    details={"started_at": self.running_since},
                )
            elif node_id in self.branches_running:
                view = NodeView(NodeState.RUNNING, why=_running_why(self.outputs.get(node_id, "")))
            elif node_id in self.branches_done and node_id not in snap.outcomes:
                view = self._outcome_view(node_id, self.branches_done[node_id])
            elif node_id in self.interrupted and (node_id == nxt or node_id not in snap.outcomes):
                view = NodeView(NodeState.INTERRUPTED, why=self.interrupted[node_id])
            elif node_id == nxt and view.state not in (NodeState.RETRYING, NodeState.BLOCKED):
                view = NodeView(NodeState.NEXT, why="next to run")
            result[node_id] = marked(view, node_id, snap.outcomes, self.stale, outdated)
        return result

    def _outdated_views(self, snap: RunSnapshot) -> dict[str, NodeView]:
        """:func:`outdated_views` of ``snap``, derived again only when its traces, the stale
        inputs, the definitions or the edits are not the ones of the last derivation."""
        edited = tuple(self.edited.items())
        key = (snap.traces, self.stale, snap.definitions, edited)
        last = self._outdated
        if (
            last is not None
            and all(a is b for a, b in zip(last[0][:3], key[:3], strict=True))
            and last[0][3] == edited
        ):
            return last[1]
        found = outdated_views(snap.traces, self.stale, snap.definitions, self.edited)
        self._outdated = (key, found)
        return found

    @staticmethod
    def _needs_ahead(snap: RunSnapshot) -> bool:
        """Whether :meth:`_never_reached` looks at what is ahead (not before the first step,
        nor once the run has ended)."""
        return snap.state not in (RunState.COMPLETED, RunState.READY, RunState.FAILED) and bool(
            snap.completed
        )

    def _never_reached(self, node_id: str, snap: RunSnapshot, ahead: set[str]) -> bool:
        """A node the run can no longer reach: it finished without it, or it is not ahead."""
        if snap.state is RunState.COMPLETED:
            return True
        if not self._needs_ahead(snap):
            return False
        return node_id not in ahead

    def _outcome_view(self, node_id: str, outcome: Outcome | None) -> NodeView:
        if outcome is None:
            return _NOT_RUN
        status = outcome.status
        if status is StageStatus.SUCCESS and outcome.reused_from is not None:
            return NodeView(NodeState.REUSED, why=f"reused ({outcome.reused_from.text()})")
        if status is StageStatus.SUCCESS:
            return NodeView(NodeState.SUCCEEDED, why=outcome.notes or "success")
        if status is StageStatus.PARTIAL_SUCCESS:
            return NodeView(NodeState.PARTIAL, why=outcome.failure_reason or outcome.notes)
        if status in (StageStatus.FAIL, StageStatus.RETRY) and node_id in self.blocked:
            return NodeView(NodeState.BLOCKED, why=outcome.failure_reason)
        if status is StageStatus.FAIL:
            return NodeView(NodeState.FAILED, why=outcome.failure_reason or "failed")
        if status is StageStatus.SKIPPED:
            return NodeView(NodeState.SKIPPED, why=outcome.notes)
        if status is StageStatus.RETRY:
            return NodeView(NodeState.RETRYING, why=outcome.failure_reason or "retry requested")
        return NodeView(NodeState.WAITING, why=outcome.notes)
