"""The run context (spec §5.1): a thread-safe key-value store shared by the stages of a run.

The context remembers which keys were set or deleted since :meth:`Context.take_changes` was last
called, so the run journal records only what a step changed (constant bytes per step).

It also remembers which execution wrote each value (its :class:`~.trace.Trace`), and while a
handler runs (:meth:`Context.recording`) it notes in that execution's trace every value the
handler reads, every key it looks for that is not set (``Trace.absent``) and every key it sets.
Reads outside that window (routing's conditions, the
checkpoint, a snapshot, the extensions' hooks) are the engine's and are never counted. A handler
call shipped to a worker reads a copy (:meth:`Context.shipped_copy`); the worker's reads come back
and are folded into the trace here (:meth:`Context.fold_reads`).
"""

from __future__ import annotations

import contextlib
import copy
import threading
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from freshness_magic.engine.trace import Part, ReadReport, Trace

_MISSING = object()

TOOL_KEYS = ("tool.output", "tool.exit_code", "tool.stdout_file", "tool.stderr_file")
"""The context keys a tool node sets (spec §4.10 names ``tool.output``); no handler sets any
other ``tool.`` key, so a condition on one can never hold (``validate`` says so)."""


WORKER_KEY = "worker.{node_id}"
"""Context key of where a node shipped to a cluster ran: ``{executor, worker, host, pid,
seconds}`` (:mod:`.dispatch`). Not part of what the node produced: a branch result's fingerprint
leaves it out."""

PARTIAL_PREFIX = "internal.partial."


def partial_key(node_id: str) -> str:
    """The context key holding what a running node saved of its finished work
    (:attr:`~freshness_magic.engine.handlers.base.StepEnv.keep`). It is checkpointed with the
    context, so an interrupted or killed node goes on from it when it runs again; the run drops
    it when the node finishes, and a retry drops every node's (it runs them afresh)."""
    return f"{PARTIAL_PREFIX}{node_id}"


class Context(Mapping[str, Any]):
    """Keys are flat dotted strings (``graph.goal``, ``tool.output``); values are JSON-able."""

    def __init__(self, values: Mapping[str, Any] | None = None, logs: list[str] | None = None):
        self._values: dict[str, Any] = dict(values or {})
        self._logs: list[str] = list(logs or [])
        self._lock = threading.RLock()
        self._changed: set[str] = set()
        self._deleted: set[str] = set()
        self._writers: dict[str, Trace] = {}
        self._recorder: Trace | None = None

    def __getitem__(self, key: str) -> Any:
        with self._lock:
            recorder = self._recorder
            try:
                value = self._values[key]
            except KeyError:
                if recorder is not None:  # ``in`` and ``get`` come here too
                    recorder.record_absent(key)
                raise
            if recorder is not None:
                recorder.record_read(key, value, self._writers.get(key))
            return value

    def __iter__(self) -> Iterator[str]:
        with self._lock:
            return iter(list(self._values))

    def __len__(self) -> int:
        with self._lock:
            return len(self._values)

    def __setitem__(self, key: str, value: Any) -> None:
        self.set(key, value)

    def __delitem__(self, key: str) -> None:
        self.delete(key)

    def set(self, key: str, value: Any, writer: Trace | None = None) -> None:
        """Set ``key``; ``writer`` is the execution whose outcome sets it (default: the one
        whose handler runs now, if any, else none: the run itself)."""
        with self._lock:
            self._values[key] = value
            self._changed.add(key)
            self._deleted.discard(key)
            self._stamp(key, value, writer)

    def _stamp(self, key: str, value: Any, writer: Trace | None) -> None:
        writer = writer or self._recorder
        if writer is None:
            self._writers.pop(key, None)
        else:
            self._writers[key] = writer
            writer.record_write(key, value)

    def delete(self, key: str) -> None:
        """Remove ``key`` if present (used for keys that must be unset, e.g. no stale files)."""
        with self._lock:
            if self._values.pop(key, _MISSING) is not _MISSING:
                self._deleted.add(key)
                self._changed.discard(key)
                self._writers.pop(key, None)
                if self._recorder is not None:
                    self._recorder.forget_write(key)

    def get_string(self, key: str, default: str = "") -> str:
        value = self.get(key)
        return default if value is None else str(value)

    def apply_updates(self, updates: Mapping[str, Any], writer: Trace | None = None) -> None:
        """Set every key of ``updates`` (an outcome's context updates, written by ``writer``)."""
        with self._lock:
            self._values.update(updates)
            self._changed.update(updates)
            self._deleted.difference_update(updates)
            for key, value in updates.items():
                self._stamp(key, value, writer)

    # ----------------------------------------------------------------- traces

    @contextlib.contextmanager
    def recording(self, trace: Trace) -> Iterator[None]:
        """Note in ``trace`` what is read and set while the block runs (a handler's call)."""
        with self._lock:
            previous, self._recorder = self._recorder, trace
        try:
            yield
        finally:
            with self._lock:
                self._recorder = previous

    def writer_of(self, key: str) -> Trace | None:
        """The execution that wrote the current value of ``key`` (None: none did)."""
        with self._lock:
            return self._writers.get(key)

    def adopt_writers(self, writers: Mapping[str, Trace]) -> None:
        """Take the writers of restored values (:func:`~.trace.latest_writers`)."""
        with self._lock:
            self._writers.update({k: t for k, t in writers.items() if k in self._values})

    def shipped_copy(self) -> tuple[dict[str, Any], dict[str, Trace]]:
        """A copy of the values for a handler call run elsewhere (a cluster worker), with the
        writer of each as it is now (taken together: :meth:`fold_reads` needs both)."""
        with self._lock:
            return copy.deepcopy(self._values), dict(self._writers)

    def fold_reads(
        self,
        report: ReadReport | None,
        values: Mapping[str, Any],
        writers: Mapping[str, Trace],
    ) -> None:
        """Note in the running handler's trace the reads a call run elsewhere reported against
        ``values`` and ``writers`` (:meth:`shipped_copy`; :meth:`~.trace.Trace.fold`)."""
        recorder = self._recorder
        if recorder is not None:
            recorder.fold(report, values, writers)

    def note_parts(self, key: str, parts: Mapping[str, Part]) -> None:
        """The value the running handler is about to return for ``key`` is made of others'
        results (a parallel node's ``parallel.results``, one part per branch): a later read of
        it reads each part from the execution that made it."""
        recorder = self._recorder
        if recorder is not None:
            recorder.parts[key] = dict(parts)

    def note_key_set(self, key: str, keys: list[str]) -> None:
        """The running handler used which keys are set (``<prefix>*``: their names, say in a
        summary), not their values: noted as a read of ``key`` with no writer, so reuse
        verifies the set and no mark follows from it."""
        recorder = self._recorder
        if recorder is not None:
            recorder.record_read(key, keys, None)

    def append_log(self, entry: str) -> None:
        with self._lock:
            self._logs.append(entry)

    def logs_since(self, start: int) -> list[str]:
        """The log entries from index ``start`` on (what a journal record adds)."""
        with self._lock:
            return self._logs[start:]

    def log_count(self) -> int:
        with self._lock:
            return len(self._logs)

    def take_changes(self) -> tuple[dict[str, Any], list[str]]:
        """``(keys set with their values, keys deleted)`` since the last call; resets both."""
        with self._lock:
            changed = {k: copy.deepcopy(self._values[k]) for k in sorted(self._changed)}
            deleted = sorted(self._deleted)
            self._changed.clear()
            self._deleted.clear()
            return changed, deleted

    @property
    def logs(self) -> list[str]:
        with self._lock:
            return list(self._logs)

    def snapshot(self) -> dict[str, Any]:
        """A copy of all values that later changes to the context do not affect."""
        with self._lock:
            return copy.deepcopy(self._values)

    def clone(self) -> Context:
        """An isolated copy for a parallel branch (§3.8)."""
        with self._lock:
            clone = Context(copy.deepcopy(self._values), list(self._logs))
            clone._writers = dict(self._writers)
            return clone

    def __repr__(self) -> str:
        return f"Context({len(self)} keys)"
