"""The evidence run extension: a record for every step, work-evidence validation, commits.

Before a step's first attempt, ``before_execute`` fingerprints the node's own evidence file (cheap)
and, only when ``evidence="require"`` or ``commit=true`` applies to the node, snapshots the work
tree, so changes made by earlier attempts of the step count; before every attempt of a
codergen node under ``require`` it puts the "Work evidence" prompt section in the context
key ``internal.prompt_suffix.<node_id>`` (the codergen handler appends it to the prompt).
``after_execute`` validates successful work nodes under ``require`` (no evidence -> FAIL with the
actionable message, then the usual failure routing) and commits under ``commit=true``.

Per step: ``on_step_finished`` writes the record (``.orchestrator/evidence/<node_id>.json``,
merged with the node's own record if it wrote one during the step) and appends it to
``evidence.jsonl`` in the run directory, then emits EVIDENCE_RECORDED.

Engine facts in ``outcome["engine"]``: run_id, status, failure_reason, notes, attempt,
duration_seconds, handler_type, stale_files, evidence_mode, evidence_method (None when the node
was not validated), evidence_reason, evidence_problems, files (added/modified/deleted), commits
(id, message: the node's own and the engine's), commit (the engine's commit id or None),
node_record (whether the node wrote its own record), node_timestamp (the timestamp the node
wrote), invalid_node_record (the text of an invalid file the node wrote, which the engine's record
replaces on disk), evidence_file, next_node; for codergen nodes llm (backend, model, usage).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from freshness_magic.engine.events import EventType
from freshness_magic.engine.handlers.codergen import LLM_KEY, PROMPT_SUFFIX_KEY
from freshness_magic.engine.model import NON_WORK_HANDLER_TYPES, Node, is_work_type
from freshness_magic.engine.outcome import Outcome, StageStatus
from freshness_magic.engine.validation import LintRule
from freshness_magic.errors import EvidenceError
from freshness_magic.evidence.commit import commit_node_changes
from freshness_magic.evidence.lint import evidence_rules
from freshness_magic.evidence.prompt import work_evidence_prompt
from freshness_magic.evidence.record import (
    EVIDENCE_LOG,
    EvidenceRecord,
    append_evidence_log,
    evidence_path,
    merge_record,
    one_line,
    read_evidence,
    read_evidence_log,
    relative_evidence_path,
    write_evidence,
)
from freshness_magic.evidence.snapshot import (
    CommitInfo,
    FileChanges,
    WorkChanges,
    WorkTreeSnapshot,
    changes_since,
    evidence_digest,
    take_snapshot,
)
from freshness_magic.evidence.validator import DefaultEvidenceValidator, EvidenceValidator

if TYPE_CHECKING:
    from freshness_magic.engine.run import Run, StepResult


MAX_KEPT_INVALID_BYTES = 65536
"""How much of an invalid node-written evidence file the engine's record keeps."""


def prompt_suffix_key(node_id: str) -> str:
    """The context key whose text the codergen handler appends to the node's prompt."""
    return PROMPT_SUFFIX_KEY.format(node_id=node_id)


@dataclass
class _StepFacts:
    """What the attempts of the current step found, for the record of the step."""

    evidence_digest: str | None = None
    """The node's evidence file before the step (tells the node's own record from older ones)."""
    snapshot: WorkTreeSnapshot | None = None
    """The work tree before the step's first attempt (require mode or commit=true only)."""
    method: str | None = None
    reason: str = ""
    problems: list[str] = field(default_factory=list)
    files: FileChanges = field(default_factory=FileChanges)
    commits: list[CommitInfo] = field(default_factory=list)
    commit: str | None = None
    invalid_record: str | None = None
    """The text of an invalid evidence file the node wrote (kept: the engine's record replaces
    the file on disk)."""


def _stale_files(value: Any) -> list[str]:
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    if isinstance(value, list | tuple):
        return [
            str(item.get("path", item)) if isinstance(item, dict) else str(item) for item in value
        ]
    return []


def record_type(handler_type: str, facts: _StepFacts) -> str:
    """The evidence type of an engine-authored record."""
    if facts.files or facts.commits:
        return "file_changes"
    if handler_type == "tool":
        return "external_effect"
    if handler_type in NON_WORK_HANDLER_TYPES:
        return "validation"
    return "analysis"


def record_summary(node: Node, outcome: Outcome) -> str:
    """One line saying what the step did, for an engine-authored record."""
    status = outcome.status.value
    detail = outcome.failure_reason if outcome.status is StageStatus.FAIL else outcome.notes
    text = f"{node.handler_type} node '{node.label}' {status}"
    return one_line(f"{text}: {detail}" if detail else text)


class EvidenceExtension:
    """Evidence records for every step; work evidence and commits per the node's attributes."""

    name = "evidence"

    def __init__(self, validator: EvidenceValidator | None = None) -> None:
        self.validator: EvidenceValidator = validator or DefaultEvidenceValidator()
        self._facts: dict[str, _StepFacts] = {}
        self._records = 0
        self._latest: dict[str, str] = {}

    # ----------------------------------------------------------------- run lifecycle

    def on_run_start(self, run: Run) -> None:
        return None

    def on_resume(self, run: Run, saved_state: dict[str, Any] | None) -> None:
        """Rebuild the index from the log on disk (the checkpoint is written before the record
        of its step, so the log is the more recent of the two)."""
        records = read_evidence_log(run.run_dir)
        self._records = len(records)
        self._latest = {record.node_id: record.timestamp for record in records}

    def lint_rules(self) -> list[LintRule]:
        """The rules for this extension's attributes (see :mod:`freshness_magic.evidence.lint`)."""
        return evidence_rules()

    def checkpoint_state(self) -> dict[str, Any]:
        """The evidence index: how many records were written and each node's latest timestamp."""
        return {"records": self._records, "latest": dict(self._latest), "log": EVIDENCE_LOG}

    # ----------------------------------------------------------------- per attempt

    @staticmethod
    def _needs_snapshot(run: Run, node: Node) -> bool:
        graph = run.graph
        return graph.commit_enabled(node) or (
            is_work_type(node.handler_type) and graph.evidence_mode(node) == "require"
        )

    def before_execute(self, run: Run, node: Node, attempt: int) -> Outcome | None:
        """Fingerprint the evidence file and, when needed, snapshot the work tree (once a step).

        Changes made by earlier attempts of the same step count: "before" is before the step.
        """
        workdir = run.workdir
        if attempt == 1 or node.id not in self._facts:
            snapshot = (
                take_snapshot(workdir, node.id, exclude=[run.run_dir])
                if self._needs_snapshot(run, node)
                else None
            )
            self._facts[node.id] = _StepFacts(evidence_digest(workdir, node.id), snapshot)
        if node.handler_type == "codergen" and run.graph.evidence_mode(node) == "require":
            run.context.set(prompt_suffix_key(node.id), work_evidence_prompt(node.id))
        return None

    def after_execute(
        self, run: Run, node: Node, outcome: Outcome, attempt: int, started_at: float
    ) -> Outcome:
        """Validate (``require``) and commit (``commit=true``) a successful attempt."""
        run.context.delete(prompt_suffix_key(node.id))
        facts = self._facts.get(node.id)
        if facts is None or facts.snapshot is None or not outcome.status.is_success:
            return outcome
        graph = run.graph
        changes: WorkChanges | None = None
        own_record_written = False
        if is_work_type(node.handler_type) and graph.evidence_mode(node) == "require":
            result = self.validator.validate(node, graph, run.workdir, facts.snapshot)
            facts.method = result.method
            facts.reason = result.reason if result.valid else ""
            facts.problems = list(result.problems)
            changes = result.changes
            own_record_written = result.record is not None
            if not result.valid:
                self._note_changes(facts, changes)
                notes = "; ".join(p for p in [outcome.notes, *result.problems] if p)
                return Outcome(
                    status=StageStatus.FAIL,
                    failure_reason=result.reason,
                    notes=notes,
                    context_updates=dict(outcome.context_updates),
                )
        if changes is None:
            changes = changes_since(facts.snapshot)
        self._note_changes(facts, changes)
        if graph.commit_enabled(node):
            if not own_record_written:
                own_record_written = (
                    changes.evidence_file_changed
                    and read_evidence(evidence_path(run.workdir, node.id), node.id).valid
                )
            try:
                commit = commit_node_changes(
                    run.workdir, node, changes, include_evidence_file=own_record_written
                )
            except EvidenceError as exc:
                return Outcome(
                    status=StageStatus.FAIL,
                    failure_reason=f"commit=true: could not commit the changes of node "
                    f"'{node.id}': {exc}",
                    notes=outcome.notes,
                    context_updates=dict(outcome.context_updates),
                )
            if commit is not None:
                facts.commit = commit.id
                facts.commits.append(commit)
        return outcome

    @staticmethod
    def _note_changes(facts: _StepFacts, changes: WorkChanges | None) -> None:
        if changes is None:
            return
        facts.files = facts.files.merged(changes.files)
        known = {c.id for c in facts.commits}
        facts.commits.extend(c for c in changes.commits if c.id not in known)

    # ----------------------------------------------------------------- per step

    def on_step_finished(self, run: Run, step_result: StepResult) -> None:
        node_id = step_result.node_id
        if not step_result.executed or node_id is None or step_result.outcome is None:
            return
        node = run.graph.nodes.get(node_id)
        if node is None:
            return
        facts = self._facts.pop(node_id, None) or _StepFacts()
        record = self.build_record(run, node, step_result, facts)
        path = write_evidence(run.workdir, record)
        append_evidence_log(run.run_dir, record)
        self._records += 1
        self._latest[node_id] = record.timestamp
        run.events.emit(
            EventType.EVIDENCE_RECORDED,
            node_id,
            {
                "path": os.fspath(path),
                "log": os.fspath(Path(run.run_dir) / EVIDENCE_LOG),
                "status": record.engine.get("status"),
                "evidence_method": record.engine.get("evidence_method"),
                "commit": record.engine.get("commit"),
                "summary": record.summary,
                "type": record.type,
            },
        )

    def _own_record(self, run: Run, node_id: str, facts: _StepFacts) -> EvidenceRecord | None:
        """The node's own valid record written during this step, if any (problems noted)."""
        path = evidence_path(run.workdir, node_id)
        result = read_evidence(path, node_id)
        if not result.exists:
            return None
        current = evidence_digest(run.workdir, node_id)
        if current == facts.evidence_digest:
            return None
        if not result.valid:
            for problem in result.problems:
                if problem not in facts.problems:
                    facts.problems.append(problem)
            try:
                text = path.read_bytes()[: MAX_KEPT_INVALID_BYTES + 1].decode("utf-8", "replace")
            except OSError:
                text = ""
            if len(text) > MAX_KEPT_INVALID_BYTES:
                text = text[:MAX_KEPT_INVALID_BYTES] + "… (cut)"
            facts.invalid_record = text
            return None
        record = result.record
        if record is not None and facts.evidence_digest is None and record.engine:
            return None
        return record

    def build_record(
        self, run: Run, node: Node, step_result: StepResult, facts: _StepFacts
    ) -> EvidenceRecord:
        """The record of one step: the engine's facts merged into the node's own record."""
        outcome = step_result.outcome or Outcome()
        own = self._own_record(run, node.id, facts)
        mode = run.graph.evidence_mode(node)
        engine_facts: dict[str, Any] = {
            "run_id": run.run_id,
            "status": outcome.status.value,
            "failure_reason": outcome.failure_reason,
            "notes": outcome.notes,
            "attempt": step_result.attempts,
            "duration_seconds": round(step_result.duration, 6),
            "handler_type": node.handler_type,
            "stale_files": _stale_files(run.context.get(f"freshness.{node.id}.stale_files")),
            "evidence_mode": mode,
            "evidence_method": facts.method,
            "evidence_reason": facts.reason,
            "evidence_problems": list(facts.problems),
            "files": facts.files.to_dict(),
            "commits": [c.to_dict() for c in facts.commits],
            "commit": facts.commit,
            "node_record": own is not None,
            "evidence_file": relative_evidence_path(node.id),
            "next_node": step_result.next_node,
        }
        if facts.invalid_record is not None:
            engine_facts["invalid_node_record"] = facts.invalid_record
        llm = outcome.context_updates.get(LLM_KEY.format(node_id=node.id))
        if llm:
            engine_facts["llm"] = llm
        hub_seq = run.context.get_string(f"hub.{node.id}.seq")
        if hub_seq:
            engine_facts["hub_seq"] = int(hub_seq)
        return merge_record(
            own,
            node_id=node.id,
            summary=record_summary(node, outcome),
            type=record_type(node.handler_type, facts),
            engine_facts=engine_facts,
        )
