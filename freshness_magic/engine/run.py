"""One run of a pipeline: the object that owns its state; ``step``, ``run``, ``answer``, ``retry``.

A :class:`Run` holds the pipeline, the context and a :class:`~.persistence.RunMemory` (outcomes,
completed nodes, next node, retries, pending gate, failure). ``step()`` hands the next node to
the :class:`~.execute.NodeExecutor` (the one path every node takes, parallel branches included),
routes with :func:`~.routing.route`, writes a checkpoint and returns a
:class:`~.state.StepResult`. ``run()`` is a loop of ``step()`` calls; there is no second code
path. Everything that happens is an event on ``run.events``.

Semantics (DESIGN.md §4): failure routing, bounded visited-only goal gates judged whenever the run
is about to enter an exit, a dead end that completes the run with a ``dead_end`` event, RETRY-only
retries (see :mod:`.routing` and :mod:`.execute`). A handler outcome WAITING puts the run in
WAITING with ``pending_gate``; :meth:`Run.answer` completes the gate with the answer. A failed or
interrupted run goes on with :meth:`Run.retry`. ``loop_restart`` continues in a fresh run
directory (:mod:`.persistence`).
"""

from __future__ import annotations

import contextlib
import logging
import random
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from freshness_magic.atomicio import ensure_ignored_dir, read_jsonl
from freshness_magic.engine.checkpoint import has_state, load_state
from freshness_magic.engine.context import Context
from freshness_magic.engine.dispatch import Dispatch
from freshness_magic.engine.edges import EdgeStep
from freshness_magic.engine.events import EventBus, EventType
from freshness_magic.engine.execute import NodeExecutor, NodeRun, Timing
from freshness_magic.engine.extensions import RunExtension, extension_rules
from freshness_magic.engine.gates import answer_outcome, gate_question, match_choice
from freshness_magic.engine.handlers.base import ChildRun, HandlerRegistry
from freshness_magic.engine.handlers.builtin import default_registry
from freshness_magic.engine.model import Graph, Node
from freshness_magic.engine.outcome import Outcome, Question, StageStatus
from freshness_magic.engine.persistence import (
    EVENTS_FILE,
    RUN_ID_RE,
    RunMemory,
    checkpoint_payload,
    follow_restarts,
    new_run_id,
    restart_dir,
    restore_memory,
    source_hash,
    stored_pipeline,
    write_manifest_file,
    write_pipeline,
    write_run_files,
)
from freshness_magic.engine.retry import BackoffConfig
from freshness_magic.engine.routing import route
from freshness_magic.engine.state import Durability, RunResult, RunState, StepResult
from freshness_magic.engine.store import RunStore
from freshness_magic.errors import CheckpointError, GateAnswerError, RunError
from freshness_magic.pathsafety import check_state_path

log = logging.getLogger(__name__)


class _ChildRuns:
    """Child runs of a manager node: same registry and sleep as the parent (``ChildRuns``)."""

    def __init__(self, registry: HandlerRegistry, sleep: Callable[[float], None]) -> None:
        self._registry = registry
        self._sleep = sleep

    def start(self, graph: Graph, workdir: Path, runs_dir: Path) -> ChildRun:
        return Run(
            graph, workdir=workdir, runs_dir=runs_dir, registry=self._registry, sleep=self._sleep
        )

    def resume(self, run_dir: Path, graph: Graph, workdir: Path) -> ChildRun:
        return Run.resume(
            run_dir, graph=graph, workdir=workdir, registry=self._registry, sleep=self._sleep
        )


class Run:
    """A pipeline run you can step, run, answer, retry, interrupt, checkpoint and resume.

    ``registry`` maps handler types to handlers (None: the built-in handlers with the simulated
    codergen backend; :func:`freshness_magic.session.open_run` builds one from a backend and an
    interviewer). ``clock``, ``wall_clock``, ``sleep`` and ``rng`` are injectable so tests run
    instantly and deterministically. ``checkpoint_history`` bounds the ``checkpoints/`` folder;
    ``durability`` says what is fsynced (:class:`~.state.Durability`). ``dispatch`` sends the
    work of portable nodes (tool commands) to an executor such as a Dask cluster
    (:mod:`.dispatch`). A started or resumed run holds its run directory's driver lock until
    :meth:`close` (or the object is collected).
    The run directory is ``runs_dir/run_id`` (default ``workdir/.freshness/runs/<stamp>-<hex>``).
    """

    def __init__(
        self,
        graph: Graph,
        *,
        workdir: str | Path = ".",
        runs_dir: str | Path | None = None,
        run_id: str | None = None,
        registry: HandlerRegistry | None = None,
        extensions: Iterable[RunExtension] = (),
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
        rng: random.Random | None = None,
        checkpoint_history: int = 50,
        backoff: BackoffConfig | None = None,
        durability: Durability | str = Durability.DURABLE,
        dispatch: Dispatch | None = None,
        _restore: dict[str, Any] | None = None,
    ) -> None:
        from freshness_magic.engine.validation import validate_or_raise

        self.registry = registry if registry is not None else default_registry()
        self.extensions: list[RunExtension] = list(extensions)
        self.dispatch = dispatch
        """Where portable node work runs (a cluster); None: in this process."""
        self._closers: list[Callable[[], None]] = []
        validate_or_raise(
            graph,
            extra_rules=[rule for ext in self.extensions for rule in extension_rules(ext)],
            known_types=self.registry.types(),
        )
        self.graph = graph
        self.workdir = Path(workdir).resolve()
        base = Path(runs_dir) if runs_dir is not None else self.workdir / ".freshness" / "runs"
        check_state_path(base)  # a linked .freshness must not move the run out of the tree
        self._run_id = run_id or new_run_id()
        if not RUN_ID_RE.match(self._run_id):
            raise RunError(
                f"run id {self._run_id!r} is not usable as a folder name; use letters, digits, "
                "'_', '-' and '.' only"
            )
        self._run_dir = base.resolve() / self._run_id
        self._wall_clock = wall_clock
        self._store = RunStore(history=checkpoint_history, durability=durability)
        self.child_runs = _ChildRuns(self.registry, sleep)
        start = graph.start_node()
        if start is None:
            raise RunError("the pipeline has no single start node (shape=Mdiamond)")
        self._context = Context()
        self._scoped = threading.local()
        self._lock = threading.Lock()
        self._memory = RunMemory(next_node=start.id)
        self._source_hash = source_hash(graph.source)
        self._exit_ids = frozenset(n.id for n in graph.exit_candidates())
        self._started = False
        self._history: list[StepResult] = []
        self.events = EventBus(self._run_id, self._run_dir / EVENTS_FILE)
        timing = Timing(clock, sleep, rng or random.Random(), backoff or BackoffConfig())
        self._executor = NodeExecutor(self, timing)
        if _restore is not None:
            self._memory, self._context = restore_memory(_restore, self._run_dir)
            if self.next_node is not None and self.next_node not in graph.nodes:
                raise CheckpointError(
                    f"checkpoint of {self._run_dir} continues at node '{self.next_node}', which "
                    "the pipeline does not have; resume with the pipeline the run was started with"
                )
            self._started = _restore.get("state") != RunState.READY.value
            last_seq = int(_restore.get("event_seq", 0))
            for record in read_jsonl(self._run_dir / EVENTS_FILE):
                last_seq = max(last_seq, int(record.get("seq", 0)))
            self.events.rebind(self._run_id, self._run_dir / EVENTS_FILE, seq=last_seq)

    # ----------------------------------------------------------------- properties

    @property
    def context(self) -> Context:
        """The context the calling thread's node sees: a branch's clone inside a parallel
        branch, else the run's own."""
        scoped: Context | None = getattr(self._scoped, "context", None)
        return scoped if scoped is not None else self._context

    @contextlib.contextmanager
    def context_scope(self, context: Context) -> Iterator[None]:
        """Make ``context`` this thread's ``run.context`` (a parallel branch's extensions)."""
        previous = getattr(self._scoped, "context", None)
        self._scoped.context = None if context is self._context else context
        try:
            yield
        finally:
            self._scoped.context = previous

    @property
    def state(self) -> RunState:
        return self._memory.state

    @property
    def next_node(self) -> str | None:
        """The node the next ``step()`` executes (None when finished)."""
        return self._memory.next_node

    @property
    def current_node(self) -> str | None:
        """The node executed last (or the gate waiting for an answer)."""
        return self._memory.current_node

    @property
    def pending_gate(self) -> Question | None:
        return self._memory.pending_gate

    @property
    def node_outcomes(self) -> dict[str, Outcome]:
        """Each executed node's last outcome (parallel branch nodes included)."""
        with self._lock:
            return dict(self._memory.outcomes)

    @property
    def completed_nodes(self) -> list[str]:
        """Executed nodes in order (a node executed twice appears twice)."""
        with self._lock:
            return list(self._memory.completed)

    @property
    def node_retries(self) -> dict[str, int]:
        with self._lock:
            return dict(self._memory.retries)

    @property
    def run_dir(self) -> Path:
        return self._run_dir

    @property
    def run_id(self) -> str:
        return self._run_id

    @property
    def history(self) -> list[StepResult]:
        return list(self._history)

    @property
    def failure_reason(self) -> str:
        return self._memory.failure_reason

    @property
    def goal_gate_redirects(self) -> int:
        return self._memory.redirects

    # ----------------------------------------------------------------- the executor's record

    def record_outcome(self, node_id: str, outcome: Outcome) -> int:
        """Remember a finished node's outcome (thread-safe); its index in ``completed_nodes``."""
        with self._lock:
            return self._memory.record(node_id, outcome)

    def set_retries(self, node_id: str, retries: int) -> None:
        with self._lock:
            if retries:
                self._memory.retries[node_id] = retries
            else:
                self._memory.retries.pop(node_id, None)

    @staticmethod
    def call_extension(ext: RunExtension, hook: str, *args: Any) -> None:
        """Call ``ext.hook(*args)``; an exception is logged and skipped, never raised."""
        try:
            getattr(ext, hook)(*args)
        except Exception:
            log.exception("run extension %r raised in %s; skipped", getattr(ext, "name", ext), hook)

    # ----------------------------------------------------------------- lifecycle

    def start(self) -> None:
        """Begin the run (idempotent): run dir, manifest, graph keys, PIPELINE_STARTED.

        Called by the first ``step()``; call it earlier to take extension baselines at load time.
        """
        if self._started:
            return
        resuming = self._store.writer is not None
        if not resuming and has_state(self._run_dir):
            raise RunError(
                f"run directory {self._run_dir} already holds a run; resume it with "
                "Run.resume(run_dir) or start with another run_id"
            )
        if self._run_dir.parent == self.workdir / ".freshness" / "runs":
            ensure_ignored_dir(self.workdir / ".freshness")
        self._run_dir.mkdir(parents=True, exist_ok=True)
        if not resuming:
            self._store.lock(self._run_dir)
            if has_state(self._run_dir):
                self._store.release()
                raise RunError(
                    f"run directory {self._run_dir} already holds a run; resume it with "
                    "Run.resume(run_dir) or start with another run_id"
                )
            write_pipeline(self._run_dir, self.graph)
            self._store.open(self._run_dir)
        self._started = True
        self._save(rest=True, announce=False)
        write_manifest_file(self._run_dir, self.graph, self._run_id, self.workdir, self._memory)
        self._context.set("graph.goal", self.graph.goal)
        for key, value in self.graph.attrs.items():
            self._context.set(f"graph.{key}", value)
        self.events.emit(
            EventType.PIPELINE_STARTED,
            data={"name": self.graph.name, "goal": self.graph.goal, "run_dir": str(self.run_dir)},
        )
        for ext in self.extensions:
            self.call_extension(ext, "on_run_start", self)
        self.save_checkpoint()

    def step(self) -> StepResult:
        """Execute the next node (with its retries) and route; see the module docstring."""
        memory = self._memory
        if memory.state.finished:
            why = memory.failure_reason if memory.state is RunState.FAILED else ""
            hint = f" ({why}); retry() goes on from the failed node" if why else ""
            return self._idle(f"the run has already {memory.state.value}{hint}; nothing to step")
        if memory.state is RunState.WAITING:
            gate = memory.pending_gate
            where = gate.node_id if gate is not None else memory.next_node
            return self._idle(
                f"waiting at gate '{where}': answer it first (answer(node_id, choice))"
            )
        self.start()
        node_id = memory.next_node
        if node_id is None or node_id not in self.graph.nodes:
            self._finish_failed(f"next node {node_id!r} does not exist in the pipeline", None)
            return self._idle(memory.failure_reason)
        node = self.graph.nodes[node_id]
        memory.state = RunState.RUNNING
        memory.current_node = node_id
        memory.interrupted_node = None
        self._context.set("current_node", node_id)
        self._executor.rearm()
        with self._store.writes():
            result = self._executor.execute(node, self._context)
            if result.interrupted:
                return self._interrupted(result)
            if result.outcome.status is StageStatus.WAITING:
                return self._enter_waiting(result)
            return self._complete(result)

    def run(self, to: str | None = None, max_steps: int | None = None) -> RunResult:
        """Step until the exit, a failure, a waiting gate, an interrupt, ``to`` (not executed)
        or ``max_steps``."""
        if to is not None and to not in self.graph.nodes:
            raise RunError(
                f"cannot run to node '{to}': it is not in the pipeline; nodes: "
                + ", ".join(self.graph.nodes)
            )
        if max_steps is not None and max_steps < 0:
            raise RunError(f"max_steps must be 0 or more, got {max_steps}")
        steps = 0
        stop_reason = ""
        while not self.state.finished and self.state is not RunState.WAITING:
            if to is not None and self.next_node == to:
                stop_reason = f"stopped before node '{to}'"
                break
            if max_steps is not None and steps >= max_steps:
                stop_reason = f"stopped after {steps} step(s)"
                break
            if self.step().interrupted:
                break
            steps += 1
        if stop_reason:
            self.start()
            self._memory.state = RunState.PAUSED
            self.events.emit(
                EventType.PIPELINE_PAUSED,
                self.next_node,
                {"reason": stop_reason, "next_node": self.next_node},
            )
            self.save_checkpoint()
        return self.result()

    def interrupt(self) -> None:
        """Stop the running node (thread-safe; Stop button, signal handler).

        A tool's process group is killed, a model call is closed; the node is recorded as
        interrupted, the run pauses there, and the next ``step()`` runs it again.
        """
        self._executor.interrupt()

    def answer(
        self, node_id: str, choice: str | None = None, comment: str | None = None
    ) -> StepResult:
        """Answer the waiting gate ``node_id`` by key, label or target id (None: its default).

        ``comment`` is kept in the context as ``human.gate.comment`` (and so in the evidence).
        """
        memory = self._memory
        gate = memory.pending_gate
        if memory.state is not RunState.WAITING or gate is None:
            raise RunError(
                f"no human gate is waiting (the run is {memory.state.value}); "
                "answer a gate only when the run waits at it"
            )
        if node_id != gate.node_id:
            raise RunError(f"gate '{node_id}' is not waiting; the waiting gate is '{gate.node_id}'")
        valid = ", ".join(f"{c.key} ({c.label} -> {c.target})" for c in gate.choices) or "(none)"
        wanted = choice if choice is not None and choice.strip() else gate.default
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
        outcome = answer_outcome(gate, picked)
        if comment:
            outcome.context_updates["human.gate.comment"] = comment
            outcome.notes = f"{outcome.notes}; comment: {comment}"
        node = self.graph.nodes[node_id]
        with self._store.writes():
            return self._complete(NodeRun(node, outcome, 1, 0.0))

    def retry(self, node_id: str | None = None) -> str:
        """Re-arm a failed, interrupted or paused run at ``node_id`` (default: the failed or
        interrupted node); returns that node. Context, outcomes and evidence so far are kept;
        the next ``step()``/``run()`` executes it. Emits RUN_RETRIED.
        """
        memory = self._memory
        if memory.state is RunState.WAITING:
            raise RunError(
                f"the run waits at gate '{memory.next_node}'; answer it instead of retrying"
            )
        target = node_id or memory.interrupted_node or memory.failed_node
        if target is None and memory.state is RunState.FAILED:
            target = memory.current_node
        if target is None:
            raise RunError(
                "nothing to retry: the run did not fail at a node; name the node to run again "
                "(retry(node_id))"
            )
        if target not in self.graph.nodes:
            raise RunError(
                f"cannot retry node '{target}': it is not in the pipeline; nodes: "
                + ", ".join(self.graph.nodes)
            )
        self.start()
        previous = memory.state
        memory.state = RunState.PAUSED
        memory.next_node = target
        memory.failure_reason = ""
        memory.failed_node = None
        memory.dead_end = None
        memory.interrupted_node = None
        self.events.emit(
            EventType.RUN_RETRIED, target, {"from_state": previous.value, "node": target}
        )
        self.save_checkpoint()
        return target

    def result(self) -> RunResult:
        """A snapshot of where the run stands."""
        with self._lock:
            return self._memory.result(self._run_dir, self._context)

    # ----------------------------------------------------------------- step endings

    def _idle(self, reason: str) -> StepResult:
        return StepResult(
            node_id=None,
            outcome=None,
            attempts=0,
            duration=0.0,
            next_node=self.next_node,
            reason=reason,
            state=self.state,
            executed=False,
        )

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
        self.save_checkpoint()
        return step

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
        decision = route(
            self.graph,
            node,
            outcome,
            self._context,
            outcomes=memory.outcomes,  # no branch runs while the main path routes
            redirects=memory.redirects,
            exit_ids=self._exit_ids,
        )
        memory.next_node = decision.target
        reason = decision.reason
        if decision.goal_gate_redirect:
            memory.redirects += 1
            self.events.emit(
                EventType.GOAL_GATE_REDIRECT,
                node.id,
                {
                    "target": decision.target,
                    "redirects": memory.redirects,
                    "limit": self.graph.max_goal_gate_redirects,
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
            self._finish_failed(reason, node.id)
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
        return result

    def _loop_restart(self, target: str, reason: str) -> str:
        """Continue in a fresh run directory linked from the old one; returns the new reason."""
        self.save_checkpoint()
        memory = self._memory
        old_dir, old_id = self._run_dir, self._run_id
        memory.restarts += 1
        new_id, new_dir = restart_dir(old_dir, old_id, memory.restarts, target)
        self.events.emit(
            EventType.PIPELINE_RESTARTED,
            target,
            {"new_run_dir": str(new_dir), "new_run_id": new_id, "target": target},
        )
        self._run_id, self._run_dir = new_id, new_dir
        memory.restarted_from = str(old_dir)
        with self._lock:
            memory.forget_nodes()
        self.events.rebind(new_id, new_dir / EVENTS_FILE)
        new_dir.mkdir(parents=True, exist_ok=True)
        self._store.lock(new_dir)
        self._store.open(new_dir)
        write_run_files(new_dir, self.graph, new_id, self.workdir, memory)
        self.events.emit(
            EventType.PIPELINE_RESTARTED,
            target,
            {"restarted_from": str(old_dir), "old_run_id": old_id, "target": target},
        )
        return f"{reason}; loop_restart: continuing at '{target}' in {new_dir}"

    # ----------------------------------------------------------------- persistence

    def save_checkpoint(self) -> None:
        """Record the current state now and write a snapshot (``checkpoint.json``).

        Steps do this themselves; extensions call it after changing their own state between
        steps (an accepted baseline must survive a crash). Does nothing before the run starts.
        """
        self._save(rest=True)

    def _save(self, *, rest: bool, announce: bool = True) -> None:
        """Append the step's journal record; a snapshot too when ``rest`` or compaction is due.

        ``announce``: emit CHECKPOINT_SAVED (not for the first record, written before the run's
        first event so that a run killed at once is still resumable).
        """
        if not self._started:
            return
        now = self._wall_clock()
        with self._lock:
            seq = self.events.seq
            path = self._store.save(
                self._memory,
                self._context,
                lambda exts: checkpoint_payload(
                    self._memory,
                    self._context,
                    run_id=self._run_id,
                    graph=self.graph,
                    pipeline_hash=self._source_hash,
                    workdir=self.workdir,
                    event_seq=seq,
                    now=now,
                    extensions=exts,
                ),
                extensions={ext.name: self._ext_state(ext) for ext in self.extensions},
                event_seq=seq,
                now=now,
                rest=rest,
            )
        if announce:
            self.events.emit(EventType.CHECKPOINT_SAVED, self.current_node, {"path": str(path)})

    def close(self) -> None:
        """Release the run directory's driver lock (another process may then drive the run)
        and what the run was given to close with it (:meth:`close_with`)."""
        self._store.release()
        while self._closers:
            self._closers.pop()()

    def close_with(self, closer: Callable[[], None]) -> None:
        """Call ``closer`` when the run closes (e.g. a cluster started for this run)."""
        self._closers.append(closer)

    def __enter__(self) -> Run:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @staticmethod
    def _ext_state(ext: RunExtension) -> dict[str, Any]:
        try:
            return dict(ext.checkpoint_state())
        except Exception:
            log.exception("run extension %r failed in checkpoint_state; stored empty", ext.name)
            return {}

    @classmethod
    def resume(
        cls,
        run_dir: str | Path,
        *,
        graph: Graph | None = None,
        workdir: str | Path | None = None,
        extensions: Iterable[RunExtension] = (),
        **kwargs: Any,
    ) -> Run:
        """Restore a run from the newest valid checkpoint of ``run_dir`` (any process).

        Without ``graph`` the pipeline is rebuilt from the run directory's ``pipeline.dot``
        (checked against the hash in the checkpoint), so the original file is not needed. A
        damaged checkpoint is reported (log warning and a CHECKPOINT_CORRUPT event naming the
        file) and an older valid one is used.
        """
        folder = follow_restarts(Path(run_dir))
        damaged: list[tuple[Path, str]] = []
        store = RunStore(
            history=int(kwargs.pop("checkpoint_history", 50)),
            durability=kwargs.pop("durability", Durability.DURABLE),
        )
        fresh = store.lock(folder) if folder.is_dir() else False
        loaded = load_state(folder, on_corrupt=lambda p, why: damaged.append((p, why)))
        data, used = loaded.data, loaded.path
        pipeline = data.get("pipeline") or {}
        stored_hash = str(pipeline.get("sha256") or "")
        if graph is None:
            graph = stored_pipeline(folder, pipeline, used)
        elif graph.source and stored_hash and source_hash(graph.source) != stored_hash:
            raise CheckpointError(
                f"checkpoint {used} belongs to another pipeline (source hash differs from "
                f"{graph.path or 'the given graph'}); resume with the pipeline the run used"
            )
        run = cls(
            graph,
            workdir=workdir if workdir is not None else data.get("workdir", "."),
            runs_dir=folder.parent,
            run_id=folder.name,
            extensions=extensions,
            _restore=data,
            **kwargs,
        )
        run._store = store
        store.open(run._run_dir, keep=tuple(p for p, _ in damaged), valid_end=loaded.journal_end)
        for path, why in damaged:
            run.events.emit(EventType.CHECKPOINT_CORRUPT, None, {"path": str(path), "why": why})
        run.events.emit(
            EventType.PIPELINE_RESUMED,
            run.next_node,
            {"checkpoint": str(used), "state": run.state.value},
        )
        saved = data.get("extensions") or {}
        for ext in run.extensions:
            state = saved.get(ext.name) if isinstance(saved, dict) else None
            cls.call_extension(ext, "on_resume", run, state if isinstance(state, dict) else None)
        if fresh:
            run._reap_survivors()
        return run

    def _reap_survivors(self) -> None:
        """Stop tool process groups a dead driver left running (branch nodes included)."""
        from freshness_magic.engine.handlers.tool import reap_survivors

        for message in reap_survivors(self._run_dir):
            log.warning("%s", message)
            self.events.emit(EventType.STAGE_OUTPUT, None, {"stream": "stderr", "text": message})
