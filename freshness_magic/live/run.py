"""A loaded pipeline's live part: its run, opened, reopened and closed, the view model fed from
it, the ``%%node`` cells, the input watcher, and the lock that lets one action run at a time.

:class:`LiveRun` is one of the two parts of :class:`~freshness_magic.notebook.pipeline.Pipeline`
(the other is its read-only view, :class:`~freshness_magic.views.pipeline_view.PipelineView`); it
holds the run and publishes the view model at every step boundary, and never renders anything.
Imports no IPython: a plain script drives a pipeline through it.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
import threading
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from freshness_magic.atomicio import write_json_atomic
from freshness_magic.cluster import ClusterPool
from freshness_magic.engine import RunState
from freshness_magic.engine.events import EventType
from freshness_magic.engine.model import Graph
from freshness_magic.engine.persistence import EVENTS_FILE, same_pipeline
from freshness_magic.errors import FreshnessMagicError, NotAFolderError, RunError
from freshness_magic.live.cells import CELL_HANDLER_TYPE, CellHandler, cell_runs_in
from freshness_magic.live.stepping import Stepped, step_loop
from freshness_magic.live.watch import InputWatcher, input_folders
from freshness_magic.pathsafety.state import first_non_folder
from freshness_magic.views.marks import freshness_of
from freshness_magic.views.model import RunSnapshot, ViewModel, stopped_spans
from freshness_magic.views.pipeline_view import require_node
from freshness_magic.views.runview import read_run
from freshness_magic.views.saved import (
    STARTED_BY_FILE,
    ResumeOffer,
    find_unfinished,
    latest_run_dir,
    run_dir_hash,
)
from freshness_magic.views.why import NOTEBOOK, PipelineCommands

if TYPE_CHECKING:
    from freshness_magic.engine.run import Run


class SupersededError(RunError):
    """An action on a pipeline object that a newer load of the same name replaced."""


def superseded_error(name: str) -> SupersededError:
    """The refusal of an action on a replaced pipeline. Only a notebook replaces one (a new
    ``%%pipeline`` of the same name): where IPython is loaded, the error is also its
    ``UsageError``, so a direct call (``review.step()``) shows one line, not a traceback;
    without IPython nothing of it is imported."""
    message = f"this view was replaced by a newer load of {name}"
    ipython_errors = sys.modules.get("IPython.core.error")
    if ipython_errors is None:
        return SupersededError(message)
    return _with_usage_error(ipython_errors.UsageError)(message)


@functools.cache
def _with_usage_error(usage_error: type[Exception]) -> type[SupersededError]:
    """:class:`SupersededError` that is also IPython's ``UsageError`` (made once)."""
    return type(
        "SupersededError",
        (SupersededError, usage_error),
        {"__module__": __name__, "__doc__": SupersededError.__doc__},
    )


class LiveRun:
    """A loaded pipeline's run with its view model, cells, watcher and lock (no actions)."""

    def __init__(
        self,
        name: str,
        graph: Graph,
        workdir: Path,
        *,
        namespace: dict[str, Any] | None = None,
        clusters: ClusterPool | None = None,
        run_options: dict[str, Any] | None = None,
        cells: dict[str, str] | None = None,
    ) -> None:
        self.name = name
        self.graph = graph
        self.workdir = workdir
        self.namespace: dict[str, Any] = namespace if namespace is not None else {}
        self.clusters = clusters if clusters is not None else ClusterPool()
        """The kernel's open clusters (``executor`` specs), shared by every pipeline's runs."""
        self.run_options: dict[str, Any] = run_options if run_options is not None else {}
        self.cells: dict[str, str] = cells if cells is not None else {}
        self.commands: PipelineCommands = NOTEBOOK
        """How messages spell the actions: the magics, or the object's methods from plain
        Python (:class:`~freshness_magic.views.why.MethodCommands`)."""
        self.superseded = False
        """True once a newer load of the same name replaced it: every action refuses."""
        self.resume_offer: ResumeOffer | None = None
        """An unfinished run of this pipeline on disk, offered to resume (None: nothing)."""
        self.resume_notes: list[str] = []
        """What changed while the run last reopened from disk was stopped (one line per node)."""
        self.reopened = False
        """The open run was reopened from disk and has not stepped since (going on from an
        interrupt need not reopen it again)."""
        self.reuse = False
        """Whether the current action reuses earlier executions (``--reuse`` on it)."""
        self.structure_version = 0
        """Bumped whenever something the layout shows changes (a ``%%node`` changes a type)."""
        self.model = ViewModel(graph)
        """The view model: node views folded from the run's events, published per step."""
        self.offer_drawn = False
        """``model`` shows the offered run as its checkpoint left it (no run is open yet)."""
        self.going = False
        """A loop of several steps (``run``, ``run --to``, ``resume``) is stepping: between its
        nodes the run is going on, not paused, whoever drives it (a cell or the view)."""
        self.stop_requested = threading.Event()
        """Set by ``stop``: the step loop starts no further node."""
        self._run: Run | None = None
        self._listeners: list[Callable[[Any], None]] = []
        self._lock = threading.RLock()
        self._refreshing = False
        self._refresh_turn = threading.Lock()
        self._watcher: InputWatcher | None = None

    @property
    def live_run(self) -> Run | None:
        """The run if one is open (``run`` opens one; this never does)."""
        return self._run

    # --- listeners, saved runs -------------------------------------------------------------------

    def subscribe(self, listener: Callable[..., None]) -> None:
        """Call ``listener(event_or_None)`` after every published update of the views."""
        self._listeners.append(listener)

    def notify(self, event: Any = None) -> None:
        for listener in list(self._listeners):
            listener(event)

    def latest_run_dir(self) -> Path | None:
        """The newest run folder under ``<workdir>/.freshness/runs`` for this pipeline."""
        return latest_run_dir(self.graph, self.workdir)

    def offer_resume(self) -> ResumeOffer | None:
        """Look for an unfinished run of this pipeline on disk and offer it (``resume_offer``)."""
        notebook = this_notebook()
        self.resume_offer = find_unfinished(
            self.graph, self.workdir, notebook=notebook
        ) or find_unfinished(self.graph, self.workdir, any_text=True, notebook=notebook)
        self._draw_offer()
        return self.resume_offer

    def _draw_offer(self) -> None:
        """Show the offered run of this text as its checkpoint left it (its waiting gate, what
        ran), read from disk as ``freshness-magic why`` reads it; a run of another text or one
        that cannot be read leaves the view at the start."""
        offer = self.resume_offer
        if self._run is not None or offer is None or offer.edited:
            return
        try:
            drawn = read_run(offer.run_dir)
        except FreshnessMagicError:
            return
        self.model = drawn.model
        self.offer_drawn = True
        self.notify()

    @property
    def watching(self) -> bool:
        return self._watcher is not None and self._watcher.alive

    # --- the run -------------------------------------------------------------------------------

    @property
    def run(self) -> Run:
        """The current run, opened on first use (``session.open_run``)."""
        self.check_current()
        if self._run is None:
            return self.open(resume=None)
        return self._run

    def open(self, *, resume: Path | None, carry: bool = False) -> Run:
        """Open a new run, or (``resume``: its folder) reopen one from disk, and follow it;
        with ``carry``, the run in ``resume`` carried over to this text of the pipeline."""
        from freshness_magic import session

        self._install_cells()
        try:
            self.workdir.mkdir(parents=True, exist_ok=True)
        except (FileExistsError, NotADirectoryError):  # a file put there after the load
            raise NotAFolderError(first_non_folder(str(self.workdir))) from None
        options = {k: v for k, v in self.run_options.items() if v not in (None, "")}
        remembered = session.remembered(resume, "executor") if resume is not None else None
        spec = options.pop("executor", None) or remembered or self.graph.attrs.get("executor", "")
        executor = self.clusters.get(spec) or "local"
        if resume is not None:
            from freshness_magic.engine.runlock import RunBusyError
            from freshness_magic.freshness.extension import resume_drift
            from freshness_magic.holders import busy_refusal

            options = self.resume_options(resume)
            try:
                if carry:  # to this text of the pipeline: unchanged nodes keep their results
                    options.pop("graph", None)
                    run, plan = session.carry_over(
                        resume, self.graph, executor=executor, workdir=self.workdir, **options
                    )
                else:
                    run = session.resume_run(
                        resume, executor=executor, workdir=self.workdir, **options
                    )
            except RunBusyError as exc:  # another kernel, idle: say where to act
                raise busy_refusal(exc) or exc from None
            self.resume_notes = [f"  {node}: {words}" for node, words in resume_drift(run)]
            if carry:
                self.resume_notes[:0] = [f"  {line}" for line in plan.lines()]
        else:
            run = session.open_run(
                self.graph, workdir=self.workdir, executor=executor, warn=False, **options
            )
            notebook = this_notebook()
            if notebook is not None:  # so another notebook in this folder does not offer it
                write_json_atomic(Path(run.run_dir) / STARTED_BY_FILE, {"notebook": notebook})
        self.resume_offer = None
        self.reopened = resume is not None
        self._attach(run, reopened=self.reopened)
        return run

    def use_reuse(self, reuse: bool) -> None:
        """Reuse earlier executions (``--reuse``) in the action about to run, or not."""
        self.reuse = reuse
        if self._run is not None:
            self._run.reuse = reuse

    @property
    def started(self) -> bool:
        """Whether the open run has begun (left ``ready``): its backend and executor are fixed."""
        return self._run is not None and self._run.state is not RunState.READY

    def use_run_options(self, specs: Mapping[str, str], *, reopen: bool = False) -> bool:
        """Open runs with these ``backend``/``executor`` specs; an open run that has not begun
        (a fresh one after ``reset``) is opened again with them, and with ``reopen`` one that
        has begun too, from its directory (what ran is kept). False, and nothing changes, when
        the open run has begun and ``reopen`` is not given. A spec that cannot serve (an unknown
        backend, a Dask scheduler that does not answer) raises here and is not kept: the next
        action does not fail on it again."""
        from freshness_magic.backends import resolve_backend

        with self.exclusive():
            begun = self.started
            if begun and not reopen:
                return False
            if "backend" in specs:
                resolve_backend(specs["backend"])
            if "executor" in specs:
                self.clusters.get(specs["executor"])
            self.run_options.update(specs)
            if "backend" in specs:  # the %%node cells' registry was built with the old backend
                self.run_options.pop("registry", None)
            if self._run is not None:
                run_dir = Path(self._run.run_dir) if begun else None
                self.detach()
                self.open(resume=run_dir)
                self.resume_notes = []
            return True

    def resume_options(self, run_dir: Path) -> dict[str, Any]:
        """Options of a resume: the loaded graph (it carries the ``%%node`` handlers) when the
        run was started from the same text, else the run's stored pipeline."""
        keep = ("registry", "backend")
        options = {k: v for k, v in self.run_options.items() if k in keep and v not in (None, "")}
        if same_pipeline(self.graph.source, run_dir_hash(run_dir)):
            options["graph"] = self.graph
        return options

    def _attach(self, run: Run, *, reopened: bool) -> None:
        """Follow ``run``; one ``reopened`` from disk brings its outputs and routes so far into
        the view model, as ``freshness-magic why`` reads them from its event log."""
        self.detach()
        self._run = run
        run.reuse = self.reuse
        self.model = ViewModel(self.graph)
        self.offer_drawn = False
        if reopened:
            self.model.replay(run.events.kinds.read(Path(run.run_dir) / EVENTS_FILE), at_rest=True)
        self.model.load_stopped(stopped_spans(Path(run.run_dir)))
        if self.cells:
            self._register_cells(run)
        run.events.subscribe(self._on_event)
        self.publish()
        self.start_watching()

    def detach(self) -> None:
        """Stop following the open run (it stays open for whoever holds it)."""
        self.stop_watching()
        if self._run is not None:
            self._run.events.unsubscribe(self._on_event)
        self._run = None

    def publish(self, *, freshness: bool = True) -> None:
        """Give the view model the run's state at this step boundary, then tell the listeners."""
        run = self._run
        if run is not None:
            stale, blocked = freshness_of(run) if freshness else (None, None)
            self.model.publish(RunSnapshot.of(run), stale, blocked)
        self.notify()

    def settle(self, *, republish: bool) -> None:
        """After a loop: publish again only when freshness changed (or nothing was published)."""
        run = self._run
        if run is None:
            return
        stale, blocked = freshness_of(run)
        if republish or stale != self.model.stale or blocked != self.model.blocked:
            self.model.publish(RunSnapshot.of(run), stale, blocked)
            self.notify()

    def _on_event(self, event: Any) -> None:
        if self.model.fold(event):
            self.notify(event)

    def resume_latest(self) -> bool:
        """Reopen the newest run of this pipeline from its checkpoint; False when there is none."""
        latest = self.latest_run_dir()
        if latest is None:
            return False
        self.open(resume=latest)
        return True

    # --- lifecycle -------------------------------------------------------------------------------

    def check_current(self) -> None:
        if self.superseded:
            raise superseded_error(self.name)

    def supersede(self) -> None:
        """A newer load of the same name replaced this object: stop and refuse every action.

        Its run is closed, so another process (or the newer load) can drive it from disk."""
        self.superseded = True
        run = self._run
        self.detach()
        if run is not None:
            run.close()

    def close(self) -> None:
        """Stop the background work (the input watcher); the run on disk stays as it is."""
        self.stop_watching()

    def start_watching(self) -> None:
        """Watch the input folders (only while a run exists); a change re-checks freshness."""
        if self._run is None or self.superseded or self._watcher is not None:
            return
        folders = input_folders(self.graph, self.workdir)
        if folders:
            self._watcher = InputWatcher(folders, self._on_files_changed).start()

    def stop_watching(self) -> None:
        watcher, self._watcher = self._watcher, None
        if watcher is not None:
            watcher.stop()

    def _on_files_changed(self, _paths: set[str]) -> None:
        self.refresh_freshness()

    # --- %%node cells ----------------------------------------------------------------------------

    def set_cell(self, node_id: str, code: str) -> None:
        """Make ``code`` the handler of ``node_id`` (a ``%%node`` cell)."""
        self.check_current()
        require_node(self.name, self.graph, node_id)
        self.cells[node_id] = code
        self.structure_version += 1
        self._install_cells()
        if self._run is not None:
            self._register_cells(self._run)
        self.notify()

    def _register_cells(self, run: Run) -> None:
        """The run's handler of ``%%node`` cells, and each cell's node declared in the run, so a
        process without the cells (``freshness-magic resume``) refuses them."""
        run.registry.register(CELL_HANDLER_TYPE, CellHandler(self.cells, self.namespace))
        for node_id in self.cells:
            run.declare_handler(node_id, CELL_HANDLER_TYPE, cell_runs_in(node_id))

    def _install_cells(self) -> None:
        for node_id in self.cells:
            self.graph.nodes[node_id].attrs["type"] = CELL_HANDLER_TYPE
        if not self.cells:
            return
        registry = self.run_options.get("registry")
        if registry is None:
            from freshness_magic.session import builtin_registry

            registry = builtin_registry(self.run_options.get("backend"))
            self.run_options["registry"] = registry
        registry.register(CELL_HANDLER_TYPE, CellHandler(self.cells, self.namespace))

    # --- one action at a time ------------------------------------------------------------------

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[None]:
        """One action at a time: a second one (another thread) is refused, not queued."""
        self.check_current()
        # A re-check of the inputs (watcher, hub) holds the lock only briefly: wait for it.
        waited = self._refreshing and self._lock.acquire(timeout=30)
        if not waited and not self._lock.acquire(blocking=False):
            raise RunError(
                f"pipeline {self.name!r} is busy with another action (a widget button); "
                "wait until it finishes or stop it"
            )
        try:
            yield
        finally:
            self._lock.release()

    def wait_idle(self, timeout: float) -> None:
        """Wait at most ``timeout`` seconds for the running action (if any) to end."""
        if self._lock.acquire(timeout=timeout):
            self._lock.release()

    @property
    def busy(self) -> bool:
        """Whether an action is running in another thread."""
        if self._lock.acquire(blocking=False):
            self._lock.release()
            return False
        return True

    def steps(
        self,
        *,
        to: str | None = None,
        max_steps: int | None = None,
        show: Callable[[str], None] | None = None,
    ) -> Stepped:
        """Step the open run (:func:`~freshness_magic.live.stepping.step_loop`): the views
        published at every step boundary, ``stop`` honoured between nodes, a kernel interrupt
        inside a node turned into an interrupted node of the reopened run."""
        return step_loop(
            self.run,
            stop=self.stop_requested,
            after_step=lambda: self.publish(freshness=False),
            on_interrupt=lambda node: self.interrupted(node, "interrupted (kernel interrupt)"),
            to=to,
            max_steps=max_steps,
            show=show,
            go_on=self.commands.keep_going(),
        )

    def interrupted(self, node_id: str, reason: str) -> Run:
        """After a kernel interrupt inside a step: reopen the run from its last checkpoint (the
        step boundary before the node), paused at the node, which shows ``interrupted``."""
        from freshness_magic import session

        old = self.run
        old.events.unsubscribe(self._on_event)
        run = session.resume_run(old.run_dir, **self.resume_options(old.run_dir))
        self._attach(run, reopened=True)
        run.events.emit(EventType.STAGE_INTERRUPTED, node_id, {"reason": reason})
        self.model.mark_interrupted(node_id, reason)
        self.model.load_stopped(stopped_spans(Path(run.run_dir)))  # with the attempt just cut
        self.publish()
        return run

    # --- freshness -------------------------------------------------------------------------------

    def refresh_freshness(self) -> bool:
        """Re-check stale inputs (cheap stat-cache check) and publish; True when they changed.
        Does nothing (False) with no run open or while an action runs in another thread, which
        publishes when its step ends. Re-checks take turns: one asked for while another runs
        (the watcher's, begun before the last file was written) waits and looks again, so what
        a cell changed shows when the cell ends."""
        if self._run is None:
            return False
        with self._refresh_turn:
            self._refreshing = True  # before the lock: an action starting now waits for us
            if not self._lock.acquire(blocking=False):
                self._refreshing = False
                return False  # an action in another thread publishes when its step ends
            try:
                before = dict(self.model.stale)
                self.publish()
                return dict(self.model.stale) != before
            finally:
                self._refreshing = False
                self._lock.release()


def this_notebook() -> str | None:
    """The notebook this kernel runs for, as the Jupyter server names the kernel's session
    (``JPY_SESSION_NAME``, its path); None outside a notebook server (a script, the terminal)."""
    return os.environ.get("JPY_SESSION_NAME") or None
