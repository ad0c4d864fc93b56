"""Crash-safe checkpoints of a run (spec §5.3, DESIGN.md §4 item 7 and §8).

After every step the run writes ``checkpoint.json`` (the latest state) atomically and keeps a
copy as ``checkpoints/checkpoint_{timestamp_ms}.json`` (a hard link to the same bytes when the file
system allows it, so the copy costs no second write). The history is bounded (``history``, oldest
pruned first) so a long run is linear in time and disk. Loading prefers ``checkpoint.json`` and,
when it is missing, truncated or corrupt, falls back to the newest valid history file; corrupt
files are reported and never deleted.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

from freshness_magic.atomicio import fsync_dir, write_atomic, write_json_atomic
from freshness_magic.errors import CheckpointError

log = logging.getLogger(__name__)

CHECKPOINT_FORMAT = 1
CHECKPOINT_FILE = "checkpoint.json"
HISTORY_DIR = "checkpoints"
MANIFEST_FILE = "manifest.json"
REQUIRED_FIELDS = ("timestamp", "current_node", "completed_nodes", "node_retries", "context")

_HISTORY_RE = re.compile(r"checkpoint_(\d+)\.json\Z")


def encode_json(value: Any) -> str:
    """Compact, sorted JSON: checkpoints are rewritten every step, so size matters."""
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

    The run keeps its node outcomes this way so that a checkpoint re-encodes only what changed;
    otherwise every step would re-encode every outcome and a long run would grow quadratic.
    """

    def __init__(self) -> None:
        self._members: dict[str, str] = {}

    def set(self, key: str, value: Any) -> None:
        self._members[key] = f"{encode_json(key)}:{encode_json(value)}"

    def clear(self) -> None:
        self._members.clear()

    def encode(self) -> str:
        return "{" + ",".join(self._members.values()) + "}"


def encode_checkpoint(data: dict[str, Any]) -> bytes:
    """One line of compact JSON; :class:`EncodedMap` values are spliced in as they are."""
    members = []
    for key in sorted(data):
        value = data[key]
        encoded = value.encode() if isinstance(value, EncodedMap) else encode_json(value)
        members.append(f"{encode_json(key)}:{encoded}")
    return ("{" + ",".join(members) + "}\n").encode("utf-8")


def history_files(run_dir: Path) -> list[Path]:
    """History checkpoints of ``run_dir``, oldest first (by the timestamp in the name)."""
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
    """Writes a run's checkpoints and keeps at most ``history`` history files."""

    def __init__(self, run_dir: Path, *, history: int = 50, keep: tuple[Path, ...] = ()) -> None:
        self.run_dir = run_dir
        self.history = max(history, 0)
        existing = history_files(run_dir)
        kept = {p.resolve() for p in keep}
        self._history: deque[Path] = deque(p for p in existing if p.resolve() not in kept)
        self._last_ms = 0
        if existing:
            match = _HISTORY_RE.match(existing[-1].name)
            self._last_ms = int(match.group(1)) if match else 0

    def _next_name(self) -> Path:
        now_ms = time.time_ns() // 1_000_000
        self._last_ms = max(now_ms, self._last_ms + 1)
        return self.run_dir / HISTORY_DIR / f"checkpoint_{self._last_ms}.json"

    def save(self, data: dict[str, Any]) -> Path:
        """Write ``data`` as the latest checkpoint plus one history entry; returns the latest."""
        payload = encode_checkpoint(data)
        latest = self.run_dir / CHECKPOINT_FILE
        write_atomic(latest, payload)
        if self.history:
            target = self._next_name()
            target.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.link(latest, target)
                fsync_dir(target.parent)
            except OSError:
                write_atomic(target, payload)
            self._history.append(target)
            while len(self._history) > self.history:
                old = self._history.popleft()
                with contextlib.suppress(FileNotFoundError):
                    old.unlink()
        return latest


def _read_valid(path: Path) -> dict[str, Any]:
    """Parse one checkpoint file; raises ValueError saying why it is not usable."""
    raw = path.read_bytes()
    if not raw.endswith(b"\n"):
        raise ValueError("truncated (no final newline)")
    data = json.loads(raw)
    if not isinstance(data, dict):
        raise ValueError("not a JSON object")
    missing = [f for f in REQUIRED_FIELDS if f not in data]
    if missing:
        raise ValueError("missing fields: " + ", ".join(missing))
    if data.get("format", CHECKPOINT_FORMAT) != CHECKPOINT_FORMAT:
        raise ValueError(f"unsupported checkpoint format {data.get('format')!r}")
    return data


def load_checkpoint(
    run_dir: Path, *, on_corrupt: Callable[[Path, str], None] | None = None
) -> tuple[dict[str, Any], Path]:
    """The newest valid checkpoint of ``run_dir`` and its path.

    ``checkpoint.json`` is tried first, then the history newest first. Every unusable file is
    logged and passed to ``on_corrupt(path, why)``; none is deleted. Raises CheckpointError when no
    file is usable.
    """
    candidates = [run_dir / CHECKPOINT_FILE, *reversed(history_files(run_dir))]
    problems: list[str] = []
    for path in candidates:
        if not path.exists():
            if path.name == CHECKPOINT_FILE:
                problems.append(f"{path}: missing")
            continue
        try:
            return _read_valid(path), path
        except (OSError, ValueError) as exc:
            why = str(exc) or type(exc).__name__
            problems.append(f"{path}: {why}")
            log.warning("checkpoint %s is not usable (%s); trying an older one", path, why)
            if on_corrupt is not None:
                on_corrupt(path, why)
    detail = "; ".join(problems) if problems else "no checkpoint files"
    raise CheckpointError(
        f"no usable checkpoint in {run_dir} ({detail}); it is not a run directory or every "
        "checkpoint is damaged — start the pipeline again with `run`"
    )


def write_manifest(run_dir: Path, data: dict[str, Any]) -> None:
    """``manifest.json`` (§5.6): pipeline name, goal, start time, run id, paths."""
    write_json_atomic(run_dir / MANIFEST_FILE, data)
