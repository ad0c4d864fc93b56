"""What a loaded pipeline shows: its run's state as last published, as views, text and evidence.

:class:`PipelineReadout` is the read side of
:class:`~freshness_magic.notebook.pipeline.NotebookPipeline`: it holds the pipeline's fields and
answers from the view model (never from a run in the middle of a step) and from the run folder on
disk. The actions and the run lifecycle are in ``pipeline.py``.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from freshness_magic.cluster import ClusterPool
from freshness_magic.engine.model import Graph, Node
from freshness_magic.engine.outcome import Outcome, Question, StageStatus
from freshness_magic.engine.state import RunState
from freshness_magic.engine.validation.attrs import no_node
from freshness_magic.errors import RunError
from freshness_magic.notebook import text
from freshness_magic.notebook.evidence_log import EvidenceTail
from freshness_magic.notebook.render import LayoutCache, LayoutUnavailable, NodeState, NodeView
from freshness_magic.notebook.saved import ResumeOffer, find_unfinished, latest_run_dir
from freshness_magic.notebook.text import TextResult
from freshness_magic.notebook.viewmodel import NodeStale, ViewModel
from freshness_magic.notebook.viewstate import RunBanner
from freshness_magic.notebook.watch import InputWatcher

if TYPE_CHECKING:
    from freshness_magic.engine.run import Run
    from freshness_magic.notebook.pipeline import NotebookPipeline

_ENDED = frozenset({NodeState.SUCCEEDED, NodeState.PARTIAL, NodeState.FAILED})
"""States a node shows once it ran (and ended) in the step in progress."""


@dataclass(repr=False, eq=False)
class PipelineReadout:
    """A pipeline loaded in the notebook under ``name``: its fields and everything it shows."""

    name: str
    graph: Graph
    workdir: Path
    namespace: dict[str, Any] = field(default_factory=dict)
    layout_cache: LayoutCache = field(default_factory=LayoutCache)
    clusters: ClusterPool = field(default_factory=ClusterPool)
    """The kernel's open clusters (``executor`` specs), shared by every pipeline's runs."""
    run_options: dict[str, Any] = field(default_factory=dict)
    cells: dict[str, str] = field(default_factory=dict)
    loaded_at: int = field(default_factory=time.monotonic_ns)
    """When it was loaded (the newest loaded pipeline is the magics' default)."""
    superseded: bool = False
    """True once a newer load of the same name replaced it: every action refuses."""
    resume_offer: ResumeOffer | None = None
    """An unfinished run of this pipeline on disk, offered to resume (None: nothing offered)."""
    resume_notes: list[str] = field(default_factory=list)
    """What changed while the run last reopened from disk was stopped (one line per node)."""
    reopened: bool = False
    """The open run was reopened from disk and has not stepped since (going on from an
    interrupt need not reopen it again)."""
    reuse: bool = False
    """Whether the current action reuses earlier executions (``--reuse`` on it)."""
    live_lines: Callable[[str], None] | None = None
    """Where step lines go as each step ends (a terminal's print); None: only in the result."""
    structure_version: int = 0
    """Bumped whenever something the layout shows changes (a ``%%node`` changes a node's type)."""
    _run: Run | None = None
    _widget: Any = None
    _listeners: list[Callable[[Any], None]] = field(default_factory=list)
    _evidence: EvidenceTail | None = None
    _lock: threading.RLock = field(default_factory=threading.RLock)
    _stop: threading.Event = field(default_factory=threading.Event)
    _refreshing: bool = False
    _watcher: InputWatcher | None = None
    _model: ViewModel | None = None

    # --- display -------------------------------------------------------------------------------

    def __repr__(self) -> str:
        return f"<pipeline {self.name}: {len(self.graph.nodes)} nodes, {self.state_name}>"

    @property
    def widget(self) -> Any:
        """The pipeline's widget (created on first use; one per pipeline, many views)."""
        if self._widget is None:
            from freshness_magic.notebook.widget import PipelineWidget

            self._widget = PipelineWidget(cast("NotebookPipeline", self))
        return self._widget

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        """The widget for rich frontends, the graph with its states as static ``text/html`` for
        front ends without a widget runtime (nbconvert, GitHub, VS Code without widgets), and
        the node-state table as ``text/plain`` (with a one-line note when no layout engine is
        installed)."""
        from freshness_magic.notebook.render import RenderError
        from freshness_magic.notebook.snapshot import static_html
        from freshness_magic.notebook.widget import in_kernel

        bundle: dict[str, Any] = {}
        if not in_kernel() and not _shows_html(include):  # terminal IPython: no layout to make
            bundle["text/plain"] = self.status_text(REPR_ROWS)
            return bundle
        try:
            layout = self.layout_cache.get(self.graph)  # cached; fails before any widget exists
        except LayoutUnavailable as exc:  # no Graphviz anywhere: the text view, one note
            bundle["text/plain"] = f"{exc}\n" + self.status_text()
            return bundle
        except RenderError:
            layout = None
        if in_kernel() or self._widget is not None:
            widget_bundle = self.widget._repr_mimebundle_()
            if isinstance(widget_bundle, dict):
                bundle.update(widget_bundle)
        if "text/html" not in bundle and layout is not None:
            bundle["text/html"] = static_html(layout, self.views(), self.status_line())
        bundle["text/plain"] = self.status_text(REPR_ROWS)
        return bundle

    @property
    def model(self) -> ViewModel:
        """The view model (node views folded from the run's events)."""
        if self._model is None:
            self._model = ViewModel(self.graph)
        return self._model

    def require_node(self, node_id: str) -> Node:
        """The node ``node_id``; :class:`RunError` naming the likely one, or the nodes there
        are, when missing."""
        if not isinstance(node_id, str):  # from Python: review.run_to(5)
            example = next(iter(self.graph.nodes), "start")
            raise RunError(f"a node id is a string such as {example!r}, not {node_id!r}")
        node = self.graph.nodes.get(node_id)
        if node is None:
            raise RunError(no_node(self.name, node_id, self.graph.nodes))
        return node

    @property
    def has_run(self) -> bool:
        return self._run is not None

    @property
    def live_run(self) -> Run | None:
        """The run if one is open (``run`` opens one; this never does)."""
        return self._run

    @property
    def stale(self) -> Mapping[str, NodeStale]:
        return self.model.stale

    # --- listeners, saved runs, watching ----------------------------------------------------------

    def subscribe(self, listener: Callable[..., None]) -> None:
        """Call ``listener(event_or_None)`` after every published update of the views."""
        self._listeners.append(listener)

    def _notify(self, event: Any = None) -> None:
        for listener in list(self._listeners):
            listener(event)

    def latest_run_dir(self) -> Path | None:
        """The newest run folder under ``<workdir>/.freshness/runs`` for this pipeline."""
        return latest_run_dir(self.graph, self.workdir)

    def offer_resume(self) -> ResumeOffer | None:
        """Look for an unfinished run of this pipeline on disk and offer it (``resume_offer``)."""
        self.resume_offer = find_unfinished(self.graph, self.workdir) or find_unfinished(
            self.graph, self.workdir, any_text=True
        )
        return self.resume_offer

    @property
    def watching(self) -> bool:
        return self._watcher is not None and self._watcher.alive

    # --- views (the last published state) ---------------------------------------------------------

    @property
    def state_name(self) -> str:
        if self.superseded:
            return "superseded"
        if self._run is None:
            return "ready"
        if self.model.running is not None:
            return "running"
        return self.model.snapshot.state.value

    def outcomes(self) -> Mapping[str, Outcome]:
        return dict(self.model.snapshot.outcomes)

    def pending_gate(self) -> Question | None:
        return self.model.snapshot.gate

    def next_node(self) -> str | None:
        if self._run is None:
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
        """The nodes upstream of ``node_id`` shown stale, and how many are shown outdated by
        changed inputs (:func:`freshness_magic.why.stale_upstream`)."""
        from freshness_magic.why import stale_upstream

        return stale_upstream(self.graph, self.views(), node_id)

    def gate_note(self) -> str:
        """The note under the waiting gate when nodes upstream of it have changed inputs ("" when
        none, or no gate waits)."""
        gate = self.pending_gate()
        if gate is None or self.superseded:
            return ""
        stale, outdated = self.stale_upstream(gate.node_id)
        return text.stale_upstream_note(gate.node_id, stale, outdated)

    def failure_text(self) -> str:
        """Why the run failed ("" unless it did): a node a ``freshness=block`` held back is
        said so, with the way on, instead of the engine's generic failure."""
        snapshot = self.model.snapshot
        if snapshot.state is not RunState.FAILED:
            return ""
        if self._run is not None:
            from freshness_magic.freshness.extension import blocked_inputs

            node = self._run.failed_node
            held = blocked_inputs(self._run, node)
            if node is not None and held is not None:
                return text.blocked_text(node, held)
        return snapshot.failure_reason

    def status_text(self, limit: int | None = None) -> str:
        """The status line, the node-state table (its first ``limit`` rows), and the resume
        offer or superseded note."""
        lines = [self.status_line(), text.status_table(self.views(), limit)]
        if note := self.gate_note():
            lines.append(note)
        dispatch = self._run.dispatch if self._run is not None else None
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
            lines.append(self.resume_offer.describe(self.name))
        return "\n".join(lines)

    def status(self) -> TextResult:
        """``%pipeline status`` from Python (``review.status()``), as a result."""
        return TextResult(self.status_text())

    def why(self, node_id: str) -> TextResult:
        """Why ``node_id`` is in its state: outcome, failure, stale files, waiting question."""
        from freshness_magic.notebook.details import why_text

        return TextResult(why_text(self, node_id))

    def evidence_records(self, node_id: str | None = None) -> list[dict[str, Any]]:
        """The valid records in the run's evidence log on disk, oldest first."""
        if self._run is None:
            return []
        log_path = Path(self._run.run_dir) / "evidence.jsonl"
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

        if self._run is None:
            return []
        nodes = [r["nodeId"] for r in records if isinstance(r.get("nodeId"), str)]
        return [f"warning: {d.message()}" for d in damaged_files(self._run.workdir, nodes)]

    def details(self, node_id: str) -> dict[str, Any]:
        """What the details panel of ``node_id`` shows (state, output, failure, evidence...)."""
        from freshness_magic.notebook.details import details_dict

        return details_dict(self, node_id)

    def banner(self) -> RunBanner | None:
        """The run-level message the view shows above the graph (None when there is none)."""
        from freshness_magic.notebook.details import banner

        return banner(self)

    @property
    def backend_name(self) -> str:
        """The codergen backend new runs use (what the view's badge says)."""
        backend = self.run_options.get("backend")
        return backend if isinstance(backend, str) and backend else "simulated"

    def explain(self, expr: str, from_node: str | None = None) -> tuple[str, Any]:
        """``expr`` explained on the live context (and, from a node, the edge it would take)."""
        from freshness_magic.notebook.details import explain_condition_live

        return explain_condition_live(self, expr, from_node)


REPR_ROWS = 60
"""Most node rows the object's own display lists (a 38,000-node pipeline printed them all)."""


def _shows_html(include: Any) -> bool:
    """Whether the front end shows HTML: ``include`` when given, else the shell's active types
    (terminal IPython shows text only, and the layout would be made for nothing)."""
    if include is not None:
        return "text/html" in include
    from IPython import get_ipython

    shell = get_ipython()
    formatter = getattr(shell, "display_formatter", None)
    return formatter is None or "text/html" in getattr(formatter, "active_types", ("text/html",))
