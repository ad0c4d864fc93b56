"""The executor seam: a node's work submitted to a ``concurrent.futures.Executor`` (a cluster).

The driver (kernel or CLI) keeps the run: state, routing, checkpoints, extensions (freshness,
evidence) and events. Only the handler call of a *portable* handler (``portable = True``: the
tool and codergen handlers) is shipped: :func:`call_remote` submits a :class:`RemoteCall` and
waits for it, and :func:`run_remote` runs it on a worker against the same work directory (which
every worker must see at the same path).

Over the shared run directory the two sides agree on two files in the node's folder:

- ``worker-<attempt>.json``: written by the worker as it starts (its name, host, pid). A call
  that finds it already there was started before by a worker that died mid-node (a scheduler
  reschedules such tasks): it returns RETRY with that reason instead of running the work
  twice, so the node's retry policy decides (no retries left: FAIL with the reason).
- ``stop-<attempt>``: written by the driver on Stop or timeout; the worker sets the handler's
  cancel event, so a tool kills its process group *on the worker*.

- ``events-<attempt>.jsonl``: the events the handler emits on the worker (its live output),
  emitted on the driver as they arrive; the result carries them all as well, for whatever the
  driver had not seen when the call returned.
The worker's identity and timing reach the outcome's context as ``worker.<node_id>``, so the
node's ``status.json`` and its evidence record name where it ran.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from freshness_magic import atomicio
from freshness_magic.engine.context import Context
from freshness_magic.engine.handlers.base import Handler, StepEnv
from freshness_magic.engine.model import Graph, Node
from freshness_magic.engine.outcome import Outcome, StageStatus

log = logging.getLogger(__name__)

WORKER_KEY = "worker.{node_id}"
"""Context key of where a shipped node ran: ``{executor, worker, host, pid, seconds}``."""
LOCAL = "local"
"""The node attribute value ``executor="local"``: the node always runs on the driver."""
POLL_SECONDS = 0.05
STOP_GRACE_SECONDS = 5.0
"""How long the driver waits for a stopped or timed-out worker call to report back."""


def local_identity() -> dict[str, Any]:
    """Who runs a call when the executor gives no worker name: this host and process."""
    return {"worker": f"{socket.gethostname()}:{os.getpid()}"}


@dataclass(frozen=True)
class Dispatch:
    """Where portable node work runs: an executor, a label for messages, and two probes.

    ``identify`` runs on the worker and names it (a Dask worker's name and address);
    ``unshippable`` returns why an object cannot be sent to the executor (None when it can).
    """

    executor: concurrent.futures.Executor
    label: str
    identify: Callable[[], dict[str, Any]] = local_identity
    unshippable: Callable[[object], str | None] = field(default=lambda _obj: None)


def ships(dispatch: Dispatch | None, node: Node, handler: Handler) -> bool:
    """Whether this node's handler call goes to ``dispatch``: the handler is portable and can be
    sent, and the node is not kept on the driver (``executor="local"``). A handler that cannot
    be sent (a model client holding a connection, say) runs on the driver, with a log line."""
    if dispatch is None or node.get("executor", "").strip() == LOCAL:
        return False
    if getattr(handler, "portable", False) is not True:
        return False
    why_not = dispatch.unshippable(handler)
    if why_not is not None:
        log.info("node %s runs on the driver, not on %s: %s", node.id, dispatch.label, why_not)
        return False
    return True


@dataclass(frozen=True)
class RemoteCall:
    """Everything a worker needs to run one attempt of one node (picklable)."""

    handler: Handler
    node: Node
    graph: Graph
    context: dict[str, Any]
    run_dir: Path
    workdir: Path
    attempt: int
    timeout: float | None
    label: str
    identify: Callable[[], dict[str, Any]]

    @property
    def node_dir(self) -> Path:
        return self.run_dir / "nodes" / self.node.id

    @property
    def marker(self) -> Path:
        return self.node_dir / f"worker-{self.attempt}.json"

    @property
    def stop_file(self) -> Path:
        return self.node_dir / f"stop-{self.attempt}"

    @property
    def events_file(self) -> Path:
        return self.node_dir / f"events-{self.attempt}.jsonl"


@dataclass
class RemoteResult:
    """What came back from a worker: the outcome, the events to replay, where and how long."""

    outcome: Outcome
    events: list[tuple[str, dict[str, Any]]]
    worker: dict[str, Any]


def run_remote(call: RemoteCall) -> RemoteResult:
    """Run ``call`` on a worker (the function the executor runs); never raises."""
    started = time.monotonic()
    worker = {"executor": call.label, **call.identify(), "pid": os.getpid()}
    worker["host"] = socket.gethostname()
    events: list[tuple[str, dict[str, Any]]] = []
    try:
        earlier = atomicio.loads_bounded(call.marker.read_bytes(), what=str(call.marker))
    except FileNotFoundError:
        earlier = None
    except (OSError, ValueError) as exc:
        earlier = {"worker": f"unknown ({exc})"}
    if earlier is not None:
        name = earlier.get("worker", "?") if isinstance(earlier, dict) else "?"
        reason = (
            f"the worker running node '{call.node.id}' (attempt {call.attempt}) stopped mid-node "
            f"(worker {name} died or was lost); its work may be half done"
        )
        from freshness_magic.engine.handlers.tool import reap_survivor

        reaped = reap_survivor(call.node_dir)
        if reaped:
            reason += f"; {reaped}"
        return RemoteResult(Outcome(status=StageStatus.RETRY, failure_reason=reason), [], worker)
    if call.stop_file.exists():
        outcome = Outcome(status=StageStatus.FAIL, failure_reason="interrupted before it started")
        return RemoteResult(outcome, [], worker)
    # No fsync: the marker only has to outlive the worker process, not the machine.
    atomicio.write_atomic(call.marker, json.dumps(worker) + "\n", fsync=False)
    cancel = threading.Event()
    done = threading.Event()

    def watch_stop() -> None:
        while not done.wait(POLL_SECONDS):
            if call.stop_file.exists():
                cancel.set()
                return

    watcher = threading.Thread(target=watch_stop, name=f"stop-{call.node.id}", daemon=True)
    watcher.start()
    live = call.events_file.open("a", encoding="utf-8")

    def emit(kind: str, data: dict[str, Any]) -> None:
        events.append((kind, data))
        with contextlib.suppress(OSError, TypeError, ValueError):
            live.write(json.dumps([len(events), kind, data]) + "\n")
            live.flush()

    env = StepEnv(
        graph=call.graph,
        run_dir=call.run_dir,
        workdir=call.workdir,
        attempt=call.attempt,
        emit=emit,
        deadline=time.monotonic() + call.timeout if call.timeout else None,
        cancel=cancel,
    )
    try:
        outcome = call.handler.execute(call.node, Context(call.context), env)
        if not isinstance(outcome, Outcome):
            outcome = Outcome(
                status=StageStatus.FAIL,
                failure_reason=f"the handler of node '{call.node.id}' returned "
                f"{type(outcome).__name__} on the worker instead of an Outcome",
            )
    except Exception as exc:
        outcome = Outcome(
            status=StageStatus.FAIL,
            failure_reason=f"handler {call.node.handler_type!r} raised {type(exc).__name__} "
            f"on worker {worker.get('worker')}: {exc}",
        )
    finally:
        done.set()
        live.close()
    worker["seconds"] = round(time.monotonic() - started, 6)
    return RemoteResult(outcome, events, worker)


def call_remote(
    dispatch: Dispatch,
    handler: Handler,
    node: Node,
    context: Context,
    env: StepEnv,
    timeout: float | None,
) -> Outcome:
    """Ship one attempt of ``node`` to ``dispatch`` and wait for it (on the driver).

    ``env.cancel`` (Stop, or the executor's own timeout) writes the stop file; the worker then
    ends the work and reports; a call not started yet is cancelled (and would not start the
    work anyway). A worker that does not report within :data:`STOP_GRACE_SECONDS` has its
    future cancelled too. A call that
    fails to come back (a lost worker, an executor error) is a FAIL with the reason, never a
    hang.
    """
    call = RemoteCall(
        handler=handler,
        node=node,
        graph=env.graph,
        context=context.snapshot(),
        run_dir=env.run_dir,
        workdir=env.workdir,
        attempt=env.attempt,
        timeout=timeout,
        label=dispatch.label,
        identify=dispatch.identify,
    )
    env.node_dir(node.id)
    for stale in (call.marker, call.stop_file, call.events_file):
        with contextlib.suppress(FileNotFoundError):
            stale.unlink()
    follower = _EventFollower(call.events_file, env)
    try:
        return _wait_for(dispatch, call, node, env, follower)
    finally:
        with contextlib.suppress(OSError):
            call.events_file.unlink()


def _wait_for(
    dispatch: Dispatch, call: RemoteCall, node: Node, env: StepEnv, follower: _EventFollower
) -> Outcome:
    try:
        future = dispatch.executor.submit(run_remote, call)
    except Exception as exc:
        return _lost(node, dispatch, f"could not submit: {type(exc).__name__}: {exc}")
    stopped_at: float | None = None
    while True:
        try:
            result = future.result(timeout=POLL_SECONDS)
            break
        except concurrent.futures.TimeoutError:
            follower.poll()
        except concurrent.futures.CancelledError:
            return _lost(node, dispatch, "the call was cancelled before it started")
        except Exception as exc:
            return _lost(node, dispatch, f"{type(exc).__name__}: {exc}")
        if env.cancel.is_set() and stopped_at is None:
            stopped_at = time.monotonic()
            atomicio.write_atomic(call.stop_file, "stop\n")
            if not call.marker.exists():
                future.cancel()  # not started: it never will (if it does, it sees the stop)
        if stopped_at is not None and time.monotonic() - stopped_at > STOP_GRACE_SECONDS:
            future.cancel()
            return _lost(node, dispatch, "the worker did not report back after the stop")
    follower.poll()
    for kind, data in result.events[follower.seen :]:
        env.emit(kind, data)
    outcome = result.outcome
    outcome.context_updates[WORKER_KEY.format(node_id=node.id)] = result.worker
    return outcome


class _EventFollower:
    """Emits, on the driver, the events a worker appends to the call's events file (live
    output); whatever it has not seen when the call returns comes from the result."""

    def __init__(self, path: Path, env: StepEnv) -> None:
        self.path, self.env = path, env
        self.offset = 0
        self.seen = 0
        """How many of the call's events were emitted (each line carries its count)."""

    def poll(self) -> None:
        try:
            with self.path.open("rb") as handle:
                handle.seek(self.offset)
                chunk = handle.read()
        except OSError:
            return
        complete = chunk[: chunk.rfind(b"\n") + 1]
        self.offset += len(complete)
        for line in complete.splitlines():
            try:
                count, kind, data = atomicio.loads_bounded(line, what=str(self.path))
            except (ValueError, TypeError):
                continue
            self.seen = int(count)
            self.env.emit(str(kind), dict(data))


def _lost(node: Node, dispatch: Dispatch, detail: str) -> Outcome:
    """A call the cluster lost: RETRY, so the node's retry policy decides (FAIL when spent)."""
    return Outcome(
        status=StageStatus.RETRY,
        failure_reason=f"node '{node.id}' did not come back from {dispatch.label}: {detail}",
    )
