"""Quoted values in the small languages inside attributes (conditions, the model stylesheet)."""

from __future__ import annotations


def read_quoted(text: str, start: int) -> tuple[str, int] | None:
    """The value of the quoted string that opens at ``text[start]`` (``"`` or ``'``), with
    backslash escapes resolved, and the position just after its closing quote; ``None`` if the
    quote is never closed. Both languages quote alike, so a value reads the same in either."""
    quote = text[start]
    out: list[str] = []
    pos = start + 1
    while pos < len(text):
        char = text[pos]
        if char == "\\" and pos + 1 < len(text):
            out.append(text[pos + 1])
            pos += 2
        elif char == quote:
            return "".join(out), pos + 1
        else:
            out.append(char)
            pos += 1
    return None
