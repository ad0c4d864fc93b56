"""The worker side of the executor seam: one node attempt, run where the executor runs it.

:func:`run_remote` is what :mod:`.dispatch` submits. It runs the handler against the shared work
and run directories and talks to the driver through files in the node's folder, each named with
the attempt and a per-call id:

- ``worker-<attempt>-<call>.json``: written as the call starts (the worker's name, host, pid). A
  call that finds it there was started before by a worker that died mid-node (a scheduler
  reschedules such tasks): it returns RETRY with that reason instead of running the work twice
  (and stops the command the dead worker left running, when it can).
- ``stop-<attempt>-<call>``: written by the driver on Stop or timeout; the call sets the
  handler's cancel event, so a tool kills its process group *on the worker*. A call that finds
  it before starting does nothing.
- ``events-<attempt>-<call>.jsonl``: the events the handler emits (its live output), one line
  each with its running count, for the driver to emit as they arrive.

The handler runs against a copy of the driver's context, so the call records what the handler
reads in a trace of its own and returns it in :attr:`RemoteResult.reads` (a
:class:`~.trace.ReadReport`); the driver folds it into the execution's trace. A call that did
not run the handler (started before, stopped first) reports no reads: an empty report, not None
(None is what a worker of an older version, which does not report reads, gives).
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from freshness_magic import atomicio
from freshness_magic.engine.context import Context
from freshness_magic.engine.fidelity import Resolved
from freshness_magic.engine.handlers.base import Handler, StepEnv, stop_slack
from freshness_magic.engine.model import Graph, Node
from freshness_magic.engine.outcome import Outcome, StageStatus
from freshness_magic.engine.trace import ReadReport, Trace

POLL_SECONDS = 0.05
GONE_WORKER_ENDING_SECONDS = 5.0
"""How long a call given again waits for the gone worker that ran it to finish exiting."""
STOPPED_BEFORE_START = "interrupted before it started"


def local_identity() -> dict[str, Any]:
    """Who runs a call when the executor gives no worker name: this host and process."""
    return {"worker": f"{socket.gethostname()}:{os.getpid()}"}


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
    call_id: str
    fidelity: Resolved | None = None
    """The node's fidelity as the driver resolved it (the edge the run took is known there)."""

    def _file(self, stem: str, suffix: str = "") -> Path:
        return (
            self.run_dir / "nodes" / self.node.id / f"{stem}-{self.attempt}-{self.call_id}{suffix}"
        )

    @property
    def node_dir(self) -> Path:
        return self.run_dir / "nodes" / self.node.id

    @property
    def marker(self) -> Path:
        return self._file("worker", ".json")

    @property
    def stop_file(self) -> Path:
        return self._file("stop")

    @property
    def events_file(self) -> Path:
        return self._file("events", ".jsonl")


@dataclass
class RemoteResult:
    """What came back from a worker: the outcome, every event it emitted, where and how long,
    and what the handler read (None: the worker did not say; an older version)."""

    outcome: Outcome
    events: list[tuple[str, dict[str, Any]]]
    worker: dict[str, Any]
    reads: ReadReport | None = None


def run_remote(call: RemoteCall) -> RemoteResult:
    """Run ``call`` on a worker (the function the executor runs); never raises."""
    started = time.monotonic()
    worker = {"executor": call.label, **call.identify(), "pid": os.getpid()}
    worker["host"] = socket.gethostname()
    if call.marker.exists():
        return RemoteResult(_rerun(call), [], worker, ReadReport())
    if call.stop_file.exists():
        failed = Outcome(status=StageStatus.FAIL, failure_reason=STOPPED_BEFORE_START)
        return RemoteResult(failed, [], worker, ReadReport())
    # No fsync: the marker only has to outlive the worker process, not the machine.
    atomicio.write_atomic(call.marker, json.dumps(worker) + "\n", fsync=False)
    events: list[tuple[str, dict[str, Any]]] = []
    cancel = threading.Event()
    done = threading.Event()

    def watch_stop() -> None:
        while not done.wait(POLL_SECONDS):
            if call.stop_file.exists():
                cancel.set()
                return

    threading.Thread(target=watch_stop, name=f"stop-{call.node.id}", daemon=True).start()
    with call.events_file.open("a", encoding="utf-8") as live:

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
            slack=stop_slack(call.timeout) if call.timeout else 0.0,
            cancel=cancel,
            fidelity=call.fidelity,
        )
        reads = Trace(call.node.id, "", "")  # its reads only: the driver knows the rest
        try:
            outcome = _execute(call, env, worker, reads)
        finally:
            done.set()
    worker["seconds"] = round(time.monotonic() - started, 6)
    return RemoteResult(outcome, events, worker, reads.report())


def _execute(call: RemoteCall, env: StepEnv, worker: dict[str, Any], reads: Trace) -> Outcome:
    context = Context(call.context)
    try:
        with context.recording(reads):
            outcome = call.handler.execute(call.node, context, env)
    except Exception as exc:
        return Outcome(
            status=StageStatus.FAIL,
            failure_reason=f"handler {call.node.handler_type!r} raised {type(exc).__name__} "
            f"on worker {worker.get('worker')}: {exc}",
        )
    if isinstance(outcome, Outcome):
        return outcome
    return Outcome(
        status=StageStatus.FAIL,
        failure_reason=f"the handler of node '{call.node.id}' returned "
        f"{type(outcome).__name__} on the worker instead of an Outcome",
    )


def _rerun(call: RemoteCall) -> Outcome:
    """The call was started before by a worker that is gone: RETRY, never the work twice."""
    from freshness_magic.engine.handlers.tool import reap_survivor

    try:
        earlier = atomicio.loads_bounded(call.marker.read_bytes(), what=str(call.marker))
        name = earlier.get("worker", "?") if isinstance(earlier, dict) else "?"
    except (OSError, ValueError) as exc:
        name = f"unknown ({exc})"
    reason = (
        f"the worker running node '{call.node.id}' (attempt {call.attempt}) stopped mid-node "
        f"(worker {name} died or was lost); its work may be half done"
    )
    # The scheduler gave the call again once the worker's connection closed, which may be
    # before the kernel has ended its process: wait for that before judging the tool orphaned.
    reaped = reap_survivor(call.node_dir, driver_ending=GONE_WORKER_ENDING_SECONDS)
    if reaped:
        reason += f"; {reaped}"
    return Outcome(status=StageStatus.RETRY, failure_reason=reason)
