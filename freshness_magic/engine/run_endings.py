"""How a :class:`~.run.Run`'s step ends: waiting at a gate, at an exit, routed on, or failed.

Every executed node's step ends in one of these (an answer to a gate too, see
:mod:`.run_recovery`): :meth:`RunEndings._complete` lets the executor finish the node, then
either ends the run at an exit or applies :func:`~.routing.route`'s decision (next node, goal gate
redirect, dead end, failure, ``loop_restart``) to the run's memory, with its event.
:meth:`RunEndings._finish_step` keeps the step in the history, reports it to the extensions and
journals it (a snapshot when the run comes to rest).
"""

from __future__ import annotations

from typing import Any

from freshness_magic.engine.edges import EdgeStep
from freshness_magic.engine.events import EventType
from freshness_magic.engine.execute import NodeRun
from freshness_magic.engine.gates import gate_question
from freshness_magic.engine.model import Node
from freshness_magic.engine.outcome import Outcome, StageStatus
from freshness_magic.engine.routing import route
from freshness_magic.engine.run_lifecycle import RunLifecycle
from freshness_magic.engine.state import RunState, StepResult


class RunEndings(RunLifecycle):
    """The ends of a step; see the module docstring."""

    def _idle(self, reason: str) -> StepResult:
        return StepResult(
            node_id=None,
            outcome=None,
            attempts=0,
            duration=0.0,
            next_node=self._memory.next_node,
            reason=reason,
            state=self._memory.state,
            executed=False,
        )

    def _enter_waiting(self, result: NodeRun) -> StepResult:
        node = result.node
        question = result.outcome.question or gate_question(self.graph, node)
        memory = self._memory
        memory.pending_gate = question
        memory.state = RunState.WAITING
        memory.next_node = node.id
        self.events.emit(EventType.GATE_WAITING, node.id, {"question": question.to_dict()})
        return self._finish_step(
            StepResult(
                node_id=node.id,
                outcome=result.outcome,
                attempts=result.attempts,
                duration=result.duration,
                next_node=node.id,
                reason=f"waiting for an answer at gate '{node.id}': {question.text}",
                state=memory.state,
            )
        )

    def _complete(self, result: NodeRun) -> StepResult:
        node, outcome = result.node, result.outcome
        memory = self._memory
        memory.current_node = node.id
        self._executor.finish(result, self._context)
        step = EdgeStep.NONE
        dead_end = None
        if node.id in self._exit_ids:
            memory.next_node = None
            if outcome.status.is_success or outcome.status is StageStatus.SKIPPED:
                reason = f"reached exit node '{node.id}'"
                memory.state = RunState.COMPLETED
                self.events.emit(
                    EventType.PIPELINE_COMPLETED,
                    node.id,
                    {"completed_nodes": len(memory.completed)},
                )
            else:
                reason = f"exit node '{node.id}' {outcome.status.value}: {outcome.failure_reason}"
                self._finish_failed(reason, node.id)
        else:
            reason, step, dead_end = self._route(node, outcome)
        return self._finish_step(
            StepResult(
                node_id=node.id,
                outcome=outcome,
                attempts=result.attempts,
                duration=result.duration,
                next_node=memory.next_node,
                reason=reason,
                state=memory.state,
                edge_step=step,
                dead_end=dead_end,
            )
        )

    def _route(self, node: Node, outcome: Outcome) -> tuple[str, EdgeStep, Any]:
        memory = self._memory
        if outcome.status.is_success:
            memory.failure_redirects.pop(node.id, None)
        decision = route(
            self.graph,
            node,
            outcome,
            self._context,
            outcomes=memory.outcomes,  # no branch runs while the main path routes
            redirects=memory.redirects,
            exit_ids=self._exit_ids,
            failure_redirects=memory.failure_redirects.get(node.id, 0),
        )
        memory.next_node = decision.target
        reason = decision.reason
        if decision.failure_redirect:
            memory.failure_redirects[node.id] = memory.failure_redirects.get(node.id, 0) + 1
        if decision.goal_gate and decision.target is not None:
            memory.redirects += 1
            self.events.emit(
                EventType.GOAL_GATE_REDIRECT,
                node.id,
                {
                    "gate": decision.goal_gate,
                    "target": decision.target,
                    "redirects": memory.redirects,
                    "limit": self.graph.max_goal_gate_redirects,
                    "reason": decision.reason,
                },
            )
        if decision.dead_end is not None:
            memory.state = RunState.COMPLETED
            memory.dead_end = decision.dead_end
            self.events.emit(EventType.DEAD_END, node.id, decision.dead_end.to_dict())
            self.events.emit(
                EventType.PIPELINE_COMPLETED,
                node.id,
                {"completed_nodes": len(memory.completed), "dead_end": True},
            )
        elif decision.target is None:
            self._finish_failed(reason, decision.goal_gate or node.id)
        else:
            memory.state = RunState.PAUSED
            self.events.emit(
                EventType.EDGE_SELECTED,
                node.id,
                {"target": decision.target, "reason": reason, "step": decision.step.value},
            )
            if decision.loop_restart:
                reason = self._loop_restart(decision.target, reason)
        return reason, decision.step, decision.dead_end

    def _finish_failed(self, reason: str, node_id: str | None) -> None:
        memory = self._memory
        memory.state = RunState.FAILED
        memory.failure_reason = reason
        memory.failed_node = node_id
        memory.next_node = None
        self.events.emit(EventType.PIPELINE_FAILED, node_id, {"reason": reason})

    def _finish_step(self, result: StepResult) -> StepResult:
        self._history.append(result)
        self._executor.node_finished(result)
        state = self._memory.state
        self._save(rest=state.finished or state is RunState.WAITING)
        if self._reuser is not None:  # after the journal: the index names only saved steps
            self._reuser.flush()
        return result
