"""The handler interface, what a handler gets to work with, and the registry (spec §4.1–§4.2)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from freshness_magic.engine.context import Context
from freshness_magic.engine.model import NODE_ID_RE, Graph, Node
from freshness_magic.engine.outcome import Outcome
from freshness_magic.errors import FreshnessMagicError, RunError
from freshness_magic.pathsafety import make_state_dir

if TYPE_CHECKING:
    from freshness_magic.engine.fidelity import Resolved
    from freshness_magic.engine.trace import Trace

TRACEBACK_FILE = "traceback.txt"
"""The traceback of code that raised, in its node's folder (the latest attempt's)."""


def stop_slack(timeout: float) -> float:
    """How long past a node's deadline its handler may take to stop its work and report the
    timeout itself (10 % of the timeout, at most 1 s): the work gets the whole timeout, and the
    run abandons a handler that has not returned after this slack."""
    return min(1.0, max(timeout, 0.0) * 0.1)


@dataclass
class StepEnv:
    """Everything a handler may use besides the node and the context, for one attempt."""

    graph: Graph
    run_dir: Path
    """The run's log root (``<runs_dir>/<run_id>``)."""
    workdir: Path
    """Where commands run and where relative paths in attributes resolve."""
    attempt: int = 1
    emit: Callable[[str, dict[str, Any]], None] = field(default=lambda _type, _data: None)
    """Report an event (type name, payload) to the run's event bus."""
    branches: BranchRunner | None = None
    """Runs nodes of a parallel branch through the run's node executor (the parallel handler)."""
    child_runs: ChildRuns | None = None
    """Starts and resumes child runs with the run's registry (the manager loop handler)."""
    deadline: float | None = None
    """``time.monotonic()`` value by which the node must finish (from its ``timeout``)."""
    slack: float = 0.0
    """Seconds past ``deadline`` a handler has to stop what it started and return; the run
    abandons it after that (:func:`stop_slack`)."""
    sleep: Callable[[float], None] = time.sleep
    """The run's sleep, for handlers that wait between polls (injectable so tests run instantly)."""
    cancel: threading.Event = field(default_factory=threading.Event)
    """Set when the run is asked to stop (Stop, a kernel interrupt): a handler that waits on
    something long (a process, a model call) stops it and returns promptly; the engine records
    the node as interrupted, whatever the handler returns."""
    keep: Callable[[Any], None] | None = None
    """Save, at once and durably, what this node has finished of its work (a JSON-able value),
    so that when it is interrupted or its driver dies, running it again goes on from there
    (a parallel node keeps its finished branches). None for a node inside a parallel branch."""
    kept: Any = None
    """What an earlier, unfinished run of this node saved with ``keep`` (None: nothing)."""
    fidelity: Resolved | None = None
    """How much of the run a codergen node passes to its model (:mod:`..fidelity`), resolved
    from the edge the run took; None: resolved from the node and graph alone."""

    def node_dir(self, node_id: str) -> Path:
        """The node's folder for artifacts (prompt.md, response.md, status.json, tool output).

        Raises RunError for an id that is not one plain name (a Graph built in code is not
        checked by the parser) and UnsafePathError when the folder is reached through a link.
        """
        if not isinstance(node_id, str) or not NODE_ID_RE.match(node_id):
            raise RunError(
                f"node id {node_id!r} cannot name a folder of the run: node ids must match "
                "[A-Za-z_][A-Za-z0-9_]* (no '/', '.' or '..'); rename the node"
            )
        return make_state_dir(self.run_dir / "nodes" / node_id)

    def keep_traceback(self, node_id: str, error: BaseException) -> Path | None:
        """Write the traceback of code that raised (a handler, a ``python:`` backend) into the
        node's folder as ``traceback.txt``, where a person debugging it finds it (the outcome
        holds only the exception's line); the file, or None when it cannot be written."""
        import traceback

        from freshness_magic.atomicio import write_atomic

        try:
            path = self.node_dir(node_id) / TRACEBACK_FILE
            write_atomic(path, "".join(traceback.format_exception(error)))
        except (OSError, FreshnessMagicError):
            return None
        return path


@dataclass(frozen=True)
class BranchStep:
    """One node of a parallel branch, executed and routed: its outcome and where to go next."""

    outcome: Outcome
    next_node: str | None
    joined: bool = False
    """``next_node`` is the fan-in of a nested parallel node that just ran (the branch runs it)."""
    interrupted: bool = False
    traces: tuple[Trace, ...] = ()
    """What the execution read and wrote (a nested parallel node's branch nodes first); the
    parallel handler journals them with the branch's progress, so a resume keeps them."""


class BranchRunner(Protocol):
    """Executes one node of a branch exactly as the main path does (run extensions, retries,
    events, status) in the branch's own context, then routes it within the branch."""

    def run_node(
        self,
        node: Node,
        context: Context,
        branch_of: str,
        ended: Callable[[BranchStep], None] | None = None,
    ) -> BranchStep:
        """``ended`` is called with the routed step before anything of the node's end is
        written (the parallel handler journals the branch's progress there)."""
        ...

    def restore_traces(self, branch_of: str, saved: list[Any]) -> list[Trace]:
        """Take back the traces (``Trace.to_dict``) of branch nodes that ended before the
        parallel node ``branch_of`` was interrupted, as ``BranchStep.traces`` gave them."""
        ...

    def interrupt(self) -> None:
        """Stop every running node (thread-safe): a Ctrl-C while branches run stops them all."""


class ChildRun(Protocol):
    """What a supervisor sees of a child run (a :class:`~freshness_magic.engine.run.Run`)."""

    @property
    def state(self) -> Any: ...
    @property
    def run_dir(self) -> Path: ...
    @property
    def completed_nodes(self) -> list[str]: ...
    @property
    def node_outcomes(self) -> dict[str, Outcome]: ...
    @property
    def current_node(self) -> str | None: ...
    @property
    def next_node(self) -> str | None: ...
    @property
    def failure_reason(self) -> str: ...
    @property
    def pending_gate(self) -> Any: ...

    def step(self) -> Any: ...

    def answer(self, node_id: str, choice: str | None = None, comment: str | None = None) -> Any:
        """Answer the gate the child waits at."""


class ChildRuns(Protocol):
    """Starts a child pipeline run, or resumes one a crash left, with the parent's handlers."""

    def start(self, graph: Graph, workdir: Path, runs_dir: Path) -> ChildRun: ...

    def resume(self, run_dir: Path, graph: Graph, workdir: Path) -> ChildRun: ...


@runtime_checkable
class Handler(Protocol):
    """Executes one node. Raising is allowed: the engine turns it into a FAIL outcome."""

    def execute(self, node: Node, context: Context, env: StepEnv) -> Outcome: ...


class CodergenBackend(Protocol):
    """An LLM (or anything) that answers a prompt; §4.5. Returns text or a full Outcome."""

    def __call__(self, node: Node, prompt: str, context: Context) -> str | Outcome: ...


class HandlerRegistry:
    """Maps handler type strings to handlers; explicit ``type``, then shape, then default."""

    def __init__(self, handlers: dict[str, Handler] | None = None, default: str = "codergen"):
        self._handlers: dict[str, Handler] = {}
        self._default = default
        for type_name, handler in (handlers or {}).items():
            self.register(type_name, handler)

    def register(self, type_name: str, handler: Handler) -> None:
        """Add or replace the handler for ``type_name``; TypeError for an object that is not a
        handler (a plain function is one only inside an object with ``execute``)."""
        if not callable(getattr(handler, "execute", None)):
            raise TypeError(
                f"{handler!r} is not a handler for {type_name!r}: it needs a method "
                "execute(node, context, env) returning an Outcome"
            )
        self._handlers[type_name] = handler

    def unregister(self, type_name: str) -> None:
        self._handlers.pop(type_name, None)

    def types(self) -> Iterable[str]:
        return tuple(self._handlers)

    def __contains__(self, type_name: object) -> bool:
        return type_name in self._handlers

    def resolve(self, node: Node) -> Handler:
        """The handler for ``node``; an unknown explicit type falls back to the default."""
        for type_name in (node.handler_type, self._default):
            handler = self._handlers.get(type_name)
            if handler is not None:
                return handler
        raise LookupError(f"no handler registered for node {node.id!r} ({node.handler_type})")
