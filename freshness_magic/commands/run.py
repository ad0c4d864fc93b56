"""``freshness-magic run PIPELINE.dot``: run a pipeline from the command line.

Shared with ``resume``: the options, the progress display and the driving loop. Gates are answered
with an answer loop over :meth:`Run.answer` (no blocking interviewer): when the run waits at a
gate, the next ``--answer NODE=CHOICE`` given for that node is used (each answer once, in order,
so ``--answer g=N --answer g=Y`` answers two visits of ``g``); else with ``--auto-approve`` the
:class:`AutoApproveInterviewer` picks (the first choice), with ``--ask`` the
:class:`ConsoleInterviewer` asks on the terminal (the gate's ``human.timeout`` takes its default);
else the run stops WAITING (exit 3) and ``resume RUN_DIR --answer NODE=CHOICE`` continues it.

Exit codes: 0 completed, 1 failed, 3 paused (waiting at a gate or stopped at ``--to``), 2 usage or
input errors (parse and validation errors print ``path:line:col: message``).

The progress display prints a line for every finished node, branch nodes of a ``parallel`` node
too (their events carry ``data["branch_of"]``; they are indented under it). If its output is
closed (``run ... | head -3``) it falls silent and the run goes on to its normal stop; the CLI then
exits 141. The engine is imported when a command runs, not when the parser is built.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import sys
import tempfile
import threading
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from shlex import quote
from typing import IO, TYPE_CHECKING, Any

from freshness_magic.choices import path_arg
from freshness_magic.commands import invoked_as
from freshness_magic.errors import RunError

if TYPE_CHECKING:
    from freshness_magic.engine import Run, RunResult
    from freshness_magic.engine.events import Event
    from freshness_magic.engine.interviewers import Interviewer
    from freshness_magic.engine.model import Graph

EXIT_CODES = {"completed": 0, "failed": 1, "waiting": 3, "paused": 3}

_MARKS = {
    "success": "ok",
    "partial_success": "partial",
    "fail": "FAIL",
    "retry": "retry",
    "skipped": "skip",
    "waiting": "wait",
}


def parse_answer(text: str) -> tuple[str, str]:
    """``NODE=CHOICE`` -> (node, choice); argparse reports a malformed one as a usage error."""
    node, sep, choice = text.partition("=")
    if not sep or not node.strip() or not choice.strip():
        raise argparse.ArgumentTypeError(
            f"expected NODE=CHOICE (for example approve=Y), got {text!r}"
        )
    return node.strip(), choice.strip()


def add_drive_options(parser: argparse.ArgumentParser) -> None:
    """Options common to ``run`` and ``resume``."""
    parser.add_argument("--to", metavar="NODE", help="stop before executing NODE (exit 3)")
    parser.add_argument(
        "--answer",
        metavar="NODE=CHOICE",
        action="append",
        type=parse_answer,
        default=[],
        help="answer gate NODE with CHOICE (key, label or target id) when the run reaches it; "
        "repeat for several gates or several visits of one gate",
    )
    asking = parser.add_mutually_exclusive_group()
    asking.add_argument(
        "--auto-approve",
        action="store_true",
        help="answer every other gate with its first choice",
    )
    asking.add_argument(
        "--ask",
        action="store_true",
        help="ask every other gate on this terminal and go on with the answer (an empty line "
        "takes the gate's human.default_choice, as does its human.timeout when it passes)",
    )
    parser.add_argument(
        "--backend",
        metavar="SPEC",
        help="codergen backend: simulated (default), openai:MODEL[@BASE_URL], anthropic:MODEL, "
        "command:COMMAND LINE, python:MODULE:FUNCTION (resume: the run's own by default)",
    )
    parser.add_argument(
        "--executor",
        metavar="SPEC",
        help="where tool commands run: local, dask (a Dask cluster on this machine) or "
        "dask://HOST:PORT (default: the pipeline's executor attribute, else local)",
    )
    parser.add_argument(
        "--reuse",
        action="store_true",
        help="take a node's execution from an earlier successful one with the same definition, "
        "input files and read values (this run or an earlier run here) instead of running it",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object at the end")


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "run",
        help="run a pipeline",
        description=(
            "Run an Attractor DOT pipeline from its start node until the exit, a failure, a human "
            "gate without an answer, or --to. Exit codes: 0 completed, 1 failed, 3 paused or "
            "waiting, 2 usage or input error."
        ),
    )
    parser.add_argument("pipeline", metavar="PIPELINE.dot", type=path_arg, help="the pipeline file")
    parser.add_argument(
        "--workdir",
        metavar="DIR",
        type=path_arg,
        default=".",
        help="where commands run, an existing folder (default: .)",
    )
    parser.add_argument(
        "--runs-dir",
        metavar="DIR",
        type=path_arg,
        help="where run directories go (default: WORKDIR/.freshness/runs)",
    )
    add_drive_options(parser)
    parser.set_defaults(handler=main)


class Progress:
    """Prints one line per finished node (and gate/retry notices) as events arrive."""

    def __init__(self, out: IO[str], preamble: list[str] | None = None) -> None:
        self.out = out
        self.preamble = list(preamble or [])
        """Lines printed before the first node starts (not when a usage error stops the run
        before any does)."""
        self.live = out.isatty()
        """On a terminal the running node is shown until its result line replaces it."""
        self.closed = False
        """The output pipe was closed: print nothing more (the run itself goes on)."""
        self.held: dict[str, list[str]] = {}
        """Nodes a ``freshness=block`` held back, with the changed files, since they last ran."""
        self.stale_said: dict[str, str] = {}
        """The stale-input line printed for a node that has not finished yet: a block's retries
        check again, and the same news is printed once."""
        self._lock = threading.Lock()

    def __call__(self, event: Event) -> None:
        if self.closed:
            return
        try:
            self._show(event)
        except BrokenPipeError:
            self.closed = True

    def _print(self, text: str, end: str = "\n") -> None:
        """One line in one write, under a lock: parallel branches report from their threads,
        and ``print``'s separate writes of the text and its end let two lines run together."""
        with self._lock:
            self.out.write(text + end)
            self.out.flush()

    def _show(self, event: Event) -> None:
        from freshness_magic.engine.events import EventType
        from freshness_magic.freshness.events import (
            FreshnessEvent,
            blocked_by,
            describe_stale_input,
        )

        data = event.data
        if self.preamble and event.type in (
            EventType.STAGE_STARTED,
            EventType.STAGE_COMPLETED,  # a gate answered on resume
            EventType.STAGE_FAILED,
        ):
            for line in self.preamble:
                self._print(line)
            self.preamble.clear()
        branch_of = data.get("branch_of")
        indent = "  " if branch_of else ""
        node = f"{indent}{event.node_id}"
        if event.type is EventType.STAGE_STARTED and self.live:
            self._print(f"  {'...':<7} {node}", end="\r")
        elif event.type in (EventType.STAGE_COMPLETED, EventType.STAGE_FAILED):
            status = str(data.get("status", ""))
            # one line per node: the whole reason (stderr tail) is in the summary and status;
            # a failure's last line (the stderr's) is usually the error itself
            from freshness_magic.engine.handlers.tool import reason_ends

            first, last = reason_ends(str(data.get("failure_reason") or data.get("notes") or ""))
            note = f"{first} · {last}" if last and status == "fail" else first
            self.stale_said.pop(event.node_id or "", None)
            held = self.held.pop(event.node_id or "", None)
            if held is not None and status == "fail":  # the handler never ran: say why
                note = blocked_by(held)
            source = data.get("reused_from")
            mark = _MARKS.get(status, status)
            if isinstance(source, dict):  # not run: taken from an earlier execution
                mark = "reused"
                note = f"from run {source.get('run_id')}, step {source.get('step')}"
            if branch_of:
                note = f"[branch of {branch_of}] {note}"
            duration = float(data.get("duration") or 0.0)
            line = f"  {mark:<7} {node:<24} {duration:7.2f}s"
            clear = "\x1b[2K" if self.live else ""
            self._print(f"{clear}{line}  {note}".rstrip())
        elif event.type is EventType.STAGE_RETRYING:
            self._print(
                f"  {'retry':<7} {node:<24} attempt {data.get('attempt')} "
                f"failed ({data.get('failure_reason') or 'retry requested'}); "
                f"waiting {float(data.get('delay') or 0):.2f}s"
            )
        elif event.type == FreshnessEvent.STALE_INPUT:
            if data.get("mode") == "block":
                self.held[event.node_id or ""] = [str(f) for f in data.get("files") or ()]
            said = describe_stale_input(data)
            if self.stale_said.get(event.node_id or "") != said:
                self.stale_said[event.node_id or ""] = said
                clear = "\x1b[2K" if self.live else ""
                self._print(f"{clear}  {'stale':<7} {node:<24} {'':8}  {said}")
        elif event.type is EventType.PIPELINE_RESTARTED and "new_run_dir" in data:
            self._print(
                f"  {'restart':<7} {node:<24} {'':8}  loop_restart: the run goes on at "
                f"{event.node_id} in a fresh run directory, {data['new_run_dir']}"
            )
        elif event.type is EventType.GOAL_GATE_REDIRECT:  # named by its gate, not the node
            gate = f"{indent}{data.get('gate') or event.node_id}"
            self._print(
                f"  {'goal':<7} {gate:<24} {'':8}  unsatisfied; the run goes back to "
                f"{data.get('target')} (redirect {data.get('redirects')} of {data.get('limit')})"
            )


def drive(run: Run, args: argparse.Namespace, *, every_answer: bool = False) -> int:
    """Run, answering gates from ``--answer``/``--auto-approve``; print; return the exit code.

    The answers are checked before anything runs (:func:`checked_answers`). An ``--answer`` no
    waiting gate took is never silently dropped: after nodes ran it is a warning (their results
    stand; the exit code says where the run is); with ``every_answer`` (``resume``), when no node
    ran, it is a RunError after the summary (taking the answer was all the command was for).
    """
    from freshness_magic.engine import RunState
    from freshness_magic.engine.events import EventType
    from freshness_magic.engine.interviewers import AutoApproveInterviewer, ConsoleInterviewer

    answers = checked_answers(run.graph, args.answer)
    out = sys.stderr if args.json else sys.stdout
    auto: Interviewer | None = None
    if args.auto_approve:
        auto = AutoApproveInterviewer()
    elif args.ask:
        auto = ConsoleInterviewer(sys.stdin, out)
    preamble = [f"codergen backend: {text}" for text in backend_text(run)]
    if run.dispatch is not None:
        preamble.append(f"executor: {run.dispatch.label}")
    progress = Progress(out, preamble)  # printed once a node starts
    worked: list[object] = []  # a node ran or a gate took an answer: the command did work

    def listen(event: Event) -> None:
        if not worked and event.type in (
            EventType.STAGE_STARTED,
            EventType.STAGE_COMPLETED,  # a gate answered
            EventType.STAGE_FAILED,
        ):
            worked.append(event.node_id)
        progress(event)

    listener = run.events.subscribe(listen)
    stops = _Stops()
    between = False
    try:
        with _signals_as_interrupt(stops):
            try:
                _drive_until_stop(run, args, answers, auto)
            except KeyboardInterrupt:
                # (b) below: the signal came between nodes, outside the engine's handling
                between = True
                run.events.unsubscribe(listener)
                run = _reopened(run)
            stops.armed = False
    finally:
        run.events.unsubscribe(listener)
    if stops.received:
        _stop_tool_groups(run)
        _say_stopped(stops.received[0], out, between=between)
    result = run.result()
    if args.json:
        print(json.dumps(result.to_dict(), indent=2, ensure_ascii=False, default=str))
    else:
        from freshness_magic.freshness.extension import blocked_inputs

        print_summary(result, sys.stdout, blocked=blocked_inputs(run, result.failed_node))
    unused = [f"{node}={choice}" for node, queued in answers.items() for choice in queued]
    if unused and not stops.received:
        waiting = f"gate '{run.pending_gate.node_id}'" if run.pending_gate else "no gate"
        problem = (
            f"--answer {' '.join(unused)} not used: that gate was not waiting (the run is "
            f"{result.status}, {waiting} waiting)"
        )
        if every_answer and not worked:  # the answer was all this command was asked to do
            raise RunError(f"{problem}; answer the gate the run waits at")
        # nodes ran: their results stand, and the exit code says where the run is
        print(f"warning: {problem}; the nodes that ran keep their results", file=sys.stderr)
    if args.to and result.state in (RunState.COMPLETED, RunState.FAILED) and not stops.received:
        from freshness_magic.views.text import missed_stop_note

        print(missed_stop_note(result.status, args.to), file=sys.stderr)
    return EXIT_CODES[result.status]


def _drive_until_stop(
    run: Run,
    args: argparse.Namespace,
    answers: dict[str, deque[str]],
    auto: Interviewer | None,
) -> None:
    """Run, answering each gate from ``answers``, else ``auto`` (``--auto-approve``, ``--ask``),
    while one has an answer."""
    from freshness_magic.engine import RunState

    while True:
        result = run.run(to=args.to)
        gate = run.pending_gate
        if result.state is not RunState.WAITING or gate is None:
            break
        queued = answers.get(gate.node_id)
        if queued:
            run.answer(gate.node_id, queued.popleft())
            continue
        if auto is not None:
            reply = auto.ask(gate)
            if reply is not None and reply.is_timeout and gate.default is not None:
                run.answer(gate.node_id, timed_out=True)
                continue
            if reply is not None and not reply.is_skipped and not reply.is_timeout:
                run.answer(gate.node_id, str(reply.value))
                continue
        break


_STOP_SIGNALS = {"SIGINT": "Ctrl-C", "SIGTERM": "SIGTERM", "SIGHUP": "the terminal hung up"}
"""Signals that stop a run as Ctrl-C does, and how the command names each."""


class _Stops:
    """The stop signals a command received; ``armed`` while one should stop the run."""

    def __init__(self) -> None:
        self.received: list[int] = []
        self.armed = True


@contextmanager
def _signals_as_interrupt(stops: _Stops) -> Iterator[None]:
    """Handle SIGTERM (sent by ``timeout``, systemd, CI runners) and SIGHUP (a closed terminal or
    ssh session) as Ctrl-C, and make every one pause the run, resumable, instead of killing the
    command with tool processes left behind. A signal arrives (a) while a node runs: the engine
    stops the node's processes and pauses the run at it; or (b) between nodes (routing, a
    checkpoint, a progress line): the KeyboardInterrupt leaves ``Run.run`` and :func:`drive`
    reopens the run from its last checkpoint. Only the first signal raises: a second Ctrl-C
    while the first is being handled is recorded, not a second interrupt of the clean-up, and
    one after the loop ended leaves the summary alone. ``stops.received`` gets each signal's
    number so the command can say why it stopped."""

    def interrupt(signum: int, frame: object) -> None:
        stops.received.append(signum)
        if stops.armed:
            stops.armed = False
            raise KeyboardInterrupt

    numbers = [getattr(signal, name) for name in _STOP_SIGNALS if hasattr(signal, name)]
    previous = {number: signal.signal(number, interrupt) for number in numbers}
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


def _stop_tool_groups(run: Run) -> None:
    """After a stop signal, end every tool process group this command started that still runs
    (recorded in ``nodes/<id>/pgid``): a handler abandoned at the stop (a node with a timeout
    runs on a worker thread) may not have stopped its group before the command exits, and its
    children would outlive the command."""
    from freshness_magic.engine.handlers.tool import reap_survivors

    reap_survivors(run.run_dir)


def _reopened(run: Run) -> Run:
    """The run as its last checkpoint has it, after an interrupt between nodes left the object
    mid-step (the checkpoint is the step boundary before; ``resume`` goes on from there). It
    closes with the caller's run; no executor is opened for it (nothing more runs)."""
    from freshness_magic.session import resume_run

    reopened = resume_run(run.run_dir, executor="local")
    run.close_with(reopened.close)
    return reopened


def _say_stopped(signum: int, out: IO[str], *, between: bool = False) -> None:
    """One line naming what stopped the run (after the terminal's ``^C``, on a line of its own)."""
    name = signal.Signals(signum).name
    lead = "\n" if name == "SIGINT" and out.isatty() else ""
    what = (
        "the run paused between nodes, at its last checkpoint"
        if between
        else "the running node was interrupted"
    )
    with contextlib.suppress(OSError):  # the terminal is gone (SIGHUP): the run dir says it all
        print(f"{lead}stopped by {_STOP_SIGNALS[name]}: {what}", file=out)


def backend_text(run: Run) -> list[str]:
    """The codergen backend in words (loudly when no model is called); none without codergen
    nodes."""
    from freshness_magic.backends import (
        SIMULATED_NOTICE,
        describe_backend,
        is_simulated,
        run_backend,
    )

    if not any(n.handler_type == "codergen" for n in run.graph.iter_nodes()):
        return []
    backend = run_backend(run)
    return [SIMULATED_NOTICE if is_simulated(backend) else describe_backend(backend)]


def checked_answers(graph: Graph, given: list[tuple[str, str]]) -> dict[str, deque[str]]:
    """The ``--answer NODE=CHOICE`` pairs queued per gate, after refusing (RunError, before
    anything runs) what could never be used as meant, found otherwise only nodes later:

    1. a node the pipeline does not have (the likely one named);
    2. a node that is not a human gate (``shape=hexagon``) nor a manager node (``shape=house``,
       whose child pipeline's gates it answers: their choices are checked when one waits);
    3. a choice the gate does not offer;
    4. a second answer for a gate after one whose target never leads back to it
       (``approve=Y approve=N`` when Y goes to the exit): the answers conflict. Answers that
       follow a choice leading back (``approve=N approve=Y``, N redoes the draft) answer the
       gate's later visits, in order.
    """
    from freshness_magic.engine.gates import gate_question, match_choice, valid_choices_text
    from freshness_magic.engine.reach import reachable, successor_map
    from freshness_magic.engine.validation.attrs import closest

    gates = ", ".join(_gates(graph)) or "(none)"
    managers = [n.id for n in graph.iter_nodes() if n.handler_type == MANAGER]
    if managers:
        gates += f"; a child pipeline's gate is answered by its manager node: {', '.join(managers)}"
    answers: dict[str, deque[str]] = {}
    ends: dict[str, str] = {}  # gate -> the answer after which the run never comes back to it
    succ: dict[str, set[str]] | None = None
    for node_id, choice in given:
        said = f"--answer {node_id}={choice}"
        node = graph.nodes.get(node_id)
        if node is None:
            near = closest(node_id, graph.nodes)
            hint = f" (did you mean '{near}'?)" if near is not None else ""
            raise RunError(
                f"--answer names node '{node_id}', which is not in the pipeline{hint}; "
                f"gates: {gates}"
            )
        if node.handler_type == MANAGER:  # its child's gates are known when one waits
            answers.setdefault(node_id, deque()).append(choice)
            continue
        if node.handler_type != "wait.human":
            raise RunError(
                f"{said}: '{node_id}' is not a human gate (a {node.handler_type} node); "
                f"--answer answers a gate (shape=hexagon): {gates}"
            )
        question = gate_question(graph, node)
        picked = match_choice(question, choice)
        if picked is None:
            raise RunError(
                f"{said}: {choice!r} is not a choice of gate '{node_id}'; "
                f"answer with a key, label or target id of one of: "
                f"{valid_choices_text(question) or '(none)'}"
            )
        if node_id in ends:
            raise RunError(
                f"--answer {ends[node_id]} and {said} conflict: after the first the run cannot "
                f"come back to gate '{node_id}', so the second could never be used; give one "
                f"answer per visit of '{node_id}', in order"
            )
        succ = succ if succ is not None else successor_map(graph)
        if picked.target != node_id and node_id not in reachable(succ, [picked.target]):
            ends[node_id] = f"{node_id}={choice}"
        answers.setdefault(node_id, deque()).append(choice)
    return answers


MANAGER = "stack.manager_loop"


def _gates(graph: Graph) -> list[str]:
    return [n.id for n in graph.iter_nodes() if n.handler_type == "wait.human"]


def print_summary(result: RunResult, out: IO[str], *, blocked: list[str] | None = None) -> None:
    """The last lines of the human output: the final state and what to do next.

    ``blocked``: the files whose change held the failed node back (``freshness=block``); then
    the handler never ran, and the way on is to accept the change (or restore the files)."""
    from freshness_magic.engine import RunState, StageStatus
    from freshness_magic.engine.gates import parse_accelerator
    from freshness_magic.freshness.events import blocked_by

    run_dir = result.run_dir
    again = invoked_as()
    if result.state is RunState.COMPLETED:
        partial = [
            node
            for node, outcome in result.node_outcomes.items()
            if outcome.status is StageStatus.PARTIAL_SUCCESS
        ]
        some = f" ({', '.join(partial)}: partial success)" if partial else ""
        runs = len(result.completed_nodes)  # a node run again (a loop, a retry) counts again
        since = (
            f" since its last loop_restart ({result.restarts} in all)" if result.restarts else ""
        )
        print(
            f"completed{some}: {runs} node run{'' if runs == 1 else 's'}{since}; run dir {run_dir}",
            file=out,
        )
        if result.dead_end is not None:
            print(f"note: the run {result.dead_end.describe()}", file=out)
    elif result.state is RunState.FAILED and result.failed_node and blocked is not None:
        node = result.failed_node
        print(
            f"failed at '{node}': {blocked_by(blocked)}; the node did not run",
            file=out,
        )
        print(f"run dir {run_dir}", file=out)
        print(
            f"accept the change and retry with: {again} resume {quote(str(run_dir))} "
            f"--accept {node} --retry (or restore the files, then: --retry)",
            file=out,
        )
    elif result.state is RunState.FAILED:
        print(f"{result.summary()}", file=out)
        print(f"run dir {run_dir}", file=out)
        if result.failed_node:
            print(f"retry with: {again} resume {quote(str(run_dir))} --retry", file=out)
    elif result.state is RunState.WAITING and result.pending_gate is not None:
        gate = result.pending_gate
        print(f"waiting at gate '{gate.node_id}': {gate.text}", file=out)
        for choice in gate.choices:
            text = parse_accelerator(choice.label)[1]
            print(f"  [{choice.key}] {text} -> {choice.target}", file=out)
        first = gate.choices[0].key if gate.choices else "CHOICE"
        print(
            f"answer with: {again} resume {quote(str(run_dir))} --answer {gate.node_id}={first}",
            file=out,
        )
    else:
        print(f"{result.summary()}; run dir {run_dir}", file=out)
        print(f"continue with: {again} resume {quote(str(run_dir))}", file=out)


def existing_dir(path: Path, option: str) -> Path:
    """``path``, a folder that exists: a mistyped work directory is an error, not a new, empty
    folder the pipeline's commands then run in."""
    if path.is_dir():
        return path
    if path.exists():
        raise RunError(f"{option} {path}: is not a folder; give a folder")
    raise RunError(f"{option} {path}: no such folder; give an existing folder (or create it first)")


def _usable_dir(path: Path, option: str, probe: bool = False) -> Path:
    """``path`` as a folder (created if missing; with ``probe``, one we can create folders in)."""
    if path.exists() and not path.is_dir():
        raise RunError(f"{option} {path}: is not a folder; give a folder")
    try:
        path.mkdir(parents=True, exist_ok=True)
        if probe:
            os.rmdir(tempfile.mkdtemp(prefix=".freshness-probe-", dir=path))
    except OSError as exc:
        raise RunError(
            f"{option} {path}: cannot create folders there ({exc.strerror or exc}); "
            "give a writable folder"
        ) from None
    return path


def main(args: argparse.Namespace) -> int:
    from freshness_magic.commands.parse import load_for_command
    from freshness_magic.engine.validation import Severity
    from freshness_magic.lint import session_validator
    from freshness_magic.session import open_run

    graph = load_for_command(args.pipeline)
    workdir = existing_dir(Path(args.workdir), "--workdir")
    # errors raise; notes stay quiet; source_files are looked for where the run reads them
    diagnostics = session_validator(workdir=workdir).validate_or_raise(graph)
    warnings = [d for d in diagnostics if d.severity is Severity.WARNING]
    for diagnostic in warnings:
        print(diagnostic.format(args.pipeline), file=sys.stderr)
    if warnings:
        print(f"{args.pipeline}: {len(warnings)} warning(s); running anyway\n", file=sys.stderr)
    if args.runs_dir is not None:
        _usable_dir(Path(args.runs_dir), "--runs-dir", probe=True)
    run = open_run(
        graph,
        workdir=workdir,
        warn=False,
        runs_dir=args.runs_dir,
        backend=args.backend,
        executor=args.executor,
        reuse=args.reuse,
    )
    with run:
        for line in side_by_side(Path(run.run_dir), graph.name):
            print(line, file=sys.stderr)
        return drive(run, args)


NEWEST_LOOKED_AT = 50
"""How many of the newest run folders are looked at for another live run of the pipeline."""


def side_by_side(run_dir: Path, name: str) -> list[str]:
    """A note for each other run of pipeline ``name`` in the same runs folder whose live driver
    is running a node now: two runs of one pipeline in one folder run their tools at the same
    time, on the same files (a trial saw both tools write one file, and no word of it). A run
    only held by an idle kernel (between nodes, at a gate, or completed) runs nothing beside
    this one and gets no note."""
    from freshness_magic.engine.activity import activity
    from freshness_magic.engine.lifecycle import read_manifest
    from freshness_magic.engine.runlock import live_driver

    try:
        folders = sorted(run_dir.parent.iterdir(), reverse=True)[:NEWEST_LOOKED_AT]
    except OSError:
        return []
    notes = []
    for folder in folders:
        if folder == run_dir or not folder.is_dir():
            continue
        driver = live_driver(folder)
        if driver is None or read_manifest(folder).get("name") != name:
            continue
        running = activity(folder).running
        if running:
            notes.append(
                f"note: another run of {name} is running {', '.join(running)} here (pid "
                f"{driver.get('pid')}, {folder}); both run their tools at the same time, on"
                " the same files"
            )
    return notes
