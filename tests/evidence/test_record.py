"""The evidence-file format: validating reader, safe paths, atomic writers, merging."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from freshness_magic.errors import EvidenceError
from freshness_magic.evidence.record import (
    ENGINE_KEY,
    EVIDENCE_LOG,
    EvidenceRecord,
    append_evidence_log,
    ensure_evidence_dir,
    evidence_path,
    iter_evidence_log,
    merge_record,
    parse_timestamp,
    read_evidence,
    read_evidence_log,
    utc_timestamp,
    validate_evidence,
    write_evidence,
)


def valid_doc(node_id: str = "draft", **changes: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "version": 1,
        "nodeId": node_id,
        "timestamp": "2026-01-02T03:04:05Z",
        "summary": "Summarised the change",
        "type": "analysis",
        "outcome": {"result": "ok"},
    }
    doc.update(changes)
    return doc


def write_doc(tmp_path: Path, doc: Any, node_id: str = "draft") -> Path:
    path = evidence_path(tmp_path, node_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return path


def test_valid_file_reads_as_record(tmp_path: Path) -> None:
    path = write_doc(tmp_path, valid_doc())
    result = read_evidence(path, "draft")
    assert result.valid and result.exists
    assert result.problems == []
    assert result.record == EvidenceRecord(
        "draft", "Summarised the change", "analysis", {"result": "ok"}, "2026-01-02T03:04:05Z"
    )


def test_missing_file_is_absent_without_problems(tmp_path: Path) -> None:
    result = read_evidence(evidence_path(tmp_path, "draft"), "draft")
    assert not result.exists and not result.valid and result.problems == []


@pytest.mark.parametrize(
    ("doc", "expected"),
    [
        ({k: v for k, v in valid_doc().items() if k != "summary"}, "field 'summary' is missing"),
        ({k: v for k, v in valid_doc().items() if k != "version"}, "field 'version' is missing"),
        (valid_doc(outcome=[1]), "field 'outcome' must be an object, not list"),
        (valid_doc(summary=""), "field 'summary' is empty"),
        (valid_doc(summary="   "), "field 'summary' is blank"),
        (valid_doc(type=""), "field 'type' is '', expected one of"),
        (valid_doc(type=3), "field 'type' must be a string, not int"),
        (valid_doc(version=2), "field 'version' is 2, expected 1"),
        (valid_doc(version="1"), "field 'version' is '1', expected 1"),
        (valid_doc(version=True), "field 'version' is True, expected 1"),
        (valid_doc(nodeId="other"), "field 'nodeId' is 'other', expected 'draft'"),
        (valid_doc(timestamp="yesterday"), "field 'timestamp' is 'yesterday', not an ISO 8601"),
        (valid_doc(type="guess"), "field 'type' is 'guess', expected one of file_changes"),
        (valid_doc(outcome="done"), "field 'outcome' must be an object, not str"),
        (valid_doc(summary=5), "field 'summary' must be a string, not int"),
        ([1, 2], "the document is a JSON list, expected an object"),
        ("{not json", "not valid JSON"),
    ],
)
def test_invalid_file_is_reported_and_treated_as_absent(
    tmp_path: Path, doc: Any, expected: str
) -> None:
    path = write_doc(tmp_path, doc)
    result = read_evidence(path, "draft")
    assert result.exists
    assert result.record is None and not result.valid
    assert any(expected in problem for problem in result.problems), result.problems
    assert all(problem.startswith(str(path)) for problem in result.problems)


def test_every_problem_is_reported_at_once(tmp_path: Path) -> None:
    path = write_doc(tmp_path, valid_doc(version=3, nodeId="x", type="nope"))
    problems = read_evidence(path, "draft").problems
    assert len(problems) == 3


@pytest.mark.parametrize("bad", ["../escape", "a/b", "", "1abc", "a.b", "a b", "..", "x\x00y"])
def test_evidence_path_refuses_ids_that_are_not_identifiers(tmp_path: Path, bad: str) -> None:
    with pytest.raises(EvidenceError, match="node ids must match"):
        evidence_path(tmp_path, bad)


def test_a_symlink_as_the_evidence_file_is_an_invalid_file_never_followed(
    tmp_path: Path,
) -> None:
    """The file is the node's: a link there makes it invalid (not read through); a linked
    folder on the way is refused (the engine's own files would land outside)."""
    folder = tmp_path / ".orchestrator" / "evidence"
    folder.mkdir(parents=True)
    outside = tmp_path / "outside.json"
    outside.write_text(json.dumps(valid_doc(nodeId="draft")))
    os.symlink(outside, folder / "draft.json")
    path = evidence_path(tmp_path, "draft")
    result = read_evidence(path, "draft")
    assert result.record is None and not result.valid
    [problem] = result.problems
    assert problem.startswith(f"{path}: not read: ") and "symbolic link" in problem
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (folder / "draft.json").unlink()
    folder.rmdir()
    os.symlink(elsewhere, folder)
    with pytest.raises(EvidenceError, match="outside"):
        evidence_path(tmp_path, "draft")


def test_orchestrator_folder_gets_its_own_gitignore(tmp_path: Path) -> None:
    ensure_evidence_dir(tmp_path)
    ignore = tmp_path / ".orchestrator" / ".gitignore"
    assert "*" in ignore.read_text().splitlines()
    ignore.write_text("custom\n")
    ensure_evidence_dir(tmp_path)
    assert ignore.read_text() == "custom\n"


def test_write_then_read_round_trips(tmp_path: Path) -> None:
    record = EvidenceRecord("lint", "ran ruff", "external_effect", {"engine": {"status": "ok"}})
    path = write_evidence(tmp_path, record)
    assert path == tmp_path / ".orchestrator" / "evidence" / "lint.json"
    assert read_evidence(path, "lint").record == record
    assert [p.name for p in path.parent.iterdir()] == ["lint.json"]


def test_log_keeps_every_record_in_order(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    for n in range(3):
        append_evidence_log(run_dir, EvidenceRecord("loop", f"pass {n}", "analysis", {"n": n}))
    append_evidence_log(run_dir, EvidenceRecord("other", "x", "analysis", {"n": 9}))
    assert [r.summary for r in read_evidence_log(run_dir, "loop")] == ["pass 0", "pass 1", "pass 2"]
    assert len(read_evidence_log(run_dir)) == 4
    lines = (run_dir / EVIDENCE_LOG).read_text().splitlines()
    assert [json.loads(line)["nodeId"] for line in lines] == ["loop", "loop", "loop", "other"]


def test_log_reader_reports_invalid_lines(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    append_evidence_log(run_dir, EvidenceRecord("a", "fine", "analysis", {"k": 1}))
    with (run_dir / EVIDENCE_LOG).open("a") as handle:
        handle.write(json.dumps(valid_doc("b", type="bogus")) + "\n")
    results = list(iter_evidence_log(run_dir))
    assert [r.valid for r in results] == [True, False]
    assert "field 'type'" in results[1].problems[0]


def test_merge_without_node_record_puts_facts_under_engine() -> None:
    merged = merge_record(
        None, node_id="n", summary="did it", type="analysis", engine_facts={"status": "success"}
    )
    assert merged.summary == "did it" and merged.type == "analysis"
    assert merged.outcome == {ENGINE_KEY: {"status": "success"}}


def test_merge_keeps_the_nodes_summary_type_and_outcome() -> None:
    own = EvidenceRecord(
        "n",
        "Deployed v2",
        "external_effect",
        {"url": "https://x", "engine": "mine"},
        "2026-01-01T00:00:00Z",
    )
    merged = merge_record(
        own, node_id="n", summary="ignored", type="analysis", engine_facts={"status": "success"}
    )
    assert merged.summary == "Deployed v2"
    assert merged.type == "external_effect"
    assert merged.outcome["url"] == "https://x"
    assert merged.outcome["node_engine"] == "mine"
    assert merged.outcome[ENGINE_KEY] == {
        "status": "success",
        "node_timestamp": "2026-01-01T00:00:00Z",
    }
    assert own.outcome["engine"] == "mine"


def test_timestamps_are_utc_iso8601() -> None:
    stamp = utc_timestamp()
    assert stamp.endswith("Z")
    assert parse_timestamp(stamp).utcoffset() is not None
    assert parse_timestamp("2026-01-02T03:04:05+02:00").hour == 3


def test_a_torn_last_line_is_cut_before_the_next_append(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    append_evidence_log(run_dir, EvidenceRecord("a", "first", "analysis", {"k": 1}))
    with (run_dir / EVIDENCE_LOG).open("ab") as handle:
        handle.write(b'{"nodeId": "a", "summ')
    assert [r.summary for r in read_evidence_log(run_dir)] == ["first"]
    append_evidence_log(run_dir, EvidenceRecord("a", "second", "analysis", {"k": 2}))
    lines = (run_dir / EVIDENCE_LOG).read_bytes().split(b"\n")
    assert lines[-1] == b""
    assert [json.loads(line)["summary"] for line in lines[:-1]] == ["first", "second"]


def test_a_log_that_is_only_a_torn_line_starts_over(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / EVIDENCE_LOG).write_bytes(b'{"nodeId": "a"')
    append_evidence_log(run_dir, EvidenceRecord("a", "only", "analysis", {"k": 1}))
    assert [r.summary for r in read_evidence_log(run_dir)] == ["only"]
    assert (run_dir / EVIDENCE_LOG).read_bytes().count(b"\n") == 1


def test_the_seed_format_without_outcome_is_valid() -> None:
    doc = {
        "version": 1,
        "nodeId": "x",
        "timestamp": "2026-01-01T00:00:00Z",
        "summary": "notified ops",
        "type": "external_effect",
    }
    result = validate_evidence(doc, "x")
    assert result.valid, result.problems
    assert result.record is not None and result.record.outcome == {}
    untyped = validate_evidence({k: v for k, v in doc.items() if k != "type"}, "x")
    assert untyped.record is not None and untyped.record.type == "file_changes"
