"""Marks on a node's result: stale (its inputs changed) and outdated (what it built on changed).

The one home of the mark rules: the view model asks :meth:`GraphMarks.outdated` for outdated
marks and :func:`marked` to lay a mark over a node's state; the stale inputs come from the run's
freshness extension (:func:`freshness_of`). A different derivation (from per-execution traces,
say) replaces :class:`GraphMarks` and :func:`stale_from_report`, and every surface (widget,
``status``, ``why``, the CLI) follows, as they all read the marks through the view model.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from freshness_magic.engine.model import Graph
from freshness_magic.engine.outcome import Outcome
from freshness_magic.engine.reach import forward_order, ran_after, successor_map
from freshness_magic.freshness.attrs import inputs_checked
from freshness_magic.freshness.events import some_files
from freshness_magic.freshness.labels import FileLabel
from freshness_magic.freshness.report import FreshnessReport, renamed
from freshness_magic.views.state import NodeState, NodeView, StaleKind

_QUIET = (NodeState.PENDING, NodeState.SUCCEEDED, NodeState.PARTIAL, NodeState.SKIPPED)
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
    if node_id in outdated and view.state in (NodeState.SUCCEEDED, NodeState.PARTIAL):
        return outdated[node_id]
    return view


class GraphMarks:
    """The outdated rule over one graph's edges (its structure computed once per graph)."""

    def __init__(self, graph: Graph) -> None:
        self.graph = graph
        self._succ = successor_map(graph)
        self._edges = {n: {e.target for e in graph.outgoing(n)} for n in graph.nodes}
        """Edge targets only: a retry target is a jump (see :meth:`_reran_upstream`)."""
        self._order, self._before = forward_order(graph)
        self._branches = _branch_nodes(graph, self._before)

    def outdated(
        self, completed: Sequence[str], stale: Mapping[str, NodeStale]
    ) -> dict[str, NodeView]:
        """The views of nodes whose results may be outdated, by the upstream node that made them
        so: those whose inputs changed since it ran (``details["upstream"]``, a list: accepting
        the inputs of all of them clears the mark), else one that ran again after them
        (``details["reran"]``: e.g. after a ``retry`` of an earlier node, until the run reaches
        them again)."""
        last = {node_id: i for i, node_id in enumerate(completed)}
        changed = [n for n, entry in stale.items() if entry.kind is StaleKind.RUN]
        found = {
            down: NodeView(
                NodeState.OUTDATED,
                why=f"may be outdated: {_inputs_of(roots)} changed",
                details={"upstream": roots},
            )
            for down, roots in ran_after(self._succ, completed, changed).items()
        }
        for down, upstream in self._reran_upstream(completed, last).items():
            if down not in found:
                found[down] = NodeView(
                    NodeState.OUTDATED,
                    why=f"may be outdated: upstream {upstream} ran again after it",
                    details={"reran": upstream},
                )
        return found

    def _reran_upstream(self, completed: Sequence[str], last: Mapping[str, int]) -> dict[str, str]:
        """Nodes that ran before the latest run of a node upstream of them (along the edges,
        loops cut: :func:`forward_order`) -> that node, the latest such.

        Not when the run went from the node to that later run along the edges: a loop's next
        pass (``review -> fix -> review``, approved the second time) works on the node's
        results instead of leaving them behind. A retry or a goal gate's jump is no edge."""
        if len(last) < 2:
            return {}
        began = dict(last)
        for fan, branches in self._branches.items():
            if fan in began:  # its branches finished inside its step, before it did
                while began[fan] > 0 and completed[began[fan] - 1] in branches:
                    began[fan] -= 1
        latest: dict[str, tuple[int, str]] = {}  # the latest run upstream of each node
        found: dict[str, str] = {}
        for node_id in self._order:
            best = (-1, "")
            for before in self._before[node_id]:
                best = max(best, latest[before], (began.get(before, -1), before))
            latest[node_id] = best
            ran = last.get(node_id)
            if ran is not None and best[0] > ran and not self._walked(completed, ran, best[0]):
                found[node_id] = best[1]
        return found

    def _walked(self, completed: Sequence[str], first: int, last: int) -> bool:
        """Whether the completed runs from index ``first`` to ``last`` follow one another along
        edges (each the target of an edge from the one before)."""
        runs = completed[first : last + 1]
        return all(b in self._edges.get(a, ()) for a, b in itertools.pairwise(runs))


def _branch_nodes(graph: Graph, before: Mapping[str, list[str]]) -> dict[str, frozenset[str]]:
    """Each parallel node's branch nodes (what runs inside its step): the nodes after it, up to
    a fan-in node, along the edges of :func:`forward_order`."""
    after: dict[str, list[str]] = {n: [] for n in graph.nodes}
    for node_id, sources in before.items():
        for source in sources:
            after[source].append(node_id)
    found: dict[str, frozenset[str]] = {}
    for node in graph.nodes.values():
        if node.handler_type != "parallel":
            continue
        seen: set[str] = set()
        todo = list(after[node.id])
        while todo:
            node_id = todo.pop()
            if node_id not in seen and graph.nodes[node_id].handler_type != "parallel.fan_in":
                seen.add(node_id)
                todo.extend(after[node_id])
        found[node.id] = frozenset(seen)
    return found


def _inputs_of(roots: list[str]) -> str:
    """``upstream lint's inputs``, or ``the inputs of upstream lint and draft``."""
    if len(roots) == 1:
        return f"upstream {roots[0]}'s inputs"
    return f"the inputs of upstream {', '.join(roots[:-1])} and {roots[-1]}"
