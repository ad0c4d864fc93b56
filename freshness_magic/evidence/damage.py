"""Node evidence files that are damaged on disk: not JSON, or not an evidence record.

Every record of a run names its node's evidence file (``outcome.engine.evidence_file``,
``.orchestrator/evidence/<node_id>.json``). A damaged file there never counts as the node's
evidence, and it is never written over or deleted (the file is the node's; the engine's facts
are in the run's ``evidence.jsonl``). So that it is not passed over in silence, the views of a
run's evidence (the CLI's ``evidence``, ``%pipeline evidence``) and the work-evidence validator
say it with :meth:`DamagedEvidence.message`: which file, what is wrong, what to do.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from freshness_magic.errors import EvidenceError
from freshness_magic.evidence.record import (
    EVIDENCE_VERSION,
    check_evidence_file,
    evidence_path,
    relative_evidence_path,
)


@dataclass(frozen=True)
class DamagedEvidence:
    """A node's evidence file that exists and cannot be used as evidence."""

    node_id: str
    path: Path
    problems: tuple[str, ...]

    def message(self) -> str:
        """One line: the file, each problem, and what to do (the file is left as it is)."""
        return (
            f"evidence file {self.path} of node '{self.node_id}' is damaged: "
            f"{'; '.join(self.problems)}. It is not counted as the node's evidence and is left "
            f"as it is: {fix_advice(self.node_id)}"
        )


def fix_advice(node_id: str) -> str:
    """What to do about a damaged evidence file of ``node_id``."""
    return (
        f"write it again as a JSON object with version {EVIDENCE_VERSION}, "
        f'nodeId "{node_id}", timestamp (ISO 8601) and summary, or delete it '
        f"(the run's record of each step is in its evidence.jsonl)"
    )


def damaged_file(workdir: str | os.PathLike[str], node_id: str) -> DamagedEvidence | None:
    """The damage of ``node_id``'s evidence file under ``workdir`` (None: valid or absent)."""
    try:
        relative = relative_evidence_path(node_id)
    except EvidenceError:
        return None  # not a node id (a damaged log line): it names no file
    try:
        path = evidence_path(workdir, node_id)
    except EvidenceError as exc:  # reached through a symbolic link: not read
        return DamagedEvidence(node_id, Path(workdir) / relative, (str(exc),))
    result = check_evidence_file(path, node_id)
    if not result.exists or result.valid:
        return None
    return DamagedEvidence(node_id, path, tuple(result.problems))


def damaged_files(
    workdir: str | os.PathLike[str], node_ids: Iterable[str]
) -> list[DamagedEvidence]:
    """The damaged evidence files of ``node_ids`` (each node once, in the order given)."""
    found = []
    for node_id in dict.fromkeys(node_ids):
        damage = damaged_file(workdir, node_id)
        if damage is not None:
            found.append(damage)
    return found
