"""A run directory as the notebook's views would show it, read without taking its driver lock.

For commands that explain a run on disk (``freshness-magic why``). The run's newest valid
checkpoint is its last step boundary (outcomes, the waiting gate, the next node, freshness
baselines); ``events.jsonl`` says what happened inside the steps (the edge taken after each node,
output, interrupts, skips). Both go through the notebook's own
:class:`~freshness_magic.views.model.ViewModel` the way a kernel feeds it: the events up to
the checkpoint are folded in, the checkpoint is published, then the events after it (a step in
progress) are folded on top. So a node's state and reason are the ones the notebook shows, from
one set of rules.

A step in progress whose driver is gone (killed: no process holds the run) is shown interrupted,
as ``status`` names it cut off: ``resume`` runs it again. Nothing here writes to the run
directory; like ``status`` it works while a kernel or another command holds the run.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from freshness_magic.engine import front_end
from freshness_magic.engine.model import Graph, Node
from freshness_magic.engine.state import RunState
from freshness_magic.engine.visible import visible
from freshness_magic.views.model import RunSnapshot, ViewModel
from freshness_magic.views.why import NodeFacts, stale_upstream

if TYPE_CHECKING:
    from freshness_magic.engine.events import Event
    from freshness_magic.engine.persistence import RunMemory
    from freshness_magic.freshness.report import FreshnessReport


@dataclass(frozen=True)
class RunView:
    """A run directory read at one moment: its pipeline, state and views."""

    run_dir: Path
    """The folder read (after following ``loop_restart`` links)."""
    graph: Graph
    memory: RunMemory
    """The run's state at its last checkpoint."""
    model: ViewModel
    report: FreshnessReport | None
    """Input freshness now against the checkpoint's baselines (None: the run keeps none)."""
    driver: dict[str, Any] | None
    """The live process that holds the run (its lock's fields), or None."""
    cut_off: tuple[str, ...]
    """Nodes whose step never ended while no process drives the run."""
    kept: tuple[str, ...] = ()
    """The branches the parallel node the run goes on from had ended (they do not run again)."""
    front_end: Any = None
    """The nodes a front end declared to run in its own handler (``engine.front_end``)."""
    unchecked: str | None = None
    """Why the inputs could not be checked though the checkpoint keeps baselines (a file of
    them missing or damaged): then no node is marked stale, and the view must say so."""

    def require_node(self, node_id: str) -> Node:
        """The node ``node_id``; RunError naming the likely one (or the nodes there are)."""
        from freshness_magic.engine.validation.attrs import no_node
        from freshness_magic.errors import RunError

        node = self.graph.nodes.get(node_id)
        if node is None:
            raise RunError(no_node("the run's pipeline", node_id, self.graph.nodes))
        return node

    def facts(self, node_id: str) -> NodeFacts:
        """What ``why`` says about ``node_id`` (RunError when the pipeline has no such node)."""
        node = self.require_node(node_id)
        views = self.model.views()
        stale = self.model.stale.get(node_id)
        memory, gate = self.memory, self.memory.pending_gate
        return NodeFacts(
            graph=self.graph,
            node=node,
            views=views,
            outcome=memory.outcomes.get(node_id),
            route=self.model.routes.get(node_id),
            stale=stale,
            symbols=self._symbols(node_id) if stale is not None else [],
            missing=self._missing(node_id),
            output=self.output(node_id),
            gate=gate,
            gate_upstream=stale_upstream(views, memory.traces) if gate else ((), 0),
            blocked=self.model.blocked,
            failed=memory.state is RunState.FAILED and memory.failed_node == node_id,
            paused_at=memory.state is RunState.PAUSED and memory.next_node == node_id,
            resumes_at=memory.next_node if memory.state is RunState.PAUSED else None,
            kept=self.kept,
            runs_elsewhere=front_end.runs_elsewhere(self.front_end, node_id, ()) or "",
        )

    def output(self, node_id: str) -> str:
        """The node's streamed output in its latest attempt, else what its ``%%node`` cell
        printed (``nodes/<id>/cell_output.txt``), as the notebook's details show it."""
        from freshness_magic.views.state import CELL_OUTPUT_FILE

        output = self.model.outputs.get(node_id, "")
        if not output:
            try:
                output = visible(
                    (self.run_dir / "nodes" / node_id / CELL_OUTPUT_FILE).read_text("utf-8")
                )
            except (OSError, UnicodeDecodeError):
                output = ""
        return output

    def _missing(self, node_id: str) -> list[str]:
        entry = self.report.nodes.get(node_id) if self.report is not None else None
        return list(entry.effective.missing_files) if entry is not None else []

    def _symbols(self, node_id: str) -> list[str]:
        """Symbol-level changes of the node's stale inputs (only while a hub runs)."""
        if self.report is None:
            return []
        from freshness_magic.hub.integration import report_symbol_lines

        return [line.split(": ", 1)[1] for line in report_symbol_lines(self.report, [node_id])]


def read_run(run_dir: Path) -> RunView:
    """Read ``run_dir`` (a run directory, or one a ``loop_restart`` continued elsewhere).

    Raises CheckpointError when it is no run directory or has no usable checkpoint (the error
    ``status`` gives), StoredPipelineError when its copy of the pipeline is missing or altered.
    """
    from freshness_magic.engine.activity import cut_off as engine_cut_off
    from freshness_magic.engine.checkpoint import load_checkpoint
    from freshness_magic.engine.context import partial_key
    from freshness_magic.engine.handlers.parallel import kept_branch_ids
    from freshness_magic.engine.persistence import (
        follow_restarts,
        restore_memory,
        stored_pipeline,
        was_edited,
    )
    from freshness_magic.engine.runlock import live_driver
    from freshness_magic.engine.trace import graph_definitions
    from freshness_magic.errors import FreshnessError
    from freshness_magic.freshness.runcheck import checkpoint_report, unchecked_because
    from freshness_magic.hub.integration import HubHashSource
    from freshness_magic.views.marks import stale_from_report

    folder = follow_restarts(run_dir)
    data, used = load_checkpoint(folder)
    graph = stored_pipeline(folder, data.get("pipeline") or {}, used)
    memory, context = restore_memory(data, folder)
    unchecked = None
    try:
        report: FreshnessReport | None = checkpoint_report(
            data, used, folder, hash_sources=HubHashSource
        )
    except FreshnessError as exc:
        report, unchecked = None, unchecked_because(exc, data, folder)
    freshness = (data.get("extensions") or {}).get("freshness") or {}
    blocked = freshness.get("blocked") if isinstance(freshness, dict) else None
    snapshot = RunSnapshot(
        state=memory.state,
        outcomes=dict(memory.outcomes),
        completed=tuple(memory.completed),
        gate=memory.pending_gate,
        next_node=memory.next_node,
        failure_reason=memory.failure_reason,
        traces=tuple(memory.traces),
        definitions=graph_definitions(graph, Path(str(data.get("workdir") or folder)))
        if was_edited(data)
        else None,
    )
    model = ViewModel(graph)
    seen = _int(data.get("event_seq"))
    after = _fold_events(model, folder, seen)
    model.publish(
        snapshot,
        stale_from_report(report, graph) if report is not None else {},
        frozenset(str(n) for n in blocked or ()),
    )
    for event in after:  # the step in progress since the checkpoint, as a kernel folds it
        model.fold(event)
    driver = live_driver(folder)
    cut_off: tuple[str, ...] = ()
    if driver is None:  # the nodes started and never ended, as status names them
        stopped = engine_cut_off(folder)
        cut_off = tuple(n for n in stopped.nodes if n in graph.nodes)
        for node_id in cut_off:
            model.mark_interrupted(node_id, stopped.reason)
        model.publish(snapshot)  # nothing runs: back to the checkpoint, the cut-off marked
    going_on = memory.next_node if memory.state is RunState.PAUSED else None
    kept = kept_branch_ids(context.get(partial_key(going_on))) if going_on else []
    handlers = context.get(front_end.HANDLERS_KEY)
    return RunView(
        folder, graph, memory, model, report, driver, cut_off, tuple(kept), handlers, unchecked
    )


def _int(value: object) -> int:
    try:
        return int(value)  # type: ignore[call-overload]
    except (TypeError, ValueError):
        return 0


def _fold_events(model: ViewModel, folder: Path, seen: int) -> list[Event]:
    """Fold the run's events up to sequence number ``seen`` (the checkpoint's) into ``model``
    (one replay, one publish); return the events after it, in order."""
    from freshness_magic.engine.events import ENGINE_EVENTS
    from freshness_magic.engine.persistence import EVENTS_FILE

    before: list[Event] = []
    after: list[Event] = []
    for event in ENGINE_EVENTS.read(folder / EVENTS_FILE):
        (after if event.seq > seen else before).append(event)
    model.replay(before)
    return after
