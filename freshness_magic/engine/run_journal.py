"""What a :class:`~.run.Run` records: the executor's reports, journal records and snapshots.

:class:`RunJournal` is the bottom layer of ``Run``: it declares the run's fields (``Run.__init__``
sets them) and is the only code that turns them into the run's saved state, through
:class:`~.store.RunStore` (a journal record per step, a snapshot when the run rests or the
journal outgrew the last one). The executor reports finished nodes and retry counts here, from
any branch thread, under the run's lock.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from freshness_magic.engine.context import partial_key
from freshness_magic.engine.events import EventType
from freshness_magic.engine.persistence import checkpoint_payload
from freshness_magic.errors import FreshnessMagicError

if TYPE_CHECKING:
    from freshness_magic.engine.context import Context
    from freshness_magic.engine.dispatch import Dispatch
    from freshness_magic.engine.events import EventBus
    from freshness_magic.engine.execute import NodeExecutor
    from freshness_magic.engine.extensions import RunExtension
    from freshness_magic.engine.handlers.base import HandlerRegistry
    from freshness_magic.engine.model import Graph
    from freshness_magic.engine.outcome import Outcome
    from freshness_magic.engine.persistence import RunMemory
    from freshness_magic.engine.reuse import Reuser
    from freshness_magic.engine.state import StepResult
    from freshness_magic.engine.store import RunStore
    from freshness_magic.engine.trace import Trace

log = logging.getLogger(__name__)

_HOOK_WORK = {
    "on_run_start": "its work at the start of the run",
    "on_resume": "its work on resuming the run",
    "on_step_finished": "its record of the step of node {node!r}",
    "on_step_saved": "its record of the step of node {node!r}",
}
"""What an extension's hook does, for the one-line warning when it fails."""


class RunJournal:
    """The run's fields and its record; see the module docstring."""

    graph: Graph
    workdir: Path
    registry: HandlerRegistry
    extensions: list[RunExtension]
    dispatch: Dispatch | None
    events: EventBus
    _run_id: str
    _run_dir: Path
    _wall_clock: Callable[[], float]
    _store: RunStore
    _context: Context
    _scoped: threading.local
    _lock: threading.Lock
    _memory: RunMemory
    _source_hash: str
    _pipeline_path: str | None
    _pipeline_file: str
    _exit_ids: frozenset[str]
    _started: bool
    _history: list[StepResult]
    _executor: NodeExecutor
    _closers: list[Callable[[], None]]
    _reuser: Reuser | None

    # ----------------------------------------------------------------- the executor's record

    def record_outcome(self, node_id: str, outcome: Outcome) -> int:
        """Remember a finished node's outcome (thread-safe); its index in ``completed_nodes``."""
        with self._lock:
            return self._memory.record(node_id, outcome)

    def record_traces(self, traces: list[Trace]) -> None:
        """Keep the traces of finished executions (a parallel node's after its branches')."""
        with self._lock:
            self._memory.traces.extend(traces)

    def take_rearmed(self) -> bool:
        """Whether the node about to run was asked for by a ``retry`` (then no longer)."""
        with self._lock:
            rearmed, self._memory.rearmed = self._memory.rearmed, False
            return rearmed

    def set_retries(self, node_id: str, retries: int) -> None:
        with self._lock:
            if retries:
                self._memory.retries[node_id] = retries
            else:
                self._memory.retries.pop(node_id, None)

    def keep_partial(self, node_id: str, value: Any) -> None:
        """Record what the running node ``node_id`` finished of its work (``StepEnv.keep``):
        in the context, journaled now, so a stop or a kill before the node ends loses none."""
        self._context.set(partial_key(node_id), value)
        self._save(rest=False, announce=False)

    @staticmethod
    def call_extension(ext: RunExtension, hook: str, *args: Any) -> None:
        """Call ``ext.hook(*args)``; an exception is logged and skipped, never raised.

        An error of our own hierarchy (a file the extension cannot write, say) is one line that
        says what was skipped; any other is a bug, logged with its traceback.
        """
        name = getattr(ext, "name", ext)
        try:
            getattr(ext, hook)(*args)
        except FreshnessMagicError as exc:
            work = _HOOK_WORK.get(hook, hook).format(node=getattr(args[-1], "node_id", None))
            log.warning("run extension %r: %s was skipped: %s", name, work, exc)
        except Exception:
            log.exception("run extension %r raised in %s; skipped", name, hook)

    # ----------------------------------------------------------------- journal and snapshots

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
        lost = None
        with self._lock:
            if self._store.lost():
                lost = self._write_run_dir_again()
            seq = self.events.seq
            path = self._store.save(
                self._memory,
                self._context,
                lambda exts: checkpoint_payload(
                    self._memory,
                    self._context,
                    run_id=self._run_id,
                    graph=self.graph,
                    pipeline_path=self._pipeline_path,
                    pipeline_hash=self._source_hash,
                    pipeline_file=self._pipeline_file,
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
        if lost is not None:
            log.warning("%s", lost)
            self.events.emit(EventType.STAGE_OUTPUT, None, {"stream": "stderr", "text": lost})
        self._executor.saved()  # what the steps in this record write comes after it
        if announce:
            self.events.emit(
                EventType.CHECKPOINT_SAVED, self._memory.current_node, {"path": str(path)}
            )

    def _write_run_dir_again(self) -> str:
        """After the run directory was removed or replaced under the run (a node's command that
        cleans the work tree, ``git clean -x``; a person): make it again, with the lock, the
        pipeline and the manifest, so that the next save writes the whole state there and the
        run stays resumable. What happened, for the run's output."""
        from freshness_magic.atomicio import ensure_ignored_dir
        from freshness_magic.engine.persistence import write_manifest_file, write_pipeline
        from freshness_magic.pathsafety import make_state_dir

        if self._run_dir.parent == self.workdir / ".freshness" / "runs":
            ensure_ignored_dir(self.workdir / ".freshness")
        make_state_dir(self._run_dir)
        self._store.start_over()
        write_pipeline(self._run_dir, self.graph)
        write_manifest_file(
            self._run_dir, self.graph, self._run_id, self.workdir, self._memory, self._pipeline_path
        )
        return (
            f"the run directory {self._run_dir} was removed or replaced while the run went on "
            "(by a node's command? git clean -x removes .freshness); the run wrote it again "
            "from its state and goes on: its events, evidence records and node files from "
            "before are gone"
        )

    @staticmethod
    def _ext_state(ext: RunExtension) -> dict[str, Any]:
        try:
            return dict(ext.checkpoint_state())
        except Exception:
            log.exception("run extension %r failed in checkpoint_state; stored empty", ext.name)
            return {}
