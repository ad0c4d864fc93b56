"""Reading a run directory's state back: the newest valid snapshot plus the journal after it.

:func:`load_state` tries ``checkpoint.json``, then the history newest first, then the journal
alone; each unusable file is logged and reported, never deleted. A run directory written in
another format version is one clear error. The format is :mod:`.checkpoint_format`;
:mod:`.checkpoint_writer` writes it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from freshness_magic.atomicio import loads_bounded
from freshness_magic.engine.checkpoint_format import (
    CHECKPOINT_FILE,
    CHECKPOINT_FORMAT,
    JOURNAL_FILE,
    MANIFEST_FILE,
    REQUIRED_FIELDS,
    apply_record,
    history_files,
    parse_journal_line,
)
from freshness_magic.errors import CheckpointError
from freshness_magic.pathsafety import open_state, read_state

log = logging.getLogger(__name__)


class FormatMismatch(CheckpointError):
    """The run directory was written in another format version (no fallback helps)."""


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
    raw = read_state(path)
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
        handle = open_state(journal)
    except FileNotFoundError:
        return state, end, 0
    except OSError as exc:
        raise CheckpointError(
            f"{journal} cannot be read ({exc.strerror or exc}); the run's state is in it"
        ) from None
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
    if not run_dir.is_dir():
        raise CheckpointError(
            f"{run_dir}: no such directory; a run directory is .freshness/runs/<run_id> under the "
            "working directory the run used"
        )
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
    return last_written_ns(run_dir) is not None


def last_written_ns(run_dir: Path) -> int | None:
    """When the run's state last changed (its journal or snapshot, whichever is newer); None
    without saved state. ``checkpoint.json`` alone lags: between snapshots only the journal
    grows, so "the newest run" must be judged by both."""
    stamps = []
    for name in (JOURNAL_FILE, CHECKPOINT_FILE):
        try:
            stamps.append((run_dir / name).stat().st_mtime_ns)
        except OSError:
            continue
    return max(stamps, default=None)
