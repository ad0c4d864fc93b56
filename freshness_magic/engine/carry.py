"""Edit the pipeline, keep the run: what a run keeps when its pipeline is replaced by an edit.

:func:`plan_carry_over` compares the pipeline a run executes with an edited one and says what
the run becomes, before anything is changed (a refusal changes nothing):

- executions of nodes that are still there keep their results (outcomes, context, evidence):
  whether an edited node's result still holds is for the marks to say (its trace's definition
  differs from the node's now: *stale*, "its definition changed: prompt"; its readers
  *outdated*), never decided here;
- removed nodes drop out (their outcomes and retry counts; their steps stay in the history, so
  the step numbers of every execution stay what they were); added nodes are pending;
- a waiting gate that is still there keeps waiting, its question asked again from the edited
  edges; the next node is kept where it still exists;
- when the node the run would go to next (or the gate it waits at) is gone, the run goes on
  from its last executed node that is still there, routed by the edited edges with that node's
  outcome; when there is none, the edit is refused.

:func:`apply_carry_over` then changes a run's memory as planned.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from freshness_magic.engine.gates import gate_question
from freshness_magic.engine.model import Graph
from freshness_magic.engine.outcome import Question
from freshness_magic.engine.persistence import RunMemory
from freshness_magic.engine.routing import next_edge
from freshness_magic.engine.state import RunState
from freshness_magic.errors import RunError


@dataclass(frozen=True)
class CarryPlan:
    """What a run becomes under an edited pipeline (see the module docstring)."""

    added: tuple[str, ...]
    removed: tuple[str, ...]
    edited: Mapping[str, tuple[str, ...]]
    """Node -> the attributes whose values changed (added or removed ones too)."""
    next_node: str | None
    pending_gate: Question | None
    state: RunState
    moved: str = ""
    """Why the next node changed (empty: it was kept)."""
    dropped_outcomes: tuple[str, ...] = field(default=())

    @property
    def changed(self) -> bool:
        return bool(self.added or self.removed or self.edited)

    def to_dict(self) -> dict[str, Any]:
        """The ``pipeline_edited`` event's data."""
        data: dict[str, Any] = {
            "added": list(self.added),
            "removed": list(self.removed),
            "edited": {k: list(v) for k, v in self.edited.items()},
            "next_node": self.next_node,
        }
        if self.moved:
            data["moved"] = self.moved
        return data

    def lines(self) -> list[str]:
        """What changed, one line each (the CLI and the notebook show them)."""
        out = [
            f"edited: {n} (its definition changed: {', '.join(a)})" for n, a in self.edited.items()
        ]
        out += [f"added: {n} (pending)" for n in self.added]
        out += [f"removed: {n} (its results drop out)" for n in self.removed]
        if self.moved:
            out.append(self.moved)
        return out or ["no node changed"]


def changed_attributes(old: Mapping[str, str], new: Mapping[str, str]) -> tuple[str, ...]:
    """The attribute names whose values differ between two definitions of a node."""
    return tuple(sorted(k for k in old.keys() | new.keys() if old.get(k) != new.get(k)))


def plan_carry_over(
    old: Graph, new: Graph, memory: RunMemory, context: Mapping[str, Any]
) -> CarryPlan:
    """The plan for carrying ``memory`` from ``old`` to ``new``; RunError when the run cannot
    go on in ``new`` (nothing is changed)."""
    added = tuple(n for n in new.nodes if n not in old.nodes)
    removed = tuple(n for n in old.nodes if n not in new.nodes)
    edited = {
        n: diff
        for n, node in new.nodes.items()
        if n in old.nodes and (diff := changed_attributes(old.nodes[n].attrs, node.attrs))
    }
    state = memory.state
    gate = memory.pending_gate
    target = memory.next_node
    moved = ""
    if state is RunState.WAITING and gate is not None and gate.child_gate is None:
        if gate.node_id in new.nodes:
            gate = gate_question(new, new.nodes[gate.node_id])
        else:
            gate, state = None, RunState.PAUSED
            target, moved = _go_on_from(new, memory, context, gone=gate_name(memory))
    elif target is not None and target not in new.nodes:
        target, moved = _go_on_from(new, memory, context, gone=target)
    dropped = tuple(n for n in memory.outcomes if n not in new.nodes)
    return CarryPlan(added, removed, edited, target, gate, state, moved, dropped)


def gate_name(memory: RunMemory) -> str:
    gate = memory.pending_gate
    return gate.node_id if gate is not None else str(memory.next_node)


def _go_on_from(
    new: Graph, memory: RunMemory, context: Mapping[str, Any], *, gone: str
) -> tuple[str, str]:
    """The next node after the last executed node still in ``new`` (RunError: none)."""
    for node_id in reversed(memory.completed):
        if node_id == gone or node_id not in new.nodes or node_id not in memory.outcomes:
            continue
        node = new.nodes[node_id]
        route = next_edge(new, node, memory.outcomes[node_id], context)
        if route.target is not None and route.target in new.nodes:
            why = (
                f"'{gone}' is not in the edited pipeline: the run goes on at '{route.target}' "
                f"(after '{node_id}', {route.reason})"
            )
            return route.target, why
        break
    raise RunError(
        f"the run's next node '{gone}' is not in the edited pipeline, and no node the run "
        "executed leads on from there; keep that node in the pipeline, or start a new run"
    )


def apply_carry_over(memory: RunMemory, plan: CarryPlan) -> None:
    """Change ``memory`` as ``plan`` says (the caller journals it)."""
    for node_id in plan.dropped_outcomes:
        memory.outcomes.pop(node_id, None)
        memory.records.discard(node_id)
        memory.retries.pop(node_id, None)
    memory.next_node = plan.next_node
    memory.pending_gate = plan.pending_gate
    memory.state = plan.state
