"""The run directory's state format (2): an append-only journal plus compacted snapshots.

Every step appends one record to ``journal.jsonl``: what the step changed (completed nodes and
their outcomes, context keys set and deleted, new log lines, the run's scalar fields, extension
state only when it changed), so the bytes written per step do not grow with the run. Each line is
``{"c":"<crc32>","r":<record>}`` and the checksum covers the record's bytes, so a line torn by a
kill (or by a power loss) is detected and dropped. The journal's first record holds the whole
state; it alone rebuilds the run. In the default durable mode the record is the step's one fsync.

``checkpoint.json`` is a snapshot of the whole state plus ``journal_offset``, the journal bytes it
already includes; it is rewritten (atomically, without fsync: it is a cache of the journal) when
the journal has grown by more than the snapshot's size since the last one, and whenever the run
comes to rest (waiting, finished, paused). Reading the state is the snapshot plus the records
after its offset: amortised O(1) per step. ``checkpoints/checkpoint_<ms>.json`` keeps the last
``history`` snapshots (hard links); when ``checkpoint.json`` is damaged the newest valid history
file is used, and when none is usable the journal is replayed from its start. Damaged files are
reported and never deleted.

This module is the format: file names, the one JSON encoding, journal lines and how a record
changes the state. :mod:`.checkpoint_writer` writes it, :mod:`.checkpoint` reads it back.
"""

from __future__ import annotations

import json
import re
import zlib
from pathlib import Path
from typing import Any

from freshness_magic.atomicio import loads_bounded

CHECKPOINT_FORMAT = 2
"""Version of the run directory's state files; 1 was a whole ``checkpoint.json`` per step."""
CHECKPOINT_FILE = "checkpoint.json"
JOURNAL_FILE = "journal.jsonl"
HISTORY_DIR = "checkpoints"
MANIFEST_FILE = "manifest.json"
STATE_SCHEMA = "checkpoint.schema.json"
"""What a snapshot and the journal's whole-state record hold (``freshness_magic/schemas``)."""
STEP_SCHEMA = "journal-record.schema.json#/$defs/step"
"""What a journal step record holds."""

HISTORY_RE = re.compile(r"checkpoint_(\d+)\.json\Z")
_LINE_HEAD = b'{"c":"'
_RECORD_AT = len(_LINE_HEAD) + 8 + len(b'","r":')


def encode_json(value: Any) -> str:
    """Compact, sorted JSON: the one encoding of journal records and snapshots."""
    return json.dumps(
        value,
        sort_keys=True,
        ensure_ascii=False,
        allow_nan=False,
        separators=(",", ":"),
        default=str,
    )


class EncodedMap:
    """A JSON object kept as one encoded ``"key":value`` member per key.

    The run keeps its node outcomes this way so that a snapshot re-encodes only what changed.
    """

    def __init__(self) -> None:
        self._members: dict[str, str] = {}

    def set(self, key: str, value: Any) -> None:
        self._members[key] = f"{encode_json(key)}:{encode_json(value)}"

    def clear(self) -> None:
        self._members.clear()

    def discard(self, key: str) -> None:
        self._members.pop(key, None)

    def subset(self, keys: list[str]) -> EncodedMap:
        """The members of ``keys`` (those present), sharing their encoded text."""
        part = EncodedMap()
        part._members = {k: self._members[k] for k in keys if k in self._members}
        return part

    def encode(self) -> str:
        return "{" + ",".join(self._members.values()) + "}"


class EncodedList:
    """A JSON array whose items are already encoded (spliced into a record as they are)."""

    def __init__(self, items: list[str]) -> None:
        self.items = items

    def encode(self) -> str:
        return "[" + ",".join(self.items) + "]"


def encode_checkpoint(data: dict[str, Any]) -> bytes:
    """One line of compact JSON; :class:`EncodedMap` and :class:`EncodedList` values are
    spliced in as they are."""
    return (_encode_object(data) + "\n").encode("utf-8")


def _encode_object(data: dict[str, Any]) -> str:
    members = []
    for key in sorted(data):
        value = data[key]
        if isinstance(value, EncodedMap | EncodedList):
            encoded = value.encode()
        else:
            encoded = encode_json(value)
        members.append(f"{encode_json(key)}:{encoded}")
    return "{" + ",".join(members) + "}"


def journal_line(record: dict[str, Any]) -> bytes:
    """``{"c":"<crc32 of the record bytes>","r":<record>}`` and a newline."""
    body = _encode_object(record).encode("utf-8")
    return b'%s%08x","r":%s}\n' % (_LINE_HEAD, zlib.crc32(body), body)


def parse_journal_line(raw: bytes) -> dict[str, Any] | None:
    """The record of one journal line, or None when it is torn or its checksum fails."""
    if not raw.endswith(b"}\n") or not raw.startswith(_LINE_HEAD) or len(raw) <= _RECORD_AT:
        return None
    body = raw[_RECORD_AT:-2]
    try:
        if int(raw[len(_LINE_HEAD) : len(_LINE_HEAD) + 8], 16) != zlib.crc32(body):
            return None
        record = loads_bounded(body)
    except (ValueError, RecursionError):
        return None
    return record if isinstance(record, dict) else None


def apply_record(state: dict[str, Any], record: dict[str, Any]) -> dict[str, Any]:
    """``state`` with one journal record applied (a full record replaces it)."""
    if record.get("kind") == "full":
        return {k: v for k, v in record.items() if k != "kind"}
    state["completed_nodes"].extend(record.get("completed", []))
    state["node_outcomes"].update(record.get("outcomes", {}))
    if "traces" in record:
        state.setdefault("traces", []).extend(record["traces"])
    context = state["context"]
    context.update(record.get("set", {}))
    for key in record.get("unset", []):
        context.pop(key, None)
    state["logs"].extend(record.get("logs", []))
    extensions = state.setdefault("extensions", {})
    for name, patch in record.get("extensions", {}).items():
        if not isinstance(extensions.get(name), dict):
            extensions[name] = {}
        apply_patch(extensions[name], patch)
    for key, value in record.get("fields", {}).items():
        state[key] = value
    return state


def apply_patch(target: dict[str, Any], patch: dict[str, Any]) -> None:
    """Apply a ``set``/``unset``/``sub`` patch (see ``persistence.state_patch``) in place."""
    target.update(patch.get("set", {}))
    for key in patch.get("unset", []):
        target.pop(key, None)
    for key, sub in patch.get("sub", {}).items():
        if not isinstance(target.get(key), dict):
            target[key] = {}
        apply_patch(target[key], sub)


def history_files(run_dir: Path) -> list[Path]:
    """History snapshots of ``run_dir``, oldest first (by the timestamp in the name)."""
    folder = run_dir / HISTORY_DIR
    if not folder.is_dir():
        return []
    found: list[tuple[int, Path]] = []
    for entry in folder.iterdir():
        match = HISTORY_RE.match(entry.name)
        if match:
            found.append((int(match.group(1)), entry))
    return [path for _, path in sorted(found)]
