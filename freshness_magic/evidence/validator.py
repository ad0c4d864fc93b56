"""Work-evidence validation: did a work node leave proof of what it did?

With ``evidence="require"`` a work node must, in this order of checking, leave uncommitted changes
that were not there before it ran, move HEAD with commits of its own, write a valid evidence file
of its own during this execution, or declare ``expects_no_changes=true``. Otherwise it fails with
:data:`NO_EVIDENCE_MESSAGE`. The validator is a Protocol so tests and hosts can inject their own.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol, runtime_checkable

from freshness_magic.engine.model import Graph, Node
from freshness_magic.evidence.attrs import expects_no_changes
from freshness_magic.evidence.damage import damaged_file
from freshness_magic.evidence.record import (
    EvidenceReadResult,
    EvidenceRecord,
    evidence_path,
    read_evidence,
    relative_evidence_path,
)
from freshness_magic.evidence.snapshot import (
    WorkChanges,
    WorkTreeSnapshot,
    changes_since,
    evidence_digest,
)

EvidenceMethod = Literal["file_changes", "evidence_file", "expects_no_changes", "none"]

NO_EVIDENCE_MESSAGE = (
    "No work evidence produced. The node must either:\n"
    "  1. Modify files (results in a commit)\n"
    "  2. Create an evidence file at .orchestrator/evidence/{node_id}.json\n"
    "  3. Declare expects_no_changes=true in the node\n"
    "\n"
    "Node: {node_id} ({label})\n"
    "Task: {task}\n"
    "Work tree: {workdir}"
)


def no_evidence_message(
    node: Node, workdir: str | os.PathLike[str], found: Sequence[str] = ()
) -> str:
    """The actionable failure message for a work node that left no evidence, then a line for
    each evidence file that is there and does not count (``found``: older than the step,
    another run's; a damaged one): option 2 alone would read as if there were no file."""
    message = NO_EVIDENCE_MESSAGE.format(
        node_id=node.id,
        label=node.label,
        task=node.prompt or node.label,
        workdir=os.fspath(Path(workdir).resolve()),
    )
    damage = damaged_file(workdir, node.id)
    return "\n".join([message, *found, *([damage.message()] if damage is not None else [])])


@dataclass
class ValidationResult:
    """The verdict on one execution of a work node."""

    valid: bool
    reason: str
    evidence: dict[str, Any] = field(default_factory=dict)
    """JSON-able facts that proved the work (changed files and commits, or the evidence file)."""
    method: EvidenceMethod = "none"
    changes: WorkChanges | None = None
    """What changed in the work tree since the before snapshot (None without a snapshot)."""
    record: EvidenceRecord | None = None
    """The node's own valid evidence record written during this execution, if any."""
    problems: list[str] = field(default_factory=list)
    """Why an evidence file of the node did not count (invalid fields, left from before)."""


@runtime_checkable
class EvidenceValidator(Protocol):
    """Decides whether a work node produced evidence of work."""

    def has_evidence_file(self, workdir: str | os.PathLike[str], node_id: str) -> bool: ...

    def read_evidence(
        self, workdir: str | os.PathLike[str], node_id: str
    ) -> EvidenceReadResult: ...

    def validate(
        self,
        node: Node,
        graph: Graph,
        workdir: str | os.PathLike[str],
        before_snapshot: WorkTreeSnapshot | None,
    ) -> ValidationResult: ...


class DefaultEvidenceValidator:
    """Checks git (or a content snapshot) and the node's evidence file on disk."""

    def has_evidence_file(self, workdir: str | os.PathLike[str], node_id: str) -> bool:
        return evidence_path(workdir, node_id).is_file()

    def read_evidence(self, workdir: str | os.PathLike[str], node_id: str) -> EvidenceReadResult:
        return read_evidence(evidence_path(workdir, node_id), node_id)

    def own_record(
        self,
        workdir: str | os.PathLike[str],
        node_id: str,
        before_snapshot: WorkTreeSnapshot | None,
    ) -> tuple[EvidenceRecord | None, list[str], list[str]]:
        """The node's valid record written during this execution, its problems, and notes.

        A file whose content is the same as before the node ran was left by an earlier
        execution (often the engine's own record) and does not count.
        """
        result = self.read_evidence(workdir, node_id)
        if not result.exists:
            return None, [], []
        if (
            before_snapshot is not None
            and before_snapshot.node_id == node_id
            and evidence_digest(workdir, node_id) == before_snapshot.evidence_digest
        ):
            return (
                None,
                [],
                [
                    f"{relative_evidence_path(node_id)} is unchanged since before the node "
                    "ran (left by an earlier execution), so it does not count: write it anew "
                    "during the step"
                ],
            )
        if not result.valid:
            return None, list(result.problems), []
        return result.record, [], []

    def validate(
        self,
        node: Node,
        graph: Graph,
        workdir: str | os.PathLike[str],
        before_snapshot: WorkTreeSnapshot | None,
    ) -> ValidationResult:
        changes = changes_since(before_snapshot) if before_snapshot is not None else None
        record, problems, notes = self.own_record(workdir, node.id, before_snapshot)
        common: dict[str, Any] = {"changes": changes, "record": record, "problems": problems}
        if changes is not None and changes.uncommitted:
            return ValidationResult(
                True,
                f"work tree changes: {_describe(changes)}",
                changes.to_dict(),
                "file_changes",
                **common,
            )
        if changes is not None and changes.head_moved:
            count = len(changes.commits)
            return ValidationResult(
                True,
                f"the node made {count} commit{'s' if count != 1 else ''}",
                changes.to_dict(),
                "file_changes",
                **common,
            )
        if record is not None:
            return ValidationResult(
                True,
                f"evidence file {relative_evidence_path(node.id)}: {record.summary}",
                {
                    "file": relative_evidence_path(node.id),
                    "summary": record.summary,
                    "type": record.type,
                },
                "evidence_file",
                **common,
            )
        if expects_no_changes(node):
            return ValidationResult(
                True,
                "Node declared expects_no_changes",
                {"expects_no_changes": True},
                "expects_no_changes",
                **common,
            )
        common["problems"] = problems + notes
        reason = no_evidence_message(node, workdir, notes)
        return ValidationResult(False, reason, {}, "none", **common)


def without_node_file(
    result: ValidationResult, node: Node, workdir: str | os.PathLike[str], why: str
) -> ValidationResult:
    """``result`` judged again without the node's evidence file (it is another run's: ``why``)."""
    problems = [*result.problems, why]
    if expects_no_changes(node):
        return ValidationResult(
            True,
            "Node declared expects_no_changes",
            {"expects_no_changes": True},
            "expects_no_changes",
            result.changes,
            None,
            problems,
        )
    return ValidationResult(
        False, no_evidence_message(node, workdir, [why]), {}, "none", result.changes, None, problems
    )


def _describe(changes: WorkChanges) -> str:
    files = changes.uncommitted
    parts = [
        f"{len(paths)} {kind}"
        for kind, paths in (
            ("added", files.added),
            ("modified", files.modified),
            ("deleted", files.deleted),
        )
        if paths
    ]
    return ", ".join(parts)
