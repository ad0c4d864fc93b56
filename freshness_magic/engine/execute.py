"""The node executor: the one code path that runs a node, on the main path and in every branch.

For one node, :meth:`NodeExecutor.execute`:

1. emits STAGE_STARTED (with ``branch_of`` for a branch node);
2. per attempt: the run extensions' ``before_execute`` (one may replace the handler call, e.g. a
   ``freshness="block"`` input returns RETRY), the handler with the node's ``timeout`` and the
   attempt's cancel event (a portable handler's call on the run's :class:`~.dispatch.Dispatch`,
   when it has one), the extensions' ``after_execute``;
3. RETRY outcomes consume attempts with the §3.6 backoff; exhausted retries give
   PARTIAL_SUCCESS with ``allow_partial=true``, else FAIL (docs/ARCHITECTURE.md);
4. :meth:`NodeExecutor.finish` then applies the outcome: the node's ``status.json``, the context
   updates, the run's record of the outcome (not for SKIPPED, §5.2) and STAGE_COMPLETED,
   STAGE_FAILED or STAGE_SKIPPED. ``Run.answer`` finishes a gate through it too.

Every execution gets a :class:`~.trace.Trace`: the context records into it what the handler
reads and sets (only during the handler's call), :meth:`NodeExecutor.finish` what the outcome
writes and its step, and :meth:`NodeExecutor.node_finished` the input fingerprints the run
extensions report (``trace_inputs``) before the run keeps it (a branch node's with its parallel
node's, when that one finishes).

Errors, each turned into an outcome rather than raised:

- (a) a handler exception or an extension exception: FAIL with its text;
- (b) the node's ``timeout``: the handler is abandoned (its cancel event is set so a tool kills
  its process group) and the attempt FAILs with "timed out after Ns";
- (c) ``interrupt()`` or a KeyboardInterrupt while the node runs: the node is *interrupted*: no
  outcome is recorded, STAGE_INTERRUPTED is emitted and the caller pauses the run there.

Extension hooks run under one lock, so branches running in threads call them one at a time; a
branch's hooks see the branch's context as ``run.context`` (see ``Run.context_scope``).

The executor sees its run only through :class:`RunHost`: the pipeline, where it runs, the
handlers and extensions, the event bus, and what it reports (an outcome, a retry count, a node's
partial work, the traces of finished executions), which the run's journal records under its
lock.
"""

from __future__ import annotations

import logging
import os
import random
import threading
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from freshness_magic.atomicio import dumps, loads_bounded, write_atomic
from freshness_magic.engine.context import Context, partial_key
from freshness_magic.engine.dispatch import Dispatch, call_remote, ships
from freshness_magic.engine.edges import EdgeStep
from freshness_magic.engine.events import EventType
from freshness_magic.engine.extensions import RunExtension, call_extension
from freshness_magic.engine.fidelity import (
    FidelityMode,
    Resolved,
    incoming_edge,
    key_set_prefix,
    resolve,
    selected_keys,
    uses_fidelity,
)
from freshness_magic.engine.handlers.base import (
    BranchStep,
    ChildRuns,
    HandlerRegistry,
    StepEnv,
    stop_slack,
)
from freshness_magic.engine.model import NODE_ID_RE, Edge, Graph, Node
from freshness_magic.engine.outcome import Outcome, StageStatus
from freshness_magic.engine.retry import BackoffConfig, build_retry_policy
from freshness_magic.engine.routing import DeadEnd, next_edge
from freshness_magic.engine.state import RunState, StepResult
from freshness_magic.engine.trace import Trace, edge_key, node_definition
from freshness_magic.errors import FreshnessMagicError
from freshness_magic.pathsafety import open_state

if TYPE_CHECKING:
    from freshness_magic.engine.reuse import Reuser
    from freshness_magic.engine.run import Run

log = logging.getLogger(__name__)

INTERRUPTED = "interrupted"
"""The failure reason of an interrupted attempt."""
STOP_WAIT_SECONDS = 10.0
"""How long an interrupt waits for a node's handler to stop its work (a tool's SIGTERM grace
and SIGKILL) before the interrupt goes on without it."""


def _step_of(trace: Trace) -> int:
    """A sealed trace's step: branch nodes report in the order their threads get there, which
    need not be the order their outcomes were recorded in."""
    return trace.step or 0


def failed(reason: str, **kw: Any) -> Outcome:
    return Outcome(status=StageStatus.FAIL, failure_reason=reason, **kw)


class RunHost(Protocol):
    """What the node executor needs of its run, and nothing more (``Run`` builds one)."""

    @property
    def graph(self) -> Graph: ...

    @property
    def run_id(self) -> str:
        """The run's id now (a ``loop_restart`` changes it): a trace names its run."""

    @property
    def run_dir(self) -> Path:
        """The run's directory now (a ``loop_restart`` moves it)."""

    @property
    def workdir(self) -> Path: ...

    @property
    def registry(self) -> HandlerRegistry: ...

    @property
    def dispatch(self) -> Dispatch | None:
        """Where portable node work runs (a cluster); None: in this process."""

    @property
    def child_runs(self) -> ChildRuns: ...

    @property
    def extensions(self) -> Sequence[RunExtension]: ...

    @property
    def run(self) -> Run:
        """The run the extensions' hooks are given."""

    @property
    def reuses(self) -> bool:
        """Whether the run takes executions from earlier equal ones (:mod:`.reuse`)."""

    @property
    def reuser(self) -> Reuser:
        """The run's reuse index: looked up before a node, told of every execution."""

    def emit(self, kind: str, node_id: str | None, data: dict[str, Any]) -> None:
        """Put an event on the run's bus."""

    def context_scope(self, context: Context) -> AbstractContextManager[None]:
        """Make ``context`` what ``run.context`` is for the calling thread (a branch's)."""

    def record_outcome(self, node_id: str, outcome: Outcome) -> int:
        """Record a finished node's outcome (any thread); its index in ``completed_nodes``."""

    def set_retries(self, node_id: str, retries: int) -> None:
        """Record how many times ``node_id`` was retried so far in this step (any thread)."""

    def keep_partial(self, node_id: str, value: Any) -> None:
        """Journal now what the running main-path node has finished of its work."""

    def record_traces(self, traces: list[Trace]) -> None:
        """Keep the traces of finished executions (a parallel node's after its branches')."""

    def take_rearmed(self) -> bool:
        """Whether the node about to run was asked for by a ``retry`` (then no longer)."""


@dataclass
class NodeRun:
    """What executing one node gave: its outcome, attempts, seconds, and whether it was stopped."""

    node: Node
    outcome: Outcome
    attempts: int
    duration: float
    interrupted: bool = False
    trace: Trace | None = None

    def step_result(
        self,
        next_node: str | None,
        reason: str,
        state: RunState,
        *,
        edge_step: EdgeStep = EdgeStep.NONE,
        dead_end: DeadEnd | None = None,
        branch_of: str | None = None,
    ) -> StepResult:
        """This execution as the record of its step: where the run goes next, why, its state
        after it (the one builder of a node's step, main path and branches alike)."""
        return StepResult(
            node_id=self.node.id,
            outcome=self.outcome,
            attempts=self.attempts,
            duration=self.duration,
            next_node=next_node,
            reason=reason,
            state=state,
            edge_step=edge_step,
            interrupted=self.interrupted,
            dead_end=dead_end,
            branch_of=branch_of,
        )


@dataclass(frozen=True)
class Timing:
    """The run's injected clock, sleep, randomness and backoff (tests make them instant)."""

    clock: Callable[[], float]
    sleep: Callable[[float], None]
    rng: random.Random
    backoff: BackoffConfig


class _TimedOut(Exception):
    """A handler ran past its node's timeout."""


def _normalised(node: Node, outcome: Outcome) -> Outcome:
    """An outcome whose status is a StageStatus (custom code may pass ``"fail"`` as a string)."""
    if isinstance(outcome.status, StageStatus):
        return outcome
    try:
        outcome.status = StageStatus.parse(str(outcome.status))
    except ValueError as exc:
        return failed(f"node '{node.id}' returned an invalid outcome: {exc}")
    return outcome


class NodeExecutor:
    """Runs nodes for one run, seen through its :class:`RunHost`; see the module docstring."""

    def __init__(self, host: RunHost, timing: Timing) -> None:
        self._host = host
        self._timing = timing
        self._hooks = threading.RLock()
        self._stop = threading.Event()
        self._active: set[threading.Event] = set()
        self._active_lock = threading.Lock()
        self._unsaved: list[tuple[Any, Outcome | None]] = []
        """Steps ended since the last journal record, with the outcome for their status file:
        what they write after it (:meth:`saved`)."""
        self._tracing: dict[str, Trace] = {}
        """Node id -> the trace of its execution running now (a parallel node's branch nodes
        find their parallel execution here)."""
        self._fidelity: dict[str, Resolved] = {}
        """Node id -> the fidelity of its execution running now (codergen nodes)."""
        self.resumed = False
        """The run was resumed and has executed no node since: a ``full`` node runs
        ``summary:high`` once (:mod:`.fidelity`)."""
        self._sealed: dict[tuple[str, str | None], Trace] = {}
        """(node id, parallel node) -> the trace its finish sealed, until ``node_finished``."""

    # ----------------------------------------------------------------- stopping

    def interrupt(self) -> None:
        """Stop every running node (thread-safe): set each attempt's cancel event."""
        self._stop.set()
        with self._active_lock:
            for cancel in self._active:
                cancel.set()

    def rearm(self) -> None:
        """Forget an earlier interrupt (a new step starts)."""
        self._stop.clear()

    # ----------------------------------------------------------------- one node

    def execute(self, node: Node, context: Context, branch_of: str | None = None) -> NodeRun:
        """Run ``node`` with its retries in ``context``; the outcome is not applied yet."""
        host = self._host
        data: dict[str, Any] = {"handler_type": node.handler_type}
        if branch_of is not None:
            data["branch_of"] = branch_of
        host.emit(EventType.STAGE_STARTED, node.id, data)
        first_resumed = branch_of is None and self.resumed
        if branch_of is None:
            self.resumed = False
        trace = self.new_trace(node, context, branch_of, first_resumed)
        self._tracing[node.id] = trace
        started = self._timing.clock()
        try:
            with host.context_scope(context):
                outcome, attempts = self._with_retries(node, context, branch_of, trace)
        finally:
            self._tracing.pop(node.id, None)
            self._fidelity.pop(node.id, None)
        duration = self._timing.clock() - started
        if self._stop.is_set():
            host.emit(
                EventType.STAGE_INTERRUPTED,
                node.id,
                {"attempts": attempts, "duration": duration, "branch_of": branch_of},
            )
            return NodeRun(node, failed(INTERRUPTED), attempts, duration, interrupted=True)
        return NodeRun(node, outcome, attempts, duration, trace=trace)

    def new_trace(
        self,
        node: Node,
        context: Context,
        branch_of: str | None = None,
        first_resumed: bool = False,
    ) -> Trace:
        """The trace of an execution of ``node`` that starts now in ``context``: its cause is the
        execution that wrote the context's ``outcome`` (the step before it on its path), or
        none after a person asked for this one (``Run.retry``). A codergen node's fidelity is
        resolved here, from the edge the run took to reach it (:mod:`.fidelity`)."""
        host = self._host
        cause = context.writer_of("outcome")
        if branch_of is None and host.take_rearmed():
            cause = None
        step = None
        if cause is not None and cause.run_id == host.run_id:
            step = cause.step if cause.step is not None else cause.cause  # after a skip
        edge, fidelity = None, ""
        if uses_fidelity(node):
            previous = cause.node_id if cause is not None else None
            edge = incoming_edge(host.graph, node, previous, context, branch_of)
            resolved = resolve(host.graph, node, edge)
            resolved = replace(
                resolved,
                previous=previous,
                degraded=first_resumed and resolved.mode is FidelityMode.FULL,
            )
            self._fidelity[node.id] = resolved
            fidelity = resolved.effective.value
        return Trace(
            node_id=node.id,
            run_id=host.run_id,
            definition=self.definition(node, edge),
            cause=step,
            branch_of=branch_of,
            edge=edge_key(edge) if edge is not None else None,
            fidelity=fidelity,
        )

    def definition(self, node: Node, edge: Edge | None = None) -> str:
        """The fingerprint of ``node`` as it runs now, reached by ``edge``: attributes, prompt
        file text and resolved fidelity."""
        return node_definition(node, self._host.graph, self._host.workdir, edge)

    def finish(self, result: NodeRun, context: Context, branch_of: str | None = None) -> None:
        """Apply a finished node's outcome: context, the run's record, event; its status file
        is written after the step's journal record (:meth:`saved`)."""
        self._announce(result, self._apply(result, context, branch_of), branch_of)

    def _apply(self, result: NodeRun, context: Context, branch_of: str | None) -> int | None:
        """A finished node's outcome in memory (context, the run's record); its record index."""
        node, outcome = result.node, result.outcome
        host = self._host
        trace = result.trace or self.new_trace(node, context, branch_of)  # an answered gate
        with self._active_lock:
            self._unsaved.append((node.id, outcome))
        context.apply_updates(outcome.context_updates, writer=trace)
        context.set("outcome", outcome.status.value, writer=trace)
        if outcome.preferred_label:
            context.set("preferred_label", outcome.preferred_label, writer=trace)
        if branch_of is None:
            context.delete(partial_key(node.id))  # its partial work is done with
        skipped = outcome.status is StageStatus.SKIPPED
        index = None if skipped else host.record_outcome(node.id, outcome)
        if index is not None:
            trace.seal(index + 1, outcome.status.value)
            self._sealed[(node.id, branch_of)] = trace
            try:
                host.reuser.executed(node, outcome, trace, host.run_dir, host.run_id)
            except (OSError, FreshnessMagicError) as exc:  # a cache: the run goes on without it
                log.warning("reuse: node %s was not recorded for reuse: %s", node.id, exc)
        return index

    def _announce(self, result: NodeRun, index: int | None, branch_of: str | None) -> None:
        """The event of a finished node (STAGE_COMPLETED, STAGE_FAILED or STAGE_SKIPPED)."""
        outcome = result.outcome
        skipped = outcome.status is StageStatus.SKIPPED
        payload: dict[str, Any] = {
            "status": outcome.status.value,
            "notes": outcome.notes,
            "failure_reason": outcome.failure_reason,
            "duration": result.duration,
            "attempts": result.attempts,
            "index": index,
        }
        if branch_of is not None:
            payload["branch_of"] = branch_of
        if outcome.reused_from is not None:
            payload["reused_from"] = outcome.reused_from.to_dict()
        if skipped:
            kind = EventType.STAGE_SKIPPED
        elif outcome.status is StageStatus.FAIL:
            kind = EventType.STAGE_FAILED
        else:
            kind = EventType.STAGE_COMPLETED
        self._host.emit(kind, result.node.id, payload)

    def node_finished(self, step: Any) -> list[Trace]:
        """Call every extension's ``on_step_finished`` for one executed node (under the lock),
        then keep its trace with the input fingerprints the extensions report; their
        ``on_step_saved`` follows the journal record that holds the step (:meth:`saved`).

        A branch node's trace goes to its parallel execution's (a nested parallel node's with
        its own branch nodes' before it); they are returned, for the parallel handler to
        journal with the branch's progress (:meth:`restore_traces` takes them back)."""
        host = self._host
        with self._hooks:
            for ext in host.extensions:
                call_extension(ext, "on_step_finished", host.run, step)
            with self._active_lock:
                self._unsaved.append((step, None))
            trace = self._sealed.pop((step.node_id, step.branch_of), None)
            if trace is None or step.interrupted:
                return []
            digests: dict[str, str] = {}
            for ext in host.extensions:
                report = getattr(ext, "trace_inputs", None)
                if callable(report):
                    try:
                        digests.update(report(host.run, trace.node_id) or {})
                    except Exception:
                        log.exception("run extension %r failed in trace_inputs", ext.name)
            trace.set_inputs(digests)
        kept = [*sorted(trace.children, key=_step_of), trace]
        trace.children = []
        if step.branch_of is None:
            host.record_traces(kept)
            return kept
        parent = self._tracing.get(step.branch_of)
        if parent is not None:
            with self._hooks:
                parent.children.extend(kept)
        return kept

    def restore_traces(self, branch_of: str, saved: list[Any]) -> list[Trace]:
        """The traces of branch nodes that ended before parallel node ``branch_of`` was
        interrupted or its driver killed (journaled with the branch's progress, as
        :meth:`node_finished` gave them): kept with the running parallel execution's, as if
        they had just ended. An entry that is not a trace is left out."""
        restored = []
        for data in saved:
            try:
                trace = Trace.from_dict(data, self._host.run_id)
            except (KeyError, TypeError, ValueError, AttributeError):
                continue
            if trace.step is not None and trace.branch_of is not None:
                restored.append(trace)
        parent = self._tracing.get(branch_of)
        if parent is not None:
            with self._hooks:
                parent.children.extend(restored)
        return restored

    def saved(self) -> None:
        """After a journal record: the writes of the steps it holds, which come after it so
        that a kill before it runs the step again with nothing of it written, and a kill after
        it never runs the step again (docs/ARCHITECTURE.md, "Kill windows"): each node's
        ``status.json`` and every extension's ``on_step_saved`` (evidence records)."""
        with self._hooks:
            with self._active_lock:
                unsaved, self._unsaved = self._unsaved, []
            for item, outcome in unsaved:
                if isinstance(item, str):
                    if outcome is not None:
                        self._write_status(item, outcome)
                    continue
                for ext in self._host.extensions:
                    if callable(getattr(ext, "on_step_saved", None)):
                        call_extension(ext, "on_step_saved", self._host.run, item)

    # ----------------------------------------------------------------- a branch

    def run_node(
        self,
        node: Node,
        context: Context,
        branch_of: str,
        ended: Callable[[BranchStep], None] | None = None,
    ) -> BranchStep:
        """One node of a branch: execute, then (one at a time with the other branches) apply its
        outcome, route inside the branch, let the extensions note it and call ``ended`` (the
        parallel handler journals the branch's progress there: the node's end is then
        recorded before anything of it is written), then its event (BranchRunner)."""
        result = self.execute(node, context, branch_of)
        if result.interrupted:
            self.node_finished(
                result.step_result(
                    node.id, f"'{node.id}' was interrupted", RunState.PAUSED, branch_of=branch_of
                )
            )
            return BranchStep(result.outcome, None, interrupted=True)
        outcome = result.outcome
        if outcome.status is StageStatus.WAITING:
            result.outcome = outcome = failed(
                f"human gate '{node.id}' inside the parallel branches of '{branch_of}' cannot "
                "wait for an answer; give the run an interviewer or move the gate after the join"
            )
        with self._hooks, self._host.context_scope(context):
            index = self._apply(result, context, branch_of)
            decision = next_edge(self._host.graph, node, outcome, context)
            traces = self.node_finished(
                result.step_result(
                    decision.target,
                    decision.reason,
                    RunState.RUNNING,
                    edge_step=decision.step,
                    branch_of=branch_of,
                )
            )
            step = BranchStep(
                outcome,
                decision.target,
                joined=decision.step is EdgeStep.FAN_IN,
                traces=tuple(traces),
            )
            if ended is not None:
                ended(step)
        self._announce(result, index, branch_of)
        return step

    # ----------------------------------------------------------------- attempts

    def _with_retries(
        self, node: Node, context: Context, branch_of: str | None, trace: Trace
    ) -> tuple[Outcome, int]:
        host = self._host
        policy = build_retry_policy(node, host.graph, self._timing.backoff)
        counter = f"internal.retry_count.{node.id}"
        host.set_retries(node.id, 0)
        if counter in context:
            context.set(counter, 0)
        attempt = 1
        while True:
            outcome = self._attempt(node, attempt, context, branch_of, trace)
            if outcome.status is not StageStatus.RETRY or self._stop.is_set():
                return outcome, attempt
            if attempt >= policy.max_attempts:
                return self._exhausted(node, outcome, attempt), attempt
            host.set_retries(node.id, attempt)
            context.set(counter, attempt)
            delay = policy.backoff.delay_for_attempt(attempt, self._timing.rng)
            host.emit(
                EventType.STAGE_RETRYING,
                node.id,
                {
                    "attempt": attempt,
                    "next_attempt": attempt + 1,
                    "max_attempts": policy.max_attempts,
                    "delay": delay,
                    "failure_reason": outcome.failure_reason,
                    "branch_of": branch_of,
                },
            )
            self._timing.sleep(delay)
            attempt += 1

    @staticmethod
    def _exhausted(node: Node, last: Outcome, attempts: int) -> Outcome:
        why = last.failure_reason or "the handler asked for a retry"
        if node.allow_partial:
            return Outcome(
                status=StageStatus.PARTIAL_SUCCESS,
                context_updates=dict(last.context_updates),
                notes=f"retries exhausted after {attempts} attempt(s); partial success "
                f"accepted (allow_partial): {why}",
                failure_reason=last.failure_reason,
            )
        if attempts == 1:  # no retry was allowed: the handler's reason says it all
            reason = f"{why}; not retried: max_retries is 0"
        else:
            reason = f"max retries exceeded after {attempts} attempt(s): {why}"
        return failed(
            reason,
            context_updates=dict(last.context_updates),
            notes=last.notes,
        )

    def _attempt(
        self, node: Node, attempt: int, context: Context, branch_of: str | None, trace: Trace
    ) -> Outcome:
        host = self._host
        started = self._timing.clock()
        outcome: Outcome | None = None
        try:
            with self._hooks:
                for ext in host.extensions:
                    replaced = ext.before_execute(host.run, node, attempt)
                    if replaced is not None:
                        outcome = replaced
                        break
            if outcome is None:
                outcome = self._reused(node, context, trace)
            if outcome is None:
                outcome = self._call_handler(node, attempt, context, branch_of, trace)
            with self._hooks:
                for ext in host.extensions:
                    outcome = ext.after_execute(host.run, node, outcome, attempt, started)
        except Exception as exc:
            if not isinstance(exc, FreshnessMagicError):  # ours say all in the failure reason
                log.exception("run extension failed at node %s", node.id)
            outcome = failed(
                f"run extension error at node '{node.id}': {type(exc).__name__}: {exc}"
            )
        return _normalised(node, outcome)

    def _reused(self, node: Node, context: Context, trace: Trace) -> Outcome | None:
        """The outcome of an earlier equal execution when the run reuses (:mod:`.reuse`), its
        reads noted in ``trace`` as the handler would have read them; None: the handler runs.
        The index is a cache: a problem reading it runs the node."""
        from freshness_magic.engine.reuse import reusable

        if not reusable(node, declares_inputs=True):  # never, whatever it declares
            return None
        host = self._host
        reuser = host.reuser
        try:
            identity = self._handler_identity(node)
            if identity is None:
                return None
            resolved = self._fidelity.get(node.id)
            if resolved is not None and resolved.degraded:  # carries what full would not
                identity += "; fidelity degraded on resume"
            with self._hooks:
                inputs = self._declared_inputs(node)
            entry = reuser.lookup(
                node,
                context,
                definition=trace.definition,
                inputs=inputs,
                handler=identity,
                run_dir=host.run_dir,
                search=host.reuses,
            )
            if entry is None:
                return None
            outcome = reuser.take(entry, node, host.run_dir)
        except (OSError, ValueError, FreshnessMagicError) as exc:
            log.warning("reuse: lookup for node %s failed; it runs: %s", node.id, exc)
            return None
        for key in entry.reads:
            prefix = key_set_prefix(key)
            if prefix is not None:  # which keys were set (a fidelity mode's summary)
                trace.record_read(key, selected_keys(list(context), prefix), None)
            elif key in context:
                trace.record_read(key, context[key], context.writer_of(key))
            else:
                trace.record_absent(key)
        return outcome

    def _handler_identity(self, node: Node) -> str | None:
        """What decides the node's work besides its definition and reads: its handler (and,
        where it says, its backend or code: ``reuse_identity``); None: no handler."""
        try:
            handler = self._host.registry.resolve(node)
        except LookupError:
            return None
        own = getattr(handler, "reuse_identity", None)
        kind = f"{type(handler).__module__}.{type(handler).__qualname__}"
        return f"{kind}: {own(node)}" if callable(own) else kind

    def _declared_inputs(self, node: Node) -> dict[str, str] | None:
        """The node's declared input files now, path -> digest, as the run extensions that
        fingerprint files report them (``reuse_inputs``); None: it declares none."""
        found: dict[str, str] | None = None
        host = self._host
        for ext in host.extensions:
            report = getattr(ext, "reuse_inputs", None)
            if callable(report):
                got = report(host.run, node)
                if got is not None:
                    found = {**(found or {}), **got}
        return found

    def _call_handler(
        self, node: Node, attempt: int, context: Context, branch_of: str | None, trace: Trace
    ) -> Outcome:
        host = self._host
        try:
            handler = host.registry.resolve(node)
        except LookupError as exc:
            return failed(str(exc))
        timeout = node.timeout
        cancel = threading.Event()
        over = threading.Event()
        main_path = branch_of is None
        env = StepEnv(
            graph=host.graph,
            run_dir=host.run_dir,
            workdir=host.workdir,
            attempt=attempt,
            emit=lambda kind, data: self._emit(kind, node.id, data),
            deadline=self._timing.clock() + timeout if timeout else None,
            slack=stop_slack(timeout) if timeout else 0.0,
            sleep=self._timing.sleep,
            cancel=cancel,
            branches=self,
            child_runs=host.child_runs,
            keep=self._keeper(node.id, over) if main_path else None,
            kept=context.get(partial_key(node.id)) if main_path else None,
            fidelity=self._fidelity.get(node.id),
        )
        status_file = host.run_dir / "nodes" / node.id / "status.json"
        before = status_file.stat().st_mtime_ns if status_file.exists() else None
        with self._active_lock:
            self._active.add(cancel)
            if self._stop.is_set():
                cancel.set()
        work = handler.execute
        dispatch = host.dispatch
        shipped = dispatch is not None and ships(dispatch, node, handler)
        if dispatch is not None and shipped:  # its timeout counts from the start on a worker

            def work(node: Node, context: Context, env: StepEnv) -> Outcome:
                return call_remote(dispatch, handler, node, context, env, timeout)

        try:
            with context.recording(trace):
                if timeout and not shipped:
                    limit = timeout + env.slack
                    result: object = self._call_with_timeout(work, node, context, env, limit)
                else:
                    result = work(node, context, env)
        except _TimedOut:
            cancel.set()
            return failed(f"timed out after {timeout:g}s")
        except KeyboardInterrupt:
            self.interrupt()
            return failed(INTERRUPTED)
        except Exception as exc:
            kept = env.keep_traceback(node.id, exc)
            return failed(
                f"handler {node.handler_type!r} raised {type(exc).__name__}: {exc}",
                notes=f"node '{node.id}' raised an exception"
                + (f"; its traceback: {kept}" if kept else ""),
            )
        finally:
            over.set()
            with self._active_lock:
                self._active.discard(cancel)
        if isinstance(result, Outcome):
            return result
        return self._outcome_without_return(node, result, status_file, before)

    def _keeper(self, node_id: str, over: threading.Event) -> Callable[[Any], None]:
        """``StepEnv.keep`` for one attempt at a main-path node; a handler that outlived its
        attempt (abandoned at its timeout) can no longer save. Given a function, it keeps what
        the function returns, calling it under the hook lock (a change and its record are one
        step for the other branches)."""

        def keep(value: Any) -> None:
            with self._hooks:  # the extensions' state is saved too: not while a hook changes it
                if callable(value):
                    value = value()
                if not over.is_set():
                    self._host.keep_partial(node_id, value)

        return keep

    @staticmethod
    def _outcome_without_return(
        node: Node, result: object, status_file: Path, before: int | None
    ) -> Outcome:
        """A handler returned no Outcome: use a status.json it wrote, or ``auto_status``."""
        if status_file.exists() and status_file.stat().st_mtime_ns != before:
            try:
                data = loads_bounded(status_file.read_text(encoding="utf-8"))
                return Outcome.from_dict(data)
            except (OSError, ValueError, TypeError, KeyError) as exc:
                return failed(f"status file {status_file} is not valid: {exc}")
        if node.auto_status:
            return Outcome(notes="auto-status: handler completed without writing status")
        return failed(
            f"the handler of node '{node.id}' returned {type(result).__name__} instead of an "
            "Outcome and wrote no status.json; return an Outcome or set auto_status=true"
        )

    @staticmethod
    def _call_with_timeout(
        fn: Callable[[Node, Context, StepEnv], Outcome],
        node: Node,
        context: Context,
        env: StepEnv,
        timeout: float,
    ) -> object:
        box: dict[str, object] = {}

        def target() -> None:
            try:
                box["result"] = fn(node, context, env)
            except BaseException as exc:
                box["error"] = exc

        worker = threading.Thread(target=target, name=f"node-{node.id}", daemon=True)
        worker.start()
        try:
            worker.join(timeout)
        except KeyboardInterrupt:
            # Ctrl-C or a stop signal: the handler stops its work (a tool kills its process
            # group) on its thread; wait for that, or the process may end first and leave it.
            env.cancel.set()
            worker.join(STOP_WAIT_SECONDS)
            raise
        if worker.is_alive():
            raise _TimedOut
        error = box.get("error")
        if isinstance(error, BaseException):
            raise error
        return box.get("result")

    def _emit(self, kind: str, node_id: str, data: dict[str, Any]) -> None:
        self._host.emit(kind, node_id, data)

    def _write_status(self, node_id: str, outcome: Outcome) -> None:
        if not NODE_ID_RE.match(node_id):
            log.warning("node id %r is not a safe folder name; status.json not written", node_id)
            return
        path = self._host.run_dir / "nodes" / node_id / "status.json"
        text = (dumps(outcome.to_dict()) + "\n").encode("utf-8")
        if _holds(path, text):  # the handler wrote this very outcome: one file less per step
            return
        try:
            write_atomic(path, text)
        except OSError as exc:  # the journal holds the outcome: the run goes on without it
            log.warning(
                "cannot write %s (%s); the node's outcome is kept in the run's journal: free "
                "disk space or make the folder writable",
                path,
                exc.strerror or exc,
            )


def _holds(path: Path, data: bytes) -> bool:
    """Whether the state file ``path`` holds exactly ``data`` (a missing or unreadable file,
    or one of another size, does not: it is written)."""
    try:
        with open_state(path) as handle:
            if os.fstat(handle.fileno()).st_size != len(data):
                return False
            return handle.read(len(data) + 1) == data
    except (OSError, FreshnessMagicError):
        return False
