"""What a loaded pipeline shows: its run's state as last published, as views, text and evidence.

:class:`PipelineView` is the read-only part of the notebook's ``Pipeline``: it answers from the
view model its live part publishes at every step boundary (never from a run in the middle of a
step) and from the run folder on disk. It changes nothing: the actions are the pipeline's, the
run's lifecycle is the live part's (``live/run.py``), which it sees only through
:class:`LiveSource`, so this module needs no IPython and no notebook code.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from freshness_magic.engine.model import Graph, Node
from freshness_magic.engine.outcome import Outcome, Question, StageStatus
from freshness_magic.engine.state import RunState
from freshness_magic.engine.validation.attrs import no_node
from freshness_magic.errors import RunError
from freshness_magic.views import text
from freshness_magic.views.evidence_log import EvidenceTail
from freshness_magic.views.frame import ViewFrame
from freshness_magic.views.marks import NodeStale
from freshness_magic.views.model import ViewModel
from freshness_magic.views.render import NodeState, NodeView
from freshness_magic.views.saved import ResumeOffer
from freshness_magic.views.state import RunBanner
from freshness_magic.views.text import TextResult
from freshness_magic.views.why import PipelineCommands

if TYPE_CHECKING:
    from freshness_magic.engine.run import Run
    from freshness_magic.views.explain import ConditionAnswer

_ENDED = frozenset({NodeState.SUCCEEDED, NodeState.REUSED, NodeState.PARTIAL, NodeState.FAILED})
"""States a node shows once it ran (and ended) in the step in progress."""


class LiveSource(Protocol):
    """What the view reads of a pipeline's live part (``live.run.LiveRun``)."""

    name: str
    graph: Graph
    superseded: bool
    resume_offer: ResumeOffer | None
    model: ViewModel
    offer_drawn: bool
    """``model`` shows the offered run as its checkpoint left it (no run is open yet)."""
    going: bool
    """A loop of several steps is stepping (between its nodes the run is not paused)."""
    run_options: dict[str, Any]
    structure_version: int
    commands: PipelineCommands
    """How messages spell the actions (the magics, or the object's methods)."""

    @property
    def live_run(self) -> Run | None: ...


def require_node(name: str, graph: Graph, node_id: str) -> Node:
    """The node ``node_id`` of ``graph``; :class:`RunError` naming the likely one, or the nodes
    there are, when missing."""
    if not isinstance(node_id, str):  # from Python: review.run_to(5)
        example = next(iter(graph.nodes), "start")
        raise RunError(f"a node id is a string such as {example!r}, not {node_id!r}")
    node = graph.nodes.get(node_id)
    if node is None:
        raise RunError(no_node(name, node_id, graph.nodes))
    return node


class PipelineView:
    """The read side of a loaded pipeline: status, why, evidence, details, conditions."""

    def __init__(self, live: LiveSource) -> None:
        self.live = live
        self._evidence: EvidenceTail | None = None

    @property
    def name(self) -> str:
        return self.live.name

    @property
    def graph(self) -> Graph:
        return self.live.graph

    @property
    def superseded(self) -> bool:
        return self.live.superseded

    @property
    def resume_offer(self) -> ResumeOffer | None:
        return self.live.resume_offer

    @property
    def model(self) -> ViewModel:
        """The view model (node views folded from the run's events)."""
        return self.live.model

    def require_node(self, node_id: str) -> Node:
        """The node ``node_id``; :class:`RunError` naming the likely one, or the nodes there
        are, when missing."""
        return require_node(self.name, self.graph, node_id)

    @property
    def has_run(self) -> bool:
        return self.live.live_run is not None

    @property
    def live_run(self) -> Run | None:
        """The run if one is open (never opens one)."""
        return self.live.live_run

    @property
    def stale(self) -> Mapping[str, NodeStale]:
        return self.model.stale

    # --- views (the last published state) ---------------------------------------------------------

    @property
    def state_name(self) -> str:
        if self.superseded:
            return "superseded"
        if self.live_run is None and not self.live.offer_drawn:
            return "ready"
        if self.model.running is not None:
            return "running"
        if self.live.going and self.model.snapshot.state is RunState.PAUSED:
            return "running"  # between two nodes of a run that goes on
        return self.model.snapshot.state.value

    def outcomes(self) -> Mapping[str, Outcome]:
        return dict(self.model.snapshot.outcomes)

    def pending_gate(self) -> Question | None:
        return self.model.snapshot.gate

    def next_node(self) -> str | None:
        if self.live_run is None and not self.live.offer_drawn:
            start = self.graph.start_node()
            return start.id if start else None
        return self.model.snapshot.next_node

    def blocked_nodes(self) -> frozenset[str]:
        """Nodes the freshness extension holds back until their changed inputs are accepted."""
        return self.model.blocked

    def views(self) -> dict[str, NodeView]:
        """Every node's visible state and why; a fresh dict the caller may keep."""
        return self.model.views()

    def nodes_run(self, views: Mapping[str, NodeView]) -> int:
        """How many nodes have run: those with an outcome (not a gate still waiting), and the
        branch nodes a parallel node in progress has finished (``views`` show them before its
        step ends)."""
        ran = {n for n, o in self.outcomes().items() if o.status is not StageStatus.WAITING}
        ran.update(n for n, v in views.items() if v.state in _ENDED)
        return len(ran)

    def status_line(self) -> str:
        """``pipeline NAME: state · next: X · 2/5 nodes run · 1 stale, 3 outdated``."""
        gate = self.pending_gate()
        views = self.views()
        counts = Counter(view.state for view in views.values())
        return text.status_line(
            self.name,
            self.model.snapshot.state.value if self.superseded else self.state_name,
            gate.node_id if gate is not None else None,
            self.next_node(),
            self.nodes_run(views),
            len(self.graph.nodes),
            stale=counts[NodeState.STALE],
            outdated=counts[NodeState.OUTDATED],
            superseded=self.superseded,
        )

    def stale_upstream(self, node_id: str) -> tuple[list[str], int]:
        """The nodes that led to the waiting gate ``node_id`` shown stale, and how many are
        shown outdated by changed inputs (:func:`freshness_magic.views.why.stale_upstream`)."""
        from freshness_magic.views.why import stale_upstream

        return stale_upstream(self.views(), self.model.snapshot.traces)

    def gate_note(self) -> str:
        """The note under the waiting gate when nodes upstream of it have changed inputs ("" when
        none, or no gate waits)."""
        gate = self.pending_gate()
        if gate is None or self.superseded:
            return ""
        stale, outdated = self.stale_upstream(gate.node_id)
        return text.stale_upstream_note(gate.node_id, stale, outdated, self.live.commands.why)

    def failure_text(self) -> str:
        """Why the run failed ("" unless it did): a node a ``freshness=block`` held back is
        said so, with the way on, instead of the engine's generic failure."""
        snapshot = self.model.snapshot
        if snapshot.state is not RunState.FAILED:
            return ""
        if self.live_run is not None:
            from freshness_magic.freshness.extension import blocked_inputs

            node = self.live_run.failed_node
            held = blocked_inputs(self.live_run, node)
            if node is not None and held is not None:
                return text.blocked_text(node, held, self.live.commands.accept(node))
        return snapshot.failure_reason

    def status_text(self, limit: int | None = None) -> str:
        """The status line, the node-state table (its first ``limit`` rows), and the resume
        offer or superseded note."""
        lines = [
            self.status_line(),
            text.status_table(self.views(), limit, self.live.commands.status()),
        ]
        if note := self.gate_note():
            lines.append(note)
        dispatch = self.live_run.dispatch if self.live_run is not None else None
        if dispatch is not None:
            lines.append(f"tool and codergen nodes run on {dispatch.label}")
        failure = self.failure_text()
        if failure:
            lines.append(f"failed: {text.failure_line(failure, 300)}")
        if self.model.dead_end is not None:
            lines.append(text.dead_end_text(self.model.dead_end))
        if self.superseded:
            lines.append(f"this view was replaced by a newer load of {self.name}")
        elif self.resume_offer is not None:
            lines.append(self.resume_offer.describe(self.name, self.live.commands))
        return "\n".join(lines)

    def status(self) -> TextResult:
        """``%pipeline status`` from Python (``review.status()``), as a result."""
        return TextResult(self.status_text())

    def why(self, node_id: str) -> TextResult:
        """Why ``node_id`` is in its state: outcome, failure, stale files, waiting question."""
        from freshness_magic.views.details import why_text

        return TextResult(why_text(self, node_id, self.live.commands))

    def evidence_records(self, node_id: str | None = None) -> list[dict[str, Any]]:
        """The valid records in the run's evidence log on disk, oldest first."""
        if self.live_run is None:
            return []
        log_path = Path(self.live_run.run_dir) / "evidence.jsonl"
        if self._evidence is None or self._evidence.path != log_path:
            self._evidence = EvidenceTail(log_path)
        records = self._evidence.read()
        return [r for r in records if node_id is None or r.get("nodeId") == node_id]

    def evidence(self, node_id: str | None = None) -> TextResult:
        if node_id is not None:
            self.require_node(node_id)
        records = self.evidence_records(node_id)
        if not records:
            where = f" for {node_id}" if node_id else ""
            return TextResult(f"no evidence records{where} yet", [])
        lines = [text.evidence_table(records), *self.damaged_evidence(records)]
        return TextResult("\n".join(lines), records)

    def damaged_evidence(self, records: list[dict[str, Any]]) -> list[str]:
        """A line for each node evidence file ``records`` name that is damaged on disk."""
        from freshness_magic.evidence.damage import damaged_files

        if self.live_run is None:
            return []
        nodes = [r["nodeId"] for r in records if isinstance(r.get("nodeId"), str)]
        return [f"warning: {d.message()}" for d in damaged_files(self.live_run.workdir, nodes)]

    def details(self, node_id: str) -> dict[str, Any]:
        """What the details panel of ``node_id`` shows (state, output, failure, evidence...)."""
        from freshness_magic.views.details import details_dict

        return details_dict(self, node_id)

    def banner(self) -> RunBanner | None:
        """The run-level message the view shows above the graph (None when there is none)."""
        from freshness_magic.views.details import banner

        return banner(self)

    @property
    def backend_name(self) -> str:
        """The codergen backend new runs use (what the view's badge says)."""
        backend = self.live.run_options.get("backend")
        return backend if isinstance(backend, str) and backend else "simulated"

    def frame(self) -> ViewFrame:
        """Everything the widget shows now, from the last published views (one read of each)."""
        from freshness_magic.views.evidence_log import approving

        views = self.views()
        # An offered run drawn from disk shows its waiting gate in the graph and the status;
        # its panel comes once Resume opens the run (answers go to the open run).
        gate = self.pending_gate() if self.live_run is not None else None
        records = self.evidence_records()
        snapshot = self.model.snapshot
        return ViewFrame(
            name=self.name,
            graph=self.graph,
            structure_version=self.live.structure_version,
            views=views,
            state=snapshot.state,
            state_name=self.state_name,
            status_line=self.status_line(),
            next_node=self.next_node(),
            nodes_run=self.nodes_run(views),
            backend=self.backend_name,
            superseded=self.superseded,
            banner=None if self.superseded else self.banner(),
            gate=gate,
            gate_note=self.gate_note(),
            gate_visit=snapshot.completed.count(gate.node_id) + 1 if gate else 0,
            approving=approving(records, gate.node_id, self.details) if gate else {},
            evidence=records,
            stopped=self.model.stopped,
        )

    def explain(
        self,
        expr: str,
        from_node: str | None = None,
        *,
        step: int | None = None,
        infer_node: bool = False,
    ) -> ConditionAnswer:
        """``expr`` explained, and from a node the edge routing would take: from a node that
        ran (or at ``step``), in the context and outcome of that execution (its latest by
        default; the answer names the step), else on the live context. The one explanation
        of ``cond`` and the widget's playground."""
        from freshness_magic.views.explain import execution_context, explain_on_context

        run = self.live_run
        context = dict(run.context) if run is not None else {}
        at = None
        ran = run is not None and any(t.node_id == from_node for t in run.traces)
        if run is not None and (step is not None or ran):
            at = execution_context(run.run_dir, run.traces, from_node, step)
        return explain_on_context(
            self.graph, context, self.outcomes(), expr, from_node, infer_node=infer_node, at=at
        )
