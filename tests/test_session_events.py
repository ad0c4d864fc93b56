"""The event vocabularies of a session: the engine's ``EventType`` plus the enums
freshness and evidence define, composed by the session layer and never by the engine."""

from __future__ import annotations

import subprocess
import warnings
from pathlib import Path

import pytest

from freshness_magic import session
from freshness_magic.engine import Run, load_pipeline
from freshness_magic.engine.events import ENGINE_EVENTS, EventType
from freshness_magic.errors import RunError
from freshness_magic.events import session_event_kinds
from freshness_magic.evidence.events import EvidenceEvent
from freshness_magic.freshness.events import FreshnessEvent

PIPELINE = """digraph p {
  start [shape=Mdiamond]
  done [shape=Msquare]
  lint [shape=parallelogram, tool_command="true", source_files="spec.md", freshness="warn"]
  start -> lint -> done
}
"""


def test_a_session_run_knows_the_same_vocabularies_as_a_session_reader(tmp_path: Path) -> None:
    (tmp_path / "spec.md").write_text("v1\n")
    run = session.open_run(PIPELINE, workdir=tmp_path)
    try:
        assert run.events.kinds == session_event_kinds()
        assert session_event_kinds().enums == (EventType, FreshnessEvent, EvidenceEvent)
    finally:
        run.close()


def test_an_engine_run_knows_only_the_engine_s_events(tmp_path: Path) -> None:
    run = Run(load_pipeline(PIPELINE), workdir=tmp_path)
    try:
        assert run.events.kinds == ENGINE_EVENTS
    finally:
        run.close()


def test_freshness_and_evidence_events_are_read_back_as_their_own_members(tmp_path: Path) -> None:
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / "spec.md").write_text("v1\n")
    run = session.open_run(PIPELINE, workdir=tmp_path)
    try:
        run.start()
        (tmp_path / "spec.md").write_text("v2\n")
        assert run.run().status == "completed"
        log = run.run_dir / "events.jsonl"
    finally:
        run.close()
    kinds = {e.type for e in session_event_kinds().read(log)}
    assert {FreshnessEvent.STALE_INPUT, EvidenceEvent.EVIDENCE_RECORDED} <= kinds
    assert EventType.STAGE_COMPLETED in kinds and EventType.HANDLER_EVENT not in kinds
    # The wire format is unchanged: the same type strings, v 1.
    text = log.read_text()
    assert '"type": "stale_input"' in text and '"type": "evidence_recorded"' in text
    assert '"v": 1' in text


def test_open_run_refuses_a_working_directory_that_is_a_file_before_writing(
    tmp_path: Path,
) -> None:
    """As the notebook does when it loads: a file (or a path under one) is refused at once,
    not at the first step; a missing folder is created by the first step."""
    blocker = tmp_path / "notes.txt"
    blocker.write_text("mine\n")
    for workdir in (blocker, blocker / "sub"):
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # no warning about spec.md under a file first
            with pytest.raises(RunError, match=rf"working directory {workdir}: {blocker} is a "):
                session.open_run(PIPELINE, workdir=workdir)
    assert blocker.read_text() == "mine\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]
    later = tmp_path / "new" / "project"
    (tmp_path / "new").mkdir()
    run = session.open_run(
        PIPELINE.replace('source_files="spec.md", freshness="warn"', ""), workdir=later
    )
    try:
        assert run.run().state.value == "completed" and later.is_dir()
    finally:
        run.close()
