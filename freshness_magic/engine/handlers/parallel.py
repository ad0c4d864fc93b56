"""``parallel`` fan-out (spec §4.8); the fan-in handler is in :mod:`.fan_in`.

Every outgoing edge of a parallel node is a branch (§4.8). A branch gets a clone of the context
and walks the graph from the edge's target. Each node of it goes through the run's node executor
(``StepEnv.branches``), exactly like a node of the main path: extensions (freshness, evidence),
timeout, retries, events, status file and the run's record of its outcome; the executor routes
it within the branch (:func:`~freshness_magic.engine.routing.next_edge`). A branch ends at a
fan-in node (which it does not execute), an exit node, or a node with no edge to follow. Branch
contexts are never merged back (§3.8): only the parallel node's ``context_updates`` reach the
run, chiefly ``parallel.results``. When the branches converge on one fan-in node, the outcome
suggests it as the next node, so the run continues there.

Every node a branch ends is journaled at once with the branch's progress (``StepEnv.keep``:
where the branch goes next, its context changes, the nodes it ran), before anything of that
node's end is written (its event, status file, evidence record): when the parallel node is
interrupted or its driver killed, running it again runs no node whose end was recorded. A branch
that had ended is joined as it was saved; one that had not goes on from its next node.

The same record holds the traces of the nodes each branch ran (``traces``, in their journal
form): running the node again gives them back to the executor (``BranchRunner.restore_traces``)
and names their writers in the branch's context again, so a resumed run has the traces of an
uninterrupted one, and the fan-in reads a kept branch's result from the branch's last node.
"""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any

from freshness_magic.engine.context import WORKER_KEY, Context
from freshness_magic.engine.events import EventType
from freshness_magic.engine.handlers.base import BranchStep, StepEnv
from freshness_magic.engine.model import Edge, Graph, Node, parse_int
from freshness_magic.engine.outcome import Outcome, StageStatus
from freshness_magic.engine.reach import first_fan_in
from freshness_magic.engine.trace import Part, Trace, latest_writers, value_fingerprint

DEFAULT_MAX_PARALLEL = 4
DEFAULT_MAX_BRANCH_STEPS = 1000
JOIN_POLICIES = ("wait_all", "first_success", "k_of_n", "quorum")
ERROR_POLICIES = ("continue", "fail_fast", "ignore")


@dataclass
class BranchResult:
    """How one branch ended; ``to_dict`` is the entry stored in ``parallel.results``."""

    id: str
    """The branch's first node (the target of the fan-out edge)."""
    index: int
    status: StageStatus = StageStatus.SUCCESS
    notes: str = ""
    failure_reason: str = ""
    context_updates: dict[str, Any] = field(default_factory=dict)
    """Context keys the branch added or changed, with their final values."""
    score: float = 0.0
    completed_nodes: list[str] = field(default_factory=list)
    stopped_at: str | None = None
    fan_in: str | None = None
    duration: float = 0.0
    writer: int | None = None
    """The step of the branch's last node (its result's writer, for the traces)."""
    traces: list[dict[str, Any]] = field(default_factory=list, repr=False)
    """The traces of the nodes the branch ran, in journal form (``Trace.to_dict``)."""

    def journal_entry(self) -> dict[str, Any]:
        """The entry kept for an ended branch while its parallel node runs: ``to_dict`` plus
        its writer and traces (not in ``parallel.results``: a step number would make equal
        results of two runs differ)."""
        return {**self.to_dict(), "writer": self.writer, "traces": list(self.traces)}

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "index": self.index,
            "status": self.status.value,
            "outcome": self.status.value,
            "notes": self.notes,
            "failure_reason": self.failure_reason,
            "context_updates": self.context_updates,
            "score": self.score,
            "completed_nodes": list(self.completed_nodes),
            "stopped_at": self.stopped_at,
            "fan_in": self.fan_in,
            "duration": round(self.duration, 6),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> BranchResult:
        """The entry ``to_dict`` made (KeyError, TypeError or ValueError when it is not one)."""
        return cls(
            id=str(data["id"]),
            index=int(data["index"]),
            status=StageStatus.parse(str(data["status"])),
            notes=str(data.get("notes") or ""),
            failure_reason=str(data.get("failure_reason") or ""),
            context_updates=dict(data.get("context_updates") or {}),
            score=float(data.get("score") or 0.0),
            completed_nodes=[str(n) for n in data.get("completed_nodes") or ()],
            stopped_at=data.get("stopped_at"),
            fan_in=data.get("fan_in"),
            duration=float(data.get("duration") or 0.0),
            writer=_step(data.get("writer")),
            traces=_trace_dicts(data.get("traces")),
        )


def _step(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _trace_dicts(value: Any) -> list[dict[str, Any]]:
    """The journal-form traces of a kept entry (ill-formed ones are left out on restore)."""
    return [t for t in value if isinstance(t, dict)] if isinstance(value, list) else []


def fan_out_edges(graph: Graph, node_id: str) -> list[Edge]:
    """The branches of a parallel node: all its outgoing edges (§4.8)."""
    return list(graph.outgoing(node_id))


def _score(context: Context) -> float:
    """A branch's ``score`` context key as a number (0 when absent or not a number)."""
    value = context.get("score")
    if isinstance(value, bool):
        return float(value)
    try:
        return float(value) if value is not None else 0.0
    except (TypeError, ValueError):
        return 0.0


def _kept_results(kept: Any) -> list[BranchResult]:
    """The branch results an interrupted run of a parallel node saved (``StepEnv.kept``); an
    entry that is not one is left out (its branch runs again)."""
    entries = kept.get("branches") if isinstance(kept, dict) else None
    found = []
    for entry in entries if isinstance(entries, list) else ():
        try:
            found.append(BranchResult.from_dict(entry))
        except (KeyError, TypeError, ValueError, AttributeError):
            continue
    return found


def kept_branches(kept: Any, branches: list[Edge]) -> dict[int, BranchResult]:
    """The branches an interrupted run of the node had ended, by index; one that does not fit
    this node's branches is left out (it runs again)."""
    return {
        r.index: r
        for r in _kept_results(kept)
        if 0 <= r.index < len(branches) and branches[r.index].target == r.id
    }


@dataclass
class _Position:
    """Where a branch that has not ended stands: the entry kept under ``progress``."""

    index: int
    id: str
    at: str | None
    """The node the branch runs next (or where it stops: a fan-in, an exit)."""
    nested_join: str | None = None
    context_updates: dict[str, Any] = field(default_factory=dict)
    completed_nodes: list[str] = field(default_factory=list)
    last: dict[str, Any] | None = None
    """The outcome of the branch's last node (``Outcome.to_dict``)."""
    traces: list[dict[str, Any]] = field(default_factory=list)
    """The traces of the nodes the branch has run, in journal form (``Trace.to_dict``)."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "id": self.id,
            "at": self.at,
            "nested_join": self.nested_join,
            "context_updates": self.context_updates,
            "completed_nodes": list(self.completed_nodes),
            "last": self.last,
            "traces": list(self.traces),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> _Position:
        at, join, last = data.get("at"), data.get("nested_join"), data.get("last")
        return cls(
            index=int(data["index"]),
            id=str(data["id"]),
            at=at if isinstance(at, str) else None,
            nested_join=join if isinstance(join, str) else None,
            context_updates=dict(data.get("context_updates") or {}),
            completed_nodes=[str(n) for n in data.get("completed_nodes") or ()],
            last=last if isinstance(last, dict) else None,
            traces=_trace_dicts(data.get("traces")),
        )


def kept_positions(kept: Any, branches: list[Edge]) -> dict[int, _Position]:
    """Where the branches an interrupted run of the node had not ended stood, by index."""
    entries = kept.get("progress") if isinstance(kept, dict) else None
    found: dict[int, _Position] = {}
    for entry in entries if isinstance(entries, list) else ():
        try:
            position = _Position.from_dict(entry)
        except (KeyError, TypeError, ValueError, AttributeError):
            continue
        if 0 <= position.index < len(branches) and branches[position.index].target == position.id:
            found[position.index] = position
    return found


class _Progress:
    """The branches' ends and positions, journaled together at every branch node's end.

    Each change is made inside ``StepEnv.keep`` (given a function, it calls it under the run's
    hook lock), so a change and its journal record are one step for the other branches, and no
    lock of its own can be taken in the other order."""

    def __init__(
        self,
        env: StepEnv,
        results: dict[int, BranchResult],
        positions: dict[int, _Position],
        restored: dict[int, list[Trace]] | None = None,
    ) -> None:
        self._env = env
        self.results = results
        self.positions = positions
        self.restored = restored or {}
        """The traces of the nodes a kept position's branch ran, given back to the executor
        (the branch names them again as the writers of its context's values)."""

    def moved(self, position: _Position) -> None:
        """A branch node ended: journal where its branch stands now."""

        def change() -> dict[str, Any]:
            self.positions[position.index] = position
            return self._value()

        self._keep(change)

    def ended(self, result: BranchResult) -> None:
        """A branch ended: journal its result (one stopped before its end keeps its position)."""

        def change() -> dict[str, Any]:
            self.results[result.index] = result
            if not _stopped(result):
                self.positions.pop(result.index, None)
            return self._value()

        self._keep(change)

    def _keep(self, change: Callable[[], dict[str, Any]]) -> None:
        if self._env.keep is None:
            change()
        else:
            self._env.keep(change)

    def _value(self) -> dict[str, Any]:
        ended = [r.journal_entry() for _, r in sorted(self.results.items()) if not _stopped(r)]
        progress = [p.to_dict() for _, p in sorted(self.positions.items())]
        return {"branches": ended, "progress": progress}


def kept_branch_ids(kept: Any) -> list[str]:
    """The branches an interrupted parallel node had ended (``StepEnv.kept``, the context's
    :func:`~freshness_magic.engine.context.partial_key` of the node): they do not run again."""
    return [r.id for r in _kept_results(kept)]


def _stopped(result: BranchResult) -> bool:
    """The branch did not end on its own: interrupted, or not run because the join was decided."""
    return result.status is StageStatus.SKIPPED


def _changed(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in after.items() if k not in before or before[k] != v}


class ParallelHandler:
    """Runs the branches with up to ``max_parallel`` threads and applies the join policy."""

    def __init__(self, max_branch_steps: int = DEFAULT_MAX_BRANCH_STEPS) -> None:
        self.max_branch_steps = max_branch_steps

    def execute(self, node: Node, context: Context, env: StepEnv) -> Outcome:
        branches = fan_out_edges(env.graph, node.id)
        if not branches:
            return Outcome(
                status=StageStatus.FAIL,
                failure_reason=f"parallel node {node.id!r} has no outgoing edges to fan out to",
            )
        if env.branches is None:
            return Outcome(
                status=StageStatus.FAIL,
                failure_reason=f"parallel node {node.id!r} needs the run's node executor "
                "(StepEnv.branches) to execute its branches",
            )
        join_policy = node.get("join_policy", "wait_all").strip() or "wait_all"
        error_policy = node.get("error_policy", "continue").strip() or "continue"
        for name, value, allowed in (
            ("join_policy", join_policy, JOIN_POLICIES),
            ("error_policy", error_policy, ERROR_POLICIES),
        ):
            if value not in allowed:
                return Outcome(
                    status=StageStatus.FAIL,
                    failure_reason=f"parallel node {node.id!r}: unknown {name} {value!r}; "
                    f"use one of {', '.join(allowed)}",
                )
        max_parallel = max(parse_int(node.get("max_parallel", "")) or DEFAULT_MAX_PARALLEL, 1)

        started = time.monotonic()
        env.emit(
            EventType.PARALLEL_STARTED,
            {"node": node.id, "branch_count": len(branches), "join_policy": join_policy},
        )
        kept = kept_branches(env.kept, branches)
        positions = {i: p for i, p in kept_positions(env.kept, branches).items() if i not in kept}
        for result in kept.values():
            env.branches.restore_traces(node.id, result.traces)
        restored = {i: env.branches.restore_traces(node.id, p.traces) for i, p in positions.items()}
        progress = _Progress(env, dict(kept), positions, restored)
        results = self._run_branches(
            node, branches, context, env, max_parallel, join_policy, error_policy, progress
        )
        outcome = self._join(node, results, join_policy, error_policy, env, started)
        kept_results = outcome.context_updates.get("parallel.results") or []
        by_id = {r.id: r for r in results}
        context.note_parts(
            "parallel.results",
            {
                str(entry["id"]): Part(by_id[entry["id"]].writer, result_fingerprint(entry))
                for entry in kept_results
                if entry.get("id") in by_id
            },
        )
        if kept:
            names = ", ".join(kept[i].id for i in sorted(kept))
            outcome.notes += f"; {names}: ended before the node was interrupted, not run again"
        return outcome

    def _run_branches(
        self,
        node: Node,
        branches: list[Edge],
        context: Context,
        env: StepEnv,
        max_parallel: int,
        join_policy: str,
        error_policy: str,
        progress: _Progress,
    ) -> list[BranchResult]:
        """Run the branches not in ``progress.results`` (those ended before an interrupt); one
        with a kept position goes on from there."""
        results = progress.results
        stop = threading.Event()
        for index, kept in sorted(results.items()):
            env.emit(
                EventType.PARALLEL_BRANCH_COMPLETED,
                {
                    "node": node.id,
                    "branch": kept.id,
                    "index": index,
                    "duration": kept.duration,
                    "success": kept.status.is_success,
                    "status": kept.status.value,
                    "kept": True,
                },
            )
        waiting = collections.deque((i, e) for i, e in enumerate(branches) if i not in results)

        def decides(result: BranchResult) -> bool:
            """Whether this branch's end settles the join (the others are not started)."""
            return (join_policy == "first_success" and result.status.is_success) or (
                error_policy == "fail_fast" and result.status is StageStatus.FAIL
            )

        if any(decides(r) for r in results.values()):
            stop.set()
        running: dict[Future[BranchResult], int] = {}
        with ThreadPoolExecutor(
            max_workers=min(max_parallel, len(branches)), thread_name_prefix=f"branch-{node.id}"
        ) as pool:

            def launch() -> None:
                """Start branches in declaration order while slots are free and no stop."""
                while waiting and len(running) < max_parallel and not stop.is_set():
                    index, edge = waiting.popleft()
                    future = pool.submit(
                        self._branch, node, edge, index, context.clone(), env, stop, progress
                    )
                    running[future] = index

            try:
                launch()
                while running:
                    done, _ = wait(running, return_when=FIRST_COMPLETED)
                    for future in done:
                        running.pop(future)
                        if decides(future.result()):
                            stop.set()
                    launch()
            except KeyboardInterrupt:
                # Leaving the pool waits for its threads: stop their nodes first.
                stop.set()
                assert env.branches is not None
                env.branches.interrupt()
                raise
        for index, edge in enumerate(branches):
            if index not in results:
                results[index] = BranchResult(
                    id=edge.target,
                    index=index,
                    status=StageStatus.SKIPPED,
                    notes="not started: the join was already decided",
                )
        return [results[i] for i in range(len(branches))]

    def _branch(
        self,
        parent: Node,
        edge: Edge,
        index: int,
        context: Context,
        env: StepEnv,
        stop: threading.Event,
        progress: _Progress,
    ) -> BranchResult:
        """Walk one branch (from its kept position, if any); never raises (a handler exception
        is a FAIL of the branch). Its result is journaled (``progress.ended``) before it is
        announced."""
        result = self._walk(parent, edge, index, context, env, stop, progress)
        progress.ended(result)
        env.emit(
            EventType.PARALLEL_BRANCH_COMPLETED,
            {
                "node": parent.id,
                "branch": edge.target,
                "index": index,
                "duration": result.duration,
                "success": result.status.is_success,
                "status": result.status.value,
            },
        )
        return result

    def _walk(
        self,
        parent: Node,
        edge: Edge,
        index: int,
        context: Context,
        env: StepEnv,
        stop: threading.Event,
        progress: _Progress,
    ) -> BranchResult:
        graph = env.graph
        result = BranchResult(id=edge.target, index=index)
        if stop.is_set():
            result.status = StageStatus.SKIPPED
            result.notes = "not started: the join was already decided"
            return result
        env.emit(
            EventType.PARALLEL_BRANCH_STARTED,
            {"node": parent.id, "branch": edge.target, "index": index},
        )
        started = time.monotonic()
        before = context.snapshot()
        current: str | None = edge.target
        steps = 0
        last: Outcome | None = None
        # The fan-in of a nested parallel node just executed: the branch runs that one itself.
        nested_join: str | None = None
        kept = progress.positions.get(index)
        saved: list[dict[str, Any]] = []
        if kept is not None:  # it had run some nodes before the interrupt: go on from there
            context.apply_updates(kept.context_updates)
            ran = progress.restored.get(index, [])
            context.adopt_writers(latest_writers(ran, context.snapshot(), branch_of=parent.id))
            current, nested_join = kept.at, kept.nested_join
            result.completed_nodes = list(kept.completed_nodes)
            steps = len(kept.completed_nodes)
            last = Outcome.from_dict(kept.last) if kept.last is not None else None
            saved = list(kept.traces)

        def ended(done: BranchStep) -> None:
            """The node's end, journaled with where the branch goes next and its trace."""
            saved.extend(t.to_dict() for t in done.traces)
            progress.moved(
                _Position(
                    index=index,
                    id=edge.target,
                    at=done.next_node,
                    nested_join=done.next_node if done.joined else None,
                    context_updates=_changed(before, context.snapshot()),
                    completed_nodes=[*result.completed_nodes, str(current)],
                    last=done.outcome.to_dict(),
                    traces=list(saved),
                )
            )

        while current is not None:
            target = graph.nodes.get(current)
            if target is None:
                last = Outcome(
                    status=StageStatus.FAIL,
                    failure_reason=f"branch {edge.target!r} reached unknown node {current!r}",
                )
                break
            result.stopped_at = current
            if target.handler_type == "parallel.fan_in" and current != nested_join:
                result.fan_in = current
                break
            if graph.is_exit(current):
                break
            if stop.is_set() or env.cancel.is_set():
                last = Outcome(
                    status=StageStatus.SKIPPED,
                    notes=f"cancelled before {current!r}: the join was already decided",
                )
                break
            if steps >= self.max_branch_steps:
                last = Outcome(
                    status=StageStatus.FAIL,
                    failure_reason=f"branch {edge.target!r} ran {steps} nodes without reaching "
                    "a fan-in or exit node (a loop?)",
                )
                break
            steps += 1
            assert env.branches is not None
            done = env.branches.run_node(target, context, parent.id, ended)
            last = done.outcome
            result.completed_nodes.append(current)
            if done.interrupted:
                last = Outcome(status=StageStatus.SKIPPED, notes=f"interrupted at {current!r}")
                break
            current = done.next_node
            nested_join = current if done.joined else None
        if last is not None:
            result.status = last.status
            result.notes = last.notes
            result.failure_reason = last.failure_reason
        result.context_updates = _changed(before, context.snapshot())
        result.score = _score(context)
        result.traces = saved
        last_writer = context.writer_of("outcome")
        if result.completed_nodes and last_writer is not None:
            result.writer = last_writer.step
        result.duration = time.monotonic() - started
        return result

    @staticmethod
    def _join(
        node: Node,
        results: list[BranchResult],
        join_policy: str,
        error_policy: str,
        env: StepEnv,
        started: float,
    ) -> Outcome:
        ran = [r for r in results if r.status is not StageStatus.SKIPPED]
        success_count = sum(1 for r in ran if r.status.is_success)
        fail_count = len(ran) - success_count
        kept = [r for r in results if r.status.is_success] if error_policy == "ignore" else results
        if join_policy == "wait_all":
            status = StageStatus.SUCCESS if fail_count == 0 else StageStatus.PARTIAL_SUCCESS
        elif join_policy == "first_success":
            status = StageStatus.SUCCESS if success_count else StageStatus.FAIL
        elif join_policy == "k_of_n":
            needed = max(parse_int(node.get("join_k", "")) or 1, 1)
            status = StageStatus.SUCCESS if success_count >= needed else StageStatus.FAIL
        else:
            try:
                fraction = float(node.get("join_quorum", "0.5"))
            except ValueError:
                fraction = 0.5
            enough = success_count >= fraction * len(results)
            status = StageStatus.SUCCESS if enough else StageStatus.FAIL
        fan_in = join_node(env.graph, node.id, results)
        suggested = [fan_in] if fan_in is not None else []
        duration = time.monotonic() - started
        env.emit(
            EventType.PARALLEL_COMPLETED,
            {
                "node": node.id,
                "duration": duration,
                "success_count": success_count,
                "failure_count": fail_count,
            },
        )
        summary = f"{success_count} of {len(results)} branches succeeded ({join_policy})"
        # The branches that did not succeed, with why: a partial success goes on, and its notes
        # are where the step line, the status and a later gate's reader see what is missing.
        # One line each (a tool's stderr tail is in the branch node's own outcome), so that
        # every branch is named on the one line views show.
        summary += "".join(
            f"; {r.id}: {(r.failure_reason or r.status.value).splitlines()[0]}"
            for r in ran
            if not r.status.is_success
        )
        return Outcome(
            status=status,
            suggested_next_ids=suggested,
            context_updates={
                "parallel.results": [r.to_dict() for r in kept],
                "parallel.success_count": success_count,
                "parallel.fail_count": fail_count,
            },
            notes=summary,
            failure_reason="" if status.is_success else summary,
        )


def result_fingerprint(entry: dict[str, Any]) -> str:
    """The fingerprint of one branch's result without what changes every time it runs (how
    long it took, which its ``notes`` say too, e.g. a tool's "completed in 0.02s"; and where its
    nodes ran: the ``worker.<node>`` key a cluster call adds): equal results of two runs of a
    branch are equal here (early cutoff), on a cluster or not. What it produced is in its
    status, failure reason and context updates."""
    kept = {k: v for k, v in entry.items() if k not in ("duration", "index", "notes")}
    updates = kept.get("context_updates")
    if isinstance(updates, dict):
        where = {WORKER_KEY.format(node_id=n) for n in entry.get("completed_nodes") or ()}
        kept["context_updates"] = {k: v for k, v in updates.items() if k not in where}
    return value_fingerprint(kept)


def join_node(graph: Graph, parallel_id: str, results: list[BranchResult]) -> str | None:
    """Where the run continues after a parallel node: the one fan-in its branches converge on.

    Branches that reached a fan-in name it; a branch that stopped early (failed, skipped) counts
    with the first fan-in reachable from its first node. None when they do not agree.
    """
    found = {r.fan_in or first_fan_in(graph, r.id) for r in results}
    if len(found) == 1:
        only = found.pop()
        if only is not None and only != parallel_id:
            return only
    return None
