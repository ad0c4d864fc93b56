"""Evidence bound to its step: a node's file counts only for the run whose step wrote it.

Evidence files ``.orchestrator/evidence/<node_id>.json`` are shared by every run and pipeline of
a work directory, so "the file changed while my step ran" is not enough: another run's node of
the same id may have written it meanwhile. Three facts decide (see :func:`foreign_reason`):

1. A file that names a ``runId`` belongs to that run (tools see ``FRESHNESS_RUN_ID``; the
   work-evidence prompt asks agents to write it).
2. Every step of a node holds a marker ``<node_id>.running.<run_id>`` (pid and host inside) from
   before its handler until its record is written; a file without ``runId`` that changed while
   another live run held a marker for the same node is ambiguous and counts for neither.
3. After its record, a step during which the file changed writes the claim
   ``<node_id>.engine.json`` (run id, attempt, the file's digest, whether it counted): the
   engine's facts beside the node's file, never over it. A file whose digest another run claimed
   is not this run's.

A node id cannot contain ``.``, so these names never collide with a node's own file.
"""

from __future__ import annotations

import contextlib
import os
import socket
from pathlib import Path
from typing import Any

from freshness_magic import atomicio
from freshness_magic.errors import EvidenceError
from freshness_magic.evidence.record import (
    MAX_EVIDENCE_BYTES,
    check_node_id,
    ensure_evidence_dir,
    evidence_dir,
    read_limited,
    utc_timestamp,
)

MARKER_INFIX = ".running."
CLAIM_SUFFIX = ".engine.json"


def marker_path(workdir: str | os.PathLike[str], node_id: str, run_id: str) -> Path:
    return evidence_dir(workdir) / f"{check_node_id(node_id)}{MARKER_INFIX}{run_id}"


def claim_path(workdir: str | os.PathLike[str], node_id: str) -> Path:
    return evidence_dir(workdir) / f"{check_node_id(node_id)}{CLAIM_SUFFIX}"


def begin_step(workdir: str | os.PathLike[str], node_id: str, run_id: str) -> None:
    """Mark that ``run_id`` is running ``node_id`` in this work directory."""
    ensure_evidence_dir(workdir)
    atomicio.write_json_atomic(
        marker_path(workdir, node_id, run_id),
        {"run_id": run_id, "pid": os.getpid(), "host": socket.gethostname()},
    )


def end_step(workdir: str | os.PathLike[str], node_id: str, run_id: str) -> None:
    """Remove the step's marker (after its claim is written)."""
    with contextlib.suppress(OSError):
        marker_path(workdir, node_id, run_id).unlink()


def write_claim(
    workdir: str | os.PathLike[str],
    node_id: str,
    *,
    run_id: str,
    attempt: int,
    digest: str,
    run_dir: str | os.PathLike[str],
    counted: bool,
) -> Path:
    """Record that the node's file became ``digest`` during this step (``counted``: for it)."""
    path = claim_path(workdir, node_id)
    atomicio.write_json_atomic(
        path,
        {
            "nodeId": node_id,
            "run_id": run_id,
            "attempt": attempt,
            "digest": digest,
            "run_dir": os.fspath(run_dir),
            "counted": counted,
            "timestamp": utc_timestamp(),
        },
    )
    return path


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        data = atomicio.loads_bounded(read_limited(path, MAX_EVIDENCE_BYTES))
    except (OSError, ValueError, UnicodeDecodeError, EvidenceError):
        return None
    return data if isinstance(data, dict) else None


def _alive(marker: dict[str, Any]) -> bool:
    """Whether the process that wrote a marker may still run (another host: assume so)."""
    if marker.get("host") != socket.gethostname():
        return True
    pid = marker.get("pid")
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def other_live_runs(workdir: str | os.PathLike[str], node_id: str, run_id: str) -> list[str]:
    """Other runs holding a live marker for ``node_id`` (stale markers of dead ones removed)."""
    folder = evidence_dir(workdir)
    prefix = f"{check_node_id(node_id)}{MARKER_INFIX}"
    found: list[str] = []
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return found
    for name in names:
        if not name.startswith(prefix) or name == f"{prefix}{run_id}":
            continue
        marker = _read_json(folder / name)
        if marker is None:
            continue
        if _alive(marker):
            found.append(str(marker.get("run_id") or name[len(prefix) :]))
        else:
            with contextlib.suppress(OSError):
                (folder / name).unlink()
    return found


def foreign_reason(
    workdir: str | os.PathLike[str],
    node_id: str,
    run_id: str,
    digest: str | None,
    file_run_id: str | None,
) -> str | None:
    """Why the node's (changed, valid) evidence file is not this run's; None when it is."""
    name = f".orchestrator/evidence/{node_id}.json"
    if file_run_id is not None:
        if file_run_id == run_id:
            return None
        return f"{name} names runId {file_run_id!r}, not this run ({run_id!r})"
    claim = _read_json(claim_path(workdir, node_id))
    if claim is not None and claim.get("digest") == digest and claim.get("run_id") != run_id:
        return (
            f"{name} was written during a step of run {claim.get('run_id')!r} as well as (or "
            f'instead of) this run ({run_id!r}); bind it with "runId" to count'
        )
    others = other_live_runs(workdir, node_id, run_id)
    if others:
        return (
            f"{name} changed while run(s) {', '.join(others)} also ran node '{node_id}' in this "
            f'work directory, so it may be theirs; write "runId": "{run_id}" '
            "(the FRESHNESS_RUN_ID environment variable) into the file to bind it to this run"
        )
    return None
