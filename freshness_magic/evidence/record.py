"""The evidence-file format, its validating reader, and the crash-safe writers.

A node (an agent, a script) may write its own evidence file while it works,
``<workdir>/.orchestrator/evidence/<node_id>.json``::

    {"version": 1, "nodeId": "draft", "timestamp": "2026-01-02T03:04:05Z",
     "summary": "one line", "type": "analysis", "outcome": {...}}

``version`` (1), ``nodeId``, ``timestamp`` (ISO 8601) and ``summary`` are required; ``type`` (one
of :data:`EVIDENCE_TYPES`, ``file_changes`` when absent) and ``outcome`` (an object) are optional;
other keys are allowed (``runId`` binds the file to one run, see ``evidence/binding.py``). Files
over :data:`MAX_EVIDENCE_BYTES` are refused without being read whole.

The engine never writes over that file: the node's file stays exactly as the node wrote it. The
engine's record of every step goes to ``evidence.jsonl`` in the run directory (every execution of
a node, in order); it is the node's record (if valid) with the engine's facts under
``outcome["engine"]`` (see :func:`merge_record`; a node key called ``engine`` is kept as
``node_engine``). So a reader finds the engine's facts in one place whoever authored the record.
``.orchestrator/`` carries a ``.gitignore`` containing ``*`` so state never shows up as the user's
changes in ``git status``.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from freshness_magic import atomicio, pathsafety
from freshness_magic.errors import EvidenceError, UnsafePathError

EVIDENCE_VERSION = 1
EVIDENCE_TYPES: tuple[str, ...] = ("file_changes", "external_effect", "analysis", "validation")
ORCHESTRATOR_DIR = ".orchestrator"
EVIDENCE_SUBDIR = "evidence"
EVIDENCE_LOG = "evidence.jsonl"
ENGINE_KEY = "engine"
"""The key under ``outcome`` that holds the engine's facts."""
NODE_ENGINE_KEY = "node_engine"
"""Where a node's own ``outcome["engine"]`` value is kept when the engine merges its facts."""
REQUIRED_FIELDS: tuple[str, ...] = ("version", "nodeId", "timestamp", "summary")
DEFAULT_TYPE = "file_changes"
"""The type of a node's record that names none (the format's default)."""
MAX_EVIDENCE_BYTES = 1 << 20
"""Largest evidence file read (1 MiB): a record says what was done; big output goes elsewhere."""


def utc_timestamp(moment: datetime | None = None) -> str:
    """ISO 8601 in UTC with a ``Z`` suffix and microseconds (sortable as text)."""
    moment = moment or datetime.now(UTC)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_timestamp(text: str) -> datetime:
    """An ISO 8601 timestamp (``Z`` or offset; naive means UTC); raises ValueError otherwise."""
    value = text.strip()
    if value.endswith(("Z", "z")):
        value = value[:-1] + "+00:00"
    moment = datetime.fromisoformat(value)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment


@dataclass
class EvidenceRecord:
    """One evidence record: what one execution of a node did."""

    node_id: str
    summary: str
    type: str
    outcome: dict[str, Any] = field(default_factory=dict)
    timestamp: str = field(default_factory=utc_timestamp)
    version: int = EVIDENCE_VERSION
    run_id: str | None = None
    """The run the node says the file belongs to (optional ``runId``; see evidence/binding.py)."""

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "version": self.version,
            "nodeId": self.node_id,
            "timestamp": self.timestamp,
            "summary": self.summary,
            "type": self.type,
            "outcome": self.outcome,
        }
        if self.run_id is not None:
            data["runId"] = self.run_id
        return data

    @property
    def engine(self) -> dict[str, Any]:
        """The engine's facts (empty for a record the node wrote and the engine has not merged)."""
        facts = self.outcome.get(ENGINE_KEY)
        return facts if isinstance(facts, dict) else {}

    @property
    def method(self) -> str:
        """How the work was shown: the engine's evidence method, else the record's type (the
        "method" column of the CLI's and the notebook's evidence tables)."""
        return str(self.engine.get("evidence_method") or self.type)


@dataclass
class EvidenceReadResult:
    """A read evidence file: the record when valid, and every problem found (empty when valid)."""

    record: EvidenceRecord | None
    problems: list[str] = field(default_factory=list)
    exists: bool = True

    @property
    def valid(self) -> bool:
        return self.record is not None and not self.problems


def _is_empty(value: Any) -> bool:
    return value is None or (isinstance(value, str | list | dict) and not value)


def validate_evidence(data: Any, node_id: str) -> EvidenceReadResult:
    """Check a decoded evidence document against the format; problems name the field and why."""
    if not isinstance(data, dict):
        kind = type(data).__name__
        return EvidenceReadResult(None, [f"the document is a JSON {kind}, expected an object"])
    problems: list[str] = []
    for name in REQUIRED_FIELDS:
        if name not in data:
            problems.append(f"field {name!r} is missing")
        elif _is_empty(data[name]):
            problems.append(f"field {name!r} is empty")
    version = data.get("version")
    if "version" in data and (isinstance(version, bool) or version != EVIDENCE_VERSION):
        problems.append(f"field 'version' is {version!r}, expected {EVIDENCE_VERSION}")
    for name in ("nodeId", "timestamp", "summary", "runId"):
        value = data.get(name)
        if value is not None and not isinstance(value, str):
            problems.append(f"field {name!r} must be a string, not {type(value).__name__}")
    found_id = data.get("nodeId")
    if isinstance(found_id, str) and found_id and found_id != node_id:
        problems.append(f"field 'nodeId' is {found_id!r}, expected {node_id!r}")
    stamp = data.get("timestamp")
    if isinstance(stamp, str) and stamp:
        try:
            parse_timestamp(stamp)
        except ValueError:
            problems.append(f"field 'timestamp' is {stamp!r}, not an ISO 8601 timestamp")
    doc_type = data.get("type", DEFAULT_TYPE)
    if "type" in data and not isinstance(doc_type, str):
        problems.append(f"field 'type' must be a string, not {type(doc_type).__name__}")
    elif doc_type not in EVIDENCE_TYPES:
        problems.append(
            f"field 'type' is {doc_type!r}, expected one of {', '.join(EVIDENCE_TYPES)}"
        )
    summary = data.get("summary")
    if isinstance(summary, str) and summary and not summary.strip():
        problems.append("field 'summary' is blank")
    outcome = data.get("outcome", {})
    if not isinstance(outcome, dict):
        problems.append(f"field 'outcome' must be an object, not {type(outcome).__name__}")
    if problems:
        return EvidenceReadResult(None, problems)
    return EvidenceReadResult(
        EvidenceRecord(
            node_id=str(data["nodeId"]),
            summary=str(data["summary"]),
            type=str(doc_type),
            outcome=dict(outcome),
            timestamp=str(data["timestamp"]),
            version=EVIDENCE_VERSION,
            run_id=data.get("runId"),
        )
    )


def read_evidence(path: str | os.PathLike[str], node_id: str) -> EvidenceReadResult:
    """Read and validate one evidence file; a missing file is ``exists=False`` with no problems.

    Each problem starts with the file's path (see :func:`check_evidence_file` for them without).
    """
    result = check_evidence_file(path, node_id)
    result.problems = [f"{Path(path)}: {problem}" for problem in result.problems]
    return result


def check_evidence_file(path: str | os.PathLike[str], node_id: str) -> EvidenceReadResult:
    """:func:`read_evidence` with problems that do not repeat the path (for a caller that names
    the file once, such as the report of a damaged file in evidence/damage.py)."""
    target = Path(path)
    try:
        raw = read_limited(target)
    except FileNotFoundError:
        return EvidenceReadResult(None, [], exists=False)
    except EvidenceError as exc:
        return EvidenceReadResult(None, [str(exc).removeprefix(f"{target}: ")])
    except OSError as exc:
        return EvidenceReadResult(None, [f"cannot be read ({exc.strerror or exc})"])
    try:
        data = atomicio.loads_bounded(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        return EvidenceReadResult(None, [f"not valid JSON ({exc})"])
    return validate_evidence(data, node_id)


def read_limited(path: Path, limit: int = MAX_EVIDENCE_BYTES) -> bytes:
    """The bytes of a regular evidence file, never following a link nor reading past ``limit``.

    Raises FileNotFoundError when there is none, EvidenceError when it is a link, not a regular
    file, or larger than ``limit`` (checked before reading it whole).
    """
    try:
        fd = pathsafety.open_for_read(path)
    except UnsafePathError as exc:
        raise EvidenceError(f"{path}: not read: {exc}") from exc
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise EvidenceError(f"{path}: is not a regular file")
        if info.st_size > limit:
            raise EvidenceError(
                f"{path}: is {info.st_size} bytes, over the {limit} byte limit for evidence "
                "files; keep large output in another file and name it in 'outcome'"
            )
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise EvidenceError(f"{path}: grew past the {limit} byte limit while being read")
    return data


def orchestrator_dir(workdir: str | os.PathLike[str]) -> Path:
    return Path(workdir) / ORCHESTRATOR_DIR


def evidence_dir(workdir: str | os.PathLike[str]) -> Path:
    return orchestrator_dir(workdir) / EVIDENCE_SUBDIR


def check_node_id(node_id: str) -> str:
    """Refuse any node id that could not be a DOT identifier (and so could leave its folder)."""
    try:
        return pathsafety.check_component(node_id)
    except UnsafePathError:
        raise EvidenceError(
            f"node id {node_id!r} cannot name an evidence file: node ids must match "
            "[A-Za-z_][A-Za-z0-9_]*"
        ) from None


def evidence_path(workdir: str | os.PathLike[str], node_id: str) -> Path:
    """``<workdir>/.orchestrator/evidence/<node_id>.json``, in a folder reached through no
    symbolic link. The file itself is the node's: a link there (or anything else that is not a
    valid record) only makes the node's file invalid, since it is read without following links
    (:func:`read_limited`) and never written through one."""
    check_node_id(node_id)
    path = evidence_dir(workdir) / f"{node_id}.json"
    try:
        pathsafety.check_state_path(path.parent)
    except UnsafePathError as exc:
        raise EvidenceError(f"evidence file for node {node_id!r}: {exc}") from exc
    return path


def relative_evidence_path(node_id: str) -> str:
    """The evidence file's path relative to the working directory, with ``/`` separators."""
    check_node_id(node_id)
    return f"{ORCHESTRATOR_DIR}/{EVIDENCE_SUBDIR}/{node_id}.json"


def ensure_evidence_dir(workdir: str | os.PathLike[str]) -> Path:
    """Create ``.orchestrator/evidence/`` and ``.orchestrator/.gitignore`` (``*``) if missing."""
    root = orchestrator_dir(workdir)
    try:
        atomicio.ensure_ignored_dir(root)
        return pathsafety.make_state_dir(root / EVIDENCE_SUBDIR)
    except UnsafePathError as exc:
        raise EvidenceError(str(exc)) from exc


def write_evidence(workdir: str | os.PathLike[str], record: EvidenceRecord) -> Path:
    """Atomically write a node's evidence file (what a Python node or a test does); its path.

    The engine never calls this: the node's file is the node's (the engine's record goes to the
    run's ``evidence.jsonl``).
    """
    ensure_evidence_dir(workdir)
    path = evidence_path(workdir, record.node_id)
    try:
        atomicio.write_json_atomic(path, record.to_dict())
    except (OSError, ValueError, UnsafePathError) as exc:
        raise EvidenceError(f"cannot write evidence file {path}: {exc}") from exc
    return path


def append_evidence_log(run_dir: str | os.PathLike[str], record: EvidenceRecord) -> Path:
    """Append the record as one line to ``<run_dir>/evidence.jsonl``; returns the log's path.

    A last line torn by a crash (no newline) is cut first, so it never merges with this record.
    """
    path = Path(run_dir) / EVIDENCE_LOG
    try:
        atomicio.append_jsonl(path, record.to_dict())
    except (OSError, ValueError, UnsafePathError) as exc:
        raise EvidenceError(f"cannot append to evidence log {path}: {exc}") from exc
    return path


LOG_TAIL_BYTES = 4 * MAX_EVIDENCE_BYTES
"""How far back from the end of ``evidence.jsonl`` :func:`last_log_record` looks."""


def last_log_record(run_dir: str | os.PathLike[str]) -> EvidenceRecord | None:
    """The last whole, valid record of the run's evidence log.

    Reads only the log's tail, starting small and growing up to :data:`LOG_TAIL_BYTES`: the
    check runs at every step, so its cost must not grow with the log.
    """
    path = Path(run_dir) / EVIDENCE_LOG
    try:
        with pathsafety.open_state(path) as handle:
            size = handle.seek(0, os.SEEK_END)
            window = 16 * 1024
            while True:
                start = max(0, size - window)
                handle.seek(start)
                tail = handle.read()
                lines = tail.split(b"\n")
                complete = lines[1:-1] if start > 0 else lines[:-1]
                found = _last_valid(complete)
                if found is not None or start == 0 or window >= LOG_TAIL_BYTES:
                    return found
                window *= 4
    except OSError:
        return None


def _last_valid(lines: list[bytes]) -> EvidenceRecord | None:
    for raw in reversed(lines):
        try:
            data = atomicio.loads_bounded(raw)
        except (ValueError, UnicodeDecodeError):
            continue
        if isinstance(data, dict):
            node = data.get("nodeId")
            return validate_evidence(data, node if isinstance(node, str) else "").record
    return None


def step_identity(record: EvidenceRecord) -> tuple[Any, ...]:
    """What makes a record one step's: node, run id, attempt, step index, and whether it was
    interrupted (an interrupted attempt's step runs again with its index)."""
    keys = ("run_id", "attempt", "step", "interrupted")
    return (record.node_id, *(record.engine.get(key) for key in keys))


def same_step(last: EvidenceRecord | None, record: EvidenceRecord) -> bool:
    """Whether ``last`` is already ``record``'s step (see :func:`step_identity`)."""
    return last is not None and step_identity(last) == step_identity(record)


def read_evidence_log(
    run_dir: str | os.PathLike[str], node_id: str | None = None
) -> list[EvidenceRecord]:
    """The run's evidence records in order (one node's when ``node_id`` is given).

    Lines that do not hold a valid record are skipped; use :func:`iter_evidence_log` to see them.
    """
    return [
        result.record for result in iter_evidence_log(run_dir, node_id) if result.record is not None
    ]


def iter_evidence_log(
    run_dir: str | os.PathLike[str], node_id: str | None = None
) -> Iterator[EvidenceReadResult]:
    """Every record of the run's evidence log, validated against the node id it names."""
    for data in atomicio.read_jsonl(Path(run_dir) / EVIDENCE_LOG):
        found = data.get("nodeId")
        if node_id is not None and found != node_id:
            continue
        yield validate_evidence(data, found if isinstance(found, str) else "")


def merge_record(
    node_record: EvidenceRecord | None,
    *,
    node_id: str,
    summary: str,
    type: str,
    engine_facts: Mapping[str, Any],
    timestamp: str | None = None,
) -> EvidenceRecord:
    """The record the engine writes: the node's own one (if valid) with the engine's facts added.

    ``summary`` and ``type`` are used only when the node wrote no valid record of its own.
    """
    stamp = timestamp or utc_timestamp()
    facts = dict(engine_facts)
    if node_record is None:
        return EvidenceRecord(node_id, summary, type, {ENGINE_KEY: facts}, stamp)
    facts.setdefault("node_timestamp", node_record.timestamp)
    outcome = dict(node_record.outcome)
    if ENGINE_KEY in outcome:
        outcome[NODE_ENGINE_KEY] = outcome.pop(ENGINE_KEY)
    outcome[ENGINE_KEY] = facts
    return EvidenceRecord(
        node_id, node_record.summary, node_record.type, outcome, stamp, run_id=node_record.run_id
    )


def one_line(text: str, limit: int = 200) -> str:
    """Collapse whitespace to one line and cut to ``limit`` characters (for summaries)."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
