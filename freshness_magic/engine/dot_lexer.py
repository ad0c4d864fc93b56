"""Tokenizer for the Attractor DOT subset (spec §2.2).

One compiled master pattern walks the text once (linear time, no nested quantifiers that can
backtrack catastrophically). Tokens are kept as three parallel lists (kind, text, offset) because
a 5,000-node pipeline has a few hundred thousand of them and an object per token would cost more
than the parse itself. Line and column are computed only when asked, by bisecting a table of line
start offsets built once per text.

Token kinds: ``word`` (identifiers, numbers, durations, dotted and hyphenated words such as
``gpt-5.2``), ``str`` (a quoted string kept raw with its quotes: see :func:`string_value`),
``->``, one-character punctuation (``{ } [ ] = ; , + :``) and ``eof``. Everything else is a
:class:`ParseError`, reported when the parser gets to it.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from itertools import accumulate, islice
from typing import NamedTuple

from freshness_magic.engine.model import Position
from freshness_magic.errors import ParseError

WORD = "word"
STRING = "str"
ARROW = "->"
EOF = "eof"

_WS = r"[ \t\r\n\f\v\ufeff]"
_TOKEN_RE = re.compile(
    # Written as adjacent strings, not re.VERBOSE: the verbose parse of the comments cost 0.3 ms
    # of every command's start-up.
    # Group 1: the gap before the token (white space and comments, unrolled so it cannot
    # backtrack: every comment starts with '/' or '#', which white space never does).
    rf"({_WS}*(?:(?://|#)[^\n]*{_WS}*|/\*.*?\*/{_WS}*)*)"
    # Group 2: the token, or one of the error alternatives, or nothing at the very end.
    r"(-?[A-Za-z0-9_.]+(?:[-:][A-Za-z0-9_.]+)*"  # word
    r'|"[^"\\]*(?:\\.[^"\\]*)*"'  # complete quoted string
    r'|".*'  # an unclosed string (error): eat the rest, as for '/*' below
    r"|->|--"  # arrow; '--' is an error
    r"|/\*.*"  # an unclosed '/*' (error): eat the rest, so later '/*' are not rescanned
    r"|."  # punctuation or anything else
    r"|\Z)",
    re.DOTALL,
)

BAD = "bad"
"""Kind of the first token that is not allowed; the token lists end right after it."""
_EXACT_KIND = {p: p for p in "{}[]=;,+:"} | {ARROW: ARROW, "--": BAD, "-": BAD}
_STRING_RE = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_WORD_START = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-"
_FIRST_KIND = dict.fromkeys(_WORD_START, WORD) | {'"': STRING}

_ESCAPE_RE = re.compile(r"\\(\r\n|.)", re.DOTALL)
_ESCAPES = {'"': '"', "n": "\n", "t": "\t", "\\": "\\", "\n": "", "\r\n": ""}


def _unescape_match(match: re.Match[str]) -> str:
    char = match.group(1)
    replacement = _ESCAPES.get(char)
    return match.group(0) if replacement is None else replacement


def string_value(token: str) -> str:
    """The value of a ``str`` token: without its quotes, unescaped."""
    return unescape(token[1:-1])


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

    __slots__ = ("line_starts", "path", "text")

    def __init__(self, text: str, path: str | None = None) -> None:
        self.text = text
        self.path = path
        starts = [0]
        find = text.find
        index = find("\n")
        while index >= 0:
            starts.append(index + 1)
            index = find("\n", index + 1)
        self.line_starts = starts

    def position(self, offset: int) -> Position:
        """The 1-based line and column of a character offset."""
        line = bisect_right(self.line_starts, offset)
        return Position(line, offset - self.line_starts[line - 1] + 1)

    def line_text(self, line: int) -> str:
        """The text of a 1-based line without its line break."""
        if not 0 < line <= len(self.line_starts):
            return ""
        start = self.line_starts[line - 1]
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


class Tokens(NamedTuple):
    """Parallel token lists; the last token is always ``eof`` at ``len(text)``.

    When the text holds something that is no token (``--``, ``<``, an unclosed string or
    comment, a stray character) the lists stop at that token, whose kind is ``bad``, and
    ``error`` says what is wrong with it. The parser raises ``error`` when it reaches the bad
    token, so a mistake earlier in the file (``graph`` instead of ``digraph``) is reported first.
    A named tuple for start-up time (see ``engine.model.Position``).
    """

    kinds: list[str]
    values: list[str]
    offsets: list[int]
    error: ParseError | None = None


def _describe_char(char: str) -> str:
    if char.isprintable() and not char.isspace():
        return repr(char)
    return f"{char!r} (U+{ord(char):04X})"


def tokenize(text: str, source: SourceMap) -> Tokens:
    """Split ``text`` into tokens (never raises: see :class:`Tokens` for text that is no token).

    The regex engine does the scanning (``split``); offsets come from running sums of the
    gap and token lengths and kinds from a table of first characters, so Python touches each
    token only once, in a comprehension. Quoted strings are kept raw; see :func:`unescape`.
    """
    # split() returns [before, gap, token, before, gap, token, ..., rest] as one flat list of
    # strings ('before' is always empty: matches are contiguous), cheaper than findall's tuples.
    parts = _TOKEN_RE.split(text)
    offsets = list(islice(accumulate(map(len, parts)), 1, None, 3))
    values = parts[2::3]
    while values and not values[-1]:
        values.pop()
        offsets.pop()
    exact, first = _EXACT_KIND.get, _FIRST_KIND.get
    kinds = [exact(token) or first(token[0], BAD) for token in values]
    if kinds and kinds[-1] == STRING and not _STRING_RE.fullmatch(values[-1]):
        kinds[-1] = BAD  # an unclosed string ran to the end of the text
    error = None
    if BAD in kinds:
        index = kinds.index(BAD)
        error = _bad_token_error(values[index], offsets[index], source)
        del kinds[index + 1 :], values[index + 1 :], offsets[index + 1 :]
    control = _CONTROL_RE.search(text)
    if control is not None and (error is None or control.start() < offsets[-1]):
        index = bisect_right(offsets, control.start())
        del kinds[index:], values[index:], offsets[index:]
        kinds.append(BAD)
        values.append(control.group())
        offsets.append(control.start())
        error = source.error(_control_message(control.group()), control.start())
    kinds.append(EOF)
    values.append("")
    offsets.append(len(text))
    return Tokens(kinds, values, offsets, error)


_CONTROL_RE = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]|\r(?!\n)")
"""A control character (tab, line breaks and CRLF line endings aside): pipeline text is shown in
terminals, where one would act (a carriage return overwrites the line, ESC starts a sequence)."""


def _control_message(char: str) -> str:
    if char == "\r":
        return (
            "a carriage return not followed by a line break (U+000D): pipeline text holds no "
            "control characters (a terminal would act on them); remove it, or end lines with \\n"
        )
    return (
        f"control character U+{ord(char):04X}: pipeline text holds none (a terminal would act "
        "on it); remove it"
    )


_DASHES = frozenset("\u2010\u2011\u2012\u2013\u2014\u2212")
"""Dashes an editor may put for a hyphen (``a \u2014> b``)."""
_ARROWS = frozenset("\u2192\u27f6\u21d2")


def _bad_token_error(token: str, start: int, source: SourceMap) -> ParseError:
    """The specific ParseError for a token that is not allowed."""
    text = source.text
    if token == "--" and text.startswith("-->", start):
        message = "'-->' is not an edge: an edge is written '->'"
    elif token == "--":
        message = "undirected edge '--' is not supported: pipelines are directed, use '->'"
    elif token == ">" and text[start - 1 : start] == "=":
        message = "'=>' is not an edge: an edge is written '->'"
        start -= 1
    elif token in _DASHES:
        message = f"{_describe_char(token)} is a dash, not a hyphen: an edge is written '->'"
    elif token in _ARROWS:
        message = f"{_describe_char(token)} is not an edge: an edge is written '->'"
    elif token.startswith('"'):
        message = (
            "unterminated string: this '\"' has no closing '\"' "
            '(add one, or escape a quote inside the string as \\")'
        )
    elif token.startswith("/*"):
        message = "unterminated comment: this '/*' has no closing '*/'"
    elif token == "<":
        message = (
            "HTML-like values <...> are not supported: write the text as a quoted string, "
            'e.g. label="..."'
        )
    else:
        message = f"unexpected character {_describe_char(token)}"
        if token == "-":
            message += ": an edge is written '->' and a negative number '-1'"
        elif token in "'`":
            message += ': quote values with double quotes, e.g. label="..."'
        elif token.isalpha():
            message += (
                ": names (node ids, attributes) are ASCII identifiers [A-Za-z_][A-Za-z0-9_]*; "
                'put other text in a quoted value, e.g. label="..."'
            )
        else:
            message += ': quote values that contain it, e.g. key="..."'
    return source.error(message, start)
