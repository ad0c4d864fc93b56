"""Why a condition holds or not: each clause's key, the value found, and warnings.

:func:`explain_condition` evaluates every clause (no short-circuit) and returns a syntax error
instead of raising, for the condition playground, ``%pipeline cond`` and the dead-end report. A
bare key that meets ``"false"`` or ``"0"`` holds (§10.5) but rarely means it: such clauses get a
warning saying to write ``key=true`` (``conditions.bare_key_warning``, also used by validation).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from freshness_magic.engine.condition_syntax import Operator
from freshness_magic.engine.conditions import (
    Condition,
    as_condition,
    bare_key_warning,
    clause_holds,
    falsy_looking,
    resolve_key,
)
from freshness_magic.errors import ConditionError


@dataclass(frozen=True, slots=True)
class ClauseExplanation:
    """What one clause compared and whether it held (shown by the condition playground)."""

    text: str
    key: str
    resolved_key: str | None
    """The key actually found (``context.x`` or ``x``); None when nothing was found."""
    operator: str
    """``=``, ``!=`` or ``truthy``."""
    expected: str | None
    """The value compared against; None for a bare (truthy) clause."""
    actual: str
    held: bool

    def to_dict(self) -> dict[str, Any]:
        return {
            "text": self.text,
            "key": self.key,
            "resolved_key": self.resolved_key,
            "operator": self.operator,
            "expected": self.expected,
            "actual": self.actual,
            "held": self.held,
        }


@dataclass(frozen=True, slots=True)
class ConditionSyntaxError:
    """A syntax error reported by :func:`explain_condition` instead of raising."""

    message: str
    column: int
    token: str


@dataclass(frozen=True, slots=True)
class ConditionExplanation:
    """Per-clause evaluation of a condition, or the syntax error that stopped it."""

    text: str
    result: bool
    clauses: tuple[ClauseExplanation, ...] = ()
    error: ConditionSyntaxError | None = None
    warnings: tuple[str, ...] = ()
    """Clauses that hold but may not mean what they say (a bare key meeting ``"false"``)."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "text": self.text,
            "result": self.result,
            "clauses": [c.to_dict() for c in self.clauses],
            "warnings": list(self.warnings),
            "error": None
            if self.error is None
            else {
                "message": self.error.message,
                "column": self.error.column,
                "token": self.error.token,
            },
        }

    def __str__(self) -> str:
        if self.error is not None:
            return f"syntax error at column {self.error.column}: {self.error.message}"
        if not self.clauses:
            return "empty condition: always true"
        lines = []
        for c in self.clauses:
            found = c.resolved_key if c.resolved_key is not None else "(not set)"
            want = "truthy" if c.expected is None else f"{c.operator} {c.expected!r}"
            mark = "held" if c.held else "failed"
            lines.append(f"{c.text}: {found} = {c.actual!r}, wanted {want} -> {mark}")
        lines.append(f"result: {self.result}")
        lines.extend(f"warning: {w}" for w in self.warnings)
        return "\n".join(lines)


def explain_condition(
    condition: str | Condition,
    *,
    outcome: str,
    preferred_label: str = "",
    context: Mapping[str, Any],
) -> ConditionExplanation:
    """Every clause with its resolved key, the value found and whether it held.

    Unlike :func:`evaluate_condition` all clauses are evaluated, and a syntax error is
    returned in ``error`` (result False) instead of raised.
    """
    text = condition.text if isinstance(condition, Condition) else condition
    try:
        parsed = as_condition(condition)
    except ConditionError as exc:
        return ConditionExplanation(
            text, False, (), ConditionSyntaxError(exc.message, exc.column, exc.token)
        )
    explained = []
    warnings = []
    for clause in parsed.clauses:
        found, actual = resolve_key(clause.key, outcome, preferred_label, context)
        if clause.operator is Operator.TRUTHY and falsy_looking(actual):
            warnings.append(bare_key_warning(clause.key, actual))
        explained.append(
            ClauseExplanation(
                text=clause.text,
                key=clause.key,
                resolved_key=found,
                operator=clause.operator.value or "truthy",
                expected=None if clause.operator is Operator.TRUTHY else clause.value,
                actual=actual,
                held=clause_holds(clause, actual),
            )
        )
    return ConditionExplanation(
        text, all(c.held for c in explained), tuple(explained), warnings=tuple(warnings)
    )
