"""One run of a pipeline: the object that owns its state, and ``step()``/``run()``/``answer()``.

A :class:`Run` holds the pipeline, the context, every node's last outcome, the completed nodes in
order, the next node, retry counters, the pending human gate and the run directory. ``step()``
executes exactly one node (with its retry loop), applies the outcome to the context, chooses the
next node, writes a checkpoint and returns a :class:`StepResult`. ``run()`` is a loop of ``step()``
calls; there is no second code path. Everything that happens is an event on ``run.events``.

Semantics (DESIGN.md §4):

- routing is :func:`freshness_magic.engine.edges.select_edge`; after FAIL with no matching
  condition the run goes to the node's ``retry_target``, ``fallback_retry_target``, then the
  graph's, else it ends FAILED with the failure reason;
- RETRY outcomes consume attempts with backoff (the injected ``sleep``); exhausted retries give
  PARTIAL_SUCCESS with ``allow_partial=true``, else FAIL; handler exceptions become FAIL;
- goal gates are judged when the run is about to enter an exit node, over the nodes visited so
  far; an unsatisfied gate redirects to its retry target (node, node fallback, graph, graph
  fallback) at most ``max_goal_gate_redirects`` times, then the run fails;
- a handler outcome WAITING (a human gate with nobody to ask now) puts the run in WAITING with
  ``pending_gate``; :meth:`Run.answer` records the answer as the gate's outcome and routes on;
- an edge with ``loop_restart=true`` continues the run from the edge's target in a fresh run
  directory ``<run_id>-r<N>`` with fresh completed nodes, outcomes, retry and goal-gate counters
  (the context is carried over). The old directory gets ``restarted_as.json`` pointing at the new
  one, the new one's manifest has ``restarted_from``, and :meth:`Run.resume` follows the link;
- a node ``timeout`` is passed to the handler as ``StepEnv.deadline`` and enforced: a handler
  still running after it is abandoned (it runs on in a daemon thread; its outcome is ignored) and
  the attempt FAILs with "timed out after Ns".
"""

from __future__ import annotations

import hashlib
import json
import logging
import random
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Any

from freshness_magic.atomicio import ensure_ignored_dir, read_jsonl, write_atomic, write_json_atomic
from freshness_magic.engine.checkpoint import (
    CHECKPOINT_FORMAT,
    CheckpointWriter,
    EncodedMap,
    load_checkpoint,
    write_manifest,
)
from freshness_magic.engine.context import Context
from freshness_magic.engine.edges import select_edge
from freshness_magic.engine.events import EventBus, EventType, utc_now_iso
from freshness_magic.engine.extensions import RunExtension
from freshness_magic.engine.handlers.base import CodergenBackend, HandlerRegistry, StepEnv
from freshness_magic.engine.interviewers import Interviewer
from freshness_magic.engine.model import NODE_ID_RE, Graph, Node
from freshness_magic.engine.outcome import Outcome, Question, StageStatus
from freshness_magic.engine.retry import BackoffConfig, build_retry_policy
from freshness_magic.errors import CheckpointError, GateAnswerError, RunError

log = logging.getLogger(__name__)

RESTART_LINK = "restarted_as.json"
PIPELINE_FILE = "pipeline.dot"
"""The pipeline text, stored once per run directory so a resume needs no original file."""
EVENTS_FILE = "events.jsonl"
_RUN_ID_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*\Z")


class RunState(StrEnum):
    """Where a run is: not started, inside a step, at a gate, stopped early, or finished."""

    READY = "ready"
    RUNNING = "running"
    WAITING = "waiting"
    PAUSED = "paused"
    COMPLETED = "completed"
    FAILED = "failed"

    @property
    def finished(self) -> bool:
        return self in (RunState.COMPLETED, RunState.FAILED)


@dataclass
class StepResult:
    """What one ``step()`` (or ``answer()``) did."""

    node_id: str | None
    """The node executed (or answered); None when nothing could be executed."""
    outcome: Outcome | None
    attempts: int
    duration: float
    """Seconds spent executing the node (retries and backoff included)."""
    next_node: str | None
    reason: str
    """Why the run goes to ``next_node`` (edge selection, failure routing) or why it stopped."""
    state: RunState
    """The run's state after this step."""
    executed: bool = True
    """False when the step executed nothing (run finished, or waiting at a gate)."""
    edge_step: str = ""
    """The edge-selection step that decided (``condition``, ``preferred_label``, ...)."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "node_id": self.node_id,
            "outcome": self.outcome.to_dict() if self.outcome is not None else None,
            "attempts": self.attempts,
            "duration": self.duration,
            "next_node": self.next_node,
            "reason": self.reason,
            "state": self.state.value,
            "executed": self.executed,
            "edge_step": self.edge_step,
        }

    def __str__(self) -> str:
        if not self.executed or self.outcome is None:
            return self.reason
        status = self.outcome.status.value
        nxt = f" -> {self.next_node}" if self.next_node else ""
        return f"{self.node_id}: {status} in {self.duration:.2f}s{nxt} ({self.reason})"


def _status_word(state: RunState) -> str:
    if state is RunState.COMPLETED:
        return "completed"
    if state is RunState.FAILED:
        return "failed"
    if state is RunState.WAITING:
        return "waiting"
    return "paused"


@dataclass
class RunResult:
    """Where a run stands after ``run()``; ``to_dict`` is the CLI's ``--json`` output."""

    state: RunState
    run_dir: Path
    completed_nodes: list[str]
    node_outcomes: dict[str, Outcome]
    next_node: str | None
    pending_gate: Question | None
    context: dict[str, Any]
    failure_reason: str = ""

    @property
    def status(self) -> str:
        """``completed``, ``failed``, ``waiting`` or ``paused``."""
        return _status_word(self.state)

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "run_dir": str(self.run_dir),
            "completed_nodes": list(self.completed_nodes),
            "node_outcomes": {
                node_id: {
                    "status": o.status.value,
                    "notes": o.notes,
                    "failure_reason": o.failure_reason,
                }
                for node_id, o in self.node_outcomes.items()
            },
            "next_node": self.next_node,
            "pending_gate": (
                self.pending_gate.to_dict() if self.pending_gate is not None else None
            ),
            "context": self.context,
            "failure_reason": self.failure_reason or None,
        }


def source_hash(source: str) -> str:
    """Identity of a pipeline text, to check that a checkpoint belongs to a pipeline."""
    return hashlib.sha256(source.encode("utf-8")).hexdigest()


def new_run_id() -> str:
    """``20260122T101500-1a2b3c``: sortable by start time, unique."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
    return f"{stamp}-{uuid.uuid4().hex[:6]}"


def _fail(reason: str, **kw: Any) -> Outcome:
    return Outcome(status=StageStatus.FAIL, failure_reason=reason, **kw)


def _outcome_record(outcome: Outcome) -> dict[str, Any]:
    """An outcome for the checkpoint without its empty fields (they come back as defaults)."""
    return {k: v for k, v in outcome.to_dict().items() if v or k == "outcome"}


def _normalised(node: Node, outcome: Outcome) -> Outcome:
    """An outcome whose status is a StageStatus (custom code may pass ``"fail"`` as a string)."""
    if isinstance(outcome.status, StageStatus):
        return outcome
    try:
        outcome.status = StageStatus.parse(str(outcome.status))
    except ValueError as exc:
        return _fail(f"node '{node.id}' returned an invalid outcome: {exc}")
    return outcome


class Run:
    """A pipeline run you can step, run, answer, checkpoint and resume.

    ``registry`` defaults to the built-in handlers driven by ``backend`` (codergen) and
    ``interviewer`` (human gates; None means gates make the run WAIT); with your own registry
    those two are not used. ``clock``, ``wall_clock``, ``sleep`` and ``rng`` are injectable so
    tests run instantly and deterministically. ``checkpoint_history`` bounds the
    ``checkpoints/`` folder. The run directory is ``runs_dir/run_id`` (default
    ``workdir/.freshness/runs/<timestamp>-<hex>``).
    """

    def __init__(
        self,
        graph: Graph,
        *,
        workdir: str | Path = ".",
        runs_dir: str | Path | None = None,
        run_id: str | None = None,
        registry: HandlerRegistry | None = None,
        backend: CodergenBackend | None = None,
        interviewer: Interviewer | None = None,
        extensions: Iterable[RunExtension] = (),
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
        rng: random.Random | None = None,
        checkpoint_history: int = 50,
        backoff: BackoffConfig | None = None,
        _restore: dict[str, Any] | None = None,
    ) -> None:
        from freshness_magic.engine.validation import validate_or_raise

        if registry is None:
            from freshness_magic.engine.handlers.builtin import default_registry

            registry = default_registry(backend=backend, interviewer=interviewer)
        validate_or_raise(graph, known_types=registry.types())
        self.registry = registry
        self.graph = graph
        self.workdir = Path(workdir).resolve()
        base = Path(runs_dir) if runs_dir is not None else self.workdir / ".freshness" / "runs"
        self._run_id = run_id or new_run_id()
        if not _RUN_ID_RE.match(self._run_id):
            raise RunError(
                f"run id {self._run_id!r} is not usable as a folder name; use letters, digits, "
                "'_', '-' and '.' only"
            )
        self._run_dir = base.resolve() / self._run_id
        self.extensions: list[RunExtension] = list(extensions)
        self._clock = clock
        self._wall_clock = wall_clock
        self._sleep = sleep
        self._rng = rng or random.Random()
        self._backoff = backoff or BackoffConfig()
        self._history_size = checkpoint_history

        start = graph.start_node()
        if start is None:
            raise RunError("the pipeline has no single start node (shape=Mdiamond)")
        self.context = Context()
        self._state = RunState.READY
        self._next_node: str | None = start.id
        self._current_node: str | None = None
        self._completed: list[str] = []
        self._outcomes: dict[str, Outcome] = {}
        self._records = EncodedMap()
        """Checkpoint form of each outcome, kept so a step does not re-encode every outcome."""
        self._source_hash = source_hash(graph.source)
        self._exit_ids = frozenset(n.id for n in graph.exit_candidates())
        self._retries: dict[str, int] = {}
        self._pending_gate: Question | None = None
        self._redirects = 0
        self._failure_reason = ""
        self._restarts = 0
        self._restarted_from: str | None = None
        self._started = False
        self._history: list[StepResult] = []
        self.events = EventBus(self._run_id, self._run_dir / EVENTS_FILE)
        self._writer: CheckpointWriter | None = None
        if _restore is not None:
            self._restore(_restore)

    # ----------------------------------------------------------------- properties

    @property
    def state(self) -> RunState:
        return self._state

    @property
    def next_node(self) -> str | None:
        """The node the next ``step()`` executes (None when finished)."""
        return self._next_node

    @property
    def current_node(self) -> str | None:
        """The node executed last (or the gate waiting for an answer)."""
        return self._current_node

    @property
    def pending_gate(self) -> Question | None:
        return self._pending_gate

    @property
    def node_outcomes(self) -> dict[str, Outcome]:
        """Each executed node's last outcome."""
        return dict(self._outcomes)

    @property
    def completed_nodes(self) -> list[str]:
        """Executed nodes in order (a node executed twice appears twice)."""
        return list(self._completed)

    @property
    def node_retries(self) -> dict[str, int]:
        return dict(self._retries)

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
        return self._failure_reason

    @property
    def goal_gate_redirects(self) -> int:
        return self._redirects

    # ----------------------------------------------------------------- lifecycle

    def start(self) -> None:
        """Begin the run (idempotent): run dir, manifest, graph keys, PIPELINE_STARTED.

        Called by the first ``step()``; call it earlier to take extension baselines at load time.
        """
        if self._started:
            return
        if (self._run_dir / "checkpoint.json").exists():
            raise RunError(
                f"run directory {self._run_dir} already holds a run; resume it with "
                "Run.resume(run_dir) or start with another run_id"
            )
        self._started = True
        if self._run_dir.parent == self.workdir / ".freshness" / "runs":
            ensure_ignored_dir(self.workdir / ".freshness")
        self._run_dir.mkdir(parents=True, exist_ok=True)
        self._write_manifest()
        self.context.set("graph.goal", self.graph.goal)
        for key, value in self.graph.attrs.items():
            self.context.set(f"graph.{key}", value)
        self.events.emit(
            EventType.PIPELINE_STARTED,
            data={"name": self.graph.name, "goal": self.graph.goal, "run_dir": str(self.run_dir)},
        )
        for ext in self.extensions:
            self._call_ext(ext, "on_run_start", self)
        self.save_checkpoint()

    def step(self) -> StepResult:
        """Execute the next node (with its retries) and route; see the module docstring."""
        if self._state.finished:
            return self._idle(f"the run has already {self._state.value}; nothing to step")
        if self._state is RunState.WAITING:
            gate = self._pending_gate
            where = gate.node_id if gate is not None else self._next_node
            return self._idle(
                f"waiting at gate '{where}': answer it first (answer(node_id, choice))"
            )
        self.start()
        node_id = self._next_node
        if node_id is None or node_id not in self.graph.nodes:
            self._finish_failed(f"next node {node_id!r} does not exist in the pipeline")
            return self._idle(self._failure_reason)
        node = self.graph.nodes[node_id]
        self._state = RunState.RUNNING
        self._current_node = node_id
        self.context.set("current_node", node_id)
        self.events.emit(
            EventType.STAGE_STARTED,
            node_id,
            {"handler_type": node.handler_type, "index": len(self._completed)},
        )
        started = self._clock()
        outcome, attempts = self._execute_with_retry(node)
        duration = self._clock() - started
        if outcome.status is StageStatus.WAITING:
            return self._enter_waiting(node, outcome, attempts, duration)
        return self._complete_node(node, outcome, attempts, duration)

    def run(self, to: str | None = None, max_steps: int | None = None) -> RunResult:
        """Step until the exit, a failure, a waiting gate, ``to`` (not executed) or max_steps."""
        if to is not None and to not in self.graph.nodes:
            raise RunError(
                f"cannot run to node '{to}': it is not in the pipeline; nodes: "
                + ", ".join(self.graph.nodes)
            )
        if max_steps is not None and max_steps < 0:
            raise RunError(f"max_steps must be 0 or more, got {max_steps}")
        steps = 0
        stop_reason = ""
        while not self._state.finished and self._state is not RunState.WAITING:
            if to is not None and self._next_node == to:
                stop_reason = f"stopped before node '{to}'"
                break
            if max_steps is not None and steps >= max_steps:
                stop_reason = f"stopped after {steps} step(s)"
                break
            self.step()
            steps += 1
        if stop_reason:
            self.start()
            self._state = RunState.PAUSED
            self.events.emit(
                EventType.PIPELINE_PAUSED,
                self._next_node,
                {"reason": stop_reason, "next_node": self._next_node},
            )
            self.save_checkpoint()
        return self.result()

    def answer(
        self, node_id: str, choice: str | None = None, comment: str | None = None
    ) -> StepResult:
        """Answer the waiting gate ``node_id`` by key, label or target id (None: its default).

        A ``comment`` is set as ``human.gate.comment`` in the context and kept in the answer's
        notes (and so in the gate's evidence record).
        """
        from freshness_magic.engine.handlers.human import answer_outcome, match_choice

        gate = self._pending_gate
        if self._state is not RunState.WAITING or gate is None:
            raise RunError(
                f"no human gate is waiting (the run is {self._state.value}); "
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
        node = self.graph.nodes[node_id]
        self._pending_gate = None
        self._state = RunState.RUNNING
        outcome = answer_outcome(gate, picked)
        if comment:
            outcome.context_updates["human.gate.comment"] = comment
            outcome.notes = f"{outcome.notes}; comment: {comment}"
        self.events.emit(
            EventType.GATE_ANSWERED,
            node_id,
            {"answer": wanted, "choice": picked.to_dict(), "comment": comment or ""},
        )
        return self._complete_node(node, outcome, 1, 0.0)

    def result(self) -> RunResult:
        """A snapshot of where the run stands."""
        return RunResult(
            state=self._state,
            run_dir=self._run_dir,
            completed_nodes=list(self._completed),
            node_outcomes=dict(self._outcomes),
            next_node=self._next_node,
            pending_gate=self._pending_gate,
            context=self.context.snapshot(),
            failure_reason=self._failure_reason,
        )

    # ----------------------------------------------------------------- execution

    def _idle(self, reason: str) -> StepResult:
        return StepResult(
            node_id=None,
            outcome=None,
            attempts=0,
            duration=0.0,
            next_node=self._next_node,
            reason=reason,
            state=self._state,
            executed=False,
        )

    def _execute_with_retry(self, node: Node) -> tuple[Outcome, int]:
        policy = build_retry_policy(node, self.graph, self._backoff)
        retries = 0
        counter = f"internal.retry_count.{node.id}"
        self._retries.pop(node.id, None)
        if counter in self.context:
            self.context.set(counter, 0)
        attempt = 1
        while True:
            outcome = self._attempt(node, attempt)
            if outcome.status is not StageStatus.RETRY:
                return outcome, attempt
            if attempt >= policy.max_attempts:
                return self._exhausted(node, outcome, attempt), attempt
            retries += 1
            self._retries[node.id] = retries
            self.context.set(counter, retries)
            delay = policy.backoff.delay_for_attempt(attempt, self._rng)
            self.events.emit(
                EventType.STAGE_RETRYING,
                node.id,
                {
                    "attempt": attempt,
                    "next_attempt": attempt + 1,
                    "max_attempts": policy.max_attempts,
                    "delay": delay,
                    "failure_reason": outcome.failure_reason,
                },
            )
            self._sleep(delay)
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
        return _fail(
            f"max retries exceeded after {attempts} attempt(s): {why}",
            context_updates=dict(last.context_updates),
            notes=last.notes,
        )

    def _attempt(self, node: Node, attempt: int) -> Outcome:
        started = self._clock()
        outcome: Outcome | None = None
        try:
            for ext in self.extensions:
                replaced = ext.before_execute(self, node, attempt)
                if replaced is not None:
                    outcome = replaced
                    break
            if outcome is None:
                outcome = self._call_handler(node, attempt)
            for ext in self.extensions:
                outcome = ext.after_execute(self, node, outcome, attempt, started)
        except Exception as exc:
            log.exception("run extension failed at node %s", node.id)
            outcome = _fail(f"run extension error at node '{node.id}': {type(exc).__name__}: {exc}")
        return _normalised(node, outcome)

    def _call_handler(self, node: Node, attempt: int) -> Outcome:
        try:
            handler = self.registry.resolve(node)
        except LookupError as exc:
            return _fail(str(exc))
        timeout = node.timeout
        env = StepEnv(
            graph=self.graph,
            run_dir=self._run_dir,
            workdir=self.workdir,
            attempt=attempt,
            emit=lambda kind, data: self._handler_event(node.id, kind, data),
            registry=self.registry,
            deadline=self._clock() + timeout if timeout else None,
            sleep=self._sleep,
        )
        status_file = self._run_dir / "nodes" / node.id / "status.json"
        before = status_file.stat().st_mtime_ns if status_file.exists() else None
        result: object
        try:
            if timeout:
                result = self._call_with_timeout(handler.execute, node, env, timeout)
            else:
                result = handler.execute(node, self.context, env)
        except _TimedOut:
            return _fail(f"timed out after {timeout:g}s")
        except Exception as exc:
            return _fail(
                f"handler {node.handler_type!r} raised {type(exc).__name__}: {exc}",
                notes=f"node '{node.id}' raised an exception",
            )
        if isinstance(result, Outcome):
            return result
        return self._outcome_without_return(node, result, status_file, before)

    def _outcome_without_return(
        self, node: Node, result: object, status_file: Path, before: int | None
    ) -> Outcome:
        """A handler returned no Outcome: use a status.json it wrote, or ``auto_status``."""
        if status_file.exists() and status_file.stat().st_mtime_ns != before:
            try:
                data = json.loads(status_file.read_text(encoding="utf-8"))
                return Outcome.from_dict(data)
            except (OSError, ValueError, TypeError, KeyError) as exc:
                return _fail(f"status file {status_file} is not valid: {exc}")
        if node.auto_status:
            return Outcome(notes="auto-status: handler completed without writing status")
        return _fail(
            f"the handler of node '{node.id}' returned {type(result).__name__} instead of an "
            "Outcome and wrote no status.json; return an Outcome or set auto_status=true"
        )

    def _call_with_timeout(
        self,
        fn: Callable[[Node, Context, StepEnv], Outcome],
        node: Node,
        env: StepEnv,
        timeout: float,
    ) -> object:
        box: dict[str, object] = {}

        def target() -> None:
            try:
                box["result"] = fn(node, self.context, env)
            except BaseException as exc:
                box["error"] = exc

        worker = threading.Thread(target=target, name=f"node-{node.id}", daemon=True)
        worker.start()
        worker.join(timeout)
        if worker.is_alive():
            raise _TimedOut
        error = box.get("error")
        if isinstance(error, BaseException):
            raise error
        return box.get("result")

    def _handler_event(self, node_id: str, kind: str, data: dict[str, Any]) -> None:
        self.events.emit(kind, node_id, data)

    # ----------------------------------------------------------------- outcomes and routing

    def _enter_waiting(
        self, node: Node, outcome: Outcome, attempts: int, duration: float
    ) -> StepResult:
        question = outcome.question
        if question is None:
            from freshness_magic.engine.handlers.human import gate_question

            question = gate_question(self.graph, node)
        self._pending_gate = question
        self._state = RunState.WAITING
        self._next_node = node.id
        self.events.emit(EventType.GATE_WAITING, node.id, {"question": question.to_dict()})
        result = StepResult(
            node_id=node.id,
            outcome=outcome,
            attempts=attempts,
            duration=duration,
            next_node=node.id,
            reason=f"waiting for an answer at gate '{node.id}': {question.text}",
            state=self._state,
        )
        return self._finish_step(result)

    def _complete_node(
        self, node: Node, outcome: Outcome, attempts: int, duration: float
    ) -> StepResult:
        self._current_node = node.id
        self._completed.append(node.id)
        self._outcomes[node.id] = outcome
        self._records.set(node.id, _outcome_record(outcome))
        self.context.apply_updates(outcome.context_updates)
        self.context.set("outcome", outcome.status.value)
        if outcome.preferred_label:
            self.context.set("preferred_label", outcome.preferred_label)
        self._write_node_status(node.id, outcome)
        payload = {
            "status": outcome.status.value,
            "notes": outcome.notes,
            "failure_reason": outcome.failure_reason,
            "duration": duration,
            "attempts": attempts,
            "index": len(self._completed) - 1,
        }
        failed = outcome.status is StageStatus.FAIL
        self.events.emit(
            EventType.STAGE_FAILED if failed else EventType.STAGE_COMPLETED, node.id, payload
        )
        step = ""
        if node.id in self._exit_ids:
            self._next_node = None
            if outcome.status.is_success or outcome.status is StageStatus.SKIPPED:
                reason = f"reached exit node '{node.id}'"
                self._state = RunState.COMPLETED
                self.events.emit(
                    EventType.PIPELINE_COMPLETED,
                    node.id,
                    {"completed_nodes": len(self._completed)},
                )
            else:
                reason = f"exit node '{node.id}' {outcome.status.value}: {outcome.failure_reason}"
                self._finish_failed(reason, node.id)
        else:
            target, reason, step, restart = self._route(node, outcome)
            self._next_node = target
            if target is None:
                self._finish_failed(reason, node.id)
            else:
                self._state = RunState.PAUSED
                self.events.emit(
                    EventType.EDGE_SELECTED,
                    node.id,
                    {"target": target, "reason": reason, "step": step},
                )
                if restart:
                    reason = self._loop_restart(target, reason)
        result = StepResult(
            node_id=node.id,
            outcome=outcome,
            attempts=attempts,
            duration=duration,
            next_node=self._next_node,
            reason=reason,
            state=self._state,
            edge_step=step,
        )
        return self._finish_step(result)

    def _route(self, node: Node, outcome: Outcome) -> tuple[str | None, str, str, bool]:
        """(next node or None, reason, edge-selection step, loop_restart)."""
        selection = select_edge(self.graph, node.id, outcome, self.context)
        join = self._parallel_join(node, outcome)
        if join is not None and selection.step != "condition":
            why = f"parallel branches of '{node.id}' joined at fan-in '{join}'"
            return join, why, "fan_in", False
        edge = selection.edge
        if edge is None:
            if outcome.status is StageStatus.FAIL:
                chain = self._retry_chain(node)
                if chain:
                    label, target = chain[0]
                    why = f"{selection.reason}; failure routed to {label} '{target}'"
                    return target, why, "retry_target", False
                why = outcome.failure_reason or "no failure reason given"
                return (
                    None,
                    f"node '{node.id}' failed ({why}); no edge condition matched the failure and "
                    "no retry_target/fallback_retry_target is set on the node or the graph",
                    "none",
                    False,
                )
            return (
                None,
                f"node '{node.id}' is not an exit node and no outgoing edge is eligible: "
                f"{selection.reason}",
                "none",
                False,
            )
        if edge.target in self._exit_ids:
            gate_target, gate_reason = self._check_goal_gates(edge.target)
            if gate_target is None and gate_reason:
                return None, gate_reason, "goal_gate", False
            if gate_target is not None:
                return gate_target, gate_reason, "goal_gate", False
        return edge.target, selection.reason, selection.step, edge.loop_restart

    def _parallel_join(self, node: Node, outcome: Outcome) -> str | None:
        """After a parallel node that did not fail: the fan-in node its outcome suggests.

        The branches already ran inside the parallel handler, so the run continues at the
        fan-in rather than following a fan-out edge into a branch again (spec §4.8/§4.9); an
        edge whose condition holds (e.g. ``outcome=partial_success``) still wins.
        """
        if node.handler_type != "parallel" or outcome.status is StageStatus.FAIL:
            return None
        for target in outcome.suggested_next_ids:
            candidate = self.graph.nodes.get(target)
            if candidate is not None and candidate.handler_type == "parallel.fan_in":
                return target
        return None

    def _retry_chain(self, node: Node) -> list[tuple[str, str]]:
        """Existing retry targets in order: node, node fallback, graph, graph fallback."""
        chain = [
            (f"retry_target of '{node.id}'", node.retry_target),
            (f"fallback_retry_target of '{node.id}'", node.fallback_retry_target),
            ("the graph's retry_target", self.graph.retry_target),
            ("the graph's fallback_retry_target", self.graph.fallback_retry_target),
        ]
        return [(label, t) for label, t in chain if t and t in self.graph.nodes]

    def _check_goal_gates(self, exit_id: str) -> tuple[str | None, str]:
        """(None, "") when every visited goal gate succeeded; else a redirect or a failure."""
        for node_id, outcome in self._outcomes.items():
            node = self.graph.nodes.get(node_id)
            if node is None or not node.goal_gate or outcome.status.is_success:
                continue
            unsatisfied = (
                f"goal gate '{node_id}' is unsatisfied (last outcome {outcome.status.value})"
            )
            limit = self.graph.max_goal_gate_redirects
            if self._redirects >= limit:
                return None, (
                    f"{unsatisfied} and the run already redirected {self._redirects} time(s) "
                    f"(max_goal_gate_redirects={limit}); the pipeline cannot reach '{exit_id}'"
                )
            chain = self._retry_chain(node)
            if not chain:
                return None, (
                    f"{unsatisfied} and no retry target is set; add retry_target to "
                    f"'{node_id}' or to the graph"
                )
            label, target = chain[0]
            self._redirects += 1
            self.events.emit(
                EventType.GOAL_GATE_REDIRECT,
                node_id,
                {"target": target, "redirects": self._redirects, "limit": limit},
            )
            return target, (
                f"{unsatisfied}; redirected to {label} '{target}' "
                f"(redirect {self._redirects} of {limit})"
            )
        return None, ""

    def _finish_failed(self, reason: str, node_id: str | None = None) -> None:
        self._state = RunState.FAILED
        self._failure_reason = reason
        self._next_node = None
        self.events.emit(EventType.PIPELINE_FAILED, node_id, {"reason": reason})

    def _finish_step(self, result: StepResult) -> StepResult:
        self._history.append(result)
        for ext in self.extensions:
            self._call_ext(ext, "on_step_finished", self, result)
        self.save_checkpoint()
        return result

    def _loop_restart(self, target: str, reason: str) -> str:
        """Continue in a fresh run directory linked from the old one; returns the new reason."""
        self.save_checkpoint()
        old_dir, old_id = self._run_dir, self._run_id
        self._restarts += 1
        base_id = re.sub(r"-r\d+\Z", "", old_id)
        new_id = f"{base_id}-r{self._restarts}"
        new_dir = old_dir.parent / new_id
        self.events.emit(
            EventType.PIPELINE_RESTARTED,
            target,
            {"new_run_dir": str(new_dir), "new_run_id": new_id, "target": target},
        )
        write_json_atomic(
            old_dir / RESTART_LINK,
            {"run_id": new_id, "run_dir": str(new_dir), "target": target},
        )
        self._run_id, self._run_dir = new_id, new_dir
        self._restarted_from = str(old_dir)
        self._completed, self._outcomes, self._retries = [], {}, {}
        self._records.clear()
        self._redirects = 0
        self._writer = None
        self.events.rebind(new_id, new_dir / EVENTS_FILE)
        new_dir.mkdir(parents=True, exist_ok=True)
        self._write_manifest()
        self.events.emit(
            EventType.PIPELINE_RESTARTED,
            target,
            {"restarted_from": str(old_dir), "old_run_id": old_id, "target": target},
        )
        return f"{reason}; loop_restart: continuing at '{target}' in {new_dir}"

    # ----------------------------------------------------------------- persistence

    def _write_node_status(self, node_id: str, outcome: Outcome) -> None:
        if not NODE_ID_RE.match(node_id):
            log.warning("node id %r is not a safe folder name; status.json not written", node_id)
            return
        folder = self._run_dir / "nodes" / node_id
        write_json_atomic(folder / "status.json", outcome.to_dict())

    def _write_manifest(self) -> None:
        if self.graph.source:
            write_atomic(self._run_dir / PIPELINE_FILE, self.graph.source)
        write_manifest(
            self._run_dir,
            {
                "name": self.graph.name,
                "goal": self.graph.goal,
                "run_id": self._run_id,
                "started_at": utc_now_iso(),
                "pipeline_path": self.graph.path,
                "pipeline_hash": self._source_hash,
                "workdir": str(self.workdir),
                "restarted_from": self._restarted_from,
            },
        )

    def _checkpoint_payload(self) -> dict[str, Any]:
        """Everything a resume needs (§5.3 fields plus the engine's own), ready to encode."""
        now = self._wall_clock()
        return {
            "format": CHECKPOINT_FORMAT,
            "timestamp": datetime.fromtimestamp(now, UTC).isoformat(timespec="milliseconds"),
            "run_id": self._run_id,
            "state": self._state.value,
            "current_node": self._current_node,
            "next_node": self._next_node,
            "completed_nodes": list(self._completed),
            "node_retries": dict(self._retries),
            "node_outcomes": self._records,
            "context": self.context.snapshot(),
            "logs": self.context.logs,
            "pending_gate": (
                self._pending_gate.to_dict() if self._pending_gate is not None else None
            ),
            "goal_gate_redirects": self._redirects,
            "failure_reason": self._failure_reason,
            "restarts": self._restarts,
            "restarted_from": self._restarted_from,
            "workdir": str(self.workdir),
            "event_seq": self.events.seq,
            "pipeline": {
                "name": self.graph.name,
                "path": self.graph.path,
                "sha256": self._source_hash,
                "source_file": PIPELINE_FILE if self.graph.source else None,
            },
            "extensions": {ext.name: self._ext_state(ext) for ext in self.extensions},
        }

    def save_checkpoint(self) -> None:
        """Write the current state as the latest checkpoint now.

        Steps do this themselves; extensions call it after changing their own state between
        steps (an accepted baseline must survive a crash). Does nothing before the run starts.
        """
        if not self._started:
            return
        if self._writer is None:
            self._writer = CheckpointWriter(self._run_dir, history=self._history_size)
        path = self._writer.save(self._checkpoint_payload())
        self.events.emit(EventType.CHECKPOINT_SAVED, self._current_node, {"path": str(path)})

    def _ext_state(self, ext: RunExtension) -> dict[str, Any]:
        try:
            return dict(ext.checkpoint_state())
        except Exception:
            log.exception("run extension %r failed in checkpoint_state; stored empty", ext.name)
            return {}

    @staticmethod
    def _call_ext(ext: RunExtension, hook: str, *args: Any) -> None:
        try:
            getattr(ext, hook)(*args)
        except Exception:
            log.exception("run extension %r raised in %s; skipped", getattr(ext, "name", ext), hook)

    def _restore(self, data: dict[str, Any]) -> None:
        try:
            state = RunState(str(data.get("state", "paused")))
            outcomes = {
                str(k): Outcome.from_dict(v) for k, v in dict(data["node_outcomes"]).items()
            }
            gate = data.get("pending_gate")
            self._pending_gate = Question.from_dict(gate) if isinstance(gate, dict) else None
            self._completed = [str(n) for n in data["completed_nodes"]]
            self._retries = {str(k): int(v) for k, v in dict(data["node_retries"]).items()}
            self.context = Context(dict(data["context"]), [str(x) for x in data.get("logs", [])])
            nxt = data.get("next_node")
            cur = data.get("current_node")
            self._redirects = int(data.get("goal_gate_redirects", 0))
            self._restarts = int(data.get("restarts", 0))
        except (KeyError, TypeError, ValueError) as exc:
            raise CheckpointError(
                f"checkpoint of {self._run_dir} has an invalid field ({exc}); it was not written "
                "by this version of freshness_magic"
            ) from exc
        self._outcomes = outcomes
        self._records.clear()
        for key, restored in outcomes.items():
            self._records.set(key, _outcome_record(restored))
        self._next_node = str(nxt) if nxt is not None else None
        self._current_node = str(cur) if cur is not None else None
        self._failure_reason = str(data.get("failure_reason") or "")
        self._restarted_from = data.get("restarted_from")
        if state in (RunState.RUNNING, RunState.READY):
            state = RunState.PAUSED
        if state is RunState.WAITING and self._pending_gate is None:
            state = RunState.PAUSED
        self._state = state
        if self._next_node is not None and self._next_node not in self.graph.nodes:
            raise CheckpointError(
                f"checkpoint of {self._run_dir} continues at node '{self._next_node}', which the "
                "pipeline does not have; resume with the pipeline the run was started with"
            )
        self._started = True
        last_seq = int(data.get("event_seq", 0))
        for record in read_jsonl(self._run_dir / EVENTS_FILE):
            last_seq = max(last_seq, int(record.get("seq", 0)))
        self.events.rebind(self._run_id, self._run_dir / EVENTS_FILE, seq=last_seq)

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
        data, used = load_checkpoint(folder, on_corrupt=lambda p, why: damaged.append((p, why)))
        pipeline = data.get("pipeline") or {}
        stored_hash = str(pipeline.get("sha256") or "")
        if graph is None:
            graph = _stored_pipeline(folder, pipeline, used)
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
        run._writer = CheckpointWriter(
            run._run_dir, history=run._history_size, keep=tuple(p for p, _ in damaged)
        )
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
            cls._call_ext(ext, "on_resume", run, state if isinstance(state, dict) else None)
        return run


def _stored_pipeline(folder: Path, pipeline: dict[str, Any], used: Path) -> Graph:
    """The pipeline a run was started with, from ``pipeline.dot`` in its run directory."""
    from freshness_magic.engine.pipeline import load_pipeline

    if not pipeline.get("source_file"):
        raise CheckpointError(
            f"checkpoint {used} has no stored pipeline (the run was started from a Graph built in "
            "code); pass graph= to resume it"
        )
    stored = folder / str(pipeline["source_file"])
    try:
        source = stored.read_text(encoding="utf-8")
    except OSError as exc:
        raise CheckpointError(
            f"cannot read the run's stored pipeline {stored} ({exc.strerror or exc}); pass graph= "
            "to resume with the original pipeline"
        ) from exc
    if source_hash(source) != pipeline.get("sha256"):
        raise CheckpointError(
            f"the stored pipeline {stored} does not match its checkpoint {used} (hash differs); "
            "pass graph= to resume with the original pipeline"
        )
    path = pipeline.get("path")
    return load_pipeline(source, path=str(path) if path else None)


class _TimedOut(Exception):
    """Internal: a handler ran past its node's timeout."""


def follow_restarts(run_dir: Path) -> Path:
    """The directory a run continued in after ``loop_restart`` (``run_dir`` if none)."""
    seen: set[Path] = set()
    current = run_dir
    while (current / RESTART_LINK).exists() and current not in seen:
        seen.add(current)
        try:
            link = json.loads((current / RESTART_LINK).read_text(encoding="utf-8"))
            current = Path(str(link["run_dir"]))
        except (OSError, ValueError, KeyError, TypeError):
            break
    return current
