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

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from freshness_magic.engine.condition_explain import ConditionExplanation, explain_condition
from freshness_magic.engine.edges import select_edge
from freshness_magic.engine.model import Edge, Graph
from freshness_magic.engine.outcome import Outcome, StageStatus
from freshness_magic.engine.trace import Trace
from freshness_magic.views.text import condition_text


@dataclass(frozen=True)
class ConditionAnswer:
    """A condition explained on a run's context: the text every surface shows, the per-clause
    explanation, the node the outcome came from and the edge routing would take from it."""

    text: str
    explanation: ConditionExplanation
    from_node: str | None = None
    edge: Edge | None = None
    step: int | None = None
    """The step of the execution whose context and outcome it was evaluated in (None: the
    live context)."""


@dataclass(frozen=True)
class ExecutionContext:
    """The context and outcome routing saw after one execution of a node."""

    node_id: str
    step: int
    context: Mapping[str, Any]
    outcome: Outcome
    note: str = ""
    """Said with the answer when the context is not exactly that node's (a branch node)."""


def execution_context(
    run_dir: Path, traces: Sequence[Trace], node_id: str | None, step: int | None
) -> ExecutionContext:
    """The context and outcome after ``node_id``'s latest execution (or the one at ``step``),
    read back from the run's journal. RunError when the node has not run, the step is not
    one of its executions, or the journal no longer holds that step."""
    from freshness_magic.engine.checkpoint import state_after_step
    from freshness_magic.errors import RunError

    found = [t for t in traces if t.step is not None and node_id in (None, t.node_id)]
    if step is not None:
        found = [t for t in found if t.step == step]
        if not found:
            whose = f"of '{node_id}' " if node_id is not None else ""
            steps = [t.step for t in traces if node_id in (None, t.node_id)]
            known = f" (its steps: {', '.join(map(str, steps))})" if node_id and steps else ""
            raise RunError(f"no execution {whose}at step {step}{known}")
    elif not found:
        raise RunError(f"'{node_id}' has not run yet: there is no context of it to look at")
    trace = found[-1]
    assert trace.step is not None
    state = state_after_step(run_dir, trace.step)
    if state is None:
        raise RunError(
            f"the run's journal no longer holds step {trace.step} (a loop_restart began a new "
            "run directory); ask about a later execution"
        )
    raw = (state.get("node_outcomes") or {}).get(trace.node_id)
    outcome = Outcome.from_dict(raw) if isinstance(raw, dict) else Outcome(StageStatus.SUCCESS)
    note = ""
    if trace.branch_of is not None:
        note = f" (a node of the branches of '{trace.branch_of}': in the run's context then)"
    context = dict(state.get("context") or {})
    return ExecutionContext(trace.node_id, trace.step, context, outcome, note)


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
    at: ExecutionContext | None = None,
) -> ConditionAnswer:
    """Explain ``expr`` against ``context`` with the outcome of ``from_node`` (else of the last
    node executed, ``outcomes`` being in execution order; success before any ran).

    ``infer_node``: with no ``from_node``, name the edge from the last node executed too (the
    playground's default choice of node); ``cond`` without ``--from`` names no edge. ``at``:
    evaluate in the context and outcome of that execution instead (the answer says which step).
    """
    outcome: Outcome | None = None
    if at is not None:
        context, from_node, outcome = at.context, at.node_id, at.outcome
    elif from_node is not None:
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
        edge_line = f"edge from {from_node}: -> {target} ({selection.reason})"
    text = condition_text(
        expr,
        explanation,
        outcome=outcome.status.value,
        preferred_label=outcome.preferred_label,
        edge=edge_line,
        checks=condition_checks(graph, expr),
    )
    if at is not None:
        text = f"in the context after {at.node_id} ran (step {at.step}){at.note}\n{text}"
    return ConditionAnswer(text, explanation, from_node, edge, at.step if at else None)
