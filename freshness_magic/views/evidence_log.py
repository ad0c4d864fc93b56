"""Reading a run's evidence log (``evidence.jsonl``) incrementally for the notebook views."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from freshness_magic.atomicio import loads_bounded


class EvidenceTail:
    """Reads an append-only evidence log incrementally: only bytes added since the last read.

    Each complete line is checked with the evidence module's validator; a torn last line is
    left for the next read, and a log that shrank (a new run reused the path) is re-read.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._offset = 0
        self._records: list[dict[str, Any]] = []

    def read(self) -> list[dict[str, Any]]:
        from freshness_magic.evidence.record import validate_evidence

        try:
            size = self.path.stat().st_size
        except FileNotFoundError:
            self._offset, self._records = 0, []
            return []
        if size < self._offset:
            self._offset, self._records = 0, []
        if size == self._offset:
            return list(self._records)
        with self.path.open("rb") as handle:
            handle.seek(self._offset)
            chunk = handle.read(size - self._offset)
        end = chunk.rfind(b"\n") + 1
        for raw in chunk[:end].splitlines():
            try:
                data = loads_bounded(raw)
            except ValueError:
                continue
            node_id = data.get("nodeId") if isinstance(data, dict) else None
            result = validate_evidence(data, node_id if isinstance(node_id, str) else "")
            if result.record is not None:
                self._records.append(result.record.to_dict())
        self._offset += end
        return list(self._records)
