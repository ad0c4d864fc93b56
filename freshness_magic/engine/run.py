"""One run of a pipeline: its state and its stepping; ``step``, ``run``, ``answer``, ``resume``.

A :class:`Run` holds the pipeline, the context and a :class:`~.persistence.RunMemory` (outcomes,
completed nodes, next node, retries, pending gate, failure). ``step()`` hands the next node to
the :class:`~.execute.NodeExecutor` (the one path every node takes, parallel branches included),
routes with :func:`~.routing.route`, writes a checkpoint and returns a
:class:`~.state.StepResult`. ``run()`` is a loop of ``step()`` calls; there is no second code
path. Everything that happens is an event on ``run.events``.

Semantics (docs/ARCHITECTURE.md): failure routing, bounded visited-only goal gates judged
whenever the run is about to enter an exit, a dead end that completes the run with a
``dead_end`` event, RETRY-only retries (see :mod:`.routing` and :mod:`.execute`). A handler
outcome WAITING puts the run in WAITING with ``pending_gate``; :meth:`Run.answer` completes the
gate with the answer.

``Run`` is built in layers, each module one job and importing only the ones below it:
:mod:`.run_journal` (the run's fields, what the executor reports, journal records and snapshots),
:mod:`.run_lifecycle` (start, resume, ``loop_restart`` into a fresh run directory, close and the
driver lock), :mod:`.run_endings` (how a step ends: gate, exit, routing, failure),
:mod:`.run_recovery` (interrupt, gate answers, ``retry`` of a failed or interrupted run), and
this module (construction, properties, ``step`` and ``run``).
"""

from __future__ import annotations

import contextlib
import random
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from freshness_magic.atomicio import loads_bounded
from freshness_magic.engine.carry import CarryPlan
from freshness_magic.engine.checkpoint_format import MANIFEST_FILE
from freshness_magic.engine.context import Context
from freshness_magic.engine.dispatch import Dispatch
from freshness_magic.engine.events import EventBus, EventType
from freshness_magic.engine.execute import NodeExecutor, Timing
from freshness_magic.engine.extensions import (
    RunExtension,
    extension_event_kinds,
    extension_rules,
)
from freshness_magic.engine.handlers.base import ChildRun, HandlerRegistry
from freshness_magic.engine.model import Graph, parse_bool
from freshness_magic.engine.outcome import Outcome, Question, StageStatus
from freshness_magic.engine.persistence import (
    EVENTS_FILE,
    PIPELINE_FILE,
    RUN_ID_RE,
    RunMemory,
    new_run_id,
    source_hash,
    stored_pipeline_path,
    workdir_gone,
)
from freshness_magic.engine.reach import inside_branches
from freshness_magic.engine.retry import BackoffConfig
from freshness_magic.engine.run_lifecycle import reopen
from freshness_magic.engine.run_recovery import RunRecovery
from freshness_magic.engine.state import Durability, RunResult, RunState, StepResult
from freshness_magic.engine.store import RunStore
from freshness_magic.engine.trace import Trace
from freshness_magic.errors import FreshnessMagicError, RunError
from freshness_magic.pathsafety import check_state_path, read_state

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


class Run(RunRecovery):
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
        self._pipeline_path = stored_pipeline_path(graph.path)
        self._pipeline_file = PIPELINE_FILE
        self._exit_ids = frozenset(n.id for n in graph.exit_candidates())
        self._started = False
        self._history = []
        self.events = EventBus(
            self._run_id, self._run_dir / EVENTS_FILE, kinds=extension_event_kinds(self.extensions)
        )
        timing = Timing(clock, sleep, rng or random.Random(), backoff or BackoffConfig())
        self._executor = NodeExecutor(self, timing)
        if _restore is not None:
            self._restore_state(_restore)

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
    def edited(self) -> bool:
        """Whether the run was carried over to an edited pipeline (:meth:`carry_over`): its
        executions of an edited node are stale."""
        return self._pipeline_file != PIPELINE_FILE

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
    def traces(self) -> list[Trace]:
        """What each execution read and wrote, in step order (:mod:`.trace`)."""
        with self._lock:
            return list(self._memory.traces)

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
    def failed_node(self) -> str | None:
        """The node whose failure ended the run (None unless it failed at a node)."""
        return self._memory.failed_node

    @property
    def goal_gate_redirects(self) -> int:
        return self._memory.redirects

    # ----------------------------------------------------------------- stepping

    def step(self) -> StepResult:
        """Execute the next node (with its retries) and route; see the module docstring."""
        self._store.check_driver()
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
        self.check_handler(node_id)
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
        self._store.check_driver()
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
            self._memory.state = RunState.PAUSED
            self.events.emit(
                EventType.PIPELINE_PAUSED,
                self.next_node,
                {"reason": stop_reason, "next_node": self.next_node},
            )
            self.save_checkpoint()
        return self.result()

    def result(self) -> RunResult:
        """A snapshot of where the run stands."""
        with self._lock:
            return self._memory.result(self._run_dir, self._context)

    def carry_over(self, graph: Graph) -> CarryPlan:
        """Go on with the edited pipeline ``graph``, keeping the run (:mod:`.carry`).

        ``graph`` is validated first (the engine's rules, the extensions' and the handler
        types: ValidationError) and the plan made (RunError when the run cannot go on in it);
        either refusal changes nothing. Then the edited text is written to the run directory
        (``pipeline-<hash>.dot``), the memory changed as planned, a PIPELINE_EDITED event
        emitted and the whole state journaled, naming that file: a crash before the record
        leaves the run as it was, after it the edited one.
        """
        from freshness_magic.atomicio import write_atomic
        from freshness_magic.engine.carry import apply_carry_over, plan_carry_over
        from freshness_magic.engine.persistence import edited_pipeline_file, write_manifest_file
        from freshness_magic.engine.validation import validate_or_raise

        self._store.check_driver()
        if not graph.source:
            raise RunError("carry_over needs a pipeline with its DOT text (load it from text)")
        if self.state is RunState.RUNNING:
            raise RunError("the run is executing a node; carry it over when the step is done")
        if not self._started:
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
        with self._lock:
            plan = plan_carry_over(self.graph, graph, self._memory, self._context)
        self.start()
        name = edited_pipeline_file(graph.source)
        write_atomic(self._run_dir / name, graph.source)
        with self._lock:
            apply_carry_over(self._memory, plan)
            self.graph = graph
            self._source_hash = source_hash(graph.source)
            self._pipeline_file = name
            self._pipeline_path = stored_pipeline_path(graph.path)
            self._exit_ids = frozenset(n.id for n in graph.exit_candidates())
            self._reuser = None
        for key, value in graph.attrs.items():
            self._context.set(f"graph.{key}", value)
        self._context.set("graph.goal", graph.goal)
        self.events.emit(
            EventType.PIPELINE_EDITED, self._memory.next_node, {**plan.to_dict(), "pipeline": name}
        )
        self._store.rewrite_whole()
        self.save_checkpoint()
        write_atomic(self._run_dir / PIPELINE_FILE, graph.source)
        write_manifest_file(
            self._run_dir, graph, self._run_id, self.workdir, self._memory, self._pipeline_path
        )
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
            _check_stored_workdir(Path(run_dir), _manifest_workdir(Path(run_dir)))
        found = reopen(
            Path(run_dir),
            graph,
            history=int(kwargs.pop("checkpoint_history", 50)),
            durability=kwargs.pop("durability", Durability.DURABLE),
        )
        data = found.loaded.data
        if workdir is None:
            workdir = str(data.get("workdir", "."))
            _check_stored_workdir(found.folder, workdir)
        run = cls(
            found.graph,
            workdir=workdir,
            runs_dir=found.folder.parent,
            run_id=found.folder.name,
            extensions=extensions,
            _restore=data,
            **kwargs,
        )
        run._resumed(found)
        return run


def read_manifest(run_dir: Path) -> dict[str, Any]:
    """``manifest.json`` of ``run_dir``, read as the run's own files are (empty when it cannot
    be read)."""
    try:
        data = loads_bounded(read_state(run_dir / MANIFEST_FILE))
    except (OSError, ValueError, FreshnessMagicError):
        return {}
    return data if isinstance(data, dict) else {}


def _manifest_workdir(run_dir: Path) -> str | None:
    """The working directory ``manifest.json`` names (None when it cannot be read)."""
    found = read_manifest(run_dir).get("workdir")
    return found if isinstance(found, str) else None


def stored_workdir(run_dir: Path) -> str:
    """The working directory the run in ``run_dir`` was started in: its manifest's, else its
    state's (loading it; a warning for a damaged file says so)."""
    found = _manifest_workdir(run_dir)
    if found is None:
        from freshness_magic.engine.checkpoint import load_checkpoint

        data, _ = load_checkpoint(run_dir)
        found = str(data.get("workdir", "."))
    return found


def _check_stored_workdir(run_dir: Path, stored: str | None) -> None:
    """A RunError when the working directory the run was started in is gone (a project moved
    or deleted): resuming must not recreate the old folder and run its tools there."""
    if gone := workdir_gone(run_dir, stored):
        raise RunError(gone.replace("; ", "; nothing was run or written; ", 1))
