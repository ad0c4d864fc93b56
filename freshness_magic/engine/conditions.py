"""The edge condition language (spec §10, docs/ARCHITECTURE.md): parse and evaluate.

A condition is clauses joined by ``&&``. A clause is ``key=value``, ``key!=value`` or a bare
``key`` (true when the value is non-empty, §10.5: ``"false"`` is true). Keys are ``outcome``,
``preferred_label``, ``context.a.b`` (looked up as ``context.a.b``, then ``a.b``) or any other
dotted key, looked up in the context as written. Values are compared as text
(:func:`stringify`).

The syntax and its error messages are :mod:`.condition_syntax`; the per-clause explanation (the
playground, dead ends, ``%pipeline cond``) and its warnings are :mod:`.condition_explain`.
Parsed conditions are cached by text, so routing re-evaluates them cheaply.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import lru_cache
from typing import Any, NamedTuple

from freshness_magic.engine.condition_syntax import Clause, Operator, parse_clauses
from freshness_magic.errors import ConditionError


class Condition(NamedTuple):
    """A parsed condition; no clauses means the edge is unconditional (always true)."""

    text: str
    clauses: tuple[Clause, ...] = ()

    def evaluate(
        self, *, outcome: str, preferred_label: str = "", context: Mapping[str, Any]
    ) -> bool:
        """All clauses hold, left to right (short-circuit)."""
        for clause in self.clauses:
            _, actual = resolve_key(clause.key, outcome, preferred_label, context)
            if not clause_holds(clause, actual):
                return False
        return True


@lru_cache(maxsize=4096)
def parse_condition(text: str) -> Condition:
    """Parse ``text``; an empty (or blank) text is the always-true condition.

    Raises :class:`ConditionError` with the offending token, its 1-based column and the
    accepted alternative.
    """
    return Condition(text, parse_clauses(text))


def check_condition(text: str) -> ConditionError | None:
    """The syntax error of ``text``, or None when it parses (used by validation)."""
    try:
        parse_condition(text)
    except ConditionError as exc:
        return exc
    return None


def stringify(value: object) -> str:
    """How a context value compares: None -> '', bools -> true/false, lists joined by ','."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | tuple | set | frozenset):
        items = sorted(value, key=str) if isinstance(value, set | frozenset) else value
        return ",".join(stringify(item) for item in items)
    if isinstance(value, Mapping):
        return json.dumps(value, sort_keys=True, default=str)
    return str(value)


def is_truthy(value: str) -> bool:
    """Non-empty (§10.5): so the string ``false`` is true; write ``key=true`` to compare."""
    return bool(value)


def resolve_key(
    key: str, outcome: str, preferred_label: str, context: Mapping[str, Any]
) -> tuple[str | None, str]:
    """The key actually found (or None) and its value as text (§10.4; missing -> '')."""
    if key == "outcome":
        return "outcome", stringify(outcome)
    if key == "preferred_label":
        return "preferred_label", stringify(preferred_label)
    candidates = (key, key[len("context.") :]) if key.startswith("context.") else (key,)
    for candidate in candidates:
        value = context.get(candidate)
        if value is not None:
            return candidate, stringify(value)
    return None, ""


def clause_holds(clause: Clause, actual: str) -> bool:
    """Whether ``clause`` holds for the key's value ``actual`` (as text)."""
    if clause.operator is Operator.EQ:
        return actual == clause.value
    if clause.operator is Operator.NE:
        return actual != clause.value
    return is_truthy(actual)


_FALSY = ("false", "0")


def falsy_looking(value: str) -> bool:
    """A value a reader takes for false (``false``, ``0``) that a bare key treats as true."""
    return value.strip().lower() in _FALSY


def bare_key_warning(key: str, value: str) -> str:
    """The warning for a bare clause ``key`` that meets ``value`` ``false``/``0`` (§10.5)."""
    return (
        f"bare key `{key}` is true for any non-empty value, so {value!r} counts as true "
        f"(spec §10.5); write `{key}=true` (or `{key}!={value}`) to test the value"
    )


def as_condition(condition: str | Condition) -> Condition:
    """``condition`` parsed (a Condition is returned as it is)."""
    return condition if isinstance(condition, Condition) else parse_condition(condition)


def evaluate_condition(
    condition: str | Condition,
    *,
    outcome: str,
    preferred_label: str = "",
    context: Mapping[str, Any],
) -> bool:
    """Whether the condition holds; an empty condition is always true.

    Raises :class:`ConditionError` when ``condition`` is text that does not parse.
    """
    return as_condition(condition).evaluate(
        outcome=outcome, preferred_label=preferred_label, context=context
    )
