"""The edge condition language (spec §10, DESIGN.md §4 item 6).

A condition is clauses joined by ``&&``. A clause is ``key=value``, ``key!=value`` or a bare
``key`` (true when the value is non-empty, §10.5: ``"false"`` is true). Keys are ``outcome``,
``preferred_label``, ``context.a.b`` (looked up as ``context.a.b``, then ``a.b``) or any other
dotted key, looked up in the context as written. Values are bare text up to the next ``&&``
(trimmed) or quoted with ``"`` or ``'``.

Everything else (``==``, ``||``, ``<``, ``and``, ``or``, ``not``, ``!``, parentheses, empty
clauses, a missing key) is a :class:`~freshness_magic.errors.ConditionError` naming the token,
its 1-based column and what to write instead. The text is scanned by hand; it never reaches
``eval``. Parsed conditions are cached by text, so routing re-evaluates them cheaply.
"""

from __future__ import annotations

import enum
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from freshness_magic.errors import ConditionError

_KEY_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*(?:\.[A-Za-z0-9_-]+)*")
_WORD_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_SPACES = " \t\r\n"
_FALSY = ("false", "0")
_WORDS = ("and", "or", "not")


class Operator(enum.Enum):
    """How a clause compares the key's value."""

    EQ = "="
    NE = "!="
    TRUTHY = ""


@dataclass(frozen=True, slots=True)
class Clause:
    """One clause: ``key``, operator, expected ``value`` ('' for truthy), source text, column."""

    key: str
    operator: Operator
    value: str
    text: str
    column: int


@dataclass(frozen=True, slots=True)
class Condition:
    """A parsed condition; no clauses means the edge is unconditional (always true)."""

    text: str
    clauses: tuple[Clause, ...] = ()

    def evaluate(
        self, *, outcome: str, preferred_label: str = "", context: Mapping[str, Any]
    ) -> bool:
        """All clauses hold, left to right (short-circuit)."""
        for clause in self.clauses:
            _, actual = resolve_key(clause.key, outcome, preferred_label, context)
            if not _holds(clause, actual):
                return False
        return True


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


@dataclass
class _Scanner:
    """The condition parser's position in ``text`` and the clauses read so far."""

    text: str
    pos: int = 0
    clauses: list[Clause] = field(default_factory=list)

    def fail(self, message: str, pos: int, token: str) -> ConditionError:
        return ConditionError(message, column=pos + 1, token=token, text=self.text)

    def skip_spaces(self) -> None:
        text, pos = self.text, self.pos
        while pos < len(text) and text[pos] in _SPACES:
            pos += 1
        self.pos = pos

    def at(self, token: str) -> bool:
        return self.text.startswith(token, self.pos)

    def rest_of_clause(self, start: int) -> str:
        end = self.text.find("&&", start)
        return self.text[start : len(self.text) if end < 0 else end].strip()


def _word_at(text: str, pos: int) -> str | None:
    """``and``/``or``/``not`` (any case) standing alone at ``pos``, else None."""
    match = _WORD_RE.match(text, pos)
    if match and match.group(0).lower() in _WORDS:
        return match.group(0)
    return None


def _word_error(scanner: _Scanner, word: str, pos: int) -> ConditionError:
    lowered = word.lower()
    if lowered == "or":
        return scanner.fail(
            f"`{word}` is not supported: use two edges, one per alternative", pos, word
        )
    if lowered == "and":
        return scanner.fail(f"`{word}` is not supported; join clauses with `&&`", pos, word)
    rest = scanner.rest_of_clause(pos + len(word))
    suggestion = "key!=value"
    match = re.fullmatch(r"([A-Za-z_][\w.-]*)\s*=\s*(.*)", rest)
    if match:
        suggestion = f"{match.group(1)}!={match.group(2)}"
    return scanner.fail(f"`{word}` (negation) is not supported; write `{suggestion}`", pos, word)


def _operator_error(scanner: _Scanner, key: str, pos: int) -> ConditionError:
    """The error for whatever stands after a key where ``=``, ``!=`` or ``&&`` belongs."""
    text = scanner.text
    if text.startswith("==", pos):
        value = scanner.rest_of_clause(pos + 2) or "value"
        return scanner.fail(f"`==` is not supported; write `{key}={value}`", pos, "==")
    for token in ("<=", ">=", "<", ">"):
        if text.startswith(token, pos):
            return scanner.fail(
                f"`{token}` is not supported: conditions compare text with `=` and `!=` only; "
                f"store the comparison's result in the context and test it "
                f"(e.g. `context.{key.removeprefix('context.')}_ok=true`)",
                pos,
                token,
            )
    if text.startswith("|", pos):
        token = "||" if text.startswith("||", pos) else "|"
        return scanner.fail(
            f"`{token}` is not supported: use two edges, one per alternative", pos, token
        )
    if text.startswith("&", pos):
        return scanner.fail("`&` is not supported; join clauses with `&&`", pos, "&")
    if text.startswith("!", pos):
        return scanner.fail(f"`!` (negation) is not supported; write `{key}!=value`", pos, "!")
    if text[pos] in "()":
        return _paren_error(scanner, pos)
    word = _word_at(text, pos)
    if word is not None:
        return _word_error(scanner, word, pos)
    token = text[pos:].split(None, 1)[0] if text[pos:].strip() else text[pos]
    return scanner.fail(
        f"expected `=`, `!=` or `&&` after key `{key}`, found `{token}`; "
        f"write `{key}=value` (quote values that contain spaces)",
        pos,
        token,
    )


def _paren_error(scanner: _Scanner, pos: int) -> ConditionError:
    token = scanner.text[pos]
    return scanner.fail(
        f"parentheses (`{token}`) are not supported: clauses are joined with `&&` only; "
        "quote the value if it contains them",
        pos,
        token,
    )


def _parse_key(scanner: _Scanner) -> str:
    text, pos = scanner.text, scanner.pos
    char = text[pos]
    if text.startswith("!=", pos) or char == "=":
        op = "!=" if char == "!" else "="
        raise scanner.fail(
            f"`{op}` has no key before it; write `key{op}value`, e.g. `outcome{op}success`",
            pos,
            op,
        )
    if char == "!":
        rest = scanner.rest_of_clause(pos + 1)
        key = _KEY_RE.match(rest)
        example = f"{key.group(0)}!=true" if key else "key!=value"
        raise scanner.fail(f"`!` (negation) is not supported; write `{example}`", pos, "!")
    if char in "()":
        raise _paren_error(scanner, pos)
    if char == "|":
        token = "||" if text.startswith("||", pos) else "|"
        raise scanner.fail(
            f"`{token}` is not supported: use two edges, one per alternative", pos, token
        )
    word = _word_at(text, pos)
    if word is not None:
        end = pos + len(word)
        if end >= len(text) or text[end] in _SPACES or text[end] in "(!":
            raise _word_error(scanner, word, pos)
    match = _KEY_RE.match(text, pos)
    if match is None:
        token = text[pos]
        raise scanner.fail(
            f"unexpected `{token}` where a key belongs; keys are `outcome`, "
            "`preferred_label` or `context.name`",
            pos,
            token,
        )
    end = match.end()
    if end < len(text) and text[end] == ".":
        raise scanner.fail(
            f"key `{match.group(0)}.` ends with `.`; write a full dotted key such as "
            f"`{match.group(0)}.name`",
            end,
            ".",
        )
    scanner.pos = end
    return match.group(0)


def _parse_quoted(scanner: _Scanner) -> str:
    text, start = scanner.text, scanner.pos
    quote = text[start]
    out: list[str] = []
    pos = start + 1
    while pos < len(text):
        char = text[pos]
        if char == "\\" and pos + 1 < len(text):
            out.append(text[pos + 1])
            pos += 2
            continue
        if char == quote:
            scanner.pos = pos + 1
            scanner.skip_spaces()
            if scanner.pos < len(text) and not scanner.at("&&"):
                bad = scanner.pos
                token = text[bad:].split(None, 1)[0]
                raise scanner.fail(
                    f"unexpected `{token}` after the quoted value; clauses are joined with `&&`",
                    bad,
                    token,
                )
            return "".join(out)
        out.append(char)
        pos += 1
    raise scanner.fail(f"unterminated quoted value; close it with `{quote}`", start, quote)


def _check_bare_value(scanner: _Scanner, start: int, end: int, key: str) -> None:
    """Reject operators, quotes and ``and``/``or``/``not`` words inside an unquoted value."""
    text = scanner.text
    pos = start
    while pos < end:
        char = text[pos]
        if char in "=!" and (char == "=" or text.startswith("!=", pos)):
            token = "!=" if char == "!" else "="
            raise scanner.fail(
                f"a second `{token}` inside the value of `{key}`; join clauses with `&&`, "
                "or quote the value if it contains it",
                pos,
                token,
            )
        if char == "|":
            token = "||" if text.startswith("||", pos) else "|"
            raise scanner.fail(
                f"`{token}` is not supported: use two edges, one per alternative", pos, token
            )
        if char == "&":
            raise scanner.fail(
                "`&` is not supported; join clauses with `&&` (quote the value if it contains `&`)",
                pos,
                "&",
            )
        if char in "()":
            raise _paren_error(scanner, pos)
        if char in "\"'":
            raise scanner.fail(
                f'a quote inside an unquoted value; quote the whole value, e.g. `{key}="..."`',
                pos,
                char,
            )
        if char.isalpha() and (pos == start or text[pos - 1] in _SPACES):
            word = _word_at(text, pos)
            if word is not None and pos > start:
                after = pos + len(word)
                if after >= end or text[after] in _SPACES:
                    raise _word_error(scanner, word, pos)
        pos += 1


def _parse_clause(scanner: _Scanner) -> Clause:
    text = scanner.text
    start = scanner.pos
    key = _parse_key(scanner)
    scanner.skip_spaces()
    if scanner.pos >= len(text) or scanner.at("&&"):
        return Clause(key, Operator.TRUTHY, "", text[start : scanner.pos].strip(), start + 1)
    if scanner.at("!="):
        operator = Operator.NE
        scanner.pos += 2
    elif scanner.at("=") and not scanner.at("=="):
        operator = Operator.EQ
        scanner.pos += 1
    else:
        raise _operator_error(scanner, key, scanner.pos)
    scanner.skip_spaces()
    if scanner.pos < len(text) and text[scanner.pos] in "\"'":
        value = _parse_quoted(scanner)
    else:
        value_start = scanner.pos
        end = text.find("&&", value_start)
        end = len(text) if end < 0 else end
        _check_bare_value(scanner, value_start, end, key)
        value = text[value_start:end].strip()
        scanner.pos = end
    return Clause(key, operator, value, text[start : scanner.pos].strip(), start + 1)


@lru_cache(maxsize=4096)
def parse_condition(text: str) -> Condition:
    """Parse ``text``; an empty (or blank) text is the always-true condition.

    Raises :class:`ConditionError` with the offending token, its 1-based column and the
    accepted alternative.
    """
    scanner = _Scanner(text)
    scanner.skip_spaces()
    if scanner.pos >= len(text):
        return Condition(text, ())
    last_and: int | None = None
    while True:
        scanner.skip_spaces()
        if scanner.pos >= len(text):
            assert last_and is not None
            raise scanner.fail(
                "nothing after the final `&&`; remove it or add a clause", last_and, "&&"
            )
        if scanner.at("&&"):
            if last_and is None:
                message = "nothing before `&&`; remove it or add a clause before it"
            else:
                message = "empty clause between two `&&`; remove one of them"
            raise scanner.fail(message, scanner.pos, "&&")
        scanner.clauses.append(_parse_clause(scanner))
        scanner.skip_spaces()
        if scanner.pos >= len(text):
            return Condition(text, tuple(scanner.clauses))
        if not scanner.at("&&"):
            key = scanner.clauses[-1].key
            raise _operator_error(scanner, key, scanner.pos)
        last_and = scanner.pos
        scanner.pos += 2


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


def falsy_looking(value: str) -> bool:
    """A value a reader takes for false (``false``, ``0``) that a bare key treats as true."""
    return value.strip().lower() in _FALSY


def bare_key_warning(key: str, value: str) -> str:
    """The warning for a bare clause ``key`` that meets ``value`` ``false``/``0`` (§10.5)."""
    return (
        f"bare key `{key}` is true for any non-empty value, so {value!r} counts as true "
        f"(spec §10.5); write `{key}=true` (or `{key}!={value}`) to test the value"
    )


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


def _holds(clause: Clause, actual: str) -> bool:
    if clause.operator is Operator.EQ:
        return actual == clause.value
    if clause.operator is Operator.NE:
        return actual != clause.value
    return is_truthy(actual)


def _as_condition(condition: str | Condition) -> Condition:
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
    return _as_condition(condition).evaluate(
        outcome=outcome, preferred_label=preferred_label, context=context
    )


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
        parsed = _as_condition(condition)
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
                held=_holds(clause, actual),
            )
        )
    return ConditionExplanation(
        text, all(c.held for c in explained), tuple(explained), warnings=tuple(warnings)
    )


def split_fix(message: str) -> tuple[str, str]:
    """Split a ConditionError message into the problem and what to write instead.

    Messages read ``<problem>; <fix>`` or ``<problem>: <fix>``; the split is at the first such
    separator outside backquotes. The fix is '' when there is none.
    """
    inside = False
    for index, char in enumerate(message):
        if char == "`":
            inside = not inside
        elif not inside and char in ";:" and message.startswith(" ", index + 1):
            return message[:index], message[index + 2 :]
    return message, ""
