"""The pipeline object: one loaded pipeline and its actions (step, run, resume, retry, stop,
accept, reset), the same from a plain Python script, from the magics and from the widget.

:class:`Pipeline` is composed of two parts: its live run (:class:`~freshness_magic.live.run.
LiveRun`: the run's lifecycle, the ``%%node`` cells, the input watcher and one lock per
pipeline) and a read-only view (:class:`~freshness_magic.views.pipeline_view.PipelineView`: status,
why, evidence, conditions, from the view model the live part publishes at every step boundary).
The magics and the widget's buttons both call these methods, so a click and a magic do exactly
the same thing. ``stop`` is the one action that does not take the lock. Steps go one at a time
through :meth:`Run.step`; after each the view model takes the run's state
(:mod:`~freshness_magic.views.model`), so a view never reads a run in the middle of a step. The
text of every answer comes from :mod:`~freshness_magic.views.text`.

Nothing here needs IPython: errors are :class:`~freshness_magic.errors.FreshnessMagicError`s
(the magics turn them into one-line ``UsageError``s), and the widget is made only when asked for.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from freshness_magic.cluster import ClusterPool
from freshness_magic.engine import RunState
from freshness_magic.engine.handlers.tool import reap_survivors
from freshness_magic.engine.model import Graph
from freshness_magic.engine.outcome import Question
from freshness_magic.engine.persistence import PIPELINE_FILE, same_pipeline
from freshness_magic.engine.recovery import rearmed_note
from freshness_magic.errors import (
    GateAnswerError,
    NothingToRetryError,
    PipelineSourceError,
    RunError,
    ValidationError,
)
from freshness_magic.live.run import LiveRun
from freshness_magic.views import text
from freshness_magic.views.frame import ViewFrame
from freshness_magic.views.model import ViewModel
from freshness_magic.views.pipeline_view import PipelineView
from freshness_magic.views.render import LayoutCache, LayoutUnavailable
from freshness_magic.views.saved import ResumeOffer, find_unfinished, run_dir_hash
from freshness_magic.views.state import NodeState
from freshness_magic.views.text import TextResult
from freshness_magic.views.why import MethodCommands, NotebookCommands, PipelineCommands

if TYPE_CHECKING:
    from freshness_magic.engine.run import Run
    from freshness_magic.engine.state import StepResult


RUN_SPECS = ("backend", "executor")
"""Run options given as spec strings (``--backend``, ``--executor``), set only when asked."""
ACCEPTED_SHOWN = 10
"""Files ``accept`` names before it counts the rest."""


LIVE_DELAY = 0.4
"""Seconds a node runs before the view shows it running, and between two live frames while it
runs (its output, a retry). Short enough to see a slow node start at once; long enough that a
step that takes less sends one frame, at its end."""

STOP_AT_CLOSE_SECONDS = 4.0
"""Long enough for a tool's process group to get SIGTERM and, after the tool handler's grace,
SIGKILL; short of the 5 s a Jupyter restart waits before it kills the kernel."""


class Pipeline:
    """A pipeline loaded from DOT, with its run, its view and its actions.

    ``Pipeline(source, workdir=..., name=...)``: ``source`` is a path to a ``.dot`` file, DOT
    text or a :class:`~freshness_magic.engine.Graph`; it is parsed and validated as
    ``freshness-magic validate`` does (errors raise :class:`~freshness_magic.errors.
    ValidationError`, warnings go to stderr). ``workdir`` (default: the current folder) is where
    the run reads its ``source_files`` and keeps ``.freshness/runs``; ``name`` (default: the
    graph's) is what messages call it. ``backend`` and ``executor`` are the spec strings of
    ``%pipeline --backend/--executor``. An unfinished run of the same text in ``workdir`` is
    offered: :meth:`resume` goes back to it, any other action starts a new run.

    The actions are those of the ``%pipeline`` magics and return a
    :class:`~freshness_magic.views.text.TextResult` (its ``text``, and for steps the run's
    result as ``data``): :meth:`step`, :meth:`run`, :meth:`run_to`, :meth:`resume`,
    :meth:`retry`, :meth:`accept`, :meth:`why`, :meth:`cond`, :meth:`status`, :meth:`evidence`,
    :meth:`stop`, :meth:`reset`. :attr:`widget` is the anywidget view. Its two parts are used
    by name: ``view`` (a :class:`~freshness_magic.views.pipeline_view.PipelineView`: its state,
    node views, details, evidence, the frame; it changes nothing) and ``live`` (a
    :class:`~freshness_magic.live.run.LiveRun`: the run, its options, cells and lock). The
    object a ``%%pipeline`` cell binds is one of these.
    """

    def __init__(
        self,
        source: str | os.PathLike[str] | Graph,
        workdir: str | os.PathLike[str] | None = None,
        name: str | None = None,
        *,
        backend: str | None = None,
        executor: str | None = None,
    ) -> None:
        folder = _workdir(workdir)
        graph = _load(source, folder)
        self._compose(LiveRun(name or graph.name or "pipeline", graph, folder), None)
        if not _in_ipython():  # no magics here: messages name this object's methods
            self.live.commands = MethodCommands.named(self.name)
        for key, value in (("backend", backend), ("executor", executor)):
            if value:
                self.live.run_options[key] = value
        self.live.offer_resume()

    @classmethod
    def loaded(
        cls,
        name: str,
        graph: Graph,
        workdir: Path,
        *,
        namespace: dict[str, Any] | None = None,
        layout_cache: LayoutCache | None = None,
        clusters: ClusterPool | None = None,
        cells: dict[str, str] | None = None,
    ) -> Pipeline:
        """A pipeline of a graph already loaded and validated (``%%pipeline``, ``%pipeline
        load``), sharing the kernel's layout cache, clusters and namespace (for ``%%node``)."""
        live = LiveRun(name, graph, workdir, namespace=namespace, clusters=clusters, cells=cells)
        pipeline = cls.__new__(cls)
        pipeline._compose(live, layout_cache)
        return pipeline

    def _compose(self, live: LiveRun, layout_cache: LayoutCache | None) -> None:
        self.live = live
        """The live part: the run, its lifecycle, the view model it publishes, one lock."""
        self.view = PipelineView(self.live)
        """The read-only part: what the pipeline shows, from the published view model."""
        self.layout_cache = layout_cache if layout_cache is not None else LayoutCache()
        self.loaded_at = time.monotonic_ns()
        """When it was loaded (the newest loaded pipeline is the magics' default)."""
        self.live_lines: Callable[[str], None] | None = None
        """Where step lines go as each step ends (a terminal's print); None: in the result."""
        self._widget: Any = None
        self._frame_listeners: list[Callable[[ViewFrame], None]] = []
        self._frame_errors: list[Callable[[BaseException], None]] = []
        self.live_delay = LIVE_DELAY
        """Seconds between an event inside a step and the frame that shows it (see
        :data:`LIVE_DELAY`)."""
        self._live_lock = threading.Lock()
        self._live: threading.Timer | None = None
        self.live.subscribe(self._push_frame)

    # --- the parts -------------------------------------------------------------------------------
    # What the pipeline shows is ``self.view`` (status, why, evidence, details, the views, the
    # frame); what changes its run is ``self.live`` (the run, its options, cells, the lock). Only
    # what a script names, and the actions below, are on the pipeline itself.

    @property
    def name(self) -> str:
        return self.live.name

    @property
    def graph(self) -> Graph:
        return self.live.graph

    @property
    def workdir(self) -> Path:
        return self.live.workdir

    @property
    def current_run(self) -> Run:
        """The engine's :class:`~freshness_magic.engine.Run`, opened on first use."""
        return self.live.run

    @property
    def _say(self) -> PipelineCommands:
        """How messages spell the actions (the magics, or this object's methods)."""
        return self.live.commands

    def _choice_command(self, gate: Question) -> Callable[[str], str] | None:
        """How a line answering ``gate`` is spelled (None: the magic's, keeping the comment)."""
        return None if isinstance(self._say, NotebookCommands) else self._say.answer(gate)

    def _waiting_text(self) -> str:
        """The waiting gate's question, its choices and how to answer them."""
        return text.waiting_text(
            self.view.pending_gate(), self.view.gate_note(), self._say.answer_with
        )

    # --- frames for the widget -------------------------------------------------------------------

    def subscribe_frames(
        self,
        listener: Callable[[ViewFrame], None],
        on_error: Callable[[BaseException], None] | None = None,
    ) -> None:
        """Call ``listener(frame)`` with a :class:`~freshness_magic.views.frame.ViewFrame` at
        every published step boundary and, inside a long step, at most once per
        :attr:`live_delay` after events (the widget serialises it; it reads nothing back).
        ``on_error`` hears a frame that could not be made (the run goes on regardless)."""
        self._frame_listeners.append(listener)
        if on_error is not None:
            self._frame_errors.append(on_error)

    def _push_frame(self, event: Any) -> None:
        """A step boundary (``None``) is pushed at once; an event inside a step only arms the
        live timer, so a step that ends sooner sends nothing but its boundary's frame."""
        if not self._frame_listeners:
            return
        if event is not None:
            with self._live_lock:
                if self._live is None:
                    self._live = threading.Timer(self.live_delay, self._push_live)
                    self._live.daemon = True
                    self._live.start()
            return
        with self._live_lock:
            timer, self._live = self._live, None
        if timer is not None:
            timer.cancel()
        self._send_frame()

    def _push_live(self) -> None:
        with self._live_lock:
            self._live = None
        self._send_frame()

    def _send_frame(self) -> None:
        try:
            frame = self.view.frame()
        except Exception as exc:  # a view error must never break the run
            for report in list(self._frame_errors):
                report(exc)
            return
        for listener in list(self._frame_listeners):
            listener(frame)

    def supersede(self) -> None:
        """A newer load of the same name replaced this object: stop and refuse every action."""
        self.live.supersede()
        if self._widget is not None:
            self._widget.supersede(f"this view was replaced by a newer load of {self.name}")
        self.live.notify()

    # --- what the magics print -------------------------------------------------------------------

    def status(self) -> TextResult:
        """``%pipeline status``: the status line and the node-state table."""
        return self.view.status()

    def why(self, node_id: str) -> TextResult:
        """``%pipeline why NODE``: why the node is in its state and what to do next."""
        return self.view.why(node_id)

    def cond(self, expr: str, from_node: str | None = None, step: int | None = None) -> TextResult:
        """``%pipeline cond EXPR [--from NODE] [--step N]``: the condition explained in the
        context and outcome of NODE's latest execution (or the one at step N), else on the live
        context (and, from a node, the edge routing would take); the explanation is the
        ``data``."""
        answer = self.view.explain(expr, from_node, step=step)
        return TextResult(answer.text, answer.explanation)

    def evidence(self, node_id: str | None = None) -> TextResult:
        """``%pipeline evidence [NODE]``: the evidence records (all, or of one node)."""
        return self.view.evidence(node_id)

    # --- display -------------------------------------------------------------------------------

    def __repr__(self) -> str:
        return f"<pipeline {self.name}: {len(self.graph.nodes)} nodes, {self.view.state_name}>"

    @property
    def widget(self) -> Any:
        """The anywidget view (created on first use; one per pipeline, many displays): show it in
        Jupyter, or in marimo with ``mo.ui.anywidget(pipeline.widget)``."""
        if self._widget is None:
            from freshness_magic.notebook.widget import PipelineWidget

            self._widget = PipelineWidget(self)
        return self._widget

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        """The widget for rich frontends, the graph with its states as static ``text/html`` for
        front ends without a widget runtime (nbconvert, GitHub, VS Code without widgets), and
        the node-state table as ``text/plain`` (with a one-line note when no layout engine is
        installed)."""
        from freshness_magic.notebook.widget import in_kernel
        from freshness_magic.views.render import RenderError
        from freshness_magic.views.snapshot import static_html

        bundle: dict[str, Any] = {}
        if not in_kernel() and not _shows_html(include):  # terminal IPython: no layout to make
            bundle["text/plain"] = self.view.status_text(REPR_ROWS)
            return bundle
        try:
            layout = self.layout_cache.get(self.graph)  # cached; fails before any widget exists
        except LayoutUnavailable as exc:  # no Graphviz anywhere: the text view, one note
            bundle["text/plain"] = f"{exc}\n" + self.view.status_text()
            return bundle
        except RenderError:
            layout = None
        if in_kernel() or self._widget is not None:
            widget_bundle = self.widget._repr_mimebundle_()
            if isinstance(widget_bundle, dict):
                bundle.update(widget_bundle)
        followed = self._widget is not None and self._widget.background  # its own output
        if "text/html" not in bundle and layout is not None and not followed:
            bundle["text/html"] = static_html(layout, self.view.views(), self.view.status_line())
        bundle["text/plain"] = self.view.status_text(REPR_ROWS)
        return bundle

    # --- actions ---------------------------------------------------------------------------------

    def run(self, to: str | None = None, max_steps: int | None = None) -> TextResult:
        """``%pipeline run``: run until ``to``, the exit, a failure or a gate."""
        return self.run_to(to, max_steps)

    def step(self) -> TextResult:
        """Execute the next node."""
        with self.live.exclusive():
            return self._advance(max_steps=1, single=True)

    def run_to(self, to: str | None = None, max_steps: int | None = None) -> TextResult:
        """Run until ``to``, the exit, a failure or a gate (``run`` on a finished run: no-op)."""
        with self.live.exclusive():
            if to is not None:
                self.view.require_node(to)
            return self._advance(to=to, max_steps=max_steps)

    def resume(
        self,
        node_id: str | None = None,
        choice: str | None = None,
        comment: str | None = None,
        *,
        to: str | None = None,
    ) -> TextResult:
        """Answer the gate at ``node_id`` with ``choice`` (None: its default), then ``run``
        (stopping before ``to``, as ``run --to`` does).

        The gate may be waiting, or next: a run paused in front of it (``run --to GATE``) first
        runs the gate, which then waits, as the CLI's ``resume --answer GATE=CHOICE`` answers
        the gate when the run reaches it. Without a node: reopen the unfinished run offered
        from disk (``resume_offer``). ``comment`` is kept in the gate's evidence and in the
        context (``human.gate.comment``).
        """
        for name, value in (("choice", choice), ("comment", comment)):
            if value is not None and not isinstance(value, str):  # from Python
                raise RunError(f"{name} is a string such as 'Y', not {value!r}")
        with self.live.exclusive():
            if to is not None:
                self.view.require_node(to)
            if node_id is None and (choice or comment):
                node_id = self._waiting_gate_for(choice)
            if node_id is None:
                return self._resume_offered(to)
            self.view.require_node(node_id)
            first: list[str] = []
            offer = self.live.resume_offer
            if self.live.live_run is None and offer is not None:
                if offer.state is not RunState.WAITING or offer.where != node_id:
                    raise RunError(
                        "no gate waits in this kernel's run; "
                        + offer.describe(self.name, self._say)
                    )
                self.live.open(resume=offer.run_dir)  # the run on disk waits there: answer it
                first = [f"resumed run {offer.run_dir.name}", *self.live.resume_notes]
            run = self.live.run
            if run.pending_gate is None and not run.state.finished:
                self._reach_gate(node_id)
                run = self.live.run  # a kernel interrupt there reopens it
            try:
                if comment:
                    answered = run.answer(node_id, choice, comment=comment)
                else:
                    answered = run.answer(node_id, choice)
            except GateAnswerError:
                gate = run.pending_gate
                if (choice or "").strip() or gate is None:
                    raise
                answers = self._choice_command(gate)  # no choice, no default
                raise RunError(text.choose_text(gate, comment, answers)) from None
            self.live.publish()
            return self._advance(to=to, answered=answered, first=first)

    def _reach_gate(self, node_id: str) -> None:
        """Run the gate ``node_id`` the run is paused in front of, so that it waits; a RunError
        saying what to run when the run is elsewhere."""
        run = self.live.run
        if self.graph.nodes[node_id].handler_type != "wait.human":
            raise RunError(f"'{node_id}' is not a human gate; only a gate takes --choice")
        if run.next_node != node_id:
            raise RunError(
                f"gate '{node_id}' is not waiting: the run is {run.state.value} before "
                f"'{run.next_node}'; run to it first ({self._say.run_to(node_id)}, or "
                f"{self._say.go_on()}, which stops when a gate waits)"
            )
        self.live.steps(max_steps=1)

    def _waiting_gate_for(self, choice: str | None) -> str:
        """The gate ``resume --choice`` without a node answers: the one waiting, in the open run
        or (after a restart) in the run on disk offered for resume; a RunError saying how to
        name one when none waits."""
        gate = self.view.pending_gate()
        if gate is not None:
            return gate.node_id
        offer = self.live.resume_offer
        if (
            self.live.live_run is None
            and offer is not None
            and offer.state is RunState.WAITING
            and offer.where is not None
        ):
            return offer.where
        raise RunError(
            f"--choice {choice or ''} answers a waiting gate, and no gate of {self.name} waits; "
            f"name the gate to run to it and answer it there: {self._say.answer_with('GATE')}"
        )

    def _other_unfinished(self, *, any_text: bool = False) -> ResumeOffer | None:
        """The newest unfinished run of this pipeline on disk that is not the open run."""
        found = find_unfinished(self.graph, self.workdir, any_text=any_text)
        mine = self.live.live_run.run_dir if self.live.live_run is not None else None
        return None if found is None or found.run_dir == mine else found

    def _nothing_to_resume(self) -> str:
        """Why there is nothing to resume: the open run completed, or the unfinished run on disk
        is of another text of the pipeline (a user who fixed the pipeline and reloaded it finds
        the old run is not offered)."""
        other = self._other_unfinished(any_text=True)
        if other is None:
            if self.live.started and self.live.run.state is RunState.COMPLETED:
                return (
                    f"nothing to resume: the run of {self.name} completed; {self._say.reset()} "
                    "starts a new one"
                )
            return f"nothing to resume: no unfinished run of {self.name} on disk"
        here = Path(self.workdir) == Path.cwd().resolve()
        where = "" if here else f" --workdir {self.workdir}"
        return (
            f"nothing to resume with this text of {self.name}: its unfinished run "
            f"{other.run_dir.name} was started from another text, and a run goes on only with the "
            f"text it started with. {self._say.step()} starts a new run with this one; "
            f"%pipeline load {other.run_dir / PIPELINE_FILE}{where} then {self._say.resume()} "
            f"reopens the old one; {self._say.keep()} carries it over to this text (unchanged "
            "nodes keep their results)"
        )

    def _resume_offered(self, to: str | None) -> TextResult:
        """``resume`` without a gate: reopen the offered run (and go on, when it was paused);
        else go on with the open run where it stopped (paused), or say what does (waiting,
        failed); else reopen the newest unfinished run of this text on disk."""
        offer = self.live.resume_offer
        if offer is not None and offer.edited:  # of another text: kept only by carrying over
            return TextResult(self._nothing_to_resume())
        if offer is None:
            if self.view.pending_gate() is not None:
                return TextResult(self._waiting_text())
            state = self.live.run.state if self.live.started else None
            if state is RunState.PAUSED:
                return self._advance(to=to)
            if state is RunState.FAILED:
                raise RunError(
                    f"the run of {self.name} failed at {self.live.run.failed_node or 'a node'}: "
                    f"{self._say.again()} goes on from there, {self._say.reset()} starts a new run"
                )
            offer = self._other_unfinished()
            if offer is None:
                return TextResult(self._nothing_to_resume())
        run = self.live.open(resume=offer.run_dir)
        lines = [f"resumed run {offer.run_dir.name}", *self.live.resume_notes]
        if run.state is RunState.PAUSED:  # it goes on, as the CLI's resume does
            if self.live_lines is not None:
                for head in lines:
                    self.live_lines(head)
                return self._advance(to=to)
            return TextResult("\n".join([*lines, self._advance(to=to).text]))
        lines.append(self.view.status_line())
        failure = self.view.failure_text()
        if failure:
            lines += [
                f"failed: {text.failure_line(failure, 300)}",
                f"{self._say.again()} runs it again",
            ]
        return TextResult("\n".join(lines))

    def start_new(self) -> TextResult:
        """Decline the offered run: the next action starts a new run (the old one stays)."""
        self.live.resume_offer = None
        return self.reset()

    def retry(self, node_id: str | None = None) -> TextResult:
        """Re-arm a failed or stopped run at its failed node (or ``node_id``), then ``run``."""
        with self.live.exclusive():
            if node_id is not None:
                self.view.require_node(node_id)
            if not self.live.started:
                raise RunError(self._nothing_ran_yet(node_id))
            try:
                armed = self.live.run.retry(node_id)
            except NothingToRetryError as exc:  # the engine names its Python call
                raise RunError(f"{exc.problem} ({self._say.retry('NODE')})") from None
            self.live.publish()
            note = rearmed_note(node_id, armed)
            return self._advance(first=[f"note: {note}"] if note else [])

    def _nothing_ran_yet(self, node_id: str | None) -> str:
        """Why a retry before the run began is refused, and what runs the node instead."""
        offer = self.live.resume_offer
        if self.live.live_run is None and offer is not None:
            return f"nothing to retry in this kernel yet; {offer.describe(self.name, self._say)}"
        say = self._say
        way = f"{say.step()} runs the first node, {say.go_on()} runs on to a gate or the end"
        if node_id is not None and node_id == self.view.next_node():
            way = f"{say.step()} runs {node_id}"
        elif node_id is not None:
            way = f"{say.run_to(node_id)} runs up to {node_id}, then {say.step()} runs it"
        return f"nothing to retry: no node of {self.name} has run yet; {way}"

    def stop(self) -> TextResult:
        """Ask the running action to stop: the running node is interrupted (a tool's process
        group is killed) and no further node starts; the run stays resumable. With nothing
        running, it does nothing and says so."""
        self.live.check_current()
        running = self.live.model.running
        if running is None and not self.live.busy:
            return TextResult(f"nothing to stop: no step or run of {self.name} is running")
        self.live.stop_requested.set()
        self._cancel_running()
        where = f" at {running[0]}" if running is not None else ""
        return TextResult(f"stop requested{where}")

    def _cancel_running(self) -> None:
        """The one place that asks the engine to stop the running node."""
        if self.live.live_run is not None:
            self.live.live_run.interrupt()

    def close(self) -> None:
        """Also stop an action still running (the kernel shuts down or restarts): its node is
        interrupted, so no tool outlives the kernel to finish its work unwatched while the
        re-run notebook does it again, and the run stays resumable at that node. Waits for the
        stop at most :data:`STOP_AT_CLOSE_SECONDS`."""
        self.live.close()
        if not self.live.busy:
            return
        self.live.stop_requested.set()
        self._cancel_running()
        self.live.wait_idle(STOP_AT_CLOSE_SECONDS)

    def _advance(
        self,
        to: str | None = None,
        max_steps: int | None = None,
        single: bool = False,
        answered: StepResult | None = None,
        first: list[str] | None = None,
    ) -> TextResult:
        """Step until ``to``, ``max_steps``, a gate, the end, a stop or an interrupt.

        One line per executed step (the ``answered`` gate's first, counted as one), then (for
        ``run``) a summary line. A run stopped in a node (interrupt, Stop) goes on as a resume
        does (the CLI's, or one after a restart): reopened from its checkpoint, so the nodes
        not run yet take the files as they are now, and what changed meanwhile is said.
        """
        fresh = self.live.live_run is None
        offer = self.live.resume_offer
        run = self.live.run
        lines: list[str] = [*(first or ())]
        if answered is not None:
            lines.append(text.step_line(answered))
        if fresh and offer is not None:
            lines.append(f"note: started a new run; {offer.run_dir.name} stays on disk")
            if offer.orphans:  # unwatched, it would do its work alongside the new run's
                lines += [f"note: {said}" for said in reap_survivors(offer.run_dir)]
        interrupted = run.state is RunState.PAUSED and run.result().interrupted_node is not None
        if interrupted and not self.live.reopened:
            run = self.live.open(resume=run.run_dir)
            if self.live.resume_notes:
                lines += ["changed while the run was stopped:", *self.live.resume_notes]
        self.live.reopened = False
        if run.state.finished and answered is None:
            if run.state is RunState.FAILED:
                at = f" at {run.failed_node}" if run.failed_node else ""
                return TextResult(
                    f"run failed{at}; nothing to do: {self._say.again()} goes on from there, "
                    f"{self._say.reset()} starts a new run"
                )
            return TextResult(f"run completed; nothing to do: {self._say.reset()} starts a new run")
        # One step's line is its result: printed as it came, it would leave the result empty
        # (terminal IPython shows an empty Out[N]) and ``r = %pipeline step`` without it.
        show = None if single else self.live_lines
        if show is not None:  # the step lines are shown as they come, not again at the end
            for line in lines:
                show(line)
            lines = []
        self.live.stop_requested.clear()
        self.live.going = max_steps != 1
        try:
            done = self.live.steps(to=to, max_steps=max_steps, show=show)
        finally:
            if self.live.going:  # the loop ended: say where it stopped (paused, waiting...)
                self.live.going = False
                self.live.notify()
        run, steps = done.run, done.steps + (answered is not None)
        if show is None:
            lines.extend(done.lines)
        self.live.settle(republish=steps == 0)
        if run.state is RunState.WAITING:
            lines.append(self._waiting_text())
        elif single and steps == 0 and not lines:
            lines.append(f"step: nothing executed ({run.state.value})")
        if not single:
            reason = self.view.failure_text() if run.state.finished else ""
            lines.append(text.summary_line(steps, self.view.state_name, reason))
        elif run.state is RunState.FAILED:
            lines.append(f"run failed: {text.failure_line(self.view.failure_text(), 300)}")
        if self.live.model.dead_end is not None and run.state.finished:
            lines.append(text.dead_end_text(self.live.model.dead_end))
        if to is not None and run.state.finished:
            lines.append(text.missed_stop_note(run.state.value, to))
        return TextResult("\n".join(lines), run.result())

    def accept(self, *node_ids: str) -> TextResult:
        """Accept the current inputs as the new baseline: of the nodes named, or of every node
        that is not run yet or is shown stale now (also nodes whose inputs changed after they
        ran)."""
        for node_id in node_ids:
            self.view.require_node(node_id)
        from freshness_magic.freshness.events import some_files
        from freshness_magic.freshness.extension import accept_changes

        with self.live.exclusive():
            self.live.refresh_freshness()
            if node_ids:
                accepted = {}
                for node_id in dict.fromkeys(node_ids):
                    accepted.update(accept_changes(self.live.run, node_id=node_id))
            else:
                accepted = accept_changes(self.live.run)
                for stale_id in sorted(set(self.view.stale) - set(accepted)):
                    accepted.update(accept_changes(self.live.run, node_id=stale_id))
            self.live.publish()
        target = ", ".join(dict.fromkeys(node_ids)) or "all stale nodes and nodes not run yet"
        files = sorted({f for changed in accepted.values() for f in changed})
        what = f": {some_files(files, ACCEPTED_SHOWN)}" if files else ": no changed files"
        return TextResult(f"accepted current inputs of {target}{what}")

    def accept_here(self, node_id: str) -> TextResult:
        """The view's Accept on one node: its changed inputs; for a node shown outdated by
        changed inputs upstream, those nodes' (what ``why`` offers, as that clears its mark)."""
        self.view.require_node(node_id)
        view = self.view.views()[node_id]
        made_by = view.details.get("upstream") if view.state is NodeState.OUTDATED else None
        return self.accept(*(made_by or [node_id]))

    def keep_run(self) -> TextResult:
        """Carry a run of an earlier text of this pipeline over to this text (``--keep-run``,
        ``%pipeline keep``, the banner's Keep the run): the offered one, else the newest run of
        this pipeline on disk. Unchanged nodes keep their results, an edited node shows stale
        and its readers outdated, removed nodes drop out, added ones are pending. A refused
        edit (the run cannot go on in it) changes nothing."""
        live = self.live
        with live.exclusive():
            if live.started:
                raise RunError(
                    f"{self.name} has its own run already; {self._say.reset()} first to keep "
                    "another"
                )
            offer = live.resume_offer
            found = offer.run_dir if offer is not None else live.latest_run_dir()
            if found is None:
                raise RunError(f"no run of {self.name} under {self.workdir} to keep")
            if same_pipeline(self.graph.source, run_dir_hash(found)):
                raise RunError(
                    f"run {found.name} already runs this text of {self.name}: "
                    f"{self._say.resume()} goes on with it"
                )
            run = live.open(resume=found, carry=True)
            lines = [f"kept run {found.name} with this text of {self.name}:", *live.resume_notes]
            lines.append(self.view.status_line())
            live.publish()
            return TextResult("\n".join(lines), run.result())

    def reset(self) -> TextResult:
        """Leave the current run; the next action starts a new one.

        A run that began and did not complete is then offered, as a load offers one found on
        disk: ``resume`` (or the view's Resume) goes back to it, so a stray reset loses
        nothing. A reset with no begun run (or ``start_new``) declines the offer.
        """
        with self.live.exclusive():
            left = self.live.live_run if self.live.started else None
            self.live.detach()
            if left is not None:
                left.close()
            self.live.model = ViewModel(self.graph)
            self.live.offer_drawn = False
            offer = find_unfinished(self.graph, self.workdir) if left is not None else None
            if offer is not None and left is not None and offer.run_dir != left.run_dir:
                offer = None  # an older run, not the one just left
            self.live.resume_offer = replace(offer, left=True) if offer else None
            self.live.publish()
        if offer is None:
            head = "reset: a new run starts at the beginning"
        else:
            head = (
                f"reset: the next action starts a new run; {offer.run_dir.name} stays on disk "
                f"and {self._say.resume()} goes back to it"
            )
        return TextResult(head + "\n" + self.view.status_line())


REPR_ROWS = 60
"""Most node rows the object's own display lists (a 38,000-node pipeline printed them all)."""


def _shows_html(include: Any) -> bool:
    """Whether the front end shows HTML: ``include`` when given, else the shell's active types
    (terminal IPython shows text only, and the layout would be made for nothing)."""
    if include is not None:
        return "text/html" in include
    from IPython import get_ipython

    shell = get_ipython()
    formatter = getattr(shell, "display_formatter", None)
    return formatter is None or "text/html" in getattr(formatter, "active_types", ("text/html",))


def _in_ipython() -> bool:
    """Whether an IPython shell runs in this process (where the magics are the way to act);
    never imports IPython itself."""
    ipython = sys.modules.get("IPython")
    return ipython is not None and ipython.get_ipython() is not None


def _workdir(raw: str | os.PathLike[str] | None) -> Path:
    """The work directory of a pipeline made from Python: a folder (it may not exist yet)."""
    from freshness_magic.pathsafety import workdir_problem

    path = Path(raw if raw is not None else Path.cwd()).expanduser().resolve()
    problem = workdir_problem(path)
    if problem is not None:
        raise RunError(f"workdir {raw}: {problem}")
    return path


def _load(source: str | os.PathLike[str] | Graph, workdir: Path) -> Graph:
    """The graph of ``source`` (a path, DOT text or a Graph), validated against ``workdir`` as
    ``freshness-magic validate`` does: errors raise, warnings go to stderr."""
    from freshness_magic.engine.pipeline import load_pipeline, read_pipeline_text
    from freshness_magic.engine.validation import Severity
    from freshness_magic.lint import session_validator

    path: str | None = None
    if isinstance(source, Graph):
        graph = source
    elif isinstance(source, str | os.PathLike):
        raw = os.fspath(source)
        if isinstance(source, os.PathLike) or "digraph" not in raw:
            path = raw
            raw = read_pipeline_text(raw)
        graph = load_pipeline(raw, path=path)
    else:
        raise PipelineSourceError(
            f"a pipeline is made from a .dot path, DOT text or a Graph, not {type(source).__name__}"
        )
    shown = [
        d
        for d in session_validator(workdir=workdir).validate(graph)
        if d.severity is not Severity.INFO
    ]
    errors = [d for d in shown if d.severity is Severity.ERROR]
    if errors:
        lines = "\n".join("  " + d.format(path) for d in shown)
        raise ValidationError(
            f"pipeline {graph.name or path or ''} did not load: {len(errors)} validation "
            f"error{'s' if len(errors) != 1 else ''} to fix:\n{lines}",
            list(shown),
        )
    for diagnostic in shown:
        print(diagnostic.format(path), file=sys.stderr)
    return graph
