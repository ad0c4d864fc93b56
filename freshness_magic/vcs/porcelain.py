"""Reading what ``git status --porcelain=v2 -z`` prints: HEAD and one record per listed path.

Apart from :mod:`.git`, which starts the processes: a check starts its status before it loads
the code that reads the answer.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class PorcelainRecord:
    """One path of ``git status --porcelain=v2 -z``: kind (``1 2 u ? !``), ``XY`` and path."""

    kind: str
    xy: str
    path: str


def porcelain_records(output: bytes) -> tuple[str | None, list[PorcelainRecord]]:
    """HEAD from the ``# branch.oid`` header (if asked with ``--branch``) and every record."""
    head_id: str | None = None
    records: list[PorcelainRecord] = []
    fields = output.split(b"\0")
    index = 0
    while index < len(fields):
        raw = fields[index]
        index += 1
        if not raw:
            continue
        text = raw.decode("utf-8", "surrogateescape")
        kind = text[0]
        if kind == "#":
            parts = text.split(" ")
            if len(parts) >= 3 and parts[1] == "branch.oid":
                head_id = None if parts[2] == "(initial)" else parts[2]
            continue
        if kind == "1":
            parts = text.split(" ", 8)
            records.append(PorcelainRecord(kind, parts[1], parts[8]))
        elif kind == "2":
            parts = text.split(" ", 9)
            records.append(PorcelainRecord(kind, parts[1], parts[9]))
            index += 1  # the original path follows as its own field
        elif kind == "u":
            parts = text.split(" ", 10)
            records.append(PorcelainRecord(kind, parts[1], parts[10]))
        elif kind in "?!":
            records.append(PorcelainRecord(kind, kind, text[2:]))
    return head_id, records
