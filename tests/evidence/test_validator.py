"""The default work-evidence validator, one test per method and per invalid evidence file."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from freshness_magic.engine.model import Graph, Node
from freshness_magic.evidence.record import EvidenceRecord, evidence_path, write_evidence
from freshness_magic.evidence.snapshot import take_snapshot
from freshness_magic.evidence.validator import (
    DefaultEvidenceValidator,
    EvidenceValidator,
    ValidationResult,
    no_evidence_message,
)
from tests.evidence.conftest import no_evidence
from tests.gitrepo import git

GRAPH = Graph("p", attrs={"evidence": "require"})


def work_node(**attrs: str) -> Node:
    return Node("implement", {"label": "Implement it", "prompt": "Fix the login bug", **attrs})


def validate(
    workdir: Path, node: Node, action: Callable[[], object] | None = None
) -> ValidationResult:
    validator = DefaultEvidenceValidator()
    before = take_snapshot(workdir, node.id)
    if action is not None:
        action()
    return validator.validate(node, GRAPH, workdir, before)


def test_default_validator_satisfies_the_protocol() -> None:
    assert isinstance(DefaultEvidenceValidator(), EvidenceValidator)


def test_file_changes(repo: Path) -> None:
    result = validate(repo, work_node(), lambda: (repo / "fix.py").write_text("ok\n"))
    assert result.valid and result.method == "file_changes"
    assert result.evidence["uncommitted"]["added"] == ["fix.py"]
    assert result.reason == "work tree changes: 1 added"


def test_deleting_a_file_counts(repo: Path) -> None:
    result = validate(repo, work_node(), lambda: (repo / "gone.txt").unlink())
    assert result.valid and result.method == "file_changes"
    assert result.changes is not None and result.changes.uncommitted.deleted == ("gone.txt",)


def test_own_commits(repo: Path) -> None:
    def commit() -> None:
        (repo / "edit.txt").write_text("fixed\n")
        git(repo, "commit", "-q", "-am", "Fix it")

    result = validate(repo, work_node(), commit)
    assert result.valid and result.method == "file_changes"
    assert [c["message"] for c in result.evidence["commits"]] == ["Fix it"]
    assert result.reason == "the node made 1 commit"


def test_evidence_file(repo: Path) -> None:
    record = EvidenceRecord("implement", "Checked the deploy", "validation", {"ok": True})
    result = validate(repo, work_node(), lambda: write_evidence(repo, record))
    assert result.valid and result.method == "evidence_file"
    assert result.record == record
    assert result.evidence == {
        "file": ".orchestrator/evidence/implement.json",
        "summary": "Checked the deploy",
        "type": "validation",
    }


def test_evidence_file_with_orchestrator_gitignored(repo: Path) -> None:
    (repo / ".gitignore").write_text(".orchestrator/\n")
    git(repo, "add", ".gitignore")
    git(repo, "commit", "-q", "-m", "ignore orchestrator")
    record = EvidenceRecord("implement", "Analysed logs", "analysis", {"errors": 0})
    result = validate(repo, work_node(), lambda: write_evidence(repo, record))
    assert result.valid and result.method == "evidence_file"


def test_expects_no_changes(repo: Path) -> None:
    result = validate(repo, work_node(expects_no_changes="true"))
    assert result.valid and result.method == "expects_no_changes"
    assert result.reason == "Node declared expects_no_changes"


def test_nothing_fails_with_the_exact_message(repo: Path) -> None:
    result = validate(repo, work_node())
    assert not result.valid and result.method == "none"
    assert result.reason == no_evidence(repo, "Implement it")


def test_task_falls_back_to_the_label(repo: Path) -> None:
    node = Node("implement", {"label": "Implement it"})
    assert no_evidence_message(node, repo).splitlines()[-2] == "Task: Implement it"


def test_pre_existing_dirty_files_are_no_evidence(repo: Path) -> None:
    (repo / "edit.txt").write_text("user was here\n")
    (repo / "notes.txt").write_text("user notes\n")
    result = validate(repo, work_node())
    assert not result.valid
    assert result.reason == no_evidence(repo, "Implement it")


def test_plain_folder_changes_count(plain_dir: Path) -> None:
    result = validate(plain_dir, work_node(), lambda: (plain_dir / "keep.txt").unlink())
    assert result.valid and result.method == "file_changes"
    assert result.evidence["commits"] == []


def test_plain_folder_nothing_fails(plain_dir: Path) -> None:
    result = validate(plain_dir, work_node())
    assert not result.valid and result.reason == no_evidence(plain_dir, "Implement it")


@pytest.mark.parametrize(
    ("doc", "problem"),
    [
        ({"version": 1, "nodeId": "implement", "summary": "s", "type": "analysis"}, "missing"),
        (
            {
                "version": 1,
                "nodeId": "someone_else",
                "timestamp": "2026-01-01T00:00:00Z",
                "summary": "s",
                "type": "analysis",
                "outcome": {"k": 1},
            },
            "field 'nodeId' is 'someone_else', expected 'implement'",
        ),
        (
            {
                "version": 1,
                "nodeId": "implement",
                "timestamp": "not a time",
                "summary": "s",
                "type": "analysis",
                "outcome": {"k": 1},
            },
            "field 'timestamp'",
        ),
        (
            {
                "version": 1,
                "nodeId": "implement",
                "timestamp": "2026-01-01T00:00:00Z",
                "summary": "s",
                "type": "vibes",
                "outcome": {"k": 1},
            },
            "field 'type' is 'vibes'",
        ),
        ("{truncated", "not valid JSON"),
    ],
)
def test_invalid_evidence_file_is_reported_and_does_not_count(
    repo: Path, doc: object, problem: str
) -> None:
    def write() -> None:
        path = evidence_path(repo, "implement")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(doc if isinstance(doc, str) else json.dumps(doc))

    result = validate(repo, work_node(), write)
    assert not result.valid
    first, damage = result.reason.rsplit("\n", 1)
    assert first == no_evidence(repo, "Implement it")
    assert damage.startswith(
        f"evidence file {evidence_path(repo, 'implement')} of node 'implement' is damaged: "
    )
    assert problem in damage and damage.endswith(
        "or delete it (the run's record of each step is in its evidence.jsonl)"
    )
    assert any(problem in p for p in result.problems), result.problems
    written = doc if isinstance(doc, str) else json.dumps(doc)
    assert evidence_path(repo, "implement").read_text() == written  # left as it is


def test_invalid_evidence_file_with_other_evidence_still_reports_problems(repo: Path) -> None:
    def act() -> None:
        (repo / "fix.py").write_text("ok\n")
        path = evidence_path(repo, "implement")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("[]")

    result = validate(repo, work_node(), act)
    assert result.valid and result.method == "file_changes"
    assert result.record is None
    assert any("expected an object" in p for p in result.problems)


def test_evidence_file_left_from_an_earlier_execution_does_not_count(repo: Path) -> None:
    write_evidence(repo, EvidenceRecord("implement", "old", "analysis", {"k": 1}))
    result = validate(repo, work_node())
    said = (
        ".orchestrator/evidence/implement.json is unchanged since before the node ran (left by "
        "an earlier execution), so it does not count: write it anew during the step"
    )
    assert not result.valid and result.reason == f"{no_evidence(repo, 'Implement it')}\n{said}"
    assert said in result.problems


def test_has_and_read_evidence(repo: Path) -> None:
    validator = DefaultEvidenceValidator()
    assert not validator.has_evidence_file(repo, "implement")
    write_evidence(repo, EvidenceRecord("implement", "s", "analysis", {"k": 1}))
    assert validator.has_evidence_file(repo, "implement")
    assert validator.read_evidence(repo, "implement").valid
