"""Attribute lists and values of the DOT subset: ``[k=v, ...]``, ``key = value``, names.

- Values are kept as text: quoted strings unescaped (see :func:`~.dot_lexer.unescape`), bare
  words (numbers, booleans, durations, identifiers, ``gpt-5.2``, ``summary:high``) exactly as
  written; adjacent quoted strings may be joined with ``+``; HTML-like ``<...>`` values are
  rejected.
- Several ``[...]`` lists may follow one statement; commas and semicolons between attributes are
  optional.
- Attribute names are identifiers, optionally dotted; a name may be quoted
  (``"human.default_choice"="Y"``, as Graphviz needs for dotted names) as long as the name itself
  is one (:data:`KEY_RE`).

A missing ``=``, value or ``]`` is an error that says what to write instead.
"""

from __future__ import annotations

import re
from bisect import bisect_right

from freshness_magic.engine.dot_cursor import TokenCursor
from freshness_magic.engine.dot_lexer import ARROW, EOF, STRING, WORD, SourceMap, string_value
from freshness_magic.engine.model import Position, RepeatedAttr
from freshness_magic.errors import ParseError

KEY_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*\Z")
"""Attribute names: identifiers, optionally qualified with dots (``human.default_choice``)."""

Attr = tuple[str, str, Position]
"""(key, value, position of the key) as written in an attribute list."""


class AttrReader(TokenCursor):
    """Reads attribute names, values and lists at the cursor; see the module docstring."""

    def __init__(self, text: str, source: SourceMap) -> None:
        super().__init__(text, source)
        self.repeated: list[RepeatedAttr] = []
        """Attributes written twice in one attribute list, in the order met."""
        self.known_keys: dict[str, str] = {}
        """Attribute names already checked against KEY_RE (names repeat on every node), each
        mapped to its first occurrence: every node's dicts then share one string per name."""

    def _key(self, i: int) -> str:
        """The attribute name at token ``i``: a word, or a quoted string holding a valid name."""
        key = self.values[i] if self.kinds[i] == WORD else string_value(self.values[i])
        known = self.known_keys.get(key)
        if known is None:
            if not KEY_RE.match(key):
                raise self._error(
                    f"invalid attribute name '{key}': names are identifiers, optionally dotted "
                    "(e.g. timeout, human.default_choice)",
                    i,
                )
            known = self.known_keys[key] = key
        return known

    def _value(self, j: int, key: str) -> tuple[str, int]:
        """The value at token ``j`` (after ``key =``); returns it and the next token index."""
        kinds, values = self.kinds, self.values
        kind = kinds[j]
        if kind == WORD:
            return values[j], j + 1
        if kind == STRING:
            if kinds[j + 1] != "+":
                return string_value(values[j]), j + 1
            parts = [string_value(values[j])]
            while kinds[j + 1] == "+":
                if kinds[j + 2] != STRING:
                    raise self._error(
                        f"'+' joins quoted strings only: found {self._describe(j + 2)} after it",
                        j + 1,
                    )
                parts.append(string_value(values[j + 2]))
                j += 2
            return "".join(parts), j + 1
        if kind == "<":
            raise self._error("HTML-like values are not supported", j)
        raise self._error(
            f"'=' without a value for '{key}' (found {self._describe(j)}): write {key}=value, "
            f'or {key}="" for an empty value',
            j - 1,
        )

    def _attr_lists(self) -> list[Attr]:
        """One or more ``[...]`` lists starting at the current '['; commas/semicolons optional."""
        kinds, values, offsets = self.kinds, self.values, self.offsets
        starts = self.source.line_starts
        known_keys = self.known_keys
        items: list[Attr] = []
        i = self.i
        while kinds[i] == "[":
            open_index = i
            i += 1
            while True:
                kind = kinds[i]
                if kind == "]":
                    i += 1
                    break
                if kind == "," or kind == ";":
                    i += 1
                    continue
                if kind == WORD or (kind == STRING and kinds[i + 1] == "="):
                    if kinds[i + 1] != "=":
                        self._missing_equals(i, open_index)
                    key = known_keys.get(values[i]) if kind == WORD else None
                    if key is None:
                        key = self._key(i)
                    value_kind = kinds[i + 2]
                    if value_kind == WORD:  # fast paths of _value for the common cases
                        value, next_i = values[i + 2], i + 3
                    elif value_kind == STRING and kinds[i + 3] != "+" and "\\" not in values[i + 2]:
                        value, next_i = values[i + 2][1:-1], i + 3
                    else:
                        value, next_i = self._value(i + 2, key)
                    offset = offsets[i]
                    line = bisect_right(starts, offset)
                    items.append((key, value, Position(line, offset - starts[line - 1] + 1)))
                    i = next_i
                    continue
                if kind in (EOF, "[", "{", "}", ARROW):
                    raise self._unclosed_bracket(open_index, i)
                if kind == STRING:
                    raise self._error(
                        'a quoted string without a name: write key="value" (join adjacent '
                        "strings with '+')",
                        i,
                    )
                raise self._error(
                    f"expected an attribute name, found {self._describe(i)}: write key=value", i
                )
        self.i = i
        if len(items) > 1:
            self._note_repeats(items)
        return items

    def _note_repeats(self, items: list[Attr]) -> None:
        """Keep each attribute written twice in one statement (Graphviz, and so the run, takes
        the last): validation warns of it (:data:`~.model.Graph.repeated`)."""
        first: dict[str, Position] = {}
        for key, value, position in items:
            if key in first:
                self.repeated.append(RepeatedAttr(key, first[key], position, value))
            else:
                first[key] = position

    def _missing_equals(self, i: int, open_index: int) -> None:
        self._check_bad(i + 1)
        following = self.kinds[i + 1]
        if following in (EOF, "[", "{", "}", ARROW):
            raise self._unclosed_bracket(open_index, i)
        key = self.values[i]
        hint = f"write {key}=value"
        previous = self.kinds[i - 1]
        if previous in (WORD, STRING):
            hint += "; if it belongs to the previous value, quote the whole value"
        raise self._error(f"attribute '{key}' has no value: {hint}", i)

    def _unclosed_bracket(self, open_index: int, found: int) -> ParseError:
        at = self._pos(self.offsets[found])
        return self._error(
            f"unbalanced brackets: this '[' is never closed (found {self._describe(found)} at "
            f"line {at.line}, column {at.column}); add the missing ']'",
            open_index,
        )
