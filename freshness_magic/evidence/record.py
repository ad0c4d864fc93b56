"""The evidence-file format, its validating reader, and the crash-safe writers.

An evidence file is ``<workdir>/.orchestrator/evidence/<node_id>.json``::

    {"version": 1, "nodeId": "draft", "timestamp": "2026-01-02T03:04:05.678901Z",
     "summary": "one line", "type": "analysis", "outcome": {...}}

A node (an agent, a script) may write its own file while it works; the engine then writes the
same path after the step. Merging rule (decided here, see :func:`merge_record`): the engine's facts
always live under ``outcome["engine"]``. A node's own ``summary``, ``type`` and ``outcome`` keys are
kept as written; a node key that happens to be called ``engine`` is kept as ``node_engine``. So a
reader finds the engine's facts in one place whoever authored the record, and nothing a node wrote
is lost.

Every record is also appended to ``evidence.jsonl`` in the run directory, which keeps every
execution of a node in order (loops run a node more than once); the per-node file holds the latest.
``.orchestrator/`` carries a ``.gitignore`` containing ``*`` so the engine's records never show up
as the user's changes in ``git status``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from freshness_magic import atomicio
from freshness_magic.engine.model import NODE_ID_RE
from freshness_magic.errors import EvidenceError

EVIDENCE_VERSION = 1
EVIDENCE_TYPES: tuple[str, ...] = ("file_changes", "external_effect", "analysis", "validation")
ORCHESTRATOR_DIR = ".orchestrator"
EVIDENCE_SUBDIR = "evidence"
EVIDENCE_LOG = "evidence.jsonl"
ENGINE_KEY = "engine"
"""The key under ``outcome`` that holds the engine's facts."""
NODE_ENGINE_KEY = "node_engine"
"""Where a node's own ``outcome["engine"]`` value is kept when the engine merges its facts."""
REQUIRED_FIELDS: tuple[str, ...] = ("version", "nodeId", "timestamp", "summary", "type", "outcome")


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

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "nodeId": self.node_id,
            "timestamp": self.timestamp,
            "summary": self.summary,
            "type": self.type,
            "outcome": self.outcome,
        }

    @property
    def engine(self) -> dict[str, Any]:
        """The engine's facts (empty for a record the node wrote and the engine has not merged)."""
        facts = self.outcome.get(ENGINE_KEY)
        return facts if isinstance(facts, dict) else {}


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
    for name in ("nodeId", "timestamp", "summary", "type"):
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
    doc_type = data.get("type")
    if isinstance(doc_type, str) and doc_type and doc_type not in EVIDENCE_TYPES:
        problems.append(
            f"field 'type' is {doc_type!r}, expected one of {', '.join(EVIDENCE_TYPES)}"
        )
    summary = data.get("summary")
    if isinstance(summary, str) and summary and not summary.strip():
        problems.append("field 'summary' is blank")
    outcome = data.get("outcome")
    if "outcome" in data and not isinstance(outcome, dict):
        problems.append(f"field 'outcome' must be an object, not {type(outcome).__name__}")
    if problems:
        return EvidenceReadResult(None, problems)
    return EvidenceReadResult(
        EvidenceRecord(
            node_id=str(data["nodeId"]),
            summary=str(data["summary"]),
            type=str(data["type"]),
            outcome=dict(data["outcome"]),
            timestamp=str(data["timestamp"]),
            version=EVIDENCE_VERSION,
        )
    )


def read_evidence(path: str | os.PathLike[str], node_id: str) -> EvidenceReadResult:
    """Read and validate one evidence file; a missing file is ``exists=False`` with no problems."""
    target = Path(path)
    try:
        raw = target.read_bytes()
    except FileNotFoundError:
        return EvidenceReadResult(None, [], exists=False)
    except OSError as exc:
        return EvidenceReadResult(None, [f"{target}: cannot be read ({exc.strerror or exc})"])
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        return EvidenceReadResult(None, [f"{target}: not valid JSON ({exc})"])
    result = validate_evidence(data, node_id)
    result.problems = [f"{target}: {problem}" for problem in result.problems]
    return result


def orchestrator_dir(workdir: str | os.PathLike[str]) -> Path:
    return Path(workdir) / ORCHESTRATOR_DIR


def evidence_dir(workdir: str | os.PathLike[str]) -> Path:
    return orchestrator_dir(workdir) / EVIDENCE_SUBDIR


def check_node_id(node_id: str) -> str:
    """Refuse any node id that could not be a DOT identifier (and so could leave its folder)."""
    if not isinstance(node_id, str) or not NODE_ID_RE.match(node_id):
        raise EvidenceError(
            f"node id {node_id!r} cannot name an evidence file: node ids must match "
            "[A-Za-z_][A-Za-z0-9_]*"
        )
    return node_id


def evidence_path(workdir: str | os.PathLike[str], node_id: str) -> Path:
    """``<workdir>/.orchestrator/evidence/<node_id>.json``, checked to stay inside that folder."""
    check_node_id(node_id)
    folder = evidence_dir(workdir)
    path = folder / f"{node_id}.json"
    resolved_folder = folder.resolve()
    resolved = path.resolve()
    if resolved.parent != resolved_folder:
        raise EvidenceError(
            f"evidence file for node {node_id!r} resolves to {resolved}, outside "
            f"{resolved_folder}; remove the symbolic link that leads there"
        )
    return path


def relative_evidence_path(node_id: str) -> str:
    """The evidence file's path relative to the working directory, with ``/`` separators."""
    check_node_id(node_id)
    return f"{ORCHESTRATOR_DIR}/{EVIDENCE_SUBDIR}/{node_id}.json"


def ensure_evidence_dir(workdir: str | os.PathLike[str]) -> Path:
    """Create ``.orchestrator/evidence/`` and ``.orchestrator/.gitignore`` (``*``) if missing."""
    root = orchestrator_dir(workdir)
    if root.is_symlink():
        raise EvidenceError(
            f"{root} is a symbolic link; evidence is only written to a real folder "
            "inside the working directory"
        )
    atomicio.ensure_ignored_dir(root)
    folder = root / EVIDENCE_SUBDIR
    folder.mkdir(exist_ok=True)
    return folder


def write_evidence(workdir: str | os.PathLike[str], record: EvidenceRecord) -> Path:
    """Atomically write the per-node evidence file; returns its path."""
    ensure_evidence_dir(workdir)
    path = evidence_path(workdir, record.node_id)
    try:
        atomicio.write_json_atomic(path, record.to_dict())
    except (OSError, ValueError) as exc:
        raise EvidenceError(f"cannot write evidence file {path}: {exc}") from exc
    return path


def append_evidence_log(run_dir: str | os.PathLike[str], record: EvidenceRecord) -> Path:
    """Append the record as one line to ``<run_dir>/evidence.jsonl``; returns the log's path.

    A last line torn by a crash (no newline) is cut first, so it never merges with this record.
    """
    path = Path(run_dir) / EVIDENCE_LOG
    try:
        atomicio.append_jsonl(path, record.to_dict())
    except (OSError, ValueError) as exc:
        raise EvidenceError(f"cannot append to evidence log {path}: {exc}") from exc
    return path


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
    return EvidenceRecord(node_id, node_record.summary, node_record.type, outcome, stamp)


def one_line(text: str, limit: int = 200) -> str:
    """Collapse whitespace to one line and cut to ``limit`` characters (for summaries)."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
