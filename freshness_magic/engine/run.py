"""One run of a pipeline: ``Run``, a facade over its state, its journal and the node executor.

A step travels one path (``run()`` is a loop of ``step()``; an answer to a gate ends the same
way):

1. :meth:`Run.step` checks the run may step and hands the next node to the
   :class:`~.execute.NodeExecutor` (extensions, handler, timeout, retries; parallel branches go
   through it too). The executor sees the run only through a narrow
   :class:`~.execute.RunHost`.
2. The step ends (the "how a step ends" methods below): interrupted (paused at the node),
   waiting at a gate, at an exit, or :func:`~.routing.route`'s decision (next node, goal gate
   redirect, dead end, failure, ``loop_restart``) applied to the run's state.
3. :meth:`Run._finish_step` keeps the step, reports it to the extensions, and the
   :class:`~.journal.Journal` records it (a snapshot when the run comes to rest).

Everything that happens is an event on ``run.events``. The parts: the state
(:class:`~.run_data.RunData`), the record (:class:`~.journal.Journal`), the run directory's life
(:mod:`.lifecycle`: start, resume, ``loop_restart``) and recovery (:mod:`.recovery`: gate
answers, ``retry``). Semantics (docs/ARCHITECTURE.md): failure routing, bounded visited-only
goal gates judged whenever the run is about to enter an exit, a dead end that completes the run
with a ``dead_end`` event, RETRY-only retries.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self

from freshness_magic.engine import front_end, lifecycle, recovery
from freshness_magic.engine.carry import CarryPlan
from freshness_magic.engine.context import Context
from freshness_magic.engine.dispatch import Dispatch
from freshness_magic.engine.edges import EdgeStep
from freshness_magic.engine.events import EventBus, EventType
from freshness_magic.engine.execute import NodeExecutor, NodeRun, Timing
from freshness_magic.engine.extensions import (
    RunExtension,
    call_extension,
    extension_event_kinds,
    extension_rules,
)
from freshness_magic.engine.gates import gate_question
from freshness_magic.engine.handlers.base import ChildRun, ChildRuns, HandlerRegistry
from freshness_magic.engine.journal import Journal
from freshness_magic.engine.model import Graph, Node, parse_bool
from freshness_magic.engine.outcome import Outcome, Question, StageStatus
from freshness_magic.engine.persistence import (
    EVENTS_FILE,
    PIPELINE_FILE,
    RUN_ID_RE,
    RunMemory,
    new_run_id,
    source_hash,
    stored_pipeline_path,
)
from freshness_magic.engine.reach import inside_branches
from freshness_magic.engine.retry import BackoffConfig
from freshness_magic.engine.routing import DeadEnd, route
from freshness_magic.engine.run_data import RunData
from freshness_magic.engine.state import Durability, RunResult, RunState, StepResult
from freshness_magic.engine.store import RunStore
from freshness_magic.engine.trace import Trace
from freshness_magic.errors import RunError
from freshness_magic.pathsafety import check_state_path

if TYPE_CHECKING:
    from freshness_magic.engine.reuse import Reuser


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


class _Host:
    """The executor's view of a run (:class:`~.execute.RunHost`): the run's pipeline, handlers
    and extensions, its bus, and the journal for what the executor reports."""

    def __init__(self, run: Run, data: RunData, journal: Journal) -> None:
        self._run = run
        self._data = data
        self._journal = journal

    @property
    def graph(self) -> Graph:
        return self._data.graph

    @property
    def run_id(self) -> str:
        return self._data.run_id

    @property
    def run_dir(self) -> Path:
        return self._data.run_dir

    @property
    def workdir(self) -> Path:
        return self._data.workdir

    @property
    def registry(self) -> HandlerRegistry:
        return self._run.registry

    @property
    def dispatch(self) -> Dispatch | None:
        return self._run.dispatch

    @property
    def child_runs(self) -> ChildRuns:
        return self._run.child_runs

    @property
    def extensions(self) -> Sequence[RunExtension]:
        return self._run.extensions

    @property
    def run(self) -> Run:
        return self._run

    @property
    def reuses(self) -> bool:
        return self._run.reuses

    @property
    def reuser(self) -> Reuser:
        return self._run.reuser

    def emit(self, kind: str, node_id: str | None, data: dict[str, Any]) -> None:
        self._data.events.emit(kind, node_id, data)

    def context_scope(self, context: Context) -> AbstractContextManager[None]:
        return self._data.context_scope(context)

    def record_outcome(self, node_id: str, outcome: Outcome) -> int:
        return self._journal.record_outcome(node_id, outcome)

    def set_retries(self, node_id: str, retries: int) -> None:
        self._journal.set_retries(node_id, retries)

    def keep_partial(self, node_id: str, value: Any) -> None:
        self._journal.keep_partial(node_id, value)

    def record_traces(self, traces: list[Trace]) -> None:
        self._journal.record_traces(traces)

    def take_rearmed(self) -> bool:
        return self._journal.take_rearmed()


class Run:
    """A pipeline run you can step, run, answer, retry, interrupt, checkpoint and resume.

    ``registry`` maps handler types to handlers (None: the built-in handlers with the simulated
    codergen backend; :func:`freshness_magic.session.open_run` builds one from a backend and an
    interviewer). ``clock``, ``wall_clock``, ``sleep`` and ``rng`` are injectable so tests run
    instantly and deterministically. ``checkpoint_history`` bounds the ``checkpoints/`` folder;
    ``durability`` says what is fsynced (:class:`~.state.Durability`). ``dispatch`` sends the
    work of portable nodes (tool commands) to an executor such as a Dask cluster
    (:mod:`.dispatch`). A started or resumed run holds its run directory's driver lock until
    :meth:`close` (or the object is collected). ``reuse`` takes an execution from an earlier
    successful one of the same node with the same definition, inputs and read values
    (:mod:`.reuse`).
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
        reuse: bool = False,
        _restore: dict[str, Any] | None = None,
    ) -> None:
        from freshness_magic.engine.validation import validate_or_raise

        if registry is None:  # the built-ins, imported only when no registry is given
            from freshness_magic.engine.handlers.builtin import default_registry

            registry = default_registry()
        self.registry = registry
        self.dispatch = dispatch
        """Where portable node work runs (a cluster); None: in this process."""
        self.reuse = reuse
        """Take executions from earlier equal ones (:mod:`.reuse`); the graph's ``reuse="true"``
        turns it on too. Settable between steps (``--reuse`` on one notebook action)."""
        self._reuser: Reuser | None = None
        self._closers: list[Callable[[], None]] = []
        self.extensions = list(extensions)
        validate_or_raise(
            graph,
            extra_rules=[rule for ext in self.extensions for rule in extension_rules(ext)],
            known_types=self.registry.types(),
        )
        workdir = Path(workdir).resolve()
        base = Path(runs_dir) if runs_dir is not None else workdir / ".freshness" / "runs"
        check_state_path(base)  # a linked .freshness must not move the run out of the tree
        run_id = run_id or new_run_id()
        if not RUN_ID_RE.match(run_id):
            raise RunError(
                f"run id {run_id!r} is not usable as a folder name; use letters, digits, "
                "'_', '-' and '.' only"
            )
        store = RunStore(history=checkpoint_history, durability=durability)
        self.child_runs = _ChildRuns(self.registry, sleep)
        start = graph.start_node()
        if start is None:
            raise RunError("the pipeline has no single start node (shape=Mdiamond)")
        run_dir = base.resolve() / run_id
        self._data = RunData(
            graph=graph,
            workdir=workdir,
            run_id=run_id,
            run_dir=run_dir,
            events=EventBus(
                run_id, run_dir / EVENTS_FILE, kinds=extension_event_kinds(self.extensions)
            ),
            memory=RunMemory(next_node=start.id),
            pipeline_path=stored_pipeline_path(graph.path),
            source_hash=source_hash(graph.source),
            exit_ids=frozenset(n.id for n in graph.exit_candidates()),
        )
        self.events = self._data.events
        self._journal = Journal(
            self._data,
            store,
            self.extensions,
            wall_clock,
            after_record=lambda: self._executor.saved(),
        )
        timing = Timing(clock, sleep, rng or random.Random(), backoff or BackoffConfig())
        self._executor = NodeExecutor(_Host(self, self._data, self._journal), timing)
        if _restore is not None:
            lifecycle.restore(self._data, _restore)

    # ----------------------------------------------------------------- properties

    @property
    def graph(self) -> Graph:
        return self._data.graph

    @property
    def workdir(self) -> Path:
        """Where commands run and relative paths resolve (absolute)."""
        return self._data.workdir

    @property
    def context(self) -> Context:
        """The context the calling thread's node sees: a branch's clone inside a parallel
        branch, else the run's own."""
        return self._data.visible_context()

    def context_scope(self, context: Context) -> AbstractContextManager[None]:
        """Make ``context`` this thread's ``run.context`` (a parallel branch's extensions)."""
        return self._data.context_scope(context)

    @property
    def edited(self) -> bool:
        """Whether the run was carried over to an edited pipeline (:meth:`carry_over`): its
        executions of an edited node are stale."""
        return self._data.pipeline_file != PIPELINE_FILE

    @property
    def reuses(self) -> bool:
        """Whether executions are taken from earlier equal ones (``reuse``, or the graph's
        ``reuse="true"``)."""
        return self.reuse or parse_bool(self.graph.attrs.get("reuse", "")) is True

    @property
    def reuser(self) -> Reuser:
        """The run's reuse index: looked up before a node when the run :attr:`reuses`, and
        given every successful execution of a reusable node, so that a later run can reuse."""
        if self._reuser is None:
            from freshness_magic.engine.reuse import ReuseIndex, Reuser

            self._reuser = Reuser(ReuseIndex(self.workdir), self.graph.name)
        return self._reuser

    @property
    def state(self) -> RunState:
        return self._data.memory.state

    @property
    def next_node(self) -> str | None:
        """The node the next ``step()`` executes (None when finished)."""
        return self._data.memory.next_node

    @property
    def current_node(self) -> str | None:
        """The node executed last (or the gate waiting for an answer)."""
        return self._data.memory.current_node

    @property
    def pending_gate(self) -> Question | None:
        return self._data.memory.pending_gate

    @property
    def node_outcomes(self) -> dict[str, Outcome]:
        """Each executed node's last outcome (parallel branch nodes included)."""
        with self._data.lock:
            return dict(self._data.memory.outcomes)

    @property
    def completed_nodes(self) -> list[str]:
        """Executed nodes in order (a node executed twice appears twice)."""
        with self._data.lock:
            return list(self._data.memory.completed)

    @property
    def traces(self) -> list[Trace]:
        """What each execution read and wrote, in step order (:mod:`.trace`)."""
        with self._data.lock:
            return list(self._data.memory.traces)

    @property
    def node_retries(self) -> dict[str, int]:
        with self._data.lock:
            return dict(self._data.memory.retries)

    @property
    def run_dir(self) -> Path:
        return self._data.run_dir

    @property
    def run_id(self) -> str:
        return self._data.run_id

    @property
    def history(self) -> list[StepResult]:
        return list(self._data.history)

    @property
    def failure_reason(self) -> str:
        return self._data.memory.failure_reason

    @property
    def failed_node(self) -> str | None:
        """The node whose failure ended the run (None unless it failed at a node)."""
        return self._data.memory.failed_node

    @property
    def goal_gate_redirects(self) -> int:
        return self._data.memory.redirects

    def result(self) -> RunResult:
        """A snapshot of where the run stands."""
        return self._data.result()

    # ----------------------------------------------------------------- stepping

    def step(self) -> StepResult:
        """Execute the next node (with its retries) and route; see the module docstring."""
        self._journal.store.check_driver()
        memory = self._data.memory
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
        self.check_handler(node_id)
        memory.state = RunState.RUNNING
        memory.current_node = node_id
        memory.interrupted_node = None
        self._data.context.set("current_node", node_id)
        self._executor.rearm()
        with self._journal.store.writes():
            result = self._executor.execute(node, self._data.context)
            if result.interrupted:
                return self._interrupted(result)
            if result.outcome.status is StageStatus.WAITING:
                return self._enter_waiting(result)
            return self._complete(result)

    def run(self, to: str | None = None, max_steps: int | None = None) -> RunResult:
        """Step until the exit, a failure, a waiting gate, an interrupt, ``to`` (not executed)
        or ``max_steps``."""
        self._journal.store.check_driver()
        if to is not None and to not in self.graph.nodes:
            from freshness_magic.engine.validation.attrs import no_node

            raise RunError(f"run to: {no_node('the pipeline', to, self.graph.nodes)}")
        if to is not None and (inside := inside_branches(self.graph, to)) is not None:
            parallel, join = inside
            raise RunError(
                f"run to: '{to}' runs inside the branches of parallel node '{parallel}', where "
                f"a run does not stop; stop before '{parallel}' (the branches) or before "
                f"'{join}' (the fan-in after them)"
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
            self._data.memory.state = RunState.PAUSED
            self.events.emit(
                EventType.PIPELINE_PAUSED,
                self.next_node,
                {"reason": stop_reason, "next_node": self.next_node},
            )
            self.save_checkpoint()
        return self.result()

    # ----------------------------------------------------------------- going on after a stop

    def interrupt(self) -> None:
        """Stop the running node (thread-safe; Stop button, signal handler).

        A tool's process group is killed, a model call is closed; the node is recorded as
        interrupted, the run pauses there, and the next ``step()`` runs it again.
        """
        self._executor.interrupt()

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
        self._journal.store.check_driver()
        answered = recovery.answer(
            self._data, self._journal, node_id, choice, comment, timed_out=timed_out
        )
        if isinstance(answered, StepResult):  # kept for a child pipeline's gate
            return answered
        with self._journal.store.writes():
            return self._complete(answered)

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
        self._journal.store.check_driver()
        target = recovery.retry_target(self._data, node_id)
        self.check_handler(target)
        self.start()
        recovery.rearm(self._data, target)
        self.save_checkpoint()
        return target

    def branch_owner(self, node_id: str) -> str | None:
        """The parallel node whose latest step ran ``node_id`` in one of its branches, if any
        (from the parallel node's recorded ``parallel.results``)."""
        return recovery.branch_owner(self._data.memory, node_id)

    def declare_handler(self, node_id: str, type_name: str, runs_in: str) -> None:
        """Record in the run that ``node_id`` runs in the handler ``type_name`` (a front end's,
        registered by it), so a process without it refuses the node instead of running the
        node's own type (:mod:`.front_end`); ``runs_in`` says where it runs."""
        front_end.declare(self._data.context, node_id, type_name, runs_in)

    def check_handler(self, node_id: str) -> None:
        """RunError when ``node_id`` was declared to run in a handler this run's registry lacks."""
        elsewhere = front_end.runs_elsewhere(
            self._data.context.get(front_end.HANDLERS_KEY), node_id, self.registry
        )
        if elsewhere is not None:
            raise RunError(front_end.refusal(node_id, elsewhere))

    # ----------------------------------------------------------------- life of the run

    def start(self) -> None:
        """Begin the run (idempotent): run dir, manifest, graph keys, PIPELINE_STARTED.

        Called by the first ``step()``; call it earlier to take extension baselines at load time.
        """
        if self._data.started:
            return
        lifecycle.begin(self._data, self._journal)
        for ext in self.extensions:
            call_extension(ext, "on_run_start", self)
        self.save_checkpoint()

    def save_checkpoint(self) -> None:
        """Record the current state now and write a snapshot (``checkpoint.json``).

        Steps do this themselves; extensions call it after changing their own state between
        steps (an accepted baseline must survive a crash). Does nothing before the run starts.
        """
        self._journal.save_checkpoint()

    def close(self) -> None:
        """Release the run directory's driver lock (another process may then drive the run)
        and what the run was given to close with it (:meth:`close_with`)."""
        self._journal.store.release()
        while self._closers:
            self._closers.pop()()

    def close_with(self, closer: Callable[[], None]) -> None:
        """Call ``closer`` when the run closes (e.g. a cluster started for this run)."""
        self._closers.append(closer)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def carry_over(self, graph: Graph) -> CarryPlan:
        """Go on with the edited pipeline ``graph``, keeping the run (:mod:`.carry`).

        ``graph`` is validated first (the engine's rules, the extensions' and the handler
        types: ValidationError) and the plan made (RunError when the run cannot go on in it);
        either refusal changes nothing. Then the edited text is written to the run directory
        (``pipeline-<hash>.dot``), the memory changed as planned, a PIPELINE_EDITED event
        emitted and the whole state journaled, naming that file: a crash before the record
        leaves the run as it was, after it the edited one.
        """
        from freshness_magic.engine.carry import plan_carry_over
        from freshness_magic.engine.validation import validate_or_raise

        data = self._data
        self._journal.store.check_driver()
        if not graph.source:
            raise RunError("carry_over needs a pipeline with its DOT text (load it from text)")
        if self.state is RunState.RUNNING:
            raise RunError("the run is executing a node; carry it over when the step is done")
        if not data.started:
            raise RunError(
                "the run has not begun: nothing to keep; start it with the edited pipeline"
            )
        validate_or_raise(
            graph,
            extra_rules=[rule for ext in self.extensions for rule in extension_rules(ext)],
            known_types=self.registry.types(),
        )
        if graph.start_node() is None:
            raise RunError("the edited pipeline has no single start node (shape=Mdiamond)")
        with data.lock:
            plan = plan_carry_over(data.graph, graph, data.memory, data.context)
        self.start()
        self._reuser = None  # the index names the pipeline it was made for
        lifecycle.carry_over(data, self._journal, graph, plan)
        return plan

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
        if workdir is None:  # before the lock is taken: a refusal writes nothing
            lifecycle.check_stored_workdir(Path(run_dir), lifecycle.manifest_workdir(Path(run_dir)))
        found = lifecycle.reopen(
            Path(run_dir),
            graph,
            history=int(kwargs.pop("checkpoint_history", 50)),
            durability=kwargs.pop("durability", Durability.DURABLE),
        )
        data = found.loaded.data
        if workdir is None:
            workdir = str(data.get("workdir", "."))
            lifecycle.check_stored_workdir(found.folder, workdir)
        run = cls(
            found.graph,
            workdir=workdir,
            runs_dir=found.folder.parent,
            run_id=found.folder.name,
            extensions=extensions,
            _restore=data,
            **kwargs,
        )
        saved = lifecycle.resumed(run._data, run._journal, found)
        run._executor.resumed = True  # a model's session does not survive the process
        for ext in run.extensions:
            state = saved.get(ext.name)
            call_extension(ext, "on_resume", run, state if isinstance(state, dict) else None)
        if found.fresh:
            lifecycle.reap_survivors(run._data)
        return run

    # ----------------------------------------------------------------- how a step ends

    def _idle(self, reason: str) -> StepResult:
        memory = self._data.memory
        return StepResult(
            node_id=None,
            outcome=None,
            attempts=0,
            duration=0.0,
            next_node=memory.next_node,
            reason=reason,
            state=memory.state,
            executed=False,
        )

    def _interrupted(self, result: NodeRun) -> StepResult:
        """The node was stopped: pause the run at it, so the next step runs it again."""
        memory = self._data.memory
        memory.state = RunState.PAUSED
        memory.interrupted_node = result.node.id
        memory.next_node = result.node.id
        self.events.emit(
            EventType.PIPELINE_PAUSED,
            result.node.id,
            {"reason": f"'{result.node.id}' was interrupted", "next_node": result.node.id},
        )
        step = result.step_result(
            result.node.id,
            f"'{result.node.id}' was interrupted; step or run to execute it again",
            memory.state,
        )
        self._data.history.append(step)
        self._executor.node_finished(step)
        self.save_checkpoint()
        return step

    def _enter_waiting(self, result: NodeRun) -> StepResult:
        node = result.node
        question = result.outcome.question or gate_question(self.graph, node)
        memory = self._data.memory
        memory.pending_gate = question
        memory.state = RunState.WAITING
        memory.next_node = node.id
        self.events.emit(EventType.GATE_WAITING, node.id, {"question": question.to_dict()})
        return self._finish_step(
            result.step_result(
                node.id,
                f"waiting for an answer at gate '{node.id}': {question.text}",
                memory.state,
            )
        )

    def _complete(self, result: NodeRun) -> StepResult:
        """Apply the node's outcome (the executor's ``finish``), then end the run at an exit
        or route on."""
        node, outcome = result.node, result.outcome
        memory = self._data.memory
        memory.current_node = node.id
        self._executor.finish(result, self._data.context)
        step = EdgeStep.NONE
        dead_end = None
        if node.id in self._data.exit_ids:
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
            result.step_result(
                memory.next_node, reason, memory.state, edge_step=step, dead_end=dead_end
            )
        )

    def _route(self, node: Node, outcome: Outcome) -> tuple[str, EdgeStep, DeadEnd | None]:
        """Apply :func:`~.routing.route`'s decision to the run's state, with its event."""
        data = self._data
        memory = data.memory
        if outcome.status.is_success:
            memory.failure_redirects.pop(node.id, None)
        decision = route(
            data.graph,
            node,
            outcome,
            data.context,
            outcomes=memory.outcomes,  # no branch runs while the main path routes
            redirects=memory.redirects,
            exit_ids=data.exit_ids,
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
                    "limit": data.graph.max_goal_gate_redirects,
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
                reason = lifecycle.loop_restart(data, self._journal, decision.target, reason)
        return reason, decision.step, decision.dead_end

    def _finish_failed(self, reason: str, node_id: str | None) -> None:
        memory = self._data.memory
        memory.state = RunState.FAILED
        memory.failure_reason = reason
        memory.failed_node = node_id
        memory.next_node = None
        self.events.emit(EventType.PIPELINE_FAILED, node_id, {"reason": reason})

    def _finish_step(self, result: StepResult) -> StepResult:
        """Keep the step, report it to the extensions, journal it (a snapshot at rest)."""
        self._data.history.append(result)
        self._executor.node_finished(result)
        state = self._data.memory.state
        self._journal.save(rest=state.finished or state is RunState.WAITING)
        if self._reuser is not None:  # after the journal: the index names only saved steps
            self._reuser.flush()
        return result
