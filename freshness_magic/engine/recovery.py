"""How a run goes on after it stopped short: gate answers and retry, as functions over its state.

- :func:`answer` checks an answer to the waiting gate and turns it into the gate's outcome, which
  ``Run.answer`` ends the step with like any other node's; the answer to a child pipeline's gate
  is kept for the manager node that waits for it, which runs next.
- :func:`retry_target` says which node a retry re-arms (the failed or interrupted node, or the
  one named; a branch node's parallel node) and :func:`rearm` re-arms the run there, keeping the
  context, the outcomes and the evidence so far.
- An interrupt is the executor's (``Run.interrupt``); the step it stops ends paused at its node.

Each is an event (GATE_ANSWERED, RUN_RETRIED) and ends in the run's record.
"""

from __future__ import annotations

from freshness_magic.engine.context import PARTIAL_PREFIX
from freshness_magic.engine.events import EventType
from freshness_magic.engine.execute import NodeRun
from freshness_magic.engine.gates import answer_outcome, child_answer_key, match_choice
from freshness_magic.engine.journal import Journal
from freshness_magic.engine.persistence import RunMemory
from freshness_magic.engine.reach import upstream
from freshness_magic.engine.run_data import RunData
from freshness_magic.engine.state import RunState, StepResult
from freshness_magic.errors import GateAnswerError, NothingToRetryError, RunError


def answer(
    data: RunData,
    journal: Journal,
    node_id: str,
    choice: str | None,
    comment: str | None,
    *,
    timed_out: bool,
) -> NodeRun | StepResult:
    """The answered gate's outcome for the step to end with (``Run.answer``), or, for a child
    pipeline's gate, the step that kept the answer. Raises RunError when no gate or another
    gate waits, GateAnswerError when the answer matches no choice (the gate keeps waiting)."""
    memory = data.memory
    gate = memory.pending_gate
    if memory.state is not RunState.WAITING or gate is None:
        raise RunError(
            f"no human gate is waiting (the run is {memory.state.value}); "
            "answer a gate only when the run waits at it"
        )
    if node_id != gate.node_id and node_id != gate.child_gate:
        node = data.graph.nodes.get(node_id)
        what = (
            f"'{node_id}' is not a human gate"
            if node is not None and node.handler_type != "wait.human"
            else f"gate '{node_id}' is not waiting"
        )
        raise RunError(f"{what}; the waiting gate is '{gate.node_id}'")
    node_id = gate.node_id
    valid = ", ".join(f"{c.key} ({c.label} -> {c.target})" for c in gate.choices) or "(none)"
    wanted = choice if choice is not None and choice.strip() and not timed_out else gate.default
    if wanted is None:
        raise GateAnswerError(
            f"gate '{node_id}' has no default choice (human.default_choice); "
            f"answer with one of: {valid}"
        )
    picked = match_choice(gate, wanted)
    if picked is None:
        raise GateAnswerError(
            f"{wanted!r} is not a choice of gate '{node_id}'; answer with a key, label or "
            f"target id of one of: {valid}"
        )
    memory.pending_gate = None
    memory.state = RunState.RUNNING
    data.events.emit(
        EventType.GATE_ANSWERED,
        node_id,
        {"answer": wanted, "choice": picked.to_dict(), "comment": comment},
    )
    if gate.child_gate is not None:
        return _answer_child(data, journal, node_id, gate.child_gate, picked.target, comment)
    outcome = answer_outcome(gate, picked, timed_out=timed_out)
    if comment:
        outcome.context_updates["human.gate.comment"] = comment
        outcome.notes = f"{outcome.notes}; comment: {comment}"
    return NodeRun(data.graph.nodes[node_id], outcome, 1, 0.0)


def _answer_child(
    data: RunData, journal: Journal, manager: str, child_gate: str, target: str, comment: str | None
) -> StepResult:
    """Keep the answer for the child pipeline's gate and pause before its manager node,
    which passes it on when it runs again (:func:`~.gates.child_answer_key`)."""
    memory = data.memory
    data.context.set(
        child_answer_key(manager), {"gate": child_gate, "choice": target, "comment": comment}
    )
    memory.state = RunState.PAUSED
    memory.next_node = manager
    journal.save_checkpoint()
    return StepResult(
        node_id=manager,
        outcome=None,
        attempts=0,
        duration=0.0,
        next_node=manager,
        reason=f"answer for gate '{child_gate}' of the child pipeline kept; manager node "
        f"'{manager}' passes it on when it runs again",
        state=memory.state,
        executed=False,
    )


def retry_target(data: RunData, node_id: str | None) -> str:
    """The node a retry re-arms (see ``Run.retry``): ``node_id``, else the interrupted or
    failed node; a node that last ran inside a parallel node's branches gives that parallel
    node. RunError or NothingToRetryError when there is nothing to retry or no such node."""
    memory = data.memory
    graph = data.graph
    if memory.state is RunState.WAITING and node_id is None:
        raise RunError(
            f"the run waits at gate '{memory.next_node}': answer it, or name the node to "
            "run again (the gate is then asked again when the run gets back to it)"
        )
    if memory.state is RunState.READY and not memory.completed:
        raise RunError(
            "nothing to retry: no node of the run has run yet; step() or run() starts it"
        )
    target = node_id or memory.interrupted_node or memory.failed_node
    if target is None and memory.state is RunState.FAILED:
        target = memory.current_node
    if target is None:
        how = {
            RunState.COMPLETED: "the run completed",
            RunState.PAUSED: "the run is paused, not failed",
        }.get(memory.state, "the run did not fail at a node")
        raise NothingToRetryError(f"nothing to retry: {how}; name the node to run again")
    if target not in graph.nodes:
        from freshness_magic.engine.validation.attrs import no_node

        raise RunError(f"retry: {no_node('the pipeline', target, graph.nodes)}")
    gate = memory.next_node if memory.state is RunState.WAITING else None
    if gate is not None and target not in upstream(graph, gate):
        raise RunError(
            f"retry at the waiting gate '{gate}': '{target}' is not a node before it; a "
            "retry there runs a node upstream of the gate again (the gate is asked again "
            "when the run gets back), it never goes past the gate: answer it first"
        )
    return branch_owner(memory, target) or target


def rearm(data: RunData, target: str) -> None:
    """Make ``target`` the next node of a started run, forgetting the failure, the pending gate
    and every node's partial work (a retry runs every node afresh); emits RUN_RETRIED."""
    memory = data.memory
    for key in [k for k in data.context if k.startswith(PARTIAL_PREFIX)]:
        data.context.delete(key)
    previous = memory.state
    memory.state = RunState.PAUSED
    memory.next_node = target
    memory.pending_gate = None  # a gate left for a node before it: asked again on the way
    memory.failure_reason = ""
    memory.failed_node = None
    memory.dead_end = None
    memory.interrupted_node = None
    memory.rearmed = True  # no step led to it: its trace has no cause
    memory.failure_redirects.pop(target, None)
    data.events.emit(EventType.RUN_RETRIED, target, {"from_state": previous.value, "node": target})


def branch_owner(memory: RunMemory, node_id: str) -> str | None:
    """The parallel node whose latest step ran ``node_id`` in one of its branches, if any
    (from the parallel node's recorded ``parallel.results``)."""
    for owner in dict.fromkeys(reversed(memory.completed)):  # the latest first
        outcome = memory.outcomes.get(owner)
        results = outcome.context_updates.get("parallel.results") if outcome else None
        if owner == node_id or not isinstance(results, list):
            continue
        for branch in results:
            if not isinstance(branch, dict):
                continue
            stopped = branch.get("stopped_at")
            if node_id in (branch.get("completed_nodes") or ()) or (
                stopped == node_id and stopped != branch.get("fan_in")
            ):
                return owner
    return None


def rearmed_note(requested: str | None, armed: str) -> str | None:
    """What to tell a user whose retry of ``requested`` re-armed ``armed`` instead (a branch
    node's parallel node, :func:`retry_target`); None when it is the node they named."""
    if requested is None or requested == armed:
        return None
    return (
        f"{requested} runs as a branch of parallel node '{armed}': {armed} runs again with all "
        "its branches, so its fan-in joins results of one pass"
    )
