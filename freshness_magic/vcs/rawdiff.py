"""Reading what ``git diff-index --raw -z`` prints: one record per listed path.

Each record is ``:<src mode> <dst mode> <src id> <dst id> <letter>`` and a NUL, then the path
and a NUL. An id of zeros means "none": no source (the path is new) or a destination git did
not read (a work tree file whose stat differs from its index entry, or one that is gone).
"""

from __future__ import annotations

from typing import NamedTuple


class RawDiffRecord(NamedTuple):
    """One path of ``git diff-index --raw -z``: the source and destination object ids (None: of
    zeros), the status letter (``A C D M R T U X``) and the path."""

    src: str | None
    dst: str | None
    letter: str
    path: str


def raw_diff_records(output: bytes) -> list[RawDiffRecord]:
    """Every record of ``output``; ValueError when it is not that format (renames and copies,
    which name two paths, are not asked for and not read)."""
    fields = output.split(b"\0")
    if fields[-1]:
        raise ValueError("raw diff output does not end with NUL")
    records: list[RawDiffRecord] = []
    for index in range(0, len(fields) - 1, 2):
        head = fields[index].decode("ascii")
        parts = head.split(" ")
        if len(parts) != 5 or not head.startswith(":") or index + 1 >= len(fields) - 1:
            raise ValueError(f"not a raw diff record: {head!r}")
        src, dst, letter = parts[2], parts[3], parts[4][:1]
        if letter in "RC":
            raise ValueError(f"a rename or copy record, which was not asked for: {head!r}")
        records.append(
            RawDiffRecord(
                None if not src.strip("0") else src,
                None if not dst.strip("0") else dst,
                letter,
                fields[index + 1].decode("utf-8", "surrogateescape"),
            )
        )
    return records
