"""A run's evidence log (``evidence.jsonl``) for the views: read incrementally, a record's
expanded detail, and what a waiting gate approves."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from freshness_magic.atomicio import loads_bounded
from freshness_magic.views.text import cut, first_items


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


def evidence_detail(record: Mapping[str, Any]) -> dict[str, Any]:
    """What an expanded evidence row shows: summary, method, files changed, commit, tails."""
    found = record.get("outcome")
    outcome: Mapping[str, Any] = found if isinstance(found, dict) else {}
    facts = outcome.get("engine")
    engine: Mapping[str, Any] = facts if isinstance(facts, dict) else {}
    files = engine.get("files") if isinstance(engine.get("files"), dict) else {}
    changed = [
        f"{path} ({kind})"
        for kind in ("added", "modified", "deleted")
        for path in (files or {}).get(kind, [])
    ]
    detail: dict[str, Any] = {
        "summary": record.get("summary", ""),
        "status": engine.get("status") or outcome.get("status", ""),
        "method": engine.get("evidence_method") or record.get("type", ""),
        "files changed": first_items(changed, "all of them: the record in evidence.jsonl"),
        "commit": engine.get("commit") or "",
        "stale files": first_items(
            [str(f) for f in engine.get("stale_files") or []],
            "all of them: the record in evidence.jsonl",
        ),
        "failure reason": engine.get("failure_reason", ""),
        "attempt": engine.get("attempt", ""),
        "time": record.get("timestamp", ""),
    }
    for key, value in engine.items():
        if "tail" in key or key in ("stdout", "stderr", "response"):
            detail[key.replace("_", " ")] = value
    return {k: v for k, v in detail.items() if v not in ("", None, [])}


def approving(
    evidence: Sequence[Mapping[str, Any]],
    gate_node: str,
    details: Callable[[str], Mapping[str, Any]],
) -> dict[str, str]:
    """What the gate approves: the response or changed files of the node that ran before it
    (its last evidence record, and ``details(node)`` for its response)."""
    records = [r for r in evidence if r.get("nodeId") != gate_node]
    if not records:
        return {}
    last = records[-1]
    node = str(last.get("nodeId", ""))
    response = details(node).get("response") or ""
    if response:
        return {"title": f"response of {node}", "text": cut(str(response), 2000)}
    detail = evidence_detail(last)
    lines = [str(detail.get("summary", ""))]
    files = detail.get("files changed") or []
    if files:
        lines.append("files changed: " + ", ".join(files))
    return {"title": f"result of {node}", "text": "\n".join(lines)}
