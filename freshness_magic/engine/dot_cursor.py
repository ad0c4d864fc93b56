"""Where the DOT parser is in the tokens, and how an error there points at the text.

:class:`TokenCursor` holds one text's token lists (see :mod:`.dot_lexer`) and the index of the
current token. The lexer stops at the first token it cannot read and keeps that error; the
cursor raises it only when the parser reaches that token, so an earlier structural mistake is
reported first (errors come in text order).

DOT strings may span lines, so a missing closing quote is not an error where it is missing: the
string runs on to the next quote and the error comes later. :meth:`TokenCursor.with_quote_hint`
then names where that string started.
"""

from __future__ import annotations

from bisect import bisect_left

from freshness_magic.engine.dot_lexer import EOF, STRING, SourceMap, tokenize
from freshness_magic.engine.model import Position
from freshness_magic.errors import ParseError


class TokenCursor:
    """The token lists of one text; ``self.i`` is the index of the current token."""

    def __init__(self, text: str, source: SourceMap) -> None:
        self.source = source
        tokens = tokenize(text, source)
        self.kinds = tokens.kinds
        self.values = tokens.values
        self.offsets = tokens.offsets
        self.bad_index = len(self.kinds) - 2 if tokens.error is not None else -1
        self.lex_error = tokens.error
        self.i = 0

    def _error(
        self, message: str, index: int | None = None, offset: int | None = None
    ) -> ParseError:
        index = self.i if index is None else index
        if self.lex_error is not None and index >= self.bad_index:
            return self.lex_error
        if offset is None:
            offset = self.offsets[index]
        return self.source.error(message, offset)

    def _check_bad(self, index: int) -> None:
        """Raise the tokenizer's error when the parser has reached the token it is about."""
        if index == self.bad_index and self.lex_error is not None:
            raise self.lex_error

    def _describe(self, index: int) -> str:
        self._check_bad(index)
        kind = self.kinds[index]
        if kind == EOF:
            return "the end of the file"
        text = self.values[index]
        if kind == STRING:
            return f"the quoted string {text[:40]}{'...' if len(text) > 40 else ''}"
        return f"'{text[:40]}{'...' if len(text) > 40 else ''}'"

    def _pos(self, offset: int) -> Position:
        return self.source.position(offset)

    def with_quote_hint(self, error: ParseError) -> ParseError:
        """``error`` with a hint when the quoted string just before it spans lines and ends on
        the error's line: its opening quote may be one whose closing quote is missing."""
        source = self.source
        if not 0 < error.line <= len(source.line_starts):
            return error
        at = source.line_starts[error.line - 1] + error.column - 1
        index = bisect_left(self.offsets, at) - 1
        while index >= 0 and self.kinds[index] != STRING:
            index -= 1
        if index < 0:
            return error
        value, start = self.values[index], self.offsets[index]
        opened, closed = self._pos(start), self._pos(start + len(value) - 1)
        if opened.line == closed.line or closed.line != error.line:
            return error
        return ParseError(
            f"{error.message}; the quoted string that starts at line {opened.line}, column "
            f"{opened.column} runs on to line {closed.line}: if its closing '\"' is missing, "
            "add it there",
            line=error.line,
            column=error.column,
            source_line=error.source_line,
            path=error.path,
        )
