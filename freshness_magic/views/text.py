"""The text the magics print: status table, step lines, why, evidence rows, condition answers.

Plain text only (terminal, nbval, ``text/plain`` of rich frontends). Each thing is rendered by
one function here: :func:`evidence_row` is the one view of an evidence record (the text table and
the widget's panel both use it) and :func:`condition_text` the one view of a condition
explanation (``%pipeline cond``, the playground, the dead-end line).
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from freshness_magic.engine.condition_explain import ConditionExplanation
from freshness_magic.engine.edges import EdgeStep
from freshness_magic.engine.gates import match_choice
from freshness_magic.engine.handlers.tool import reason_ends
from freshness_magic.engine.outcome import Choice, Question, StageStatus
from freshness_magic.freshness.events import blocked_by, some_files
from freshness_magic.views.render import NodeState, NodeView, state_table

if TYPE_CHECKING:
    from freshness_magic.engine.events import Event


class TextResult:
    """A magic's answer: plain text everywhere (terminal, nbval), same text in rich frontends."""

    def __init__(self, text: str, data: Any = None) -> None:
        self.text = text
        self.data = data

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        return {"text/plain": self.text}

    def __repr__(self) -> str:
        return self.text

    def __str__(self) -> str:
        return self.text


def one_line(text: str, limit: int) -> str:
    """``text`` on one line, cut to ``limit`` characters with an ellipsis."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def cut(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters with an ellipsis (its lines kept)."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def failure_line(reason: str, limit: int) -> str:
    """A failure reason in ``limit`` characters: the text before a tool's stderr section and,
    after `` · ``, that section's last line (the error itself), each cut to fit; folding the
    whole reason ran the stderr heading into the sentence and cut the error off."""
    first, last = reason_ends(reason)
    if not last:
        return one_line(first, limit)
    last = one_line(last, limit // 2)
    return f"{one_line(first, limit - len(last) - 3)} · {last}"


MAX_LISTED = 100
"""Most items a details or evidence panel lists (a change of 10,000 files would be 10,000 rows)."""


def first_items(items: list[str], where: str, limit: int = MAX_LISTED) -> list[str]:
    """``items`` up to ``limit``, then one item saying how many more and ``where`` they are."""
    if len(items) <= limit:
        return items
    return [*items[:limit], f"… and {len(items) - limit} more ({where})"]


def choice_text(choice: Choice) -> str:
    """A gate choice as shown to people: ``[K] label`` (the key not repeated)."""
    label = choice.label or choice.target
    if choice.key and choice.key.lower() in label[:4].lower():
        return label
    return f"[{choice.key}] {label}" if choice.key else label


def state_word(view: NodeView) -> str:
    """``succeeded``, ``stale(run)``, ...: the state column of the table."""
    if view.state is NodeState.STALE:
        return f"stale({view.stale.value})"
    return view.state.value


def reason(view: NodeView) -> str:
    """Why the node is in its state, or "" when that would only repeat the state word (an
    interrupted node's reason may be just ``interrupted``)."""
    return "" if view.why == state_word(view) else view.why


def status_table(
    views: Mapping[str, NodeView], limit: int | None = None, everything: str = "%pipeline status"
) -> str:
    """The node-state table (stable: no times, ids or paths); with ``limit``, its first rows
    and a line saying how many more there are and that ``everything`` lists them all."""
    shown = list(views.items()) if limit is None else list(views.items())[:limit]
    rows = [(node_id, state_word(v), failure_line(reason(v), 90)) for node_id, v in shown]
    table = state_table(rows)
    more = len(views) - len(shown)
    return f"{table}\n… and {more} more nodes ({everything} lists them all)" if more else table


def status_line(
    name: str,
    state: str,
    gate: str | None,
    next_node: str | None,
    ran: int,
    total: int,
    *,
    stale: int = 0,
    outdated: int = 0,
    superseded: bool = False,
) -> str:
    """``pipeline NAME: state · next: X · 2/5 nodes run · 1 stale, 3 outdated`` (or ``waiting
    at GATE``); a superseded pipeline says so first, then where its run was."""
    if superseded:
        was = f"waiting at {gate}" if gate is not None else state
        head = "superseded by a newer load" + (f"; {was}" if ran or gate else "")
        return " · ".join([f"pipeline {name}: {head}", f"{ran}/{total} nodes run"])
    parts = [f"pipeline {name}: {state}"]
    if gate is not None:
        parts.append(f"waiting at {gate}")
    elif state not in ("completed", "failed") and next_node:
        parts.append(f"next: {next_node}")
    parts.append(f"{ran}/{total} nodes run")
    marked = [f"{n} {word}" for n, word in ((stale, "stale"), (outdated, "outdated")) if n]
    if marked:
        parts.append(", ".join(marked))
    return " · ".join(parts)


def stale_upstream_note(
    gate: str, stale: Sequence[str], outdated: int, why: Callable[[str], str] | None = None
) -> str:
    """The note under a waiting gate whose upstream nodes have changed inputs ("" if none):
    ``note: upstream of review: model_card stale, 3 outdated (inputs changed; ...)``; ``why``
    spells the command that explains a node (default: ``%pipeline why NODE``)."""
    if not stale and not outdated:
        return ""
    found = [f"{some_files(stale, 5)} stale"] if stale else []
    if outdated:
        found.append(f"{outdated} outdated")
    ask = stale[0] if len(stale) == 1 else "NODE"
    said = why(ask) if why is not None else f"%pipeline why {ask}"
    return f"note: upstream of {gate}: {', '.join(found)} (inputs changed; {said})"


def waiting_text(
    gate: Question | None, note: str = "", answer_with: Callable[[str], str] | None = None
) -> str:
    """The waiting gate, its choices and the command that answers it (and ``note``: changed
    inputs upstream of it, :func:`stale_upstream_note`); ``answer_with(gate)`` spells that
    command (default: the magic)."""
    if gate is None:
        return "waiting"
    choices = "  ".join(choice_text(c) for c in gate.choices)
    said = (
        answer_with(gate.node_id)
        if answer_with is not None
        else f"%pipeline resume {gate.node_id} --choice <key> [--comment TEXT]"
    )
    text = f"waiting at {gate.node_id}: {gate.text}\n  choices: {choices}\n  answer with: {said}"
    return f"{text}\n  {note}" if note else text


def answer_key(gate: Question, choice: Choice) -> str:
    """What answers ``gate`` with ``choice``: its key, or its target when another choice has
    the same key."""
    return choice.key if match_choice(gate, choice.key) is choice else choice.target


def answer_command(gate: Question, key: str, comment: str | None = None) -> str:
    """The magic that answers ``gate`` with ``key`` (and ``comment``)."""
    line = f"%pipeline resume {gate.node_id} --choice {shlex.quote(key)}"
    return f"{line} --comment {shlex.quote(comment)}" if comment else line


def answer_lines(
    gate: Question, comment: str | None = None, command: Callable[[str], str] | None = None
) -> list[str]:
    """One line per choice of ``gate``: the choice, then the magic that answers with it (its
    :func:`answer_key`), keeping the ``comment`` given; ``command(key)`` spells another
    surface's command instead (the CLI's ``resume RUN_DIR --answer GATE=KEY``). Ready to paste;
    ``resume`` without a choice and ``why GATE`` both list them."""
    shown = [choice_text(c) + f" -> {c.target}" for c in gate.choices]
    width = max(map(len, shown), default=0)
    lines = []
    for choice, label in zip(gate.choices, shown, strict=True):
        key = answer_key(gate, choice)
        line = command(key) if command is not None else answer_command(gate, key, comment)
        lines.append(f"{label + ':':<{width + 1}}  {line}")
    return lines


def choose_text(
    gate: Question, comment: str | None = None, command: Callable[[str], str] | None = None
) -> str:
    """A gate answered without a choice that has no default: each choice with the line that
    answers with it (:func:`answer_lines`; ``command`` as there)."""
    head = (
        f"gate '{gate.node_id}' has no default choice (human.default_choice); answer with one of:"
    )
    return "\n".join([head, *indented(answer_lines(gate, comment, command))])


def step_line(result: Any) -> str:
    """One line for one executed step: ``step: lint -> success; next: draft`` (and, when an
    unsatisfied goal gate sends the run back, which gate and where to)."""
    if not getattr(result, "executed", False) or result.outcome is None:
        if result.node_id is not None:  # an answer kept for a child pipeline's gate
            return f"step: {result.node_id}: {result.reason}"
        return f"step: nothing executed ({result.reason})"
    line = f"step: {result.node_id} -> {result.outcome.status.value}"
    if result.outcome.reused_from is not None:
        line = f"step: {result.node_id} -> reused ({result.outcome.reused_from.text()})"
    if result.outcome.failure_reason and not result.outcome.status.is_success:
        line += f" ({failure_line(result.outcome.failure_reason, 120)})"
    waiting = result.next_node == result.node_id and result.outcome.status is StageStatus.WAITING
    if result.next_node and not waiting:
        line += f"; next: {result.next_node}"
        if result.edge_step is EdgeStep.GOAL_GATE:  # not where its edges lead: say why
            line += f": {result.reason}"
    return line


def branch_line(event: Event) -> str:
    """``  b1 -> success (branch of fan)``: a node a parallel node ran in one of its branches,
    under the parallel node's step line (the command line indents them the same way)."""
    data = event.data
    line = f"  {event.node_id} -> {data.get('status', '')} (branch of {data['branch_of']})"
    reason = str(data.get("failure_reason") or "")
    return f"{line}: {one_line(reason, 120)}" if reason else line


def blocked_text(node_id: str, files: Sequence[str], accept: str | None = None) -> str:
    """Why a run failed at a node ``freshness=block`` held back, and the notebook's way on
    (``accept`` spells the command that accepts it; default: the magic)."""
    said = accept if accept is not None else f"%pipeline accept {node_id}"
    return (
        f"{node_id} did not run, {blocked_by(files)}. Accept the change ({said}, or the "
        f"view's Accept changes) and retry, or restore the files and retry"
    )


def summary_line(steps: int, state: str, reason: str = "") -> str:
    """The last line of ``%pipeline run``: ``run: 3 step(s); failed: <why>``."""
    line = f"run: {steps} step(s); {state}"
    if reason:
        line += f": {failure_line(reason, 200)}"
    return line


def missed_stop_note(state: str, to: str) -> str:
    """Said when a run asked to stop before ``to`` ended without reaching it (the node was
    behind the run, or on a route it did not take): the stop did nothing."""
    return f"note: the run {state} without reaching '{to}' (--to)"


def evidence_row(record: Mapping[str, Any]) -> dict[str, str]:
    """The columns of one evidence record: time, node, status, method, stale, summary, duration.

    The one view of a record: the text table below and the widget's panel both use it.
    """
    found = record.get("outcome")
    outcome: dict[str, Any] = found if isinstance(found, dict) else {}
    facts = outcome.get("engine")
    engine: dict[str, Any] = facts if isinstance(facts, dict) else {}
    status = engine.get("status") or outcome.get("status") or ""
    method = engine.get("evidence_method") or record.get("type") or ""
    stale = engine.get("stale_files") or []
    if isinstance(stale, list):
        paths = [str(s.get("path", s)) if isinstance(s, dict) else str(s) for s in stale]
        stale_text = some_files(paths, 3)
    else:
        stale_text = str(stale)
    seconds = engine.get("duration_seconds")
    duration = f"{float(seconds) * 1000:.0f} ms" if isinstance(seconds, int | float) else ""
    return {
        "time": str(record.get("timestamp", "")),
        "node": str(record.get("nodeId", "")),
        "status": str(status),
        "method": str(method),
        "stale": stale_text,
        "summary": one_line(str(record.get("summary", "")), 120),
        "duration": duration,
    }


_EVIDENCE_HEAD = ("node", "status", "method", "summary")


def evidence_table(records: Sequence[Mapping[str, Any]]) -> str:
    """``%pipeline evidence``: one line per record, oldest first."""
    rows = [evidence_row(rec) for rec in records]
    table = [
        (
            row["node"],
            row["status"],
            row["method"],
            row["summary"] + (f"  [stale: {row['stale']}]" if row["stale"] else ""),
        )
        for row in rows
    ]
    widths = [max(len(h), *(len(r[i]) for r in table)) for i, h in enumerate(_EVIDENCE_HEAD[:3])]
    lines = [
        "  ".join(f"{cell:<{widths[i]}}" for i, cell in enumerate(r[:3])) + "  " + r[3]
        for r in [_EVIDENCE_HEAD, *table]
    ]
    return "\n".join([lines[0].rstrip(), *lines[1:]])


def condition_text(
    expr: str,
    explanation: ConditionExplanation,
    *,
    outcome: str = "",
    preferred_label: str = "",
    edge: str | None = None,
    checks: Sequence[str] = (),
) -> str:
    """A condition explained clause by clause (or its syntax error with a caret).

    The one view of a :class:`ConditionExplanation` in the notebook; ``edge`` is the line
    naming the edge that would be taken, when asked with ``--from``; ``checks`` are what
    ``validate`` would warn about the condition in DOT (a key that looks like a typo of
    ``outcome``, a value that is no outcome status), shown after the live warnings.
    """
    lines = []
    if explanation.error is not None:
        err = explanation.error
        lines.append(f"syntax error at column {err.column}: {err.message}")
        lines.append(f"  {expr}")
        lines.append("  " + " " * max(err.column - 1, 0) + "^")
    else:
        lines.append(f"result: {'true' if explanation.result else 'false'}")
        lines.append(f"  (outcome={outcome}, preferred_label={preferred_label!r})")
        for clause in explanation.clauses:
            found = clause.resolved_key if clause.resolved_key is not None else "(not set)"
            want = "truthy" if clause.expected is None else f"{clause.operator} {clause.expected}"
            mark = "held" if clause.held else "failed"
            lines.append(f"  {clause.text:<30} {found} = {clause.actual!r} (wanted {want}): {mark}")
        lines.extend(f"warning: {warning}" for warning in explanation.warnings)
        lines.extend(
            f"warning: {check}"
            for check in checks
            if not any(said in check for said in explanation.warnings)
        )
    if edge is not None:
        lines.append(edge)
    return "\n".join(lines)


def dead_end_text(dead_end: Mapping[str, Any]) -> str:
    """``ended at X: no edge matched`` with each condition tried and its value."""
    node = dead_end.get("node", "?")
    lines = [f"ended at {node}: no edge matched"]
    conditions = dead_end.get("conditions")
    for item in conditions if isinstance(conditions, list) else []:
        if isinstance(item, dict):
            value = "true" if item.get("value") else "false"
            lines.append(f"  {item.get('edge', '?')}: {item.get('condition', '')} -> {value}")
    return "\n".join(lines)


def indented(lines: Iterable[str]) -> list[str]:
    """``lines`` indented by two spaces (the detail lines of ``why``)."""
    return [f"  {line}" for line in lines]
