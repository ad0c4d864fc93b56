"""The executor seam: a node's work submitted to a ``concurrent.futures.Executor`` (a cluster).

The driver (kernel or CLI) keeps the run: state, routing, checkpoints, extensions (freshness,
evidence) and events. Only the handler call of a *portable* handler (``portable = True``: the
tool and codergen handlers) is shipped: :func:`call_remote` submits a
:class:`~.remote.RemoteCall` and waits for it, and :func:`~.remote.run_remote` runs it on a
worker against the same work directory (which every worker must see at the same path).

While it waits, the driver emits the worker's events as they arrive (live output), counts the
node's ``timeout`` from when the call *started* on a worker (not while it was queued), writes
the stop file on Stop or timeout, and asks the dispatch every few seconds whether the cluster
can still run work: a call is never waited for forever. A call the cluster lost is RETRY, so
the node's retry policy decides (FAIL with the reason when no retries are left). The worker's
identity and timing reach the outcome's context as ``worker.<node_id>``, so the node's
``status.json`` and its evidence record name where it ran.

What the handler read on the worker comes back with the result and is folded into the
execution's trace with the writer of each key as the copy it was sent held it
(:meth:`~.context.Context.fold_reads`): a shipped execution records the reads a local one does.
Every call that came back counts, as every attempt of a local execution does; a call that never
came back (lost, not reported after a stop) adds none. A worker of an older version returns no
reads: the trace then counts every written value it was sent as possibly read
(``Trace.reads_unknown``): its readers' marks are never falsely absent, and it is never reused.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import logging
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from freshness_magic import atomicio
from freshness_magic.engine.context import WORKER_KEY, Context
from freshness_magic.engine.handlers.base import Handler, StepEnv
from freshness_magic.engine.model import Node
from freshness_magic.engine.outcome import Outcome, StageStatus
from freshness_magic.engine.remote import RemoteCall, RemoteResult, local_identity, run_remote

log = logging.getLogger(__name__)

__all__ = ["WORKER_KEY", "Dispatch", "call_remote", "ships"]

LOCAL = "local"
"""The node attribute value ``executor="local"``: the node always runs on the driver."""
POLL_SECONDS = 0.05
STOP_GRACE_SECONDS = 5.0
"""How long the driver waits for a stopped or timed-out call to report back."""
HEALTH_SECONDS = 2.0
"""How often the driver asks whether the cluster can still run work (as often as the grace
lasts, when that is shorter)."""
LOST_GRACE_SECONDS = 10.0
"""How long the cluster may be unable to run work (workers restarting) before a call is lost."""


@dataclass(frozen=True)
class Dispatch:
    """Where portable node work runs: an executor, a label for messages, and three probes.

    ``identify`` runs on the worker and names it (a Dask worker's name and address);
    ``unshippable`` returns why an object cannot be sent to the executor (None when it can);
    ``unavailable`` returns why the executor cannot run work now (None when it can).
    """

    executor: concurrent.futures.Executor
    label: str
    identify: Callable[[], dict[str, Any]] = local_identity
    unshippable: Callable[[object], str | None] = field(default=lambda _obj: None)
    unavailable: Callable[[], str | None] = field(default=lambda: None)
    lost_grace: float = LOST_GRACE_SECONDS
    """How long ``unavailable`` may say the executor cannot run work before a call is lost."""


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


def call_remote(
    dispatch: Dispatch,
    handler: Handler,
    node: Node,
    context: Context,
    env: StepEnv,
    timeout: float | None,
) -> Outcome:
    """Ship one attempt of ``node`` to ``dispatch`` and wait for it (on the driver)."""
    values, writers = context.shipped_copy()
    call = RemoteCall(
        handler=handler,
        node=node,
        graph=env.graph,
        context=values,
        run_dir=env.run_dir,
        workdir=env.workdir,
        attempt=env.attempt,
        timeout=timeout,
        label=dispatch.label,
        identify=dispatch.identify,
        call_id=secrets.token_hex(4),
        fidelity=env.fidelity,
    )
    env.node_dir(node.id)
    waiting = _Waiting(dispatch, call, env)
    try:
        outcome = waiting.outcome()
        if waiting.result is not None:  # a call that never came back read nothing known
            context.fold_reads(waiting.result.reads, values, writers)
        return outcome
    finally:
        with contextlib.suppress(OSError):
            call.events_file.unlink()


class _Waiting:
    """The driver's side of one call: submit, follow, stop, time out, notice a lost cluster."""

    def __init__(self, dispatch: Dispatch, call: RemoteCall, env: StepEnv) -> None:
        self.dispatch, self.call, self.env = dispatch, call, env
        self.follower = _EventFollower(call.events_file, env)
        self.started: float | None = None
        self.stopped: float | None = None
        self.timed_out = False
        self.health_every = min(HEALTH_SECONDS, dispatch.lost_grace)
        """A grace shorter than the usual interval is looked at as often as it lasts."""
        self.next_health = time.monotonic() + self.health_every
        self.unhealthy_since: float | None = None
        self.result: RemoteResult | None = None
        """What the worker returned (None: the call never came back)."""

    def outcome(self) -> Outcome:
        try:
            future = self.dispatch.executor.submit(run_remote, self.call)
        except Exception as exc:
            return self.lost(f"could not submit: {type(exc).__name__}: {exc}")
        while True:
            try:
                result: RemoteResult = future.result(timeout=POLL_SECONDS)
                break
            except concurrent.futures.TimeoutError:
                self.follower.poll()
            except concurrent.futures.CancelledError:
                return self.lost("the cluster cancelled the call")
            except Exception as exc:
                return self.lost(f"{type(exc).__name__}: {exc}")
            except BaseException:  # Ctrl-C in this thread: the worker must stop the work too
                self.stop_before_leaving(future)
                raise
            given_up = self.watch(future)
            if given_up is not None:
                return given_up
        return self.finished(result)

    def stop_before_leaving(self, future: concurrent.futures.Future[Any]) -> None:
        """Ask the worker to stop the call and wait a while for it to report back, so that a
        driver about to pause (or exit) leaves no work running on the cluster."""
        with contextlib.suppress(OSError):
            atomicio.write_atomic(self.call.stop_file, "stop\n", fsync=False)
        if not self.call.marker.exists():
            future.cancel()
        with contextlib.suppress(Exception):
            future.result(timeout=STOP_GRACE_SECONDS)

    def watch(self, future: concurrent.futures.Future[Any]) -> Outcome | None:
        """One look while waiting; an outcome when the driver stops waiting."""
        now = time.monotonic()
        call = self.call
        if self.started is None and call.marker.exists():
            self.started = now
        if self.stopped is None:
            over = (
                call.timeout is not None
                and self.started is not None
                and now - self.started > call.timeout + STOP_GRACE_SECONDS
            )
            if self.env.cancel.is_set() or over:
                self.timed_out = over and not self.env.cancel.is_set()
                self.stopped = now
                atomicio.write_atomic(call.stop_file, "stop\n", fsync=False)
                if self.started is None:
                    future.cancel()  # not started: it never will (if it does, it sees the stop)
        elif now - self.stopped > STOP_GRACE_SECONDS:
            future.cancel()
            if self.timed_out:
                return self.timeout_outcome()
            return self.lost("the worker did not report back after the stop")
        if now >= self.next_health:
            self.next_health = now + self.health_every
            why = self.dispatch.unavailable()
            if why is None:
                self.unhealthy_since = None
            elif self.unhealthy_since is None:
                self.unhealthy_since = now
            elif now - self.unhealthy_since > self.dispatch.lost_grace:
                future.cancel()
                return self.lost(why)
        return None

    def finished(self, result: RemoteResult) -> Outcome:
        self.result = result
        self.follower.poll()
        for kind, data in result.events[self.follower.seen :]:
            self.env.emit(kind, data)
        outcome = self.timeout_outcome() if self.timed_out else result.outcome
        outcome.context_updates[WORKER_KEY.format(node_id=self.call.node.id)] = result.worker
        for done_with in (self.call.marker, self.call.stop_file):
            with contextlib.suppress(OSError):
                done_with.unlink()
        return outcome

    def timeout_outcome(self) -> Outcome:
        return Outcome(
            status=StageStatus.FAIL,
            failure_reason=f"timed out after {self.call.timeout:g}s on {self.dispatch.label} "
            "(the worker was asked to stop)",
        )

    def lost(self, detail: str) -> Outcome:
        """A call the cluster lost: RETRY (the node's retry policy decides). A call that had
        started is asked to stop, so a worker that still runs it ends the work."""
        call = self.call
        if call.marker.exists():
            with contextlib.suppress(OSError):
                atomicio.write_atomic(call.stop_file, "stop\n", fsync=False)
            detail += "; the call had started on a worker and was asked to stop"
            from freshness_magic.engine.handlers.tool import reap_survivor

            reaped = reap_survivor(call.node_dir)  # its worker is dead: the stop file is unread
            if reaped is not None and reaped.startswith("stopped"):
                detail += f"; {reaped}"
        return Outcome(
            status=StageStatus.RETRY,
            failure_reason=f"node '{call.node.id}' did not come back from "
            f"{self.dispatch.label}: {detail}",
        )


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
