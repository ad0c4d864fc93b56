"""How a :class:`~.run.Run` goes on after it stopped short: interrupt, gate answers, retry.

- :meth:`RunRecovery.interrupt` stops the running node from any thread; the step that ran it
  ends in :meth:`RunRecovery._interrupted`: the run pauses at that node and runs it again next.
- :meth:`RunRecovery.answer` checks an answer to the waiting gate, turns it into the gate's
  outcome and ends the step with it like any other node's (:mod:`.run_endings`); the answer to a
  child pipeline's gate is kept for the manager node that waits for it, which runs next.
- :meth:`RunRecovery.retry` re-arms a failed, interrupted or paused run at a node, keeping the
  context, the outcomes and the evidence so far.

Each is an event (PIPELINE_PAUSED, GATE_ANSWERED, RUN_RETRIED) and ends in the run's record.
"""

from __future__ import annotations

from freshness_magic.engine import front_end
from freshness_magic.engine.context import PARTIAL_PREFIX
from freshness_magic.engine.events import EventType
from freshness_magic.engine.execute import NodeRun
from freshness_magic.engine.gates import answer_outcome, child_answer_key, match_choice
from freshness_magic.engine.reach import upstream
from freshness_magic.engine.run_endings import RunEndings
from freshness_magic.engine.state import RunState, StepResult
from freshness_magic.errors import GateAnswerError, NothingToRetryError, RunError


class RunRecovery(RunEndings):
    """Interrupt, answer and retry; see the module docstring."""

    def interrupt(self) -> None:
        """Stop the running node (thread-safe; Stop button, signal handler).

        A tool's process group is killed, a model call is closed; the node is recorded as
        interrupted, the run pauses there, and the next ``step()`` runs it again.
        """
        self._executor.interrupt()

    def _interrupted(self, result: NodeRun) -> StepResult:
        memory = self._memory
        memory.state = RunState.PAUSED
        memory.interrupted_node = result.node.id
        memory.next_node = result.node.id
        self.events.emit(
            EventType.PIPELINE_PAUSED,
            result.node.id,
            {"reason": f"'{result.node.id}' was interrupted", "next_node": result.node.id},
        )
        step = StepResult(
            node_id=result.node.id,
            outcome=result.outcome,
            attempts=result.attempts,
            duration=result.duration,
            next_node=result.node.id,
            reason=f"'{result.node.id}' was interrupted; step or run to execute it again",
            state=memory.state,
            interrupted=True,
        )
        self._history.append(step)
        self._executor.node_finished(step)
        self.save_checkpoint()
        return step

    def answer(
        self,
        node_id: str,
        choice: str | None = None,
        comment: str | None = None,
        *,
        timed_out: bool = False,
    ) -> StepResult:
        """Answer the waiting gate ``node_id`` by key, label or target id (None: its default).
        A child pipeline's gate is named by its manager node or by its own id. ``timed_out``:
        no one answered within the gate's time, so it takes its default and its notes say so.

        ``comment`` is kept in the context as ``human.gate.comment`` (and so in the evidence).
        Raises RunError when no gate or another gate waits, GateAnswerError when the answer
        matches no choice (the gate keeps waiting).
        """
        self._store.check_driver()
        memory = self._memory
        gate = memory.pending_gate
        if memory.state is not RunState.WAITING or gate is None:
            raise RunError(
                f"no human gate is waiting (the run is {memory.state.value}); "
                "answer a gate only when the run waits at it"
            )
        if node_id != gate.node_id and node_id != gate.child_gate:
            node = self.graph.nodes.get(node_id)
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
        self.events.emit(
            EventType.GATE_ANSWERED,
            node_id,
            {"answer": wanted, "choice": picked.to_dict(), "comment": comment},
        )
        if gate.child_gate is not None:
            return self._answer_child(node_id, gate.child_gate, picked.target, comment)
        outcome = answer_outcome(gate, picked, timed_out=timed_out)
        if comment:
            outcome.context_updates["human.gate.comment"] = comment
            outcome.notes = f"{outcome.notes}; comment: {comment}"
        node = self.graph.nodes[node_id]
        with self._store.writes():
            return self._complete(NodeRun(node, outcome, 1, 0.0))

    def _answer_child(
        self, manager: str, child_gate: str, target: str, comment: str | None
    ) -> StepResult:
        """Keep the answer for the child pipeline's gate and pause before its manager node,
        which passes it on when it runs again (:func:`~.gates.child_answer_key`)."""
        memory = self._memory
        self._context.set(
            child_answer_key(manager), {"gate": child_gate, "choice": target, "comment": comment}
        )
        memory.state = RunState.PAUSED
        memory.next_node = manager
        self.save_checkpoint()
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

    def retry(self, node_id: str | None = None) -> str:
        """Re-arm a failed, interrupted or paused run at ``node_id`` (default: the failed or
        interrupted node), or a run waiting at a gate at the node named (say, a node upstream
        of the gate whose inputs changed: the gate is asked again when the run gets back to
        it); returns the node re-armed. Context, outcomes and evidence so far are
        kept, but not the partial work of an interrupted node (a parallel node's ended
        branches): every node runs afresh. The next ``step()``/``run()`` executes it, with a
        new allowance of ``max_failure_redirects``. Emits RUN_RETRIED.

        A node that last ran inside a parallel node's branches is re-armed at that parallel
        node: alone it would go on to the fan-in, which would join this branch's new result
        with the other branches' old ones. The returned node says so to the caller.
        """
        self._store.check_driver()
        memory = self._memory
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
        if target not in self.graph.nodes:
            from freshness_magic.engine.validation.attrs import no_node

            raise RunError(f"retry: {no_node('the pipeline', target, self.graph.nodes)}")
        gate = memory.next_node if memory.state is RunState.WAITING else None
        if gate is not None and target not in upstream(self.graph, gate):
            raise RunError(
                f"retry at the waiting gate '{gate}': '{target}' is not a node before it; a "
                "retry there runs a node upstream of the gate again (the gate is asked again "
                "when the run gets back), it never goes past the gate: answer it first"
            )
        target = self.branch_owner(target) or target
        self.check_handler(target)
        self.start()
        for key in [k for k in self._context if k.startswith(PARTIAL_PREFIX)]:
            self._context.delete(key)  # a retry runs every node afresh, wherever it starts
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
        self.events.emit(
            EventType.RUN_RETRIED, target, {"from_state": previous.value, "node": target}
        )
        self.save_checkpoint()
        return target

    def declare_handler(self, node_id: str, type_name: str, runs_in: str) -> None:
        """Record in the run that ``node_id`` runs in the handler ``type_name`` (a front end's,
        registered by it), so a process without it refuses the node instead of running the
        node's own type (:mod:`.front_end`); ``runs_in`` says where it runs."""
        front_end.declare(self._context, node_id, type_name, runs_in)

    def check_handler(self, node_id: str) -> None:
        """RunError when ``node_id`` was declared to run in a handler this run's registry lacks."""
        elsewhere = front_end.runs_elsewhere(
            self._context.get(front_end.HANDLERS_KEY), node_id, self.registry
        )
        if elsewhere is not None:
            raise RunError(front_end.refusal(node_id, elsewhere))

    def branch_owner(self, node_id: str) -> str | None:
        """The parallel node whose latest step ran ``node_id`` in one of its branches, if any
        (from the parallel node's recorded ``parallel.results``)."""
        memory = self._memory
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
    node's parallel node, :meth:`RunRecovery.retry`); None when it is the node they named."""
    if requested is None or requested == armed:
        return None
    return (
        f"{requested} runs as a branch of parallel node '{armed}': {armed} runs again with all "
        "its branches, so its fan-in joins results of one pass"
    )
