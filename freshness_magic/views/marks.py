"""Marks on a node's result: stale (its inputs changed) and outdated (what it built on changed).

The one home of the mark rules in the views: the view model asks :func:`outdated_views` for
outdated marks (derived from the run's traces by :mod:`freshness_magic.engine.marks`, never from
the graph's shape) and :func:`marked` to lay a mark over a node's state; the stale inputs come
from the run's freshness extension (:func:`freshness_of`). Every surface (widget, ``status``,
``why``, the CLI) reads the marks through the view model.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from freshness_magic.engine.marks import MarkKind, node_marks
from freshness_magic.engine.model import Graph
from freshness_magic.engine.outcome import Outcome
from freshness_magic.engine.trace import Trace
from freshness_magic.freshness.attrs import inputs_checked
from freshness_magic.freshness.events import some_files
from freshness_magic.freshness.labels import FileLabel
from freshness_magic.freshness.report import FreshnessReport, renamed
from freshness_magic.views.state import NodeState, NodeView, StaleKind

_QUIET = (
    NodeState.PENDING,
    NodeState.SUCCEEDED,
    NodeState.REUSED,
    NodeState.PARTIAL,
    NodeState.SKIPPED,
)
"""States a stale mark may cover (a running, failed, waiting ... node shows that instead)."""


@dataclass(frozen=True)
class StaleFile:
    """One changed input of a node with its label (``modified``, ``deleted``, ``added`` ...)."""

    path: str
    label: str


@dataclass(frozen=True)
class NodeStale:
    """A node's stale inputs and since when (run-start baseline or the node's own completion)."""

    kind: StaleKind
    files: tuple[StaleFile, ...]
    gone: bool = False
    """Every input it had was deleted and its ``source_files`` match no file now (a folder
    moved or renamed under its glob, say)."""

    def describe(self) -> str:
        since = "baseline" if self.kind is StaleKind.BASELINE else "it ran"
        shown = [f"{f.path} ({f.label})" for f in self.files[:WHY_FILES]]
        return f"inputs changed since {since}: {some_files(shown, WHY_FILES, len(self.files))}"


WHY_FILES = 10
"""Stale files a node's "why" (tooltip, ``%pipeline why``) names before counting the rest."""


_LABELS = {"stale_changed": "modified", "stale_deleted": "deleted", "stale_added": "added"}


def stale_from_report(report: FreshnessReport, graph: Graph) -> dict[str, NodeStale]:
    """Per-node stale inputs from the freshness report: since the node ran, else since baseline.

    Where every view (widget, status, ``why``, on both surfaces) learns which nodes are stale:
    only a node of ``graph`` whose inputs are checked (:func:`inputs_checked`) can be; the
    report also has baselines of ``freshness=ignore`` nodes, never shown stale.
    """
    result: dict[str, NodeStale] = {}
    for node_id, entry in report.nodes.items():
        node = graph.nodes.get(node_id)
        if node is None or not inputs_checked(node):
            continue
        if entry.since_run is not None:
            view, kind = entry.since_run, StaleKind.RUN
        else:
            view, kind = entry.since_baseline, StaleKind.BASELINE
        moved = renamed(view.files)
        files = tuple(
            StaleFile(moved[f.path], f"renamed from {f.path}")
            if f.path in moved
            else StaleFile(f.path, _LABELS.get(f.label.value, f.label.value))
            for f in view.files
            if f.label is not FileLabel.FRESH and f.path not in moved.values()
        )
        if files and view.is_stale:
            gone = not view.fresh and all(f.label == "deleted" for f in files)
            result[node_id] = NodeStale(kind, files, gone)
    return result


def freshness_of(run: Any) -> tuple[dict[str, NodeStale], frozenset[str]]:
    """The stale inputs per node and the blocked nodes, from the run's freshness extension."""
    for ext in getattr(run, "extensions", ()):
        if getattr(ext, "name", "") != "freshness":
            continue
        report = ext.report(run) if callable(getattr(ext, "report", None)) else None
        graph = run.graph
        stale = stale_from_report(report, graph) if isinstance(report, FreshnessReport) else {}
        return stale, frozenset(getattr(ext, "blocked", ()))
    return {}, frozenset()


def marked(
    view: NodeView,
    node_id: str,
    outcomes: Mapping[str, Outcome],
    stale: Mapping[str, NodeStale],
    outdated: Mapping[str, NodeView],
) -> NodeView:
    """``view`` with the node's mark laid over it: stale where its inputs changed (since it ran
    when it has an outcome, else since the baseline), else outdated where a result it built on
    changed; unchanged when neither applies or its state shows something more urgent."""
    entry = stale.get(node_id)
    if entry is not None and view.state in _QUIET:
        kind = StaleKind.RUN if node_id in outcomes else StaleKind.BASELINE
        return NodeView(NodeState.STALE, kind, entry.describe())
    if node_id in outdated and view.state in (
        NodeState.SUCCEEDED,
        NodeState.REUSED,
        NodeState.PARTIAL,
    ):
        return outdated[node_id]
    return view


def outdated_views(
    traces: Sequence[Trace],
    stale: Mapping[str, NodeStale],
    definitions: Mapping[str, str] | None = None,
    edited: Mapping[str, Sequence[str]] | None = None,
) -> dict[str, NodeView]:
    """The views of nodes whose latest execution is outdated, from the run's traces
    (:mod:`freshness_magic.engine.marks`; never from the graph's shape): ``why`` is the chain
    ("`join` read the result of `lint` (step 4), whose input `a.py` changed");
    ``details["upstream"]`` the stale nodes at its ends (accepting all their inputs clears it),
    else ``details["reran"]``, the node whose newer execution wrote a different value (only
    running this node again clears that). With ``definitions`` (each node's definition now, for
    a run carried over to an edited pipeline), also the nodes whose latest execution ran an
    earlier definition: stale, "its definition changed: prompt" (``edited`` names the
    attributes the edits changed)."""
    changed = {n: [f.path for f in s.files] for n, s in stale.items() if s.kind is StaleKind.RUN}
    found: dict[str, NodeView] = {}
    for node_id, mark in node_marks(traces, changed, definitions).items():
        if mark.kind is MarkKind.STALE and mark.definition and node_id not in stale:
            names = (edited or {}).get(node_id, ())
            why = "its definition changed" + (f": {', '.join(names)}" if names else "")
            found[node_id] = NodeView(
                NodeState.STALE, StaleKind.RUN, why, details={"definition": list(names)}
            )
            continue
        if mark.kind is not MarkKind.OUTDATED:
            continue
        roots = mark.roots()
        details: dict[str, Any] = {"step": mark.step}
        if roots:
            details["upstream"] = roots
        else:
            details["reran"] = next(
                (link.writer_node for link in mark.links if link.superseded_by is not None), ""
            )
        found[node_id] = NodeView(NodeState.OUTDATED, why=mark.because(), details=details)
    return found
