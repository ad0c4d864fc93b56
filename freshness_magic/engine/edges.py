"""Edge selection after a node finishes (spec §3.3 as decided in DESIGN.md §4 items 1–2).

The five steps, in order:

1. edges whose ``condition`` holds (best by weight, then target id);
2. the first unconditional edge whose normalised label equals the outcome's ``preferred_label``;
3. the first unconditional edge whose target is in ``suggested_next_ids`` (in the order the
   outcome suggests them);
4. the best unconditional edge by weight, then target id;
5. none.

After a FAIL outcome only step 1 applies: an unconditional edge is never taken after a failure
(the run then tries the retry targets, see :mod:`freshness_magic.engine.run`). The reason string of
the result is shown to users (CLI, ``%pipeline cond --from NODE``), so it says what decided.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from freshness_magic.engine.conditions import evaluate_condition
from freshness_magic.engine.model import Edge, Graph
from freshness_magic.engine.outcome import Outcome, StageStatus
from freshness_magic.errors import FreshnessMagicError

_ACCELERATOR_RE = re.compile(r"^\s*(?:\[\s*\w\s*\]\s*|\w\s*\)\s*|\w\s+-\s+)")


def normalize_label(label: str) -> str:
    """Lowercase, trim, and strip one accelerator prefix (``[Y] ``, ``Y) ``, ``Y - ``)."""
    return _ACCELERATOR_RE.sub("", label, count=1).strip().lower()


@dataclass(frozen=True)
class EdgeSelection:
    """The chosen edge (None when no edge is eligible), the step that chose it, and why."""

    edge: Edge | None
    step: str
    """``condition``, ``preferred_label``, ``suggested_next_ids``, ``weight`` or ``none``."""
    reason: str

    @property
    def target(self) -> str | None:
        return self.edge.target if self.edge is not None else None


def _best(edges: Iterable[Edge]) -> Edge:
    """Highest weight first, then the lexically smallest target id, then declaration order."""
    return min(edges, key=lambda e: (-e.weight, e.target, e.index))


def condition_holds(edge: Edge, outcome: Outcome, context: Mapping[str, Any]) -> bool:
    """Whether ``edge`` has a condition and it holds; a malformed condition never holds."""
    if not edge.condition:
        return False
    try:
        return evaluate_condition(
            edge.condition,
            outcome=outcome.status.value,
            preferred_label=outcome.preferred_label,
            context=context,
        )
    except FreshnessMagicError:
        return False


def select_edge(
    graph: Graph, node_id: str, outcome: Outcome, context: Mapping[str, Any]
) -> EdgeSelection:
    """Choose the edge to follow from ``node_id`` given its ``outcome`` and the run context."""
    edges = graph.outgoing(node_id)
    if not edges:
        return EdgeSelection(None, "none", f"node '{node_id}' has no outgoing edges")

    matched = [e for e in edges if condition_holds(e, outcome, context)]
    if matched:
        edge = _best(matched)
        extra = f" (best of {len(matched)} matching edges by weight, then target id)"
        return EdgeSelection(
            edge,
            "condition",
            f"condition `{edge.condition}` held" + (extra if len(matched) > 1 else ""),
        )

    unconditional = [e for e in edges if not e.condition]
    if outcome.status is StageStatus.FAIL:
        ignored = f"; {len(unconditional)} unconditional edge(s) ignored" if unconditional else ""
        return EdgeSelection(
            None,
            "none",
            "outcome is fail and no edge condition held; unconditional edges are never taken "
            f"after a failure{ignored}",
        )

    if outcome.preferred_label:
        wanted = normalize_label(outcome.preferred_label)
        for edge in unconditional:
            if edge.label and normalize_label(edge.label) == wanted:
                return EdgeSelection(
                    edge,
                    "preferred_label",
                    f"preferred label '{outcome.preferred_label}' matched edge label "
                    f"'{edge.label}'",
                )

    for suggested in outcome.suggested_next_ids:
        for edge in unconditional:
            if edge.target == suggested:
                return EdgeSelection(
                    edge, "suggested_next_ids", f"suggested next node '{suggested}'"
                )

    if unconditional:
        edge = _best(unconditional)
        if len(unconditional) == 1:
            why = "the only unconditional edge"
        else:
            why = (
                f"highest weight ({edge.weight}) among {len(unconditional)} unconditional "
                "edges, ties broken by target id"
            )
        return EdgeSelection(edge, "weight", why)

    return EdgeSelection(
        None, "none", f"no condition held and node '{node_id}' has no unconditional edge"
    )
