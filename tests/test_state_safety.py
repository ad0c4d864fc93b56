"""State files that nothing can corrupt or escape: depth-bounded JSON, size limits, no links."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from freshness_magic import atomicio
from freshness_magic.engine import Run, RunState
from freshness_magic.engine.model import Edge, Graph, Node
from freshness_magic.engine.pipeline import load_pipeline
from freshness_magic.errors import EvidenceError, StateFileError, UnsafePathError
from freshness_magic.evidence.record import (
    MAX_EVIDENCE_BYTES,
    EvidenceRecord,
    evidence_path,
    read_evidence,
    read_evidence_log,
    write_evidence,
)
from freshness_magic.session import open_run, resume_run
from tests.pipelines import ECHO_HI, one_tool
from tests.waiting import wait_until

DEEP = 200_000


def nest(depth: int, kinds: list[bool]) -> str:
    """JSON nested ``depth`` levels, each level a list (True) or an object (False)."""
    opening = "".join("[" if kinds[i % len(kinds)] else '{"k":' for i in range(depth))
    closing = "".join("]" if kinds[i % len(kinds)] else "}" for i in reversed(range(depth)))
    return opening + "1" + closing


@settings(max_examples=60, deadline=None)
@given(depth=st.integers(0, 400), kinds=st.lists(st.booleans(), min_size=1, max_size=5))
def test_nesting_is_decoded_up_to_the_limit_and_refused_beyond(
    depth: int, kinds: list[bool]
) -> None:
    text = nest(depth, kinds)
    if depth <= atomicio.MAX_JSON_DEPTH:
        assert atomicio.loads_bounded(text) == json.loads(text)
    else:
        with pytest.raises(StateFileError, match="nested more than 100"):
            atomicio.loads_bounded(text)


@settings(max_examples=60, deadline=None)
@given(
    value=st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(alphabet='[]{}"\\ab'),
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner),
        max_leaves=20,
    )
)
def test_shallow_documents_decode_exactly_whatever_their_strings_hold(value: object) -> None:
    text = json.dumps(value)
    assert atomicio.loads_bounded(text) == value


@settings(max_examples=80, deadline=None)
@given(
    depth=st.integers(0, 200),
    text=st.text(alphabet='[]{}"\\ab'),
    kinds=st.lists(st.booleans(), min_size=1, max_size=3),
)
def test_brackets_quotes_and_backslashes_in_strings_do_not_count_as_nesting(
    depth: int, text: str, kinds: list[bool]
) -> None:
    """Strings holding more brackets than the limit (so that the nesting is measured) with any
    run of quotes and backslashes: only the document's own nesting decides."""
    inner = json.dumps(["[" * 120 + text, text + "{" * 120, {text: "\\" + text}])
    document = nest(depth, kinds).replace("1", inner, 1)
    if depth + 2 <= atomicio.MAX_JSON_DEPTH:
        assert atomicio.loads_bounded(document) == json.loads(document)
    else:
        with pytest.raises(StateFileError, match="nested more than 100"):
            atomicio.loads_bounded(document)


def test_a_deep_document_is_a_value_error_not_a_recursion_error() -> None:
    for text in ("[" * DEEP, '{"a":' * DEEP, "[" * DEEP + "]" * DEEP):
        with pytest.raises(ValueError):
            atomicio.loads_bounded(text)


def test_damaged_log_lines_are_skipped_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    log = tmp_path / "events.jsonl"
    atomicio.append_jsonl(log, {"seq": 1})
    with log.open("ab") as handle:
        handle.write(b"[" * DEEP + b"\n")
        handle.write(b"{not json\n")
    atomicio.append_jsonl(log, {"seq": 2})
    with caplog.at_level(logging.WARNING):
        assert list(atomicio.read_jsonl(log)) == [{"seq": 1}, {"seq": 2}]
    assert [r.message for r in caplog.records if "damaged line" in r.message] == [
        f"{log}:2: damaged line skipped (JSON nested more than 100 levels deep (or with "
        "unmatched brackets); the file is damaged or not ours)",
        f"{log}:3: damaged line skipped (Expecting property name enclosed in double quotes: "
        "line 1 column 2 (char 1))",
    ]


def test_a_run_resumes_and_reports_evidence_past_deep_log_lines(tmp_path: Path) -> None:
    run = open_run(ECHO_HI, workdir=tmp_path)
    run.step()
    for name in ("events.jsonl", "evidence.jsonl"):
        with (run.run_dir / name).open("ab") as handle:
            handle.write(b"[" * DEEP + b"\n")
    resumed = resume_run(run.run_dir)
    assert resumed.run().state is RunState.COMPLETED
    assert [r.node_id for r in read_evidence_log(run.run_dir)] == ["start", "work", "done"]


def test_a_deep_node_evidence_file_is_a_recorded_problem(tmp_path: Path) -> None:
    path = evidence_path(tmp_path, "work")
    path.parent.mkdir(parents=True)
    path.write_text("[" * DEEP)
    result = read_evidence(path, "work")
    assert result.record is None
    assert "nested more than 100" in result.problems[0]


def test_a_step_whose_node_wrote_deep_json_keeps_its_record_with_the_problem(
    tmp_path: Path,
) -> None:
    command = (
        "mkdir -p .orchestrator/evidence && "
        f"python3 -c \"print('[' * {DEEP})\" > .orchestrator/evidence/work.json"
    )
    run = open_run(ECHO_HI.replace('"echo hi"', json.dumps(command)), workdir=tmp_path)
    assert run.run().state is RunState.COMPLETED
    record = [r for r in read_evidence_log(run.run_dir) if r.node_id == "work"][-1]
    assert any("nested more than 100" in p for p in record.engine["evidence_problems"])


def test_an_evidence_file_over_the_limit_is_refused_unread(tmp_path: Path) -> None:
    path = evidence_path(tmp_path, "work")
    path.parent.mkdir(parents=True)
    with path.open("wb") as handle:
        handle.truncate(300 * 1024 * 1024)  # sparse: 300 MB without writing them
    result = read_evidence(path, "work")
    assert result.record is None
    assert f"over the {MAX_EVIDENCE_BYTES} byte limit" in result.problems[0]


def test_an_oversized_node_file_never_reaches_the_run_log(tmp_path: Path) -> None:
    size = 300 * 1024 * 1024
    command = (
        f"mkdir -p .orchestrator/evidence && truncate -s {size} .orchestrator/evidence/work.json"
    )
    run = open_run(ECHO_HI.replace('"echo hi"', json.dumps(command)), workdir=tmp_path)
    assert run.run().state is RunState.COMPLETED
    assert (run.run_dir / "evidence.jsonl").stat().st_size < 64 * 1024
    record = [r for r in read_evidence_log(run.run_dir) if r.node_id == "work"][-1]
    assert any("byte limit" in p for p in record.engine["evidence_problems"])


def outside_link(tmp_path: Path, inside: str) -> tuple[Path, Path]:
    work, outside = tmp_path / "work", tmp_path / "outside"
    outside.mkdir()
    link = work / inside
    link.parent.mkdir(parents=True)
    link.symlink_to(outside, target_is_directory=True)
    return work, outside


@pytest.mark.parametrize("inside", [".orchestrator/evidence", ".orchestrator", ".freshness"])
def test_a_linked_state_folder_is_refused_and_nothing_lands_outside(
    tmp_path: Path, inside: str
) -> None:
    work, outside = outside_link(tmp_path, inside)
    with pytest.raises(UnsafePathError) as caught:
        open_run(ECHO_HI, workdir=work).run()
    message = str(caught.value)
    assert "\n" not in message and "is a symbolic link" in message and inside in message
    assert list(outside.iterdir()) == []


def test_a_linked_evidence_file_is_never_written_through_and_costs_no_record(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A link at a node's evidence path is the node's (invalid) file: the engine neither
    follows nor replaces it, says so in one line, and its own record is in the run's log."""
    (tmp_path / ".orchestrator/evidence").mkdir(parents=True)
    link = tmp_path / ".orchestrator/evidence/work.json"
    link.symlink_to(tmp_path / "elsewhere.json")
    with caplog.at_level("WARNING"):
        run = open_run(ECHO_HI, workdir=tmp_path)
        result = run.run()
    assert result.state is RunState.COMPLETED
    assert [r.exc_info for r in caplog.records] == [None] * len(caplog.records), caplog.text
    assert any("work.json is a symbolic link" in r.getMessage() for r in caplog.records)
    assert not (tmp_path / "elsewhere.json").exists() and link.is_symlink()
    assert [r.node_id for r in read_evidence_log(run.run_dir)] == run.completed_nodes
    run.close()


def test_writers_refuse_a_link_anywhere_under_a_state_folder(tmp_path: Path) -> None:
    work, outside = outside_link(tmp_path, ".freshness/runs")
    with pytest.raises(UnsafePathError):
        atomicio.write_json_atomic(work / ".freshness/runs/r1/checkpoint.json", {})
    with pytest.raises(UnsafePathError):
        atomicio.append_jsonl(work / ".freshness/runs/r1/events.jsonl", {})
    (work / ".freshness/runs").unlink()
    (work / ".freshness/runs/r1").mkdir(parents=True)
    (work / ".freshness/runs/r1/events.jsonl").symlink_to(outside / "events.jsonl")
    with pytest.raises(UnsafePathError):
        atomicio.append_jsonl(work / ".freshness/runs/r1/events.jsonl", {})
    work2, outside2 = tmp_path / "w2", tmp_path / "o2"
    outside2.mkdir()
    (work2 / ".orchestrator").mkdir(parents=True)
    (work2 / ".orchestrator/evidence").symlink_to(outside2)
    with pytest.raises(EvidenceError, match="symbolic link"):
        write_evidence(work2, EvidenceRecord("n", "s", "analysis"))
    assert list(outside.iterdir()) == [] and list(outside2.iterdir()) == []


def test_a_python_graph_with_a_path_like_node_id_writes_nothing_outside(tmp_path: Path) -> None:
    work = tmp_path / "a" / "b"
    work.mkdir(parents=True)
    bad = "../../x"
    graph = Graph(
        name="g",
        nodes={
            "start": Node("start", {"shape": "Mdiamond"}),
            bad: Node(bad, {"shape": "parallelogram", "tool_command": "echo out"}),
            "done": Node("done", {"shape": "Msquare"}),
        },
        edges=[Edge("start", bad), Edge(bad, "done")],
    )
    result = Run(graph, workdir=work).run()
    assert result.state is RunState.FAILED
    assert "cannot name a folder of the run" in result.node_outcomes[bad].failure_reason
    runs = work / ".freshness" / "runs"
    written = {p for p in tmp_path.rglob("*") if p.is_file()}
    assert written and all(runs in p.parents or p.name == ".gitignore" for p in written)


def test_stale_temp_files_of_ours_are_removed_on_resume(tmp_path: Path) -> None:
    run = open_run(ECHO_HI, workdir=tmp_path)
    run.step()
    ours = [
        run.run_dir / ".checkpoint.json.k3j_x9a2.tmp",
        run.run_dir / "nodes" / "start" / ".status.json.abcdEFGH.tmp",
    ]
    others = [run.run_dir / "notes.tmp", run.run_dir / ".checkpoint.json.tmp"]
    for path in ours + others:
        path.write_text("{")
    old_evidence_tmp = tmp_path / ".orchestrator" / "evidence" / ".work.json.a1b2c3d4.tmp"
    new_evidence_tmp = tmp_path / ".orchestrator" / "evidence" / ".other.json.a1b2c3d4.tmp"
    old_evidence_tmp.parent.mkdir(parents=True, exist_ok=True)
    for path in (old_evidence_tmp, new_evidence_tmp):
        path.write_text("{")
    os.utime(old_evidence_tmp, (1, 1))
    resume_run(run.run_dir)
    assert [p.exists() for p in ours] == [False, False]
    assert [p.exists() for p in others] == [True, True]
    assert not old_evidence_tmp.exists() and new_evidence_tmp.exists()


def test_resume_stops_a_tool_that_outlived_its_killed_driver(tmp_path: Path) -> None:
    (tmp_path / "p.dot").write_text(one_tool("sleep 300"))
    driver = subprocess.Popen(
        [sys.executable, "-m", "freshness_magic", "run", "p.dot"],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    runs = tmp_path / ".freshness" / "runs"
    wait_until(
        lambda: list(runs.glob("*/nodes/work/pgid")) or driver.poll() is not None,
        "the driver started the tool",
        timeout=60,
    )
    assert driver.poll() is None, "the driver ended before its tool started"
    pgid_file = next(runs.glob("*/nodes/work/pgid"))
    pgid = json.loads(pgid_file.read_text())["pgid"]
    os.kill(driver.pid, signal.SIGKILL)
    driver.wait()
    os.killpg(pgid, 0)  # the tool survived its driver
    run_dir = pgid_file.parent.parent.parent
    status = subprocess.run(
        [sys.executable, "-m", "freshness_magic", "status", str(run_dir)],
        capture_output=True,
        text=True,
        check=False,
    )
    lines = status.stdout.splitlines()
    assert (
        f"note: the tool of node 'work' (process group {pgid}) still runs, although the process "
        f"that started it (pid {driver.pid}: the run's driver, or a cluster worker) is gone; "
        "resume stops it first"
    ) in lines, status.stdout
    note = "note: work was running when its driver stopped without saving (killed?); "
    assert note + "resume runs it again" in lines  # the checkpoint alone says only paused
    os.killpg(pgid, 0)  # status only looked
    resumed = resume_run(run_dir)
    assert resumed.next_node == "work"
    assert not pgid_file.exists()
    with pytest.raises(ProcessLookupError):
        for _ in range(200):
            os.killpg(pgid, 0)
            time.sleep(0.05)


def test_a_run_built_directly_refuses_a_linked_freshness_folder(tmp_path: Path) -> None:
    """Not only the session: the engine's Run checks its run directory's path itself."""
    work, outside = outside_link(tmp_path, ".freshness")
    with pytest.raises(UnsafePathError, match="is a symbolic link"):
        Run(load_pipeline(ECHO_HI), workdir=work)
    assert list(outside.iterdir()) == []


GATED = """digraph p {
  start [shape=Mdiamond]
  work  [shape=parallelogram, tool_command="echo hi", source_files="in.txt", freshness="warn"]
  gate  [shape=hexagon, label="Go?"]
  done  [shape=Msquare]
  start -> work -> gate
  gate -> done [label="[Y] Yes"]
}
"""


def _tree(folder: Path) -> dict[str, bytes | None]:
    return {
        str(p.relative_to(folder)): p.read_bytes() if p.is_file() else None
        for p in sorted(folder.rglob("*"))
    }


@pytest.mark.parametrize(
    "name", ["checkpoint.json", "journal.jsonl", "events.jsonl", "evidence.jsonl", "driver.lock"]
)
def test_a_folder_where_the_run_keeps_a_file_is_a_one_line_error_and_changes_nothing(
    tmp_path: Path, name: str
) -> None:
    (tmp_path / "p.dot").write_text(GATED)
    (tmp_path / "in.txt").write_text("x\n")
    with open_run(tmp_path / "p.dot", workdir=tmp_path) as run:
        assert run.run().state is RunState.WAITING
        run_dir = run.run_dir
    target = run_dir / name
    if target.exists():
        target.unlink()
    target.mkdir()
    (target / "kept.txt").write_text("someone's file\n")
    before = _tree(run_dir)
    for command in (["status"], ["check"], ["resume", "--answer", "gate=Y"]):
        done = subprocess.run(
            [sys.executable, "-m", "freshness_magic", *command[:1], str(run_dir), *command[1:]],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert "Traceback" not in done.stderr, (command, done.stderr)
        if command[0] == "resume":
            assert done.returncode == 2, done.stdout
            last = done.stderr.strip().splitlines()[-1]
            assert name in last and ("move it" in last or "cannot be read" in last), last
    assert _tree(run_dir) == before
