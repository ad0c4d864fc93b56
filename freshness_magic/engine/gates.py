"""Human gates: questions, choices, answers and the one accelerator grammar (spec §4.6).

Choices come from a gate's outgoing edges in declaration order; an edge label such as ``[Y] Yes``,
``Y) Yes`` or ``Y - Yes`` gives the choice its key. The handler (:mod:`.handlers.human`), the run
(``Run.answer``), edge selection (preferred labels) and validation all parse labels here.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from freshness_magic.engine.model import Graph, Node, parse_duration

if TYPE_CHECKING:
    from freshness_magic.engine.outcome import Choice, Outcome, Question

_ACCELERATOR_PATTERNS = (
    re.compile(r"^\s*\[\s*(\w)\s*\]\s*(.*)$", re.DOTALL),  # [K] Label, [ K ] Label
    re.compile(r"^\s*(\w)\s*\)\s*(.*)$", re.DOTALL),  # K) Label
    re.compile(r"^\s*(\w)\s+-\s+(.*)$", re.DOTALL),  # K - Label
)
"""The one accelerator grammar (§4.6): edge routing, gate choices and validation all use it."""


def parse_accelerator(label: str) -> tuple[str, str]:
    """The accelerator key and the label text without it: ``[Y] Yes`` -> ``("Y", "Yes")``.

    Recognises ``[K] x``, ``K) x`` and ``K - x``; otherwise the key is the first non-blank
    character and the text is the whole label.
    """
    for pattern in _ACCELERATOR_PATTERNS:
        match = pattern.match(label)
        if match:
            return match.group(1), match.group(2).strip()
    stripped = label.strip()
    return (stripped[:1], stripped)


def has_accelerator(label: str) -> bool:
    """Whether ``label`` writes its key (``[Y] Yes``, ``Y) Yes``, ``Y - Yes``)."""
    return any(pattern.match(label) for pattern in _ACCELERATOR_PATTERNS)


def normalize_label(label: str) -> str:
    """Lowercase, trim, and strip one accelerator prefix: how edge labels are compared (§3.3)."""
    return parse_accelerator(label)[1].strip().lower()


def _gate_timeout(node: Node) -> float | None:
    raw = node.get("human.timeout")
    if raw:
        return parse_duration(raw)
    return node.timeout


def gate_question(graph: Graph, node: Node) -> Question:
    """The question a gate asks: label as text, one choice per outgoing edge, the default."""
    # The records load here, not at import: validation reads labels with this module at every
    # CLI start, and asks for a question only of a gate with a default choice.
    from freshness_magic.engine.outcome import Choice, Question

    choices = tuple(
        Choice(key=parse_accelerator(label)[0], label=label, target=edge.target)
        for edge in graph.outgoing(node.id)
        for label in (edge.label or edge.target,)
    )
    question = Question(
        node_id=node.id,
        text=node.attrs.get("label") or "Select an option:",
        choices=choices,
        timeout_seconds=_gate_timeout(node),
    )
    wanted = node.get("human.default_choice").strip()
    if wanted:
        default = match_choice(question, wanted)
        if default is not None:
            question = Question(
                node_id=question.node_id,
                text=question.text,
                choices=question.choices,
                default=default.target,
                timeout_seconds=question.timeout_seconds,
            )
    return question


def match_choice(question: Question, answer: str) -> Choice | None:
    """The choice an answer names: accelerator key, target id, full label or label text.

    Matching ignores case and surrounding blanks; the kinds are tried in that order, so a key
    wins over a one-letter target id, and within a kind the first edge in declaration order wins.
    """
    wanted = answer.strip().casefold()
    if not wanted:
        return None
    tests = (
        lambda c: c.key.casefold() == wanted,
        lambda c: c.target.casefold() == wanted,
        lambda c: c.label.strip().casefold() == wanted,
        lambda c: parse_accelerator(c.label)[1].casefold() == wanted,
    )
    for test in tests:
        for choice in question.choices:
            if test(choice):
                return choice
    return None


def default_choice_of(question: Question) -> Choice | None:
    """The choice the question's default (a target id) points at, if any."""
    if question.default is None:
        return None
    for choice in question.choices:
        if choice.target == question.default:
            return choice
    return None


def _display(choice: Choice) -> str:
    """``[K] label``, without repeating a key the label already starts with."""
    key, _text = parse_accelerator(choice.label)
    if key == choice.key and choice.label != _text:
        return choice.label
    return f"[{choice.key}] {choice.label}"


def answer_outcome(question: Question, choice: Choice, *, timed_out: bool = False) -> Outcome:
    """SUCCESS routed to the chosen edge, with the ``human.gate.*`` keys set.

    ``timed_out``: no one answered in time and the gate took its default, which the notes say
    (a log must not read as if a person chose it).
    """
    from freshness_magic.engine.outcome import Outcome, StageStatus

    how = "Human selected"
    if timed_out:
        wait = question.timeout_seconds
        how = "No answer" + (f" in {wait:g}s" if wait is not None else "") + ": took the default"
    return Outcome(
        status=StageStatus.SUCCESS,
        preferred_label=choice.label,
        suggested_next_ids=[choice.target],
        context_updates={
            "human.gate.selected": choice.key,
            "human.gate.label": choice.label,
        },
        notes=f"{how} {_display(choice)} -> {choice.target}",
    )


def valid_choices_text(question: Question) -> str:
    """``Y (Yes -> done), N (No -> draft)``: for messages that list what may be answered."""
    return ", ".join(f"{c.key} ({c.label} -> {c.target})" for c in question.choices)


def child_answer_key(manager_id: str) -> str:
    """The context key that carries an answer to a child pipeline's gate from the parent run's
    ``answer`` to its manager node, which passes it on when it runs again (it is checkpointed
    with the context, so the answer survives a stop between the two)."""
    return f"internal.child_answer.{manager_id}"
