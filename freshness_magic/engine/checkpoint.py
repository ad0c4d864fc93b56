"""Reading a run directory's state back: the newest valid snapshot plus the journal after it.

:func:`load_state` tries ``checkpoint.json``, then the history newest first, then the journal
alone; each unusable file is logged and reported, never deleted. Every snapshot and journal
record is checked against its schema (``checkpoint.schema.json``, ``journal-record.schema.json``)
before it is used, so a field of the wrong type makes its file unusable, with the field named,
instead of failing later, deep in a reader. A run directory in which any state file read says
another format version is one clear error, never a fallback: a run touched by a newer version
belongs to it, and continuing it from an older snapshot would write over its state. The format
is :mod:`.checkpoint_format`; :mod:`.checkpoint_writer` writes it.
"""

from __future__ import annotations

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
    STATE_SCHEMA,
    STEP_SCHEMA,
    apply_record,
    history_files,
    parse_journal_line,
)
from freshness_magic.errors import CheckpointError
from freshness_magic.pathsafety import open_state, read_state
from freshness_magic.schemas import first_problem


def _warn(message: str, *args: object) -> None:
    """Log a warning; ``logging`` is imported only then (a clean read never needs it)."""
    import logging

    logging.getLogger(__name__).warning(message, *args)


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


def _parse_snapshot(path: Path) -> dict[str, Any]:
    """The JSON object in one snapshot file; ValueError says why it is not one."""
    raw = read_state(path)
    if not raw.endswith(b"\n"):
        raise ValueError("truncated (no final newline)")
    try:
        data = loads_bounded(raw)
    except RecursionError as exc:
        raise ValueError("nested too deeply") from exc
    if not isinstance(data, dict):
        raise ValueError("not a JSON object")
    return data


def _read_snapshot(path: Path, run_dir: Path) -> dict[str, Any]:
    """Parse and check one snapshot; ValueError says why it is unusable (naming the field),
    FormatMismatch when it is of another format."""
    data = _parse_snapshot(path)
    if data.get("format") != CHECKPOINT_FORMAT:
        raise _format_error(run_dir, data.get("format"))
    if "journal_offset" not in data:
        raise ValueError("journal_offset: missing (a required field)")
    problem = first_problem(data, STATE_SCHEMA)
    if problem is not None:
        raise ValueError(problem)
    return data


def _record_problem(record: dict[str, Any], run_dir: Path) -> str | None:
    """Why a journal record cannot be applied (None: it can); FormatMismatch when it says
    another format."""
    _refuse_record_format(record, run_dir)
    kind = record.get("kind")
    if kind == "full":
        return first_problem(record, STATE_SCHEMA)
    if kind == "step":
        return first_problem(record, STEP_SCHEMA)
    return f'kind: expected "full" or "step", got {kind!r}'


def _journal_format(journal: Path, run_dir: Path) -> None:
    """FormatMismatch when the journal's first record says another format (the record a
    snapshot already holds is not replayed, so it is read here on its own)."""
    try:
        with open_state(journal) as handle:
            record = parse_journal_line(handle.readline())
    except OSError:
        return  # missing or unreadable: the replay says so when it needs the journal
    if record is not None:
        _refuse_record_format(record, run_dir)


def _refuse_record_format(record: dict[str, Any], run_dir: Path) -> None:
    """FormatMismatch when a journal record says another format (a whole-state record always
    says its format; a step record of this format says none)."""
    says = record.get("kind") == "full" or "format" in record
    if says and record.get("format") != CHECKPOINT_FORMAT:
        raise _format_error(run_dir, record.get("format"))


def _first_record_problem(journal: Path) -> str:
    """Why the journal's first record gives no state (for the error that nothing is usable)."""
    try:
        with open_state(journal) as handle:
            record = parse_journal_line(handle.readline())
    except OSError as exc:
        return f"cannot be read ({exc.strerror or exc})"
    if record is None:
        return "no valid first record (torn or damaged)"
    if record.get("kind") != "full":
        return "its first record is not the whole state"
    return f"first record: {_record_problem(record, journal.parent) or 'does not apply'}"


def refuse_other_format(run_dir: Path) -> None:
    """FormatMismatch when the snapshot :func:`load_state` would start from, the journal's
    first record or a record after that snapshot says another format. Meant for before the
    driver lock is taken, so that refusing writes nothing in ``run_dir``; cheaper than a load
    (only records that may say a format are parsed)."""
    offset = 0
    for path in _candidates(run_dir):
        try:
            data = _parse_snapshot(path)
        except (OSError, ValueError):
            continue
        if data.get("format") != CHECKPOINT_FORMAT:
            raise _format_error(run_dir, data.get("format"))
        found = data.get("journal_offset")
        offset = found if isinstance(found, int) and found >= 0 else 0
        break
    journal = run_dir / JOURNAL_FILE
    _journal_format(journal, run_dir)
    try:
        handle = open_state(journal)
    except OSError:
        return
    with handle:
        handle.seek(offset)
        for raw in handle:
            if b'"format":' in raw and (record := parse_journal_line(raw)) is not None:
                _refuse_record_format(record, run_dir)


def _candidates(run_dir: Path) -> list[Path]:
    """The snapshots in the order they are tried: ``checkpoint.json``, then history newest first."""
    return [run_dir / CHECKPOINT_FILE, *reversed(history_files(run_dir))]


def _replay(
    journal: Path, state: dict[str, Any] | None, offset: int
) -> tuple[dict[str, Any] | None, int, int]:
    """Apply the valid records from ``offset`` on; returns (state, valid end, records).

    A record that breaks its schema ends the journal like a damaged one; a record of another
    format raises FormatMismatch (the journal is another version's, not damaged).
    """
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
                    _warn("journal %s has a damaged record at byte %d; stopped there", journal, end)
                break
            if state is None and record.get("kind") != "full":
                break
            problem = _record_problem(record, journal.parent)
            if problem is not None:
                _warn(
                    "journal %s record at byte %d is not usable (%s); stopped there",
                    journal,
                    end,
                    problem,
                )
                break
            try:
                state = apply_record(state if state is not None else {}, record)
            except (AttributeError, KeyError, TypeError) as exc:
                _warn("journal %s record at byte %d does not apply (%s)", journal, end, exc)
                break
            end += len(raw)
            count += 1
    return state, end, count


def load_state(
    run_dir: Path, *, on_corrupt: Callable[[Path, str], None] | None = None
) -> LoadedState:
    """The run's state: the newest valid snapshot plus the journal records after it.

    ``checkpoint.json`` is tried first, then the history newest first, then the journal alone.
    Every unusable file (damaged, or a field that breaks the schema) is logged and passed to
    ``on_corrupt(path, why)``; none is deleted. A snapshot or journal record of another format
    version raises FormatMismatch at once, with no fallback; no usable state raises
    CheckpointError.
    """
    if not run_dir.is_dir():
        raise CheckpointError(
            f"{run_dir}: no such directory; a run directory is .freshness/runs/<run_id> under the "
            "working directory the run used"
        )
    journal = run_dir / JOURNAL_FILE
    _journal_format(journal, run_dir)
    problems: list[str] = []
    for path in _candidates(run_dir):
        if not path.exists():
            if path.name == CHECKPOINT_FILE:
                problems.append(f"{path}: missing")
            continue
        try:
            data = _read_snapshot(path, run_dir)
            offset = int(data.pop("journal_offset"))
        except (OSError, ValueError, TypeError) as exc:
            why = str(exc) or type(exc).__name__
        else:
            state, end, count = _replay(journal, data, offset)
            assert state is not None
            return LoadedState(state, path, end, count)
        problems.append(f"{path}: {why}")
        _warn("checkpoint %s is not usable (%s); trying an older one", path, why)
        if on_corrupt is not None:
            on_corrupt(path, why)
    state, end, count = _replay(journal, None, 0)
    if state is not None:
        return LoadedState(state, journal, end, count)
    if journal.exists():
        problems.append(f"{journal}: {_first_record_problem(journal)}")
    snapshots = [p for p in _candidates(run_dir) if p.exists()]
    if (run_dir / MANIFEST_FILE).exists() and not journal.exists() and not snapshots:
        again = f"start the pipeline again with `run` (its text is in {run_dir / 'pipeline.dot'})"
        ran = [name for name in _RECORDS_OF_STEPS if (run_dir / name).exists()]
        if ran:
            raise CheckpointError(
                f"run directory {run_dir} has no saved state ({JOURNAL_FILE} and its snapshots "
                f"are missing), though its nodes ran and left records ({', '.join(ran)}): it "
                f"cannot be resumed; {again}, and keep this directory for those records"
            )
        raise CheckpointError(
            f"run directory {run_dir} has a manifest but no saved state: the run was stopped "
            f"before its first checkpoint and nothing ran; {again} and delete this directory"
        )
    detail = "; ".join(problems) if problems else "no checkpoint files"
    raise CheckpointError(
        f"no usable checkpoint in {run_dir} ({detail}); it is not a run directory or every "
        "checkpoint is damaged — start the pipeline again with `run`"
    )


_RECORDS_OF_STEPS = ("nodes", "events.jsonl", "evidence.jsonl")
"""What a run directory holds once a step has run (its folders, its event and evidence logs):
a directory with any of them is never called empty."""


def load_checkpoint(
    run_dir: Path, *, on_corrupt: Callable[[Path, str], None] | None = None
) -> tuple[dict[str, Any], Path]:
    """The run's current state as one dict (the checkpoint fields) and the snapshot it came from.

    See :func:`load_state`; this is the form ``status``, ``check`` and the notebook read.
    """
    loaded = load_state(run_dir, on_corrupt=on_corrupt)
    return loaded.data, loaded.path


def state_after_step(run_dir: Path, step: int) -> dict[str, Any] | None:
    """The run's state as the journal record that completed its ``step``-th execution left it
    (the context routing saw after that node; for a node of a parallel branch, the run's
    context after its parallel node). None when the journal does not reach that step (a
    ``loop_restart`` began a new directory, or the journal was written again after the run
    directory was removed). Replays the journal from its start: for questions about the past
    (``cond --step``), not for every step."""
    journal = run_dir / JOURNAL_FILE
    state: dict[str, Any] | None = None
    try:
        handle = open_state(journal)
    except OSError:
        return None
    with handle:
        for raw in handle:
            record = parse_journal_line(raw)
            if record is None or (state is None and record.get("kind") != "full"):
                return None
            try:
                state = apply_record(state if state is not None else {}, record)
            except (AttributeError, KeyError, TypeError):
                return None
            if len(state.get("completed_nodes") or ()) >= step:
                return state
    return None
