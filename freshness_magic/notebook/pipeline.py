"""The notebook's pipeline object: one loaded pipeline and its actions (step, run, resume, retry,
stop, accept, reset); its run's lifecycle is in :mod:`~freshness_magic.notebook.live`.

The magics and the widget's buttons both call these methods, so a click and a magic do exactly
the same thing. One lock per pipeline (and so per run) lets one action run at a time; ``stop``
is the one action that does not take it. Steps go one at a time through :meth:`Run.step`; after
each the view model takes the run's state (:mod:`~freshness_magic.notebook.viewmodel`), so a
view never reads a run in the middle of a step. The text of every answer comes from
:mod:`~freshness_magic.notebook.text`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from freshness_magic.engine import RunState
from freshness_magic.engine.handlers.tool import reap_survivors
from freshness_magic.engine.persistence import PIPELINE_FILE
from freshness_magic.engine.recovery import rearmed_note
from freshness_magic.errors import GateAnswerError, NothingToRetryError, RunError
from freshness_magic.notebook import text
from freshness_magic.notebook.live import LivePipeline
from freshness_magic.notebook.saved import ResumeOffer, find_unfinished
from freshness_magic.notebook.stepping import step_loop
from freshness_magic.notebook.text import TextResult
from freshness_magic.notebook.viewmodel import ViewModel
from freshness_magic.notebook.viewstate import NodeState

if TYPE_CHECKING:
    from freshness_magic.engine.state import StepResult


RUN_SPECS = ("backend", "executor")
"""Run options given as spec strings (``--backend``, ``--executor``), set only when asked."""
ACCEPTED_SHOWN = 10
"""Files ``accept`` names before it counts the rest."""


STOP_AT_CLOSE_SECONDS = 4.0
"""Long enough for a tool's process group to get SIGTERM and, after the tool handler's grace,
SIGKILL; short of the 5 s a Jupyter restart waits before it kills the kernel."""


@dataclass(repr=False, eq=False)
class NotebookPipeline(LivePipeline):
    """A pipeline loaded in the notebook under ``name``; owns its run, view model and widget."""

    # --- actions ---------------------------------------------------------------------------------

    def step(self) -> TextResult:
        """Execute the next node."""
        with self.exclusive():
            return self._advance(max_steps=1, single=True)

    def run_to(self, to: str | None = None, max_steps: int | None = None) -> TextResult:
        """Run until ``to``, the exit, a failure or a gate (``run`` on a finished run: no-op)."""
        with self.exclusive():
            if to is not None:
                self.require_node(to)
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
        with self.exclusive():
            if to is not None:
                self.require_node(to)
            if node_id is None and (choice or comment):
                node_id = self._waiting_gate_for(choice)
            if node_id is None:
                return self._resume_offered(to)
            self.require_node(node_id)
            first: list[str] = []
            offer = self.resume_offer
            if self._run is None and offer is not None:
                if offer.state is not RunState.WAITING or offer.where != node_id:
                    raise RunError(
                        f"no gate waits in this kernel's run; {offer.describe(self.name)}"
                    )
                self._open(resume=offer.run_dir)  # the run on disk waits there: answer it
                first = [f"resumed run {offer.run_dir.name}", *self.resume_notes]
            run = self.run
            if run.pending_gate is None and not run.state.finished:
                self._reach_gate(node_id)
                run = self.run  # a kernel interrupt there reopens it
            try:
                if comment:
                    answered = run.answer(node_id, choice, comment=comment)
                else:
                    answered = run.answer(node_id, choice)
            except GateAnswerError:
                gate = run.pending_gate
                if (choice or "").strip() or gate is None:
                    raise
                raise RunError(text.choose_text(gate, comment)) from None  # no choice, no default
            self.publish()
            return self._advance(to=to, answered=answered, first=first)

    def _reach_gate(self, node_id: str) -> None:
        """Run the gate ``node_id`` the run is paused in front of, so that it waits; a RunError
        saying what to run when the run is elsewhere."""
        run = self.run
        if self.graph.nodes[node_id].handler_type != "wait.human":
            raise RunError(f"'{node_id}' is not a human gate; only a gate takes --choice")
        if run.next_node != node_id:
            raise RunError(
                f"gate '{node_id}' is not waiting: the run is {run.state.value} before "
                f"'{run.next_node}'; run to it first (%pipeline run --to {node_id}, or "
                "%pipeline run, which stops when a gate waits)"
            )
        step_loop(
            run,
            stop=self._stop,
            after_step=lambda: self.publish(freshness=False),
            on_interrupt=lambda node: self._interrupted(node, "interrupted (kernel interrupt)"),
            max_steps=1,
        )

    def _waiting_gate_for(self, choice: str | None) -> str:
        """The gate ``resume --choice`` without a node answers: the one waiting, in the open run
        or (after a restart) in the run on disk offered for resume; a RunError saying how to
        name one when none waits."""
        gate = self.pending_gate()
        if gate is not None:
            return gate.node_id
        offer = self.resume_offer
        if (
            self._run is None
            and offer is not None
            and offer.state is RunState.WAITING
            and offer.where is not None
        ):
            return offer.where
        raise RunError(
            f"--choice {choice or ''} answers a waiting gate, and no gate of {self.name} waits; "
            "name the gate to run to it and answer it there: %pipeline resume GATE --choice KEY"
        )

    def _other_unfinished(self, *, any_text: bool = False) -> ResumeOffer | None:
        """The newest unfinished run of this pipeline on disk that is not the open run."""
        found = find_unfinished(self.graph, self.workdir, any_text=any_text)
        mine = self._run.run_dir if self._run is not None else None
        return None if found is None or found.run_dir == mine else found

    def _nothing_to_resume(self) -> str:
        """Why there is nothing to resume: the open run completed, or the unfinished run on disk
        is of another text of the pipeline (a user who fixed the pipeline and reloaded it finds
        the old run is not offered)."""
        other = self._other_unfinished(any_text=True)
        if other is None:
            if self.started and self.run.state is RunState.COMPLETED:
                return (
                    f"nothing to resume: the run of {self.name} completed; %pipeline reset "
                    "starts a new one"
                )
            return f"nothing to resume: no unfinished run of {self.name} on disk"
        here = Path(self.workdir) == Path.cwd().resolve()
        where = "" if here else f" --workdir {self.workdir}"
        return (
            f"nothing to resume with this text of {self.name}: its unfinished run "
            f"{other.run_dir.name} was started from another text, and a run goes on only with the "
            f"text it started with. %pipeline step starts a new run with this one; %pipeline load "
            f"{other.run_dir / PIPELINE_FILE}{where} then %pipeline resume reopens the old one"
        )

    def _resume_offered(self, to: str | None) -> TextResult:
        """``resume`` without a gate: reopen the offered run (and go on, when it was paused);
        else go on with the open run where it stopped (paused), or say what does (waiting,
        failed); else reopen the newest unfinished run of this text on disk."""
        offer = self.resume_offer
        if offer is None:
            gate = self.pending_gate()
            if gate is not None:
                return TextResult(text.waiting_text(gate, self.gate_note()))
            state = self.run.state if self.started else None
            if state is RunState.PAUSED:
                return self._advance(to=to)
            if state is RunState.FAILED:
                raise RunError(
                    f"the run of {self.name} failed at {self.run.failed_node or 'a node'}: "
                    "%pipeline retry goes on from there, %pipeline reset starts a new run"
                )
            offer = self._other_unfinished()
            if offer is None:
                return TextResult(self._nothing_to_resume())
        run = self._open(resume=offer.run_dir)
        lines = [f"resumed run {offer.run_dir.name}", *self.resume_notes]
        if run.state is RunState.PAUSED:  # it goes on, as the CLI's resume does
            if self.live_lines is not None:
                for head in lines:
                    self.live_lines(head)
                return self._advance(to=to)
            return TextResult("\n".join([*lines, self._advance(to=to).text]))
        lines.append(self.status_line())
        failure = self.failure_text()
        if failure:
            lines += [f"failed: {text.failure_line(failure, 300)}", "%pipeline retry runs it again"]
        return TextResult("\n".join(lines))

    def start_new(self) -> TextResult:
        """Decline the offered run: the next action starts a new run (the old one stays)."""
        self.resume_offer = None
        return self.reset()

    def retry(self, node_id: str | None = None) -> TextResult:
        """Re-arm a failed or stopped run at its failed node (or ``node_id``), then ``run``."""
        with self.exclusive():
            if node_id is not None:
                self.require_node(node_id)
            if not self.started:
                raise RunError(self._nothing_ran_yet(node_id))
            try:
                armed = self.run.retry(node_id)
            except NothingToRetryError as exc:  # the engine names its Python call
                raise RunError(f"{exc.problem} (%pipeline retry NODE)") from None
            self.publish()
            note = rearmed_note(node_id, armed)
            return self._advance(first=[f"note: {note}"] if note else [])

    def _nothing_ran_yet(self, node_id: str | None) -> str:
        """Why a retry before the run began is refused, and what runs the node instead."""
        offer = self.resume_offer
        if self._run is None and offer is not None:
            return f"nothing to retry in this kernel yet; {offer.describe(self.name)}"
        way = "%pipeline step runs the first node, %pipeline run runs on to a gate or the end"
        if node_id is not None and node_id == self.next_node():
            way = f"%pipeline step runs {node_id}"
        elif node_id is not None:
            way = f"%pipeline run --to {node_id} runs up to {node_id}, then %pipeline step runs it"
        return f"nothing to retry: no node of {self.name} has run yet; {way}"

    def stop(self) -> TextResult:
        """Ask the running action to stop: the running node is interrupted (a tool's process
        group is killed) and no further node starts; the run stays resumable. With nothing
        running, it does nothing and says so."""
        self._check_current()
        running = self.model.running
        if running is None and not self.busy:
            return TextResult(f"nothing to stop: no step or run of {self.name} is running")
        self._stop.set()
        self._cancel_running()
        where = f" at {running[0]}" if running is not None else ""
        return TextResult(f"stop requested{where}")

    def _cancel_running(self) -> None:
        """The one place that asks the engine to stop the running node."""
        if self._run is not None:
            self._run.interrupt()

    def close(self) -> None:
        """Also stop an action still running (the kernel shuts down or restarts): its node is
        interrupted, so no tool outlives the kernel to finish its work unwatched while the
        re-run notebook does it again, and the run stays resumable at that node. Waits for the
        stop at most :data:`STOP_AT_CLOSE_SECONDS`."""
        super().close()
        if not self.busy:
            return
        self._stop.set()
        self._cancel_running()
        if self._lock.acquire(timeout=STOP_AT_CLOSE_SECONDS):
            self._lock.release()

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
        fresh = self._run is None
        offer = self.resume_offer
        run = self.run
        lines: list[str] = [*(first or ())]
        if answered is not None:
            lines.append(text.step_line(answered))
        if fresh and offer is not None:
            lines.append(f"note: started a new run; {offer.run_dir.name} stays on disk")
            if offer.orphans:  # unwatched, it would do its work alongside the new run's
                lines += [f"note: {said}" for said in reap_survivors(offer.run_dir)]
        interrupted = run.state is RunState.PAUSED and run.result().interrupted_node is not None
        if interrupted and not self.reopened:
            run = self._open(resume=run.run_dir)
            if self.resume_notes:
                lines += ["changed while the run was stopped:", *self.resume_notes]
        self.reopened = False
        if run.state.finished and answered is None:
            if run.state is RunState.FAILED:
                at = f" at {run.failed_node}" if run.failed_node else ""
                return TextResult(
                    f"run failed{at}; nothing to do: %pipeline retry goes on from there, "
                    "%pipeline reset starts a new run"
                )
            return TextResult("run completed; nothing to do: %pipeline reset starts a new run")
        # One step's line is its result: printed as it came, it would leave the result empty
        # (terminal IPython shows an empty Out[N]) and ``r = %pipeline step`` without it.
        show = None if single else self.live_lines
        if show is not None:  # the step lines are shown as they come, not again at the end
            for line in lines:
                show(line)
            lines = []
        self._stop.clear()
        done = step_loop(
            run,
            stop=self._stop,
            after_step=lambda: self.publish(freshness=False),
            on_interrupt=lambda node: self._interrupted(node, "interrupted (kernel interrupt)"),
            to=to,
            max_steps=max_steps,
            show=show,
        )
        run, steps = done.run, done.steps + (answered is not None)
        if show is None:
            lines.extend(done.lines)
        self._settle(republish=steps == 0)
        if run.state is RunState.WAITING:
            lines.append(text.waiting_text(self.pending_gate(), self.gate_note()))
        elif single and steps == 0 and not lines:
            lines.append(f"step: nothing executed ({run.state.value})")
        if not single:
            reason = self.failure_text() if run.state.finished else ""
            lines.append(text.summary_line(steps, self.state_name, reason))
        elif run.state is RunState.FAILED:
            lines.append(f"run failed: {text.failure_line(self.failure_text(), 300)}")
        if self.model.dead_end is not None and run.state.finished:
            lines.append(text.dead_end_text(self.model.dead_end))
        if to is not None and run.state.finished:
            lines.append(text.missed_stop_note(run.state.value, to))
        return TextResult("\n".join(lines), run.result())

    def accept(self, *node_ids: str) -> TextResult:
        """Accept the current inputs as the new baseline: of the nodes named, or of every node
        that is not run yet or is shown stale now (also nodes whose inputs changed after they
        ran)."""
        for node_id in node_ids:
            self.require_node(node_id)
        from freshness_magic.freshness.events import some_files
        from freshness_magic.freshness.extension import accept_changes

        with self.exclusive():
            self.refresh_freshness()
            if node_ids:
                accepted = {}
                for node_id in dict.fromkeys(node_ids):
                    accepted.update(accept_changes(self.run, node_id=node_id))
            else:
                accepted = accept_changes(self.run)
                for stale_id in sorted(set(self.stale) - set(accepted)):
                    accepted.update(accept_changes(self.run, node_id=stale_id))
            self.publish()
        target = ", ".join(dict.fromkeys(node_ids)) or "all stale nodes and nodes not run yet"
        files = sorted({f for changed in accepted.values() for f in changed})
        what = f": {some_files(files, ACCEPTED_SHOWN)}" if files else ": no changed files"
        return TextResult(f"accepted current inputs of {target}{what}")

    def accept_here(self, node_id: str) -> TextResult:
        """The view's Accept on one node: its changed inputs; for a node shown outdated by
        changed inputs upstream, those nodes' (what ``why`` offers, as that clears its mark)."""
        self.require_node(node_id)
        view = self.views()[node_id]
        made_by = view.details.get("upstream") if view.state is NodeState.OUTDATED else None
        return self.accept(*(made_by or [node_id]))

    def reset(self) -> TextResult:
        """Leave the current run; the next action starts a new one.

        A run that began and did not complete is then offered, as a load offers one found on
        disk: ``resume`` (or the view's Resume) goes back to it, so a stray reset loses
        nothing. A reset with no begun run (or ``start_new``) declines the offer.
        """
        with self.exclusive():
            left = self._run if self.started else None
            self._detach()
            if left is not None:
                left.close()
            self._model = ViewModel(self.graph)
            offer = find_unfinished(self.graph, self.workdir) if left is not None else None
            if offer is not None and left is not None and offer.run_dir != left.run_dir:
                offer = None  # an older run, not the one just left
            self.resume_offer = replace(offer, left=True) if offer else None
            self.publish()
        if offer is None:
            head = "reset: a new run starts at the beginning"
        else:
            head = (
                f"reset: the next action starts a new run; {offer.run_dir.name} stays on disk "
                "and %pipeline resume goes back to it"
            )
        return TextResult(head + "\n" + self.status_line())
