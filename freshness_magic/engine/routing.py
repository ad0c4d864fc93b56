"""Where a run goes after a node: edge selection, failure routing, goal gates, parallel join.

One module serves the main path (``Run.step``) and every parallel branch:

- :func:`next_edge` is what both use: §3.3 edge selection (:func:`~.edges.select_edge`), then,
  after a ``parallel`` node that did not fail, the fan-in its branches converged on (§4.8) unless
  an edge condition matched;
- :func:`route` is the main path's full decision: :func:`next_edge`; after FAIL with no matching
  condition the node's ``retry_target``, ``fallback_retry_target``, then the graph's
  (docs/ARCHITECTURE.md), at most ``max_failure_redirects`` times in a row per node;
  goal gates are judged whenever the chosen target is an exit (§3.4), however the run got there;
  a node that succeeds with no eligible edge is a :class:`DeadEnd` (§3.2 step 6: the run ends
  completed, and says so with every condition it tried).

A branch never uses failure routing or goal gates: those belong to the run, after the join.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from freshness_magic.engine.conditions import evaluate_condition
from freshness_magic.engine.edges import EdgeStep, select_edge
from freshness_magic.engine.handlers.tool import STDERR_SECTION
from freshness_magic.engine.model import Graph, Node
from freshness_magic.engine.outcome import Outcome, StageStatus
from freshness_magic.errors import FreshnessMagicError


@dataclass(frozen=True)
class ConditionTrial:
    """One outgoing edge's condition and what it evaluated to (None: it does not parse)."""

    edge: str
    condition: str
    value: bool | None
    error: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "edge": self.edge,
            "condition": self.condition,
            "value": self.value,
            "error": self.error or None,
        }

    def __str__(self) -> str:
        shown = self.error or str(self.value).lower()
        return f"{self.edge} [{self.condition}] = {shown}"


@dataclass(frozen=True)
class DeadEnd:
    """A non-exit node that succeeded with no eligible edge, and the conditions tried there."""

    node: str
    conditions: tuple[ConditionTrial, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"node": self.node, "conditions": [c.to_dict() for c in self.conditions]}

    def describe(self) -> str:
        if not self.conditions:
            return f"ended at '{self.node}': it has no outgoing edge"
        tried = "; ".join(str(c) for c in self.conditions)
        return f"ended at '{self.node}': no edge matched ({tried})"


@dataclass(frozen=True)
class Route:
    """The decision after a node: the next node (None: the run stops), why, and how."""

    target: str | None
    reason: str
    step: EdgeStep
    loop_restart: bool = False
    dead_end: DeadEnd | None = None
    goal_gate: str = ""
    """The unsatisfied goal gate ("": none): the one whose retry target the target is (the run
    counts the redirect), or, with no target, the one that stops the run (it failed there, so
    a retry runs the gate again, not the node that reached the exit)."""
    failure_redirect: bool = False
    """The node failed and the target is its retry target (the run counts it for the node)."""


def condition_trials(
    graph: Graph, node_id: str, outcome: Outcome, context: Mapping[str, Any]
) -> tuple[ConditionTrial, ...]:
    """Every conditional outgoing edge of ``node_id`` with its value under ``outcome``."""
    trials = []
    for edge in graph.outgoing(node_id):
        if not edge.condition:
            continue
        name = f"{edge.source}->{edge.target}"
        try:
            value = evaluate_condition(
                edge.condition,
                outcome=outcome.status.value,
                preferred_label=outcome.preferred_label,
                context=context,
            )
        except FreshnessMagicError as exc:
            trials.append(ConditionTrial(name, edge.condition, None, str(exc)))
            continue
        trials.append(ConditionTrial(name, edge.condition, value))
    return tuple(trials)


def join_target(graph: Graph, node: Node, outcome: Outcome) -> str | None:
    """After a parallel node that did not fail: the fan-in node its outcome suggests."""
    if node.handler_type != "parallel" or outcome.status is StageStatus.FAIL:
        return None
    for target in outcome.suggested_next_ids:
        candidate = graph.nodes.get(target)
        if candidate is not None and candidate.handler_type == "parallel.fan_in":
            return target
    return None


def next_edge(graph: Graph, node: Node, outcome: Outcome, context: Mapping[str, Any]) -> Route:
    """Edge selection plus the parallel join: the part of routing branches share with runs."""
    selection = select_edge(graph, node.id, outcome, context)
    join = join_target(graph, node, outcome)
    if join is not None and selection.step is not EdgeStep.CONDITION:
        why = f"parallel branches of '{node.id}' joined at fan-in '{join}'"
        return Route(join, why, EdgeStep.FAN_IN)
    edge = selection.edge
    if edge is None:
        return Route(None, selection.reason, EdgeStep.NONE)
    return Route(edge.target, selection.reason, selection.step, loop_restart=edge.loop_restart)


def retry_chain(graph: Graph, node: Node) -> list[tuple[str, str]]:
    """Existing retry targets in order: node, node fallback, graph, graph fallback."""
    chain = [
        (f"retry_target of '{node.id}'", node.retry_target),
        (f"fallback_retry_target of '{node.id}'", node.fallback_retry_target),
        ("the graph's retry_target", graph.retry_target),
        ("the graph's fallback_retry_target", graph.fallback_retry_target),
    ]
    return [(label, t) for label, t in chain if t and t in graph.nodes]


def judge_goal_gates(
    graph: Graph, outcomes: Mapping[str, Outcome], redirects: int, exit_id: str
) -> Route | None:
    """None when every visited goal gate succeeded; else a redirect or a stop (§3.4).

    Only visited gates count (docs/ARCHITECTURE.md), and redirects are bounded by the graph's
    ``max_goal_gate_redirects``.
    """
    for node_id, outcome in outcomes.items():
        node = graph.nodes.get(node_id)
        if node is None or not node.goal_gate or outcome.status.is_success:
            continue
        unsatisfied = f"goal gate '{node_id}' is unsatisfied (last outcome {outcome.status.value})"
        limit = graph.max_goal_gate_redirects
        if redirects >= limit:
            return Route(
                None,
                f"{unsatisfied} and the run already redirected {redirects} time(s) "
                f"(max_goal_gate_redirects={limit}); the pipeline cannot reach '{exit_id}'",
                EdgeStep.GOAL_GATE,
                goal_gate=node_id,
            )
        chain = retry_chain(graph, node)
        if not chain:
            return Route(
                None,
                f"{unsatisfied} and no retry target is set; add retry_target to '{node_id}' or "
                "to the graph",
                EdgeStep.GOAL_GATE,
                goal_gate=node_id,
            )
        label, target = chain[0]
        return Route(
            target,
            f"{unsatisfied}, so the run goes back to {label} '{target}' (redirect "
            f"{redirects + 1} of {limit})",
            EdgeStep.GOAL_GATE,
            goal_gate=node_id,
        )
    return None


def route(
    graph: Graph,
    node: Node,
    outcome: Outcome,
    context: Mapping[str, Any],
    *,
    outcomes: Mapping[str, Outcome],
    redirects: int,
    exit_ids: frozenset[str],
    failure_redirects: int = 0,
) -> Route:
    """The main path's decision after ``node`` (not an exit) finished with ``outcome``.

    ``failure_redirects``: how many failures of ``node`` in a row already led the run on (by an
    edge condition or a retry target); at the graph's ``max_failure_redirects`` the run fails
    instead, so a fix-and-retry loop that never succeeds cannot run forever.
    """
    decision = next_edge(graph, node, outcome, context)
    if outcome.status is StageStatus.FAIL:
        why = outcome.failure_reason or "no failure reason given"
        if decision.target is None:
            chain = retry_chain(graph, node)
            if not chain:
                return Route(
                    None,
                    _failed(
                        node.id,
                        why,
                        "no edge condition matched the failure and no "
                        "retry_target/fallback_retry_target is set on the node or the graph",
                    ),
                    EdgeStep.NONE,
                )
            label, target = chain[0]
            decision = Route(
                target,
                f"{decision.reason}; failure routed to {label} '{target}'",
                EdgeStep.RETRY_TARGET,
            )
        limit = graph.max_failure_redirects
        if failure_redirects >= limit:
            return Route(
                None,
                _failed(
                    node.id,
                    why,
                    f"its failures led on to '{decision.target}' {failure_redirects} time(s) in a "
                    f"row already (max_failure_redirects={limit}): fix the cause and retry, or "
                    "raise max_failure_redirects on the graph",
                ),
                EdgeStep.NONE,
            )
        decision = replace(decision, failure_redirect=True)
    if decision.target is None:
        dead_end = DeadEnd(node.id, condition_trials(graph, node.id, outcome, context))
        return Route(None, dead_end.describe(), EdgeStep.NONE, dead_end=dead_end)
    if decision.target in exit_ids:
        verdict = judge_goal_gates(graph, outcomes, redirects, decision.target)
        if verdict is not None:
            return verdict
    return decision


def _failed(node_id: str, why: str, then: str) -> str:
    """``node 'x' failed (why); then``, with a tool's stderr lines after the sentence: in the
    parentheses they ran into the rest of it."""
    head, section, stderr = why.partition(STDERR_SECTION)
    text = f"node '{node_id}' failed ({head}); {then}"
    return f"{text}{section}{stderr}" if section else text
