"""Tokenizer for the Attractor DOT subset (spec §2.2).

One compiled master pattern walks the text once (linear time, no nested quantifiers that can
backtrack catastrophically). Tokens are kept as three parallel lists (kind, value, offset) because
a 5,000-node pipeline has a few hundred thousand of them and tuples/objects per token cost more
than the parse itself. Line and column are computed only when asked, by bisecting a table of line
start offsets built once per text.

Token kinds: ``word`` (identifiers, numbers, durations, dotted and hyphenated words such as
``gpt-5.2``), ``str`` (a quoted string, value already unescaped), ``->``, one-character
punctuation (``{ } [ ] = ; , + :``) and ``eof``. Everything else is a :class:`ParseError`.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass

from freshness_magic.engine.model import Position
from freshness_magic.errors import ParseError

WORD = "word"
STRING = "str"
ARROW = "->"
EOF = "eof"

_TOKEN_RE = re.compile(
    r"""[ \t\r\n\f\v\ufeff]*(?:
      (?P<word>-?[A-Za-z0-9_.]+(?:[-:][A-Za-z0-9_.]+)*)
    | (?P<str>"[^"\\]*(?:\\.[^"\\]*)*")
    | (?P<punct>[{}\[\]=;,+:])
    | (?P<arrow>->)
    | (?P<comment>(?://|\#)[^\n]*|/\*.*?\*/)
    | (?P<undirected>--)
    | (?P<badstr>")
    | (?P<badcomment>/\*)
    | (?P<html><)
    | (?P<other>.)
    | (?P<end>\Z)
    )""",
    re.VERBOSE | re.DOTALL,
)

_ESCAPE_RE = re.compile(r"\\(\r\n|.)", re.DOTALL)
_ESCAPES = {'"': '"', "n": "\n", "t": "\t", "\\": "\\", "\n": "", "\r\n": ""}


def _unescape_match(match: re.Match[str]) -> str:
    char = match.group(1)
    replacement = _ESCAPES.get(char)
    return match.group(0) if replacement is None else replacement


def unescape(body: str) -> str:
    """Unescape the inside of a quoted string: ``\\"``, ``\\n``, ``\\t``, ``\\\\``.

    A backslash before a line break continues the line (as in Graphviz). Every other backslash
    sequence (``\\l``, ``\\N``, ...) is kept literally so Graphviz label escapes survive.
    """
    if "\\" not in body:
        return body
    return _ESCAPE_RE.sub(_unescape_match, body)


class SourceMap:
    """Maps character offsets of one text to 1-based line/column, and builds ParseErrors."""

    __slots__ = ("_starts", "path", "text")

    def __init__(self, text: str, path: str | None = None) -> None:
        self.text = text
        self.path = path
        starts = [0]
        find = text.find
        index = find("\n")
        while index >= 0:
            starts.append(index + 1)
            index = find("\n", index + 1)
        self._starts = starts

    def position(self, offset: int) -> Position:
        """The 1-based line and column of a character offset."""
        line = bisect_right(self._starts, offset)
        return Position(line, offset - self._starts[line - 1] + 1)

    def line_text(self, line: int) -> str:
        """The text of a 1-based line without its line break."""
        if not 0 < line <= len(self._starts):
            return ""
        start = self._starts[line - 1]
        end = self.text.find("\n", start)
        return self.text[start : end if end >= 0 else len(self.text)].rstrip("\r")

    def error(self, message: str, offset: int) -> ParseError:
        """A ParseError pointing at ``offset`` with the source line for the caret."""
        pos = self.position(offset)
        return ParseError(
            message,
            line=pos.line,
            column=pos.column,
            source_line=self.line_text(pos.line),
            path=self.path,
        )


@dataclass(slots=True)
class Tokens:
    """Parallel token lists; the last token is always ``eof`` at ``len(text)``."""

    kinds: list[str]
    values: list[str]
    offsets: list[int]


def _describe_char(char: str) -> str:
    if char.isprintable() and not char.isspace():
        return repr(char)
    return f"{char!r} (U+{ord(char):04X})"


def tokenize(text: str, source: SourceMap) -> Tokens:
    """Split ``text`` into tokens; raises ParseError on text that is no token at all."""
    kinds: list[str] = []
    values: list[str] = []
    offsets: list[int] = []
    add_kind = kinds.append
    add_value = values.append
    add_offset = offsets.append
    for match in _TOKEN_RE.finditer(text):
        group = match.lastgroup
        if group == "word":
            add_kind(WORD)
            add_value(match.group(group))
            add_offset(match.start(group))
        elif group == "punct":
            value = match.group(group)
            add_kind(value)
            add_value(value)
            add_offset(match.start(group))
        elif group == "str":
            add_kind(STRING)
            add_value(unescape(match.group(group)[1:-1]))
            add_offset(match.start(group))
        elif group == "arrow":
            add_kind(ARROW)
            add_value(ARROW)
            add_offset(match.start(group))
        elif group == "comment" or group == "end":
            continue
        else:
            _raise_bad_token(group, match, source)
    add_kind(EOF)
    add_value("")
    add_offset(len(text))
    return Tokens(kinds, values, offsets)


def _raise_bad_token(group: str | None, match: re.Match[str], source: SourceMap) -> None:
    """Turn a match of one of the error alternatives into its specific ParseError."""
    start = match.start(group or 0)
    if group == "undirected":
        message = "undirected edge '--' is not supported: pipelines are directed, use '->'"
    elif group == "badstr":
        message = (
            "unterminated string: this '\"' has no closing '\"' "
            '(add one, or escape a quote inside the string as \\")'
        )
    elif group == "badcomment":
        message = "unterminated comment: this '/*' has no closing '*/'"
    elif group == "html":
        message = (
            "HTML-like values <...> are not supported: write the text as a quoted string, "
            'e.g. label="..."'
        )
    else:
        char = match.group(group or 0)
        message = f"unexpected character {_describe_char(char)}"
        if char == "-":
            message += ": an edge is written '->' and a negative number '-1'"
        elif char in "'`":
            message += ': quote values with double quotes, e.g. label="..."'
        else:
            message += ': quote values that contain it, e.g. key="..."'
    raise source.error(message, start)
