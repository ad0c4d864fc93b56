"""One run's state: its pipeline, where it runs, its context, what it remembers, its steps.

:class:`RunData` is what every part of a :class:`~.run.Run` works on: the facade's step and its
endings, the journal (:mod:`.journal`), the run directory's life (:mod:`.lifecycle`) and
recovery (:mod:`.recovery`). What survives a restart is ``memory`` (a
:class:`~.persistence.RunMemory`: position, outcomes, retries, pending gate, failure) and
``context``; the rest is rebuilt when the run is made. The node executor never sees this object:
it gets the narrow :class:`~.execute.RunHost`.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from freshness_magic.engine.context import Context
from freshness_magic.engine.events import EventBus
from freshness_magic.engine.model import Graph
from freshness_magic.engine.persistence import PIPELINE_FILE, RunMemory
from freshness_magic.engine.state import RunResult, StepResult


@dataclass(slots=True, eq=False)
class RunData:
    """Everything one run holds; see the module docstring."""

    graph: Graph
    """The pipeline (an edited one after ``Run.carry_over``)."""
    workdir: Path
    run_id: str
    run_dir: Path
    """``runs_dir/run_id``; both change when a ``loop_restart`` moves the run."""
    events: EventBus
    memory: RunMemory
    context: Context = field(default_factory=Context)
    """The run's own context (a parallel branch works on a clone: :meth:`context_scope`)."""
    pipeline_path: str | None = None
    """The pipeline file's path as the run stores it (absolute when it is a file)."""
    source_hash: str = ""
    pipeline_file: str = PIPELINE_FILE
    """The run directory's file holding the pipeline text (another after ``carry_over``)."""
    exit_ids: frozenset[str] = frozenset()
    started: bool = False
    """The run directory is set up and the journal open (:meth:`~.run.Run.start`)."""
    history: list[StepResult] = field(default_factory=list)
    """Every step this object took (not restored on resume)."""
    lock: threading.Lock = field(default_factory=threading.Lock)
    """Guards ``memory`` while branch threads report finished nodes."""
    scoped: threading.local = field(default_factory=threading.local)
    """Per thread: the context a branch's node and its extensions see."""

    def visible_context(self) -> Context:
        """The context the calling thread's node sees: a branch's clone inside a parallel
        branch, else the run's own."""
        scoped: Context | None = getattr(self.scoped, "context", None)
        return scoped if scoped is not None else self.context

    @contextlib.contextmanager
    def context_scope(self, context: Context) -> Iterator[None]:
        """Make ``context`` this thread's visible context (a parallel branch's extensions)."""
        previous = getattr(self.scoped, "context", None)
        self.scoped.context = None if context is self.context else context
        try:
            yield
        finally:
            self.scoped.context = previous

    def result(self) -> RunResult:
        """A snapshot of where the run stands."""
        with self.lock:
            return self.memory.result(self.run_dir, self.context)
