"""Why a condition holds or not on a run's live context: the one explanation behind the
widget's condition playground, ``%pipeline cond`` and ``Pipeline.cond``.

Every surface gets the same text: clause by clause (or the syntax error with a caret), the
live warnings (a bare key meeting ``"false"``), what ``validate`` would warn about the
condition as an edge condition of the graph (``outcom`` looks like a typo of ``outcome``,
``succes`` is no outcome status) and, from a node, the edge routing would take from it. An
exit node (or any node no edge leaves) names no edge: nothing would be taken from it, and
after a completed run the last node executed is the exit.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from freshness_magic.engine.condition_explain import ConditionExplanation, explain_condition
from freshness_magic.engine.edges import select_edge
from freshness_magic.engine.model import Edge, Graph
from freshness_magic.engine.outcome import Outcome, StageStatus
from freshness_magic.views.text import condition_text


@dataclass(frozen=True)
class ConditionAnswer:
    """A condition explained on a run's context: the text every surface shows, the per-clause
    explanation, the node the outcome came from and the edge routing would take from it."""

    text: str
    explanation: ConditionExplanation
    from_node: str | None = None
    edge: Edge | None = None


def condition_checks(graph: Graph, expr: str) -> list[str]:
    """What ``validate`` warns about ``expr`` as an edge condition of ``graph`` (a key that
    looks like a typo of ``outcome``, ``'succes' is not an outcome status``), each with its fix:
    the validator's own findings, so the playground, ``cond`` and ``validate`` never disagree."""
    from freshness_magic.engine.validation.flow import condition_findings

    return [f"{f.message} (fix: {f.fix})" for f in condition_findings(graph, expr)]


def explain_on_context(
    graph: Graph,
    context: Mapping[str, Any],
    outcomes: Mapping[str, Outcome],
    expr: str,
    from_node: str | None = None,
    *,
    infer_node: bool = False,
) -> ConditionAnswer:
    """Explain ``expr`` against ``context`` with the outcome of ``from_node`` (else of the last
    node executed, ``outcomes`` being in execution order; success before any ran).

    ``infer_node``: with no ``from_node``, name the edge from the last node executed too (the
    playground's default choice of node); ``cond`` without ``--from`` names no edge.
    """
    outcome: Outcome | None = None
    if from_node is not None:
        outcome = outcomes.get(from_node)
    elif outcomes:
        last, outcome = list(outcomes.items())[-1]
        from_node = last if infer_node else None
    if outcome is None:
        outcome = Outcome(StageStatus.SUCCESS)
    explanation = explain_condition(
        expr, outcome=outcome.status.value, preferred_label=outcome.preferred_label, context=context
    )
    edge = None
    edge_line = None
    if from_node in graph.nodes and graph.outgoing(from_node):
        selection = select_edge(graph, from_node, outcome, context)
        edge = selection.edge
        target = edge.target if edge is not None else "(none)"
        edge_line = f"edge from {from_node}: -> {target} ({selection.step}: {selection.reason})"
    text = condition_text(
        expr,
        explanation,
        outcome=outcome.status.value,
        preferred_label=outcome.preferred_label,
        edge=edge_line,
        checks=condition_checks(graph, expr),
    )
    return ConditionAnswer(text, explanation, from_node, edge)
