"""Text files users give (pipelines, prompt files) are UTF-8; where one is not, say where."""

from __future__ import annotations

import codecs

_BOMS = (
    (codecs.BOM_UTF32_LE, "UTF-32"),
    (codecs.BOM_UTF32_BE, "UTF-32"),
    (codecs.BOM_UTF16_LE, "UTF-16"),
    (codecs.BOM_UTF16_BE, "UTF-16"),
)


def not_utf8(data: bytes, exc: UnicodeDecodeError) -> str:
    """Where ``data`` stops being UTF-8, for a message: ``UTF-16 text (...)``, or ``not UTF-8
    text at line 3, column 12 (byte 0xe9)`` (columns in characters, as parse errors count)."""
    for bom, name in _BOMS:
        if data.startswith(bom):
            return f"{name} text (it starts with a {name} byte order mark), not UTF-8"
    line, column = where_not_utf8(data, exc)
    return f"not UTF-8 text at line {line}, column {column} (byte 0x{data[exc.start]:02x})"


def where_not_utf8(data: bytes, exc: UnicodeDecodeError) -> tuple[int, int]:
    """The 1-based line and column (in characters) where ``data`` stops being UTF-8."""
    before = data[: exc.start]
    line = before.count(b"\n") + 1
    return line, len(before[before.rfind(b"\n") + 1 :].decode("utf-8", errors="replace")) + 1


def decode(data: bytes) -> str:
    """``data`` as UTF-8 text; a ValueError saying where it is not (:func:`not_utf8`)."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{not_utf8(data, exc)}; save it as UTF-8") from None
