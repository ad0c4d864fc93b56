"""A run's record: its state turned into journal records and snapshots, and the executor's reports.

:class:`Journal` is the only code that writes a run's state (:class:`~.run_data.RunData`) to
disk, through :class:`~.store.RunStore`: a journal record per step, a snapshot when the run
rests or the journal outgrew the last one (see :mod:`.checkpoint_format`). The node executor's
reports (a finished node's outcome, retry counts, a node's partial work, the traces of finished
executions) arrive here too, from any branch thread, under the run's lock.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from freshness_magic.atomicio import ensure_ignored_dir
from freshness_magic.engine.context import partial_key
from freshness_magic.engine.events import EventType
from freshness_magic.engine.extensions import RunExtension
from freshness_magic.engine.outcome import Outcome
from freshness_magic.engine.persistence import (
    checkpoint_payload,
    write_manifest_file,
    write_pipeline,
)
from freshness_magic.engine.run_data import RunData
from freshness_magic.engine.store import RunStore
from freshness_magic.engine.trace import Trace
from freshness_magic.pathsafety import make_state_dir

log = logging.getLogger(__name__)


class Journal:
    """Records one run's state; see the module docstring.

    ``store`` is the run's journal writer and driver lock; a resume hands over the one that
    took the lock (:func:`~.lifecycle.resumed`). ``after_record`` is called after every
    record: what the steps it holds write comes after it (the executor's ``saved``: status
    files, the extensions' ``on_step_saved``).
    """

    def __init__(
        self,
        data: RunData,
        store: RunStore,
        extensions: Sequence[RunExtension],
        wall_clock: Callable[[], float],
        after_record: Callable[[], None],
    ) -> None:
        self.store = store
        self._data = data
        self._extensions = extensions
        self._wall_clock = wall_clock
        self._after_record = after_record

    # ----------------------------------------------------------------- the executor's reports

    def record_outcome(self, node_id: str, outcome: Outcome) -> int:
        """Remember a finished node's outcome (thread-safe); its index in ``completed_nodes``."""
        with self._data.lock:
            return self._data.memory.record(node_id, outcome)

    def record_traces(self, traces: list[Trace]) -> None:
        """Keep the traces of finished executions (a parallel node's after its branches')."""
        with self._data.lock:
            self._data.memory.traces.extend(traces)

    def take_rearmed(self) -> bool:
        """Whether the node about to run was asked for by a ``retry`` (then no longer)."""
        with self._data.lock:
            rearmed, self._data.memory.rearmed = self._data.memory.rearmed, False
            return rearmed

    def set_retries(self, node_id: str, retries: int) -> None:
        """Remember how many times ``node_id`` was retried in its current step (thread-safe)."""
        memory = self._data.memory
        with self._data.lock:
            if retries:
                memory.retries[node_id] = retries
            else:
                memory.retries.pop(node_id, None)

    def keep_partial(self, node_id: str, value: Any) -> None:
        """Record what the running node ``node_id`` finished of its work (``StepEnv.keep``):
        in the context, journaled now, so a stop or a kill before the node ends loses none."""
        self._data.context.set(partial_key(node_id), value)
        self.save(rest=False, announce=False)

    # ----------------------------------------------------------------- journal and snapshots

    def save_checkpoint(self) -> None:
        """Record the current state now and write a snapshot (``checkpoint.json``).

        Steps do this themselves; extensions call it (``Run.save_checkpoint``) after changing
        their own state between steps (an accepted baseline must survive a crash). Does nothing
        before the run starts.
        """
        self.save(rest=True)

    def save(self, *, rest: bool, announce: bool = True) -> None:
        """Append the step's journal record; a snapshot too when ``rest`` or compaction is due.

        ``announce``: emit CHECKPOINT_SAVED (not for the first record, written before the run's
        first event so that a run killed at once is still resumable).
        """
        data = self._data
        if not data.started:
            return
        now = self._wall_clock()
        lost = None
        with data.lock:
            if self.store.lost():
                lost = self._write_run_dir_again()
            seq = data.events.seq
            path = self.store.save(
                data.memory,
                data.context,
                lambda exts: checkpoint_payload(
                    data.memory,
                    data.context,
                    run_id=data.run_id,
                    graph=data.graph,
                    pipeline_path=data.pipeline_path,
                    pipeline_hash=data.source_hash,
                    pipeline_file=data.pipeline_file,
                    workdir=data.workdir,
                    event_seq=seq,
                    now=now,
                    extensions=exts,
                ),
                extensions={ext.name: _ext_state(ext) for ext in self._extensions},
                event_seq=seq,
                now=now,
                rest=rest,
            )
        if lost is not None:
            log.warning("%s", lost)
            data.events.emit(EventType.STAGE_OUTPUT, None, {"stream": "stderr", "text": lost})
        self._after_record()  # what the steps in this record write comes after it
        if announce:
            data.events.emit(
                EventType.CHECKPOINT_SAVED, data.memory.current_node, {"path": str(path)}
            )

    def _write_run_dir_again(self) -> str:
        """After the run directory was removed or replaced under the run (a node's command that
        cleans the work tree, ``git clean -x``; a person): make it again, with the lock, the
        pipeline and the manifest, so that the next save writes the whole state there and the
        run stays resumable. What happened, for the run's output."""
        data = self._data
        if data.run_dir.parent == data.workdir / ".freshness" / "runs":
            ensure_ignored_dir(data.workdir / ".freshness")
        make_state_dir(data.run_dir)
        self.store.start_over()
        write_pipeline(data.run_dir, data.graph)
        write_manifest_file(
            data.run_dir, data.graph, data.run_id, data.workdir, data.memory, data.pipeline_path
        )
        return (
            f"the run directory {data.run_dir} was removed or replaced while the run went on "
            "(by a node's command? git clean -x removes .freshness); the run wrote it again "
            "from its state and goes on: its events, evidence records and node files from "
            "before are gone"
        )


def _ext_state(ext: RunExtension) -> dict[str, Any]:
    try:
        return dict(ext.checkpoint_state())
    except Exception:
        log.exception("run extension %r failed in checkpoint_state; stored empty", ext.name)
        return {}
