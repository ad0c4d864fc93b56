"""Why a node is in its state: the one explanation behind ``%pipeline why`` and ``freshness-magic
why``.

Both surfaces gather the same :class:`NodeFacts` (the node's published view, last outcome, stale
inputs, the gate waiting, ...): the notebook from its pipeline (``views/details.py``), the
command line from the run directory (``views/runview.py``). :func:`why_lines` turns them into
the lines both print, and :func:`next_steps` into what to do next, each step spelled in the
commands of the surface that asked (:class:`Commands`: :data:`NOTEBOOK` or :class:`CliCommands`),
so the text is written once and a pasted line works where it was read.

Like all of ``views/``, it imports no IPython, ipywidgets or ``notebook/`` code (the command
line uses it); the views it reads come from the view model (``views/model.py``).
"""

from __future__ import annotations

import json
import keyword
import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from freshness_magic.engine.marks import led_to
from freshness_magic.engine.model import Graph, Node
from freshness_magic.engine.outcome import Outcome, Question
from freshness_magic.engine.reach import upstream
from freshness_magic.engine.trace import Trace
from freshness_magic.freshness.attrs import freshness_mode, inputs_checked, source_files
from freshness_magic.views import text
from freshness_magic.views.marks import NodeStale
from freshness_magic.views.render import inputs_text
from freshness_magic.views.state import NodeState, NodeView, StaleKind


class Commands(Protocol):
    """How a surface spells the commands ``why`` suggests (each a line ready to paste)."""

    answers_default: bool
    """Whether an answer without a choice takes the gate's ``human.default_choice``."""

    @property
    def reopens(self) -> bool:
        """Whether going on reopens the run from its checkpoint (a resume), where every node
        that has not run takes its baseline again, rather than a live run."""
        ...

    def why(self, node_id: str) -> str:
        """Explain ``node_id``."""
        ...

    def accept(self, *node_ids: str) -> str:
        """Take the current inputs of ``node_ids`` as their new baselines, running nothing."""
        ...

    def retry(self, node_id: str, *, accept: bool = False) -> str:
        """Run ``node_id`` again (after accepting its inputs) and go on from it."""
        ...

    def answer(self, gate: Question) -> Callable[[str], str]:
        """The command that answers ``gate`` with a key (:func:`text.answer_key`)."""
        ...

    def go_on(self) -> str:
        """Continue the run where it stopped."""
        ...


class NotebookCommands:
    """The magics: ``%pipeline accept lint``, ``%pipeline retry lint``, ``--choice``."""

    answers_default = True
    reopens = False  # the kernel's run goes on (after a restart, the resume says what changed)

    def why(self, node_id: str) -> str:
        return f"%pipeline why {node_id}"

    def accept(self, *node_ids: str) -> str:
        return " ".join(["%pipeline accept", *node_ids])

    def retry(self, node_id: str, *, accept: bool = False) -> str:
        first = f"{self.accept(node_id)}, then " if accept else ""
        return f"{first}%pipeline retry {node_id}"

    def answer(self, gate: Question) -> Callable[[str], str]:
        return lambda key: text.answer_command(gate, key)

    def go_on(self) -> str:
        return "%pipeline run"  # as the interrupt's own line and the view's banner say

    def answer_with(self, gate: str) -> str:
        """The line under a waiting gate: how to answer it with any of its keys."""
        return f"%pipeline resume {gate} --choice <key> [--comment TEXT]"

    def step(self) -> str:
        return "%pipeline step"

    def run_to(self, node_id: str) -> str:
        return f"%pipeline run --to {node_id}"

    def keep_going(self) -> str:
        """What goes on after a stop or an interrupt."""
        return "%pipeline run or step"

    def again(self) -> str:
        """Run the failed node again and go on."""
        return "%pipeline retry"

    def resume(self) -> str:
        """Go back to the run on disk offered for resume."""
        return "%pipeline resume"

    def reset(self) -> str:
        return "%pipeline reset"

    def keep(self) -> str:
        """Carry a run of an earlier text over to this one."""
        return "%pipeline keep"

    def status(self) -> str:
        return "%pipeline status"


NOTEBOOK = NotebookCommands()


def _literal(value: str) -> str:
    """``value`` as a double-quoted Python string literal (``"lint"``)."""
    return json.dumps(value, ensure_ascii=False)


@dataclass(frozen=True)
class MethodCommands:
    """The pipeline object's methods, for a ``Pipeline`` used from plain Python (a script,
    marimo) where no magic exists: ``review.accept("lint")``, ``review.resume("approve",
    choice="Y")``. ``variable`` is what the object is called (its pipeline's name when that is
    an identifier, else ``pipeline``)."""

    variable: str = "pipeline"
    answers_default = True
    reopens = False

    @classmethod
    def named(cls, name: str) -> MethodCommands:
        """The spelling for a pipeline called ``name``."""
        return cls(name if name.isidentifier() and not keyword.iskeyword(name) else "pipeline")

    def _call(self, method: str, *args: str, **kwargs: str) -> str:
        words = [*map(_literal, args), *(f"{k}={_literal(v)}" for k, v in kwargs.items())]
        return f"{self.variable}.{method}({', '.join(words)})"

    def why(self, node_id: str) -> str:
        return self._call("why", node_id)

    def accept(self, *node_ids: str) -> str:
        return self._call("accept", *node_ids)

    def retry(self, node_id: str, *, accept: bool = False) -> str:
        first = f"{self.accept(node_id)}, then " if accept else ""
        return f"{first}{self._call('retry', node_id)}"

    def answer(self, gate: Question) -> Callable[[str], str]:
        return lambda key: self._call("resume", gate.node_id, choice=key)

    def go_on(self) -> str:
        return self._call("run")

    def answer_with(self, gate: str) -> str:
        return f'{self._call("resume", gate)[:-1]}, choice="<key>"[, comment="TEXT"])'

    def step(self) -> str:
        return self._call("step")

    def run_to(self, node_id: str) -> str:
        return self._call("run", to=node_id)

    def keep_going(self) -> str:
        return f"{self.go_on()} or {self.step()}"

    def again(self) -> str:
        return self._call("retry")

    def resume(self) -> str:
        return self._call("resume")

    def reset(self) -> str:
        return self._call("reset")

    def keep(self) -> str:
        return self._call("keep_run")

    def status(self) -> str:
        return self._call("status")


PipelineCommands = NotebookCommands | MethodCommands
"""How a loaded pipeline spells its actions: the magics in IPython, its methods elsewhere."""


@dataclass(frozen=True)
class CliCommands:
    """The command line: ``resume RUN_DIR --accept lint``, ``--retry lint``, ``--answer g=K``.

    ``resume`` goes on with the run after it accepts; ``stop_at`` (the next node of a paused run)
    makes an accept stop before anything runs (``--to NEXT``), as ``%pipeline accept`` does. At a
    waiting gate or after the end nothing runs anyway.
    """

    program: str
    run_dir: str
    stop_at: str | None = None
    reopens: bool = True
    """False while a live process (a kernel, a ``run``) holds the run: it goes on there."""
    answers_default = False  # resume without --answer leaves the gate waiting

    def _resume(self, *options: str) -> str:
        return " ".join([self.program, "resume", shlex.quote(self.run_dir), *options])

    def why(self, node_id: str) -> str:
        return f"{self.program} why {shlex.quote(self.run_dir)} {node_id}"

    def accept(self, *node_ids: str) -> str:
        stop = ("--to", self.stop_at) if self.stop_at is not None else ()
        return self._resume(*(word for n in node_ids for word in ("--accept", n)), *stop)

    def retry(self, node_id: str, *, accept: bool = False) -> str:
        first = ("--accept", node_id) if accept else ()
        return self._resume(*first, "--retry", node_id)

    def answer(self, gate: Question) -> Callable[[str], str]:
        return lambda key: self._resume("--answer", shlex.quote(f"{gate.node_id}={key}"))

    def go_on(self) -> str:
        return self._resume()


@dataclass(frozen=True)
class NodeFacts:
    """What ``why`` says about one node, read at a step boundary (never mid-step)."""

    graph: Graph
    node: Node
    views: Mapping[str, NodeView]
    """Every node's published view (``node``'s among them)."""
    outcome: Outcome | None = None
    """Its last outcome."""
    route: tuple[str, str] | None = None
    """Where the run went after its latest visit, and why."""
    stale: NodeStale | None = None
    symbols: Sequence[str] = ()
    """Symbol-level changes of its stale inputs (the Node State Hub's, when one runs)."""
    missing: Sequence[str] = ()
    """``source_files`` paths that exist neither now nor at its last snapshot."""
    output: str = ""
    gate: Question | None = None
    """The gate the run waits at (any node's)."""
    gate_upstream: tuple[Sequence[str], int] = ((), 0)
    """The nodes that led to the waiting gate shown stale, and how many shown outdated."""
    blocked: frozenset[str] = frozenset()
    """Nodes a ``freshness=block`` holds back until their changed inputs are accepted."""
    failed: bool = False
    """The run failed at this node (a retry runs it again)."""
    paused_at: bool = False
    """The run paused with this node next to run again (it was interrupted or cut off)."""
    resumes_at: str | None = None
    """The node a paused run goes on from (a parallel node for its interrupted branches)."""
    kept: Sequence[str] = ()
    """The branches the interrupted parallel node ``resumes_at`` had ended: they keep their
    results and do not run again."""
    superseded: bool = False
    """The pipeline object was replaced: its actions are refused."""
    runs_elsewhere: str = ""
    """Where the node runs when this surface cannot run it (a notebook's ``%%node`` cell seen
    from the command line), else empty."""

    @property
    def view(self) -> NodeView:
        return self.views[self.node.id]


REBASELINED = (
    "a resume takes its inputs as they are then as its new baseline, as for every node not run "
    "yet, so it runs on them without a freshness warning or hold-back"
)
"""What a resume does to a node that has not run (it takes its baseline again): said where a
change to its inputs is shown, so nothing promises a ``block`` that the resume will not make."""

COMMAND_INDENT = "    "
"""How far a step's command stands in under its sentence."""


@dataclass(frozen=True)
class NextStep:
    """One thing to do next: what it does, and the command that does it (None: a note).

    Printed as the sentence, then the command alone on the next line, ready to copy: a run
    directory's path in the middle of a sentence made both hard to read. A gate's choice
    (``inline``) already ends with its command, aligned with the other choices.
    """

    line: str
    command: str | None = None
    inline: bool = False

    @property
    def lines(self) -> list[str]:
        if self.command is None or self.inline:
            return [self.line]
        return [f"{self.line}:", f"{COMMAND_INDENT}{self.command}"]


def stale_upstream(views: Mapping[str, NodeView], traces: Sequence[Trace]) -> tuple[list[str], int]:
    """The nodes that led to where the run stands (:func:`~.engine.marks.led_to`: what a
    waiting gate's question rests on) shown stale, and how many are shown outdated by changed
    inputs, in the pipeline's order."""
    found = led_to(traces)
    stale = [n for n in views if n in found and views[n].state is NodeState.STALE]
    outdated = [
        n
        for n in views
        if n in found and views[n].state is NodeState.OUTDATED and "upstream" in views[n].details
    ]
    return stale, len(outdated)


def why_lines(facts: NodeFacts, commands: Commands) -> list[str]:
    """Why the node is in its state: state word and reason, last outcome, notes or failure,
    where the run went past a failed node, changed and missing inputs, output, then
    :func:`next_steps`."""
    node_id, view = facts.node.id, facts.view
    lines = [f"{node_id}: {text.state_word(view)}"]
    if why := text.reason(view):  # a tool's reason goes on with its stderr tail: indented more
        first, *more = why.splitlines() or [why]
        lines.extend([f"  {first}", *(f"    {line}" for line in more)])
    if facts.stale is not None and facts.stale.gone:
        lines.append(
            "  its source_files match no file now: every input it had is gone (moved or renamed? "
            "fix source_files, or accept to go on without them)"
        )
    outcome = facts.outcome
    if outcome is not None:
        again = view.state in (NodeState.WAITING, NodeState.NEXT, NodeState.RUNNING)
        label = "outcome of its last visit" if again else "last outcome"  # it is being run again
        lines.append(f"  {label}: {outcome.status.value}")
        if outcome.notes and outcome.notes != view.why:
            lines.append(f"  notes: {text.one_line(outcome.notes, 200)}")
        if outcome.failure_reason and outcome.failure_reason != view.why:
            lines.append(f"  failure: {text.one_line(outcome.failure_reason, 300)}")
    if facts.route is not None and view.state is NodeState.FAILED:  # the run went on past it
        lines.append(f"  then the run went on to {facts.route[0]}: {facts.route[1]}")
    if facts.failed and facts.node.goal_gate and facts.route is not None:
        lines.append(
            "  it is a goal gate: the run failed when it reached the exit, which needs every goal "
            "gate it visited to have succeeded"
        )
    stale = facts.stale
    if stale is not None and stale.describe() != view.why:
        lines.append(f"  {stale.describe()}")
    if stale is not None:
        lines.extend(text.indented(facts.symbols))
    if inputs := inputs_text(facts.node):
        lines.append(f"  {inputs}")
        if facts.missing:
            lines.append(
                f"  missing: {', '.join(facts.missing)}; freshness tracks nothing there, so it "
                "counts as unchanged (fix the path in source_files, or create the file)"
            )
    if facts.output:
        lines.append(f"  output: {text.one_line(facts.output, 200)}")
    if view.state is NodeState.PENDING and stale is None:
        checked = inputs_checked(facts.node) or not source_files(facts.node)
        lines.append("  not run yet; inputs unchanged" if checked else "  not run yet")
    steps = next_steps(facts, commands)
    return [*lines, *text.indented(line for step in steps for line in step.lines)]


def next_steps(facts: NodeFacts, commands: Commands) -> list[NextStep]:
    """What ``why`` ends with: the lines that answer a waiting gate (with a note on changed
    inputs upstream of it); what accepting does for a stale or outdated node (and, for one that
    ran, that a retry runs it again); a retry for the node the run failed at; going on for the
    node a paused run stopped in. A node held back by ``freshness=block`` says what to do in its
    reason; a step is added only when that reason does not name the command already."""
    if facts.superseded:
        return []  # its actions are refused: the newer load's why says what to do
    node_id, view, gate = facts.node.id, facts.view, facts.gate
    if gate is not None and gate.node_id == node_id:
        return _gate_steps(facts, gate, commands)
    made_by = view.details.get("upstream") if view.state is NodeState.OUTDATED else None
    if made_by is not None:
        line = "next: clear this mark without running anything again"
        if len(made_by) > 1:
            line += f" (accept all {len(made_by)}: each of them keeps it outdated)"
        return [NextStep(line, commands.accept(*made_by))]
    if view.state is NodeState.OUTDATED and "reran" in view.details:
        return _rerun_steps(facts, commands)
    stale = facts.stale
    mode = freshness_mode(facts.node)
    if node_id in facts.blocked:
        outcome = facts.outcome
        reasons = [view.why, *((outcome.notes, outcome.failure_reason) if outcome else ())]
        if any(commands.accept(node_id) in words for words in reasons):
            return []  # the reason says it (a run recorded before the engine's note named none)
        if not facts.failed:  # held back, and the run stopped before failing there
            accept = commands.accept(node_id)
            line = "next: take its changed inputs as its new baseline, so that it runs"
            return [NextStep(f"{line} when the run gets there again", accept)]
        retry = commands.retry(node_id, accept=True)
        return [NextStep("next: run it on its changed inputs, and go on from it", retry)]
    if stale is None:
        return _go_on_steps(facts, commands)
    accept = commands.accept(node_id)
    said = "next: take its current inputs as its new baseline"
    if stale.kind is StaleKind.BASELINE and commands.reopens:
        return [NextStep(f"note: it has not run yet: {REBASELINED}")]
    if stale.kind is StaleKind.BASELINE:
        effect = {
            "block": "without that, freshness=block holds it back when the run reaches it, "
            "until accepted or the files are restored",
            "warn": "without that, it runs anyway with a warning (freshness=warn)",
        }.get(mode, "it runs on the current files either way (freshness=ignore)")
        return [NextStep(f"{said}, so it is no longer stale; {effect}", accept)]
    after = sum(1 for v in facts.views.values() if v.details.get("upstream") == [node_id])
    cleared = "it is no longer stale"
    if after:
        cleared += f", nor the {after} node{'s' if after > 1 else ''} after it shown outdated"
    line = f"{said} without running it again ({cleared})"
    if mode == "block":
        line += (
            "; without that, freshness=block holds it back if the run reaches it again, "
            "until accepted or the files are restored"
        )
    elif mode == "warn":
        line += "; if the run reaches it again, it runs anyway with a warning (freshness=warn)"
    steps = [NextStep(line, accept)]
    again = "or: run it again on the current files, and go on from it"
    if gate is not None:  # a retry there runs a node before the gate, never one past it
        if node_id not in upstream(facts.graph, gate.node_id):
            return steps
        again += f" (gate '{gate.node_id}' is asked again when the run gets back to it)"
    return [*steps, NextStep(again, commands.retry(node_id, accept=mode == "block"))]


def _gate_steps(facts: NodeFacts, gate: Question, commands: Commands) -> list[NextStep]:
    """The note on changed inputs upstream of the waiting gate, then one answer per choice."""
    default = next((c for c in gate.choices if c.target == gate.default), None)
    head = "answer with one of"
    if default is not None and commands.answers_default:
        head += f" (without --choice: the default, {text.choice_text(default)})"
    elif default is not None:  # the command line takes a default only when it asks
        timeout = gate.timeout_seconds
        after = f" or after {timeout:g}s (human.timeout)" if timeout else ""
        head += (
            f" (the default, {text.choice_text(default)}, is what --ask takes on an empty "
            f"line{after})"
        )
    stale, outdated = facts.gate_upstream
    note = text.stale_upstream_note(gate.node_id, stale, outdated, commands.why)
    answer = commands.answer(gate)
    lines = text.answer_lines(gate, command=answer)
    keys = [answer(text.answer_key(gate, choice)) for choice in gate.choices]
    return [
        *([NextStep(note)] if note else []),
        NextStep(f"{head}:"),
        *(NextStep(f"  {line}", key, inline=True) for line, key in zip(lines, keys, strict=True)),
    ]


def _rerun_steps(facts: NodeFacts, commands: Commands) -> list[NextStep]:
    """For a node that ran before a node upstream of it ran again: only running it again
    clears the mark, when the run gets there or now (a waiting gate is answered first)."""
    if facts.gate is not None:
        return [NextStep("next: it runs again if the run gets there after the gate is answered")]
    retry = commands.retry(facts.node.id)
    return [NextStep("next: run it again on the new results, and go on", retry)]


def _go_on_steps(facts: NodeFacts, commands: Commands) -> list[NextStep]:
    """A retry for the node the run failed at; going on for the node a paused run stops in."""
    node_id = facts.node.id
    stopped = facts.failed and facts.view.state is NodeState.FAILED
    if facts.runs_elsewhere and (stopped or facts.paused_at):
        line = f"next: it runs in {facts.runs_elsewhere}; this command cannot run it, go on there"
        return [NextStep(line)]
    if stopped:
        retry = commands.retry(node_id)
        return [NextStep("next: fix the cause, then run it again and go on from it", retry)]
    kept = f" ({', '.join(facts.kept)} had ended: not run again)" if facts.kept else ""
    if facts.paused_at and facts.view.state is NodeState.INTERRUPTED:
        go_on = commands.go_on()
        return [NextStep(f"next: run it again and go on from it{kept}", go_on)]
    owner = facts.graph.nodes.get(facts.resumes_at or "")
    if (
        facts.view.state is NodeState.INTERRUPTED
        and owner is not None
        and owner.handler_type == "parallel"
    ):
        go_on = commands.go_on()
        ended = f"{', '.join(facts.kept)} had ended" if facts.kept else "none had ended"
        line = f"next: run parallel node '{owner.id}' again ({ended}: not run again) and go on"
        return [NextStep(line, go_on)]
    return []


def why_text(facts: NodeFacts, commands: Commands) -> str:
    """:func:`why_lines` as one text."""
    return "\n".join(why_lines(facts, commands))


def why_dict(facts: NodeFacts, commands: Commands) -> dict[str, Any]:
    """The JSON form (``freshness-magic why --json``; the README's "Command line" names the
    fields): the facts, and ``next``, the commands of :func:`next_steps`."""
    view, outcome, stale = facts.view, facts.outcome, facts.stale
    steps = next_steps(facts, commands)
    gate = facts.gate if facts.gate is not None and facts.gate.node_id == facts.node.id else None
    return {
        "node": facts.node.id,
        "state": view.state.value,
        "stale_since": stale.kind.value if stale is not None else None,
        "reason": text.reason(view),
        "outcome": None
        if outcome is None
        else {
            "status": outcome.status.value,
            "notes": outcome.notes,
            "failure_reason": outcome.failure_reason,
        },
        "went_on_to": None
        if facts.route is None
        else {"node": facts.route[0], "reason": facts.route[1]},
        "stale_files": [{"path": f.path, "label": f.label} for f in stale.files] if stale else [],
        "symbols": list(facts.symbols) if stale is not None else [],
        "inputs": list(source_files(facts.node)),
        "freshness": freshness_mode(facts.node) if source_files(facts.node) else None,
        "missing_inputs": list(facts.missing),
        "output": facts.output,
        "gate": gate.to_dict() if gate is not None else None,
        "next": [step.command for step in steps if step.command is not None],
        "text": why_lines(facts, commands),
    }
