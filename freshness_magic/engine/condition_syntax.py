"""The syntax of edge conditions (spec §10.2): clauses, and what to write instead.

:func:`parse_clauses` scans the text by hand (it never reaches ``eval``) into :class:`Clause`
records: ``key=value``, ``key!=value`` or a bare ``key``, joined by ``&&``; values are bare text
up to the next ``&&`` (trimmed) or quoted with ``"`` or ``'``. Everything else (``==``, ``||``,
``<``, ``and``, ``or``, ``not``, ``!``, parentheses, empty clauses, a missing key) is a
:class:`~freshness_magic.errors.ConditionError` naming the token, its 1-based column and what to
write instead, as ``<problem>; <fix>`` or ``<problem>: <fix>`` (:func:`split_fix` takes the two
apart for diagnostics).
"""

from __future__ import annotations

import enum
import re
from typing import NamedTuple

from freshness_magic.engine.quoted import read_quoted
from freshness_magic.errors import ConditionError

_KEY_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*(?:\.[A-Za-z0-9_-]+)*")
_WORD_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_SPACES = " \t\r\n"
_WORDS = ("and", "or", "not")


class Operator(enum.Enum):
    """How a clause compares the key's value."""

    EQ = "="
    NE = "!="
    TRUTHY = ""


class Clause(NamedTuple):
    """One clause: ``key``, operator, expected ``value`` ('' for truthy), source text, column."""

    key: str
    operator: Operator
    value: str
    text: str
    column: int


class _Scanner:
    """The place in a condition's text while its clauses are read."""

    __slots__ = ("clauses", "pos", "text")

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self.clauses: list[Clause] = []

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
    quoted = read_quoted(text, start)
    if quoted is None:
        raise scanner.fail(f"unterminated quoted value; close it with `{quote}`", start, quote)
    value, scanner.pos = quoted
    scanner.skip_spaces()
    if scanner.pos < len(text) and not scanner.at("&&"):
        bad = scanner.pos
        token = text[bad:].split(None, 1)[0]
        raise scanner.fail(
            f"unexpected `{token}` after the quoted value; clauses are joined with `&&`",
            bad,
            token,
        )
    return value


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


def parse_clauses(text: str) -> tuple[Clause, ...]:
    """The clauses of ``text`` in order; none for an empty (or blank) text.

    Raises :class:`ConditionError` with the offending token, its 1-based column and the
    accepted alternative.
    """
    scanner = _Scanner(text)
    scanner.skip_spaces()
    if scanner.pos >= len(text):
        return ()
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
            return tuple(scanner.clauses)
        if not scanner.at("&&"):
            key = scanner.clauses[-1].key
            raise _operator_error(scanner, key, scanner.pos)
        last_and = scanner.pos
        scanner.pos += 2


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
