"""Edge selection after a node finishes (spec §3.3 as decided in docs/ARCHITECTURE.md).

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

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from freshness_magic.engine.conditions import evaluate_condition
from freshness_magic.engine.gates import normalize_label
from freshness_magic.engine.model import Edge, Graph
from freshness_magic.engine.outcome import Outcome, StageStatus
from freshness_magic.errors import FreshnessMagicError


class EdgeStep(StrEnum):
    """What decided where a run goes: a selection step (§3.3) or the run's own routing."""

    CONDITION = "condition"
    PREFERRED_LABEL = "preferred_label"
    SUGGESTED_NEXT_IDS = "suggested_next_ids"
    WEIGHT = "weight"
    NONE = "none"
    FAN_IN = "fan_in"
    """After a parallel node: the fan-in its branches converged on (§4.8)."""
    RETRY_TARGET = "retry_target"
    """After FAIL: a node's or the graph's retry target (docs/ARCHITECTURE.md)."""
    GOAL_GATE = "goal_gate"
    """Entering the exit with an unsatisfied goal gate (§3.4)."""


@dataclass(frozen=True)
class EdgeSelection:
    """The chosen edge (None when no edge is eligible), the step that chose it, and why."""

    edge: Edge | None
    step: EdgeStep
    reason: str

    @property
    def target(self) -> str | None:
        return self.edge.target if self.edge is not None else None


def best_edge(edges: Iterable[Edge]) -> Edge:
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
        return EdgeSelection(None, EdgeStep.NONE, f"node '{node_id}' has no outgoing edges")

    matched = [e for e in edges if condition_holds(e, outcome, context)]
    if matched:
        edge = best_edge(matched)
        extra = f" (best of {len(matched)} matching edges by weight, then target id)"
        return EdgeSelection(
            edge,
            EdgeStep.CONDITION,
            f"condition `{edge.condition}` held" + (extra if len(matched) > 1 else ""),
        )

    unconditional = [e for e in edges if not e.condition]
    if outcome.status is StageStatus.FAIL:
        ignored = f"; {len(unconditional)} unconditional edge(s) ignored" if unconditional else ""
        return EdgeSelection(
            None,
            EdgeStep.NONE,
            "outcome is fail and no edge condition held; unconditional edges are never taken "
            f"after a failure{ignored}",
        )

    if outcome.preferred_label:
        wanted = normalize_label(outcome.preferred_label)
        for edge in unconditional:
            if edge.label and normalize_label(edge.label) == wanted:
                return EdgeSelection(
                    edge,
                    EdgeStep.PREFERRED_LABEL,
                    f"preferred label '{outcome.preferred_label}' matched edge label "
                    f"'{edge.label}'",
                )

    for suggested in outcome.suggested_next_ids:
        for edge in unconditional:
            if edge.target == suggested:
                return EdgeSelection(
                    edge, EdgeStep.SUGGESTED_NEXT_IDS, f"suggested next node '{suggested}'"
                )

    if unconditional:
        edge = best_edge(unconditional)
        if len(unconditional) == 1:
            why = "the only unconditional edge"
        else:
            why = (
                f"highest weight ({edge.weight}) among {len(unconditional)} unconditional "
                "edges, ties broken by target id"
            )
        return EdgeSelection(edge, EdgeStep.WEIGHT, why)

    return EdgeSelection(
        None, EdgeStep.NONE, f"no condition held and node '{node_id}' has no unconditional edge"
    )
