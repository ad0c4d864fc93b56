"""The run directory's state: an append-only journal plus compacted snapshots (format 2).

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
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import time
import zlib
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from freshness_magic.atomicio import loads_bounded, write_atomic, write_json_atomic
from freshness_magic.errors import CheckpointError

log = logging.getLogger(__name__)

CHECKPOINT_FORMAT = 2
"""Version of the run directory's state files; 1 was a whole ``checkpoint.json`` per step."""
CHECKPOINT_FILE = "checkpoint.json"
JOURNAL_FILE = "journal.jsonl"
HISTORY_DIR = "checkpoints"
MANIFEST_FILE = "manifest.json"
REQUIRED_FIELDS = ("timestamp", "current_node", "completed_nodes", "node_retries", "context")

_HISTORY_RE = re.compile(r"checkpoint_(\d+)\.json\Z")
_LINE_HEAD = b'{"c":"'
_RECORD_AT = len(_LINE_HEAD) + 8 + len(b'","r":')


class FormatMismatch(CheckpointError):
    """The run directory was written in another format version (no fallback helps)."""


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

    def subset(self, keys: list[str]) -> EncodedMap:
        """The members of ``keys`` (those present), sharing their encoded text."""
        part = EncodedMap()
        part._members = {k: self._members[k] for k in keys if k in self._members}
        return part

    def encode(self) -> str:
        return "{" + ",".join(self._members.values()) + "}"


def encode_checkpoint(data: dict[str, Any]) -> bytes:
    """One line of compact JSON; :class:`EncodedMap` values are spliced in as they are."""
    return (_encode_object(data) + "\n").encode("utf-8")


def _encode_object(data: dict[str, Any]) -> str:
    members = []
    for key in sorted(data):
        value = data[key]
        encoded = value.encode() if isinstance(value, EncodedMap) else encode_json(value)
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
        match = _HISTORY_RE.match(entry.name)
        if match:
            found.append((int(match.group(1)), entry))
    return [path for _, path in sorted(found)]


class CheckpointWriter:
    """Appends a run's journal records and writes its snapshots (at most ``history`` kept).

    ``durable``: fsync each journal record (the default; one fsync per step). ``valid_end``
    (resume) cuts a torn or damaged journal tail before the first append.
    """

    def __init__(
        self,
        run_dir: Path,
        *,
        history: int = 50,
        keep: tuple[Path, ...] = (),
        durable: bool = True,
        valid_end: int | None = None,
    ) -> None:
        self.run_dir = run_dir
        self.history = max(history, 0)
        self.durable = durable
        existing = history_files(run_dir)
        kept = {p.resolve() for p in keep}
        self._history: deque[Path] = deque(p for p in existing if p.resolve() not in kept)
        self._last_ms = 0
        if existing:
            match = _HISTORY_RE.match(existing[-1].name)
            self._last_ms = int(match.group(1)) if match else 0
        self.journal = run_dir / JOURNAL_FILE
        self._end = self.journal.stat().st_size if self.journal.exists() else 0
        if valid_end is not None and valid_end < self._end:
            with open(self.journal, "r+b") as handle:
                handle.truncate(valid_end)
            self._end = valid_end
        self._since_snapshot = 0
        self._snapshot_size = 0
        self.needs_snapshot = True
        """True until this writer has written a snapshot (the first save compacts)."""

    def append(self, record: dict[str, Any]) -> int:
        """Append one record (fsynced when durable); returns the journal's new end."""
        line = journal_line(record)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.journal, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line)
            if self.durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        self._end += len(line)
        self._since_snapshot += len(line)
        return self._end

    @property
    def compaction_due(self) -> bool:
        """The journal since the last snapshot is larger than that snapshot."""
        return self.needs_snapshot or self._since_snapshot > self._snapshot_size

    def snapshot(self, data: dict[str, Any]) -> Path:
        """Write ``data`` (the whole state, covering the journal so far) as ``checkpoint.json``
        and one history entry; returns its path."""
        payload = encode_checkpoint({**data, "journal_offset": self._end})
        latest = self.run_dir / CHECKPOINT_FILE
        write_atomic(latest, payload, fsync=False)
        self._snapshot_size = len(payload)
        self._since_snapshot = 0
        self.needs_snapshot = False
        if self.history:
            target = self._next_name()
            target.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.link(latest, target)
            except OSError:
                write_atomic(target, payload, fsync=False)
            self._history.append(target)
            while len(self._history) > self.history:
                old = self._history.popleft()
                with contextlib.suppress(FileNotFoundError):
                    old.unlink()
        return latest

    def _next_name(self) -> Path:
        now_ms = time.time_ns() // 1_000_000
        self._last_ms = max(now_ms, self._last_ms + 1)
        return self.run_dir / HISTORY_DIR / f"checkpoint_{self._last_ms}.json"


@dataclass
class LoadedState:
    """The state of a run directory as read: the dict, where it came from, what was replayed."""

    data: dict[str, Any]
    path: Path
    """The snapshot used (or the journal when no snapshot was usable)."""
    journal_end: int
    """Bytes of the journal that are valid (a resume cuts anything after)."""
    replayed: int
    """Journal records parsed on top of the snapshot."""


def _format_error(run_dir: Path, found: Any) -> FormatMismatch:
    have = found if found is not None else 1
    return FormatMismatch(
        f"run directory {run_dir} has state format {have}, this freshness_magic reads format "
        f"{CHECKPOINT_FORMAT}; finish it with the version that started it, or start the pipeline "
        "again with `run`"
    )


def _read_snapshot(path: Path, run_dir: Path) -> dict[str, Any]:
    """Parse one snapshot; ValueError says why it is unusable, FormatMismatch for old formats."""
    raw = path.read_bytes()
    if not raw.endswith(b"\n"):
        raise ValueError("truncated (no final newline)")
    try:
        data = loads_bounded(raw)
    except RecursionError as exc:
        raise ValueError("nested too deeply") from exc
    if not isinstance(data, dict):
        raise ValueError("not a JSON object")
    if data.get("format") != CHECKPOINT_FORMAT:
        raise _format_error(run_dir, data.get("format"))
    missing = [f for f in (*REQUIRED_FIELDS, "journal_offset") if f not in data]
    if missing:
        raise ValueError("missing fields: " + ", ".join(missing))
    return data


def _replay(
    journal: Path, state: dict[str, Any] | None, offset: int
) -> tuple[dict[str, Any] | None, int, int]:
    """Apply the valid records from ``offset`` on; returns (state, valid end, records)."""
    count = 0
    end = offset
    try:
        handle = journal.open("rb")
    except FileNotFoundError:
        return state, end, 0
    with handle:
        handle.seek(offset)
        for raw in handle:
            record = parse_journal_line(raw)
            if record is None:
                if raw.endswith(b"\n"):
                    log.warning(
                        "journal %s has a damaged record at byte %d; stopped there", journal, end
                    )
                break
            if state is None and record.get("kind") != "full":
                break
            try:
                state = apply_record(state if state is not None else {}, record)
            except (AttributeError, KeyError, TypeError) as exc:
                log.warning("journal %s record at byte %d does not apply (%s)", journal, end, exc)
                break
            end += len(raw)
            count += 1
    return state, end, count


def load_state(
    run_dir: Path, *, on_corrupt: Callable[[Path, str], None] | None = None
) -> LoadedState:
    """The run's state: the newest valid snapshot plus the journal records after it.

    ``checkpoint.json`` is tried first, then the history newest first, then the journal alone.
    Every unusable file is logged and passed to ``on_corrupt(path, why)``; none is deleted. A run
    directory of another format version raises at once; no usable state raises CheckpointError.
    """
    journal = run_dir / JOURNAL_FILE
    candidates = [run_dir / CHECKPOINT_FILE, *reversed(history_files(run_dir))]
    problems: list[str] = []
    for path in candidates:
        if not path.exists():
            if path.name == CHECKPOINT_FILE:
                problems.append(f"{path}: missing")
            continue
        try:
            data = _read_snapshot(path, run_dir)
            offset = int(data.pop("journal_offset"))
        except FormatMismatch:
            if not journal.exists():
                raise
            why = "written in another format"
        except (OSError, ValueError, TypeError) as exc:
            why = str(exc) or type(exc).__name__
        else:
            state, end, count = _replay(journal, data, offset)
            assert state is not None
            return LoadedState(state, path, end, count)
        problems.append(f"{path}: {why}")
        log.warning("checkpoint %s is not usable (%s); trying an older one", path, why)
        if on_corrupt is not None:
            on_corrupt(path, why)
    state, end, count = _replay(journal, None, 0)
    if state is not None:
        return LoadedState(state, journal, end, count)
    if journal.exists():
        problems.append(f"{journal}: no valid first record")
    if (run_dir / MANIFEST_FILE).exists() and not journal.exists():
        raise CheckpointError(
            f"run directory {run_dir} has a manifest but no saved state: the run was stopped "
            "before its first checkpoint and nothing ran; start the pipeline again with `run` "
            f"(its text is in {run_dir / 'pipeline.dot'}) and delete this directory"
        )
    detail = "; ".join(problems) if problems else "no checkpoint files"
    raise CheckpointError(
        f"no usable checkpoint in {run_dir} ({detail}); it is not a run directory or every "
        "checkpoint is damaged — start the pipeline again with `run`"
    )


def load_checkpoint(
    run_dir: Path, *, on_corrupt: Callable[[Path, str], None] | None = None
) -> tuple[dict[str, Any], Path]:
    """The run's current state as one dict (the checkpoint fields) and the snapshot it came from.

    See :func:`load_state`; this is the form ``status``, ``check`` and the notebook read.
    """
    loaded = load_state(run_dir, on_corrupt=on_corrupt)
    return loaded.data, loaded.path


def has_state(run_dir: Path) -> bool:
    """True when ``run_dir`` holds a run's saved state (of any format)."""
    return (run_dir / JOURNAL_FILE).exists() or (run_dir / CHECKPOINT_FILE).exists()


def write_manifest(run_dir: Path, data: dict[str, Any]) -> None:
    """``manifest.json`` (§5.6): pipeline name, goal, start time, run id, paths."""
    write_json_atomic(run_dir / MANIFEST_FILE, data)
