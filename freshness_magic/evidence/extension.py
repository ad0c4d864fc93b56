"""The evidence run extension: a record for every step, work-evidence validation, commits.

Before a step's first attempt, ``before_execute`` fingerprints the node's own evidence file (cheap)
and, only when ``evidence="require"`` or ``commit=true`` applies to the node, snapshots the work
tree, so changes made by earlier attempts of the step count; before every attempt of a
codergen node under ``require`` it puts the "Work evidence" prompt section in the context
key ``internal.prompt_suffix.<node_id>`` (the codergen handler appends it to the prompt).
``after_execute`` validates successful work nodes under ``require`` (no evidence -> FAIL with the
actionable message, then the usual failure routing) and commits under ``commit=true``.

Per step: ``on_step_finished`` (after the handler) builds the step's record (merged with the
node's own record if this step wrote one) and holds it in the checkpoint state; ``on_step_saved``
(after the journal record of the step's end) appends it to ``evidence.jsonl`` in the run
directory, unless the log already ends with it. A kill before the journal record runs the step
again and leaves no record of the lost end; one after it never runs the step again, and the
resume writes the held record if the log lacks it (docs/ARCHITECTURE.md, "Kill windows"): one
record per run id, node, attempt and step index. A record the log refuses
(a full disk, a lost permission) is kept in the checkpoint, and the next node fails instead of
running until a retry can append it: no work goes on without its record. It never writes over
the node's own file: it writes the claim ``<node_id>.engine.json`` beside it when the node's file
counted, then emits EVIDENCE_RECORDED. A node's file counts only if this step created or changed
it and it is bound to this run (``evidence/binding.py``).

Engine facts in ``outcome["engine"]``: run_id, status, failure_reason, notes, attempt,
duration_seconds, handler_type, stale_files, evidence_mode, evidence_method (None when the node
was not validated), evidence_reason, evidence_problems, files (added/modified/deleted), commits
(id, message: the node's own and the engine's), commit (the engine's commit id or None),
node_record (whether the node wrote its own record), node_timestamp (the timestamp the node
wrote), node_file_digest (the content digest of the node's file that counted), step (the step's
index in the run: with run_id, node and attempt the record's identity), invalid_node_record (the
text of an invalid file the node wrote), evidence_file, next_node; for codergen nodes llm
(backend, model, usage); for a node run on a cluster worker (executor, worker, address, host,
pid, seconds); for a reused execution (not run, taken from an earlier one) reused_from
(run_id, step) and evidence_method ``reused``.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from freshness_magic.engine.dispatch import WORKER_KEY
from freshness_magic.engine.handlers.codergen import LLM_KEY, PROMPT_SUFFIX_KEY
from freshness_magic.engine.model import Node
from freshness_magic.engine.outcome import Outcome, StageStatus
from freshness_magic.engine.validation import LintRule
from freshness_magic.errors import EvidenceError
from freshness_magic.evidence import binding
from freshness_magic.evidence.attrs import (
    NON_WORK_HANDLER_TYPES,
    commit_enabled,
    evidence_mode,
    is_work_type,
    requires_work_evidence,
)
from freshness_magic.evidence.commit import commit_node_changes
from freshness_magic.evidence.events import EvidenceEvent
from freshness_magic.evidence.lint import evidence_rules
from freshness_magic.evidence.prompt import work_evidence_prompt
from freshness_magic.evidence.record import (
    EVIDENCE_LOG,
    EvidenceRecord,
    append_evidence_log,
    evidence_path,
    last_log_record,
    merge_record,
    one_line,
    read_evidence,
    read_evidence_log,
    read_limited,
    relative_evidence_path,
    same_step,
    step_identity,
    validate_evidence,
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
from freshness_magic.evidence.validator import (
    DefaultEvidenceValidator,
    EvidenceValidator,
    without_node_file,
)

if TYPE_CHECKING:
    from freshness_magic.engine import Run, StepResult


MAX_KEPT_INVALID_BYTES = 65536
"""How much of an invalid node-written evidence file the engine's record keeps."""


log = logging.getLogger(__name__)


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
    """The text of an invalid evidence file the node wrote (its file stays as written)."""
    marked: bool = False
    """Whether this step holds a running marker (see evidence/binding.py)."""


@dataclass
class _Ended:
    """A step's record, held until its journal record is written (``on_step_saved``)."""

    record: EvidenceRecord
    own_digest: str | None
    facts: _StepFacts


def _stale_files(value: Any) -> list[str]:
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    if isinstance(value, list | tuple):
        return [
            str(item.get("path", item)) if isinstance(item, dict) else str(item) for item in value
        ]
    return []


def _node_written(workdir: Path, node_id: str) -> bool:
    """Whether the node's evidence file exists and is not one the engine wrote (an engine record
    carries ``outcome.engine``); such a file is the node's and is never written over."""
    path = evidence_path(workdir, node_id)
    if not path.exists():
        return False
    result = read_evidence(path, node_id)
    return not (result.record is not None and result.record.engine)


def record_type(handler_type: str, facts: _StepFacts) -> str:
    """The evidence type of an engine-authored record."""
    if facts.files or facts.commits:
        return "file_changes"
    if handler_type == "tool":
        return "external_effect"
    if handler_type in NON_WORK_HANDLER_TYPES:
        return "validation"
    return "analysis"


def record_summary(node: Node, outcome: Outcome, interrupted: bool = False) -> str:
    """One line saying what the step did, for an engine-authored record."""
    if interrupted:
        what = f"{node.handler_type} node '{node.label}'"
        return f"{what} interrupted: it runs again when the run goes on"
    if outcome.reused_from is not None:
        return one_line(
            f"{node.handler_type} node '{node.label}' reused ({outcome.reused_from.text()}): "
            "not run, its outcome and outputs taken from that execution"
        )
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
        self._unwritten: list[EvidenceRecord] = []
        """Step records not in the run's log yet, oldest first: held until their step's journal
        record is written, or refused by the log (a full disk, a lost permission)."""
        self._ended: dict[int, _Ended] = {}
        """Steps whose record waits for their journal record (by ``id`` of the StepResult)."""
        self._appended_to: str | None = None
        """The run folder whose evidence log this object appended to last, without an error
        since: the log then ends with a record no longer held, so a held record is not read
        back from its tail before it is appended (a resume or an error reads it again)."""

    # ----------------------------------------------------------------- run lifecycle

    def on_run_start(self, run: Run) -> None:
        return None

    def on_resume(self, run: Run, saved_state: dict[str, Any] | None) -> None:
        """Rebuild the index from the log on disk (the checkpoint is written before the record
        of its step, so the log is the more recent of the two); take back the records the log
        refused that it still does not hold."""
        records = read_evidence_log(run.run_dir)
        self._records = len(records)
        saved = (saved_state or {}).get("unwritten")
        held = {step_identity(r) for r in records}
        self._unwritten = []
        self._ended = {}
        self._appended_to = None
        for data in saved if isinstance(saved, list) else ():
            node = data.get("nodeId") if isinstance(data, dict) else None
            found = validate_evidence(data, node if isinstance(node, str) else "").record
            if found is not None and step_identity(found) not in held:
                self._unwritten.append(found)
        # A driver stopped after a step's journal record and before its log line: the step
        # does not run again, and its record is written now (or kept, if the log refuses).
        error = self._write_unwritten(run)
        if error is not None:
            log.warning("evidence: %s; the records are kept and written later", error)

    def lint_rules(self) -> list[LintRule]:
        """The rules for this extension's attributes (see :mod:`freshness_magic.evidence.lint`)."""
        return evidence_rules()

    def event_kinds(self) -> tuple[type[EvidenceEvent]]:
        """The events this extension emits (the run's bus must know them)."""
        return (EvidenceEvent,)

    def checkpoint_state(self) -> dict[str, Any]:
        """The evidence index: how many records the run log holds, where it is, and the records
        it refused (written when it takes them again)."""
        state: dict[str, Any] = {"records": self._records, "log": EVIDENCE_LOG}
        if self._unwritten:
            state["unwritten"] = [record.to_dict() for record in self._unwritten]
        return state

    def _write_unwritten(self, run: Run) -> EvidenceError | None:
        """Append the held records (the log refused them, or their step's journal record was
        just written), oldest first, each unless the log already ends with it; the error if the
        log refuses again (the rest are kept, in order, for the next try)."""
        folder = os.fspath(run.run_dir)
        try:
            while self._unwritten:
                known = self._appended_to == folder
                self._appended_to = None
                if known or not same_step(last_log_record(folder), self._unwritten[0]):
                    append_evidence_log(folder, self._unwritten[0])
                    self._records += 1
                self._unwritten.pop(0)
                self._appended_to = folder
        except EvidenceError as exc:
            return exc
        return None

    def _refused(self, run: Run, node: Node) -> Outcome | None:
        """A FAIL for ``node`` while the log still refuses earlier steps' records: no more work
        runs without its record (a retry, once the log can be written, writes them first)."""
        error = self._write_unwritten(run)
        if error is None:
            return None
        steps = ", ".join(dict.fromkeys(f"'{r.node_id}'" for r in self._unwritten))
        return Outcome(
            status=StageStatus.FAIL,
            failure_reason=f"evidence: node '{node.id}' does not run while the record of "
            f"{steps} is not written ({error}); make the run folder writable (free disk space, "
            "permissions), then retry",
        )

    # ----------------------------------------------------------------- per attempt

    @staticmethod
    def _needs_snapshot(run: Run, node: Node) -> bool:
        return commit_enabled(run.graph, node) or requires_work_evidence(run.graph, node)

    def before_execute(self, run: Run, node: Node, attempt: int) -> Outcome | None:
        """Fingerprint the evidence file and, when needed, snapshot the work tree (once a step).

        Changes made by earlier attempts of the same step count: "before" is before the step.
        """
        refused = self._refused(run, node)
        if refused is not None:
            return refused
        workdir = run.workdir
        if attempt == 1 or node.id not in self._facts:
            snapshot = (
                take_snapshot(workdir, node.id, exclude=[run.run_dir])
                if self._needs_snapshot(run, node)
                else None
            )
            previous = self._facts.get(node.id)
            if previous is not None and previous.marked:
                binding.end_step(workdir, node.id, run.run_id)
            facts = _StepFacts(evidence_digest(workdir, node.id), snapshot)
            if is_work_type(node.handler_type):
                try:
                    binding.begin_step(workdir, node.id, run.run_id)
                except OSError as exc:
                    raise _refused_write(exc) from None
                facts.marked = True
            self._facts[node.id] = facts
        if node.handler_type == "codergen" and evidence_mode(run.graph, node) == "require":
            run.context.set(prompt_suffix_key(node.id), work_evidence_prompt(node.id, run.run_id))
        return None

    def after_execute(
        self, run: Run, node: Node, outcome: Outcome, attempt: int, started_at: float
    ) -> Outcome:
        """Validate (``require``) and commit (``commit=true``) a successful attempt."""
        run.context.delete(prompt_suffix_key(node.id))
        facts = self._facts.get(node.id)
        if facts is None or facts.snapshot is None or not outcome.status.is_success:
            return outcome
        if outcome.reused_from is not None:  # its work was judged when it ran
            facts.method = "reused"
            return outcome
        graph = run.graph
        changes: WorkChanges | None = None
        own_record_written = False
        if requires_work_evidence(graph, node):
            result = self.validator.validate(node, graph, run.workdir, facts.snapshot)
            if result.method == "evidence_file":
                foreign = self._foreign(run, node.id, result.record)
                if foreign is not None:
                    result = without_node_file(result, node, run.workdir, foreign)
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
        if commit_enabled(graph, node):
            if not own_record_written:
                read = read_evidence(evidence_path(run.workdir, node.id), node.id)
                own_record_written = (
                    changes.evidence_file_changed
                    and read.valid
                    and self._foreign(run, node.id, read.record) is None
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
                if said := _earlier_changes_committed(node, changes, facts.snapshot, commit):
                    log.warning("%s", said)
                    outcome = replace(outcome, notes="\n".join(filter(None, [outcome.notes, said])))
        return outcome

    @staticmethod
    def _note_changes(facts: _StepFacts, changes: WorkChanges | None) -> None:
        if changes is None:
            return
        facts.files = facts.files.merged(changes.files)
        known = {c.id for c in facts.commits}
        facts.commits.extend(c for c in changes.commits if c.id not in known)

    @staticmethod
    def _foreign(run: Run, node_id: str, record: EvidenceRecord | None) -> str | None:
        """Why the node's changed evidence file is another run's (None: it is this run's)."""
        return binding.foreign_reason(
            run.workdir,
            node_id,
            run.run_id,
            evidence_digest(run.workdir, node_id),
            record.run_id if record is not None else None,
        )

    # ----------------------------------------------------------------- per step

    def on_step_finished(self, run: Run, step_result: StepResult) -> None:
        """Build the step's record and hold it (in the checkpoint state): the step's journal
        record, written next, holds it, and :meth:`on_step_saved` writes it after that, so a
        kill between the two never runs the step again nor loses its record, and a kill before
        the journal record leaves no record of an end the run does not know."""
        node_id = step_result.node_id
        if not step_result.executed or node_id is None or step_result.outcome is None:
            return
        node = run.graph.nodes.get(node_id)
        if node is None:
            return
        facts = self._facts.pop(node_id, None)
        if facts is None:  # no attempt ran here (a gate answered by another process): the
            facts = _StepFacts(evidence_digest(run.workdir, node_id))  # file is as it was
        elif step_result.interrupted and facts.snapshot is not None:
            self._note_changes(facts, changes_since(facts.snapshot))  # what it left behind
        try:
            record, own_digest = self.build_record(run, node, step_result, facts)
        except BaseException:
            if facts.marked:
                binding.end_step(run.workdir, node_id, run.run_id)
            raise
        self._unwritten.append(record)
        self._ended[id(step_result)] = _Ended(record, own_digest, facts)

    def on_step_saved(self, run: Run, step_result: StepResult) -> None:
        """After the journal record that holds the step: append its record to the run's log
        (with any the log refused before), then the node's file or the claim beside it."""
        ended = self._ended.pop(id(step_result), None)
        if ended is None:
            return
        try:
            self._write_ended(run, step_result, ended)
        except OSError as exc:
            raise _refused_write(exc) from None

    def _write_ended(self, run: Run, step_result: StepResult, ended: _Ended) -> None:
        record, facts, node_id = ended.record, ended.facts, ended.record.node_id
        try:
            error = self._write_unwritten(run)
            current = evidence_digest(run.workdir, node_id)
            if current == facts.evidence_digest and not _node_written(run.workdir, node_id):
                # No file of the node's own: the file shows this step's record, bound to this
                # run (runId), so another run never counts it as its own work evidence. A link
                # standing there is left alone (never written through): the log has the record.
                try:
                    write_evidence(run.workdir, replace(record, run_id=run.run_id))
                except EvidenceError as exc:
                    log.warning("evidence: the copy of the record in the node's file: %s", exc)
            elif current is not None and current != facts.evidence_digest:
                binding.write_claim(
                    run.workdir,
                    node_id,
                    run_id=run.run_id,
                    attempt=step_result.attempts,
                    digest=current,
                    run_dir=run.run_dir,
                    counted=ended.own_digest is not None,
                )
        finally:
            if facts.marked:
                binding.end_step(run.workdir, node_id, run.run_id)
        if error is not None:
            raise error
        run.events.emit(
            EvidenceEvent.EVIDENCE_RECORDED,
            node_id,
            {
                "path": os.fspath(evidence_path(run.workdir, node_id)),
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
            facts.invalid_record = _invalid_text(path)
            return None
        record = result.record
        if record is not None and facts.evidence_digest is None and record.engine:
            return None
        foreign = self._foreign(run, node_id, record)
        if foreign is not None:
            if foreign not in facts.problems:
                facts.problems.append(foreign)
            return None
        return record

    def build_record(
        self, run: Run, node: Node, step_result: StepResult, facts: _StepFacts
    ) -> tuple[EvidenceRecord, str | None]:
        """The record of one step (the engine's facts merged into the node's own record), and
        the digest of the node's own file when it counted (None otherwise)."""
        outcome = step_result.outcome or Outcome()
        own = self._own_record(run, node.id, facts)
        own_digest = evidence_digest(run.workdir, node.id) if own is not None else None
        mode = evidence_mode(run.graph, node)
        engine_facts: dict[str, Any] = {
            "run_id": run.run_id,
            "status": outcome.status.value,
            "failure_reason": outcome.failure_reason,
            "notes": outcome.notes,
            "attempt": step_result.attempts,
            "step": len(run.completed_nodes) + step_result.interrupted,  # its rerun's index
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
            "node_file_digest": own_digest,
            "evidence_file": relative_evidence_path(node.id),
            "next_node": step_result.next_node,
        }
        if step_result.interrupted:
            engine_facts["interrupted"] = True
        if outcome.reused_from is not None:
            engine_facts["reused_from"] = outcome.reused_from.to_dict()
        if facts.invalid_record is not None:
            engine_facts["invalid_node_record"] = facts.invalid_record
        llm = outcome.context_updates.get(LLM_KEY.format(node_id=node.id))
        if llm:
            engine_facts["llm"] = llm
        worker = outcome.context_updates.get(WORKER_KEY.format(node_id=node.id))
        if worker:
            engine_facts["worker"] = worker
        hub_seq = run.context.get_string(f"hub.{node.id}.seq")
        if hub_seq:
            engine_facts["hub_seq"] = int(hub_seq)
        record = merge_record(
            own,
            node_id=node.id,
            summary=record_summary(node, outcome, step_result.interrupted),
            type=record_type(node.handler_type, facts),
            engine_facts=engine_facts,
        )
        return record, own_digest


def _refused_write(exc: OSError) -> EvidenceError:
    """One line for a state write the system refused (full disk, read-only, permission)."""
    where = f" {exc.filename}" if exc.filename else ""
    return EvidenceError(
        f"cannot write{where} ({exc.strerror or exc}): free disk space or make the folder "
        "writable, then go on with the run"
    )


def _invalid_text(path: Path) -> str | None:
    """The start of an invalid node file, to keep in the record (None: too big, a link, gone)."""
    try:
        text = read_limited(path).decode("utf-8", "replace")
    except (OSError, EvidenceError):
        return None
    if len(text) > MAX_KEPT_INVALID_BYTES:
        text = text[:MAX_KEPT_INVALID_BYTES] + "… (cut)"
    return text


def _earlier_changes_committed(
    node: Node, changes: WorkChanges, before: WorkTreeSnapshot, commit: CommitInfo
) -> str | None:
    """The warning for a ``commit=true`` commit that holds files which had uncommitted changes
    before the node ran (a person's edits, or an earlier node's): git commits a file whole,
    so those changes are in the node's commit; None when there were none."""
    from freshness_magic.freshness.events import some_files

    earlier = [path for path in changes.uncommitted.paths if path in before.entries]
    if not earlier:
        return None
    short = commit.id[:12]
    return (
        f"commit=true: the commit {short} of node '{node.id}' holds the whole of "
        f"{some_files(earlier, 3)}, which had uncommitted changes before the node ran "
        f"(yours, or an earlier node's); git show {short} shows them"
    )
