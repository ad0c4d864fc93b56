"""``freshness-magic evidence RUN_DIR [NODE] [--json]``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from freshness_magic.cli import main
from freshness_magic.engine import Run, RunState
from freshness_magic.evidence.record import EVIDENCE_LOG
from freshness_magic.session import open_run
from tests.processes import cli

DOT = """digraph cli {
  graph [evidence=require]
  start [shape=Mdiamond]
  build [shape=parallelogram, tool_command="echo built > build.txt", label="Build it"]
  check [shape=parallelogram, tool_command="true", expects_no_changes=true]
  done [shape=Msquare]
  start -> build -> check -> done
}"""


@pytest.fixture
def finished_run(repo: Path) -> Run:
    run = open_run(DOT, workdir=repo)
    assert run.run().state is RunState.COMPLETED
    return run


def test_table_lists_every_step(finished_run: Run, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["evidence", str(finished_run.run_dir)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == [
        "time",
        "node",
        "status",
        "method",
        "stale",
        "files",
        "summary",
        "duration",
    ]
    nodes = [line.split()[2] for line in lines[1:]]
    assert nodes == ["start", "build", "check", "done"]
    build = next(line for line in lines if " build " in line)
    assert "success" in build and "file_changes" in build and "Build it" in build
    check = next(line for line in lines if " check " in line)
    assert "expects_no_changes" in check


def test_one_node_as_json(finished_run: Run, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["evidence", str(finished_run.run_dir), "build", "--json"]) == 0
    records = json.loads(capsys.readouterr().out)
    assert [r["nodeId"] for r in records] == ["build"]
    assert records[0]["outcome"]["engine"]["files"]["added"] == ["build.txt"]
    assert records[0]["version"] == 1


def test_a_node_not_in_the_pipeline_is_named_as_such(
    finished_run: Run, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["evidence", str(finished_run.run_dir), "nowhere"]) == 2
    assert (
        capsys.readouterr()
        .err.strip()
        .endswith("no node 'nowhere' in the run's pipeline; nodes: start, build, check, done")
    )


def test_bad_node_id_and_missing_run_are_one_line_errors(
    tmp_path: Path, finished_run: Run, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["evidence", str(finished_run.run_dir), "../x"]) == 2
    assert "node ids must match" in capsys.readouterr().err
    assert main(["evidence", str(tmp_path / "missing")]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert main(["evidence", str(tmp_path)]) == 2
    assert EVIDENCE_LOG in capsys.readouterr().err


def test_invalid_log_lines_are_warned_about(
    finished_run: Run, capsys: pytest.CaptureFixture[str]
) -> None:
    with (finished_run.run_dir / EVIDENCE_LOG).open("a") as handle:
        handle.write(json.dumps({"version": 1, "nodeId": "build"}) + "\n")
    assert main(["evidence", str(finished_run.run_dir)]) == 0
    captured = capsys.readouterr()
    assert "warning:" in captured.err and "field 'summary' is missing" in captured.err
    assert len(captured.out.splitlines()) == 5


def test_module_entry_point(finished_run: Run) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "freshness_magic", "evidence", str(finished_run.run_dir), "check"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "expects_no_changes" in result.stdout


def test_a_step_that_ran_on_many_stale_files_stays_a_short_row(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The stale files column names three files and counts the rest: with every file listed, a
    15,000-file change made each row (all padded to the widest) 289 KB long."""
    dot = """digraph many {
      start [shape=Mdiamond]
      make [shape=parallelogram, tool_command="for i in $(seq 8); do echo $i > gen$i.txt; done"]
      use [shape=parallelogram, tool_command="true", source_files="*.txt", freshness=warn]
      done [shape=Msquare]
      start -> make -> use -> done
    }"""
    run = open_run(dot, workdir=repo)
    assert run.run().state is RunState.COMPLETED
    assert main(["evidence", str(run.run_dir), "use"]) == 0
    row = capsys.readouterr().out.splitlines()[1]
    assert "gen1.txt, gen2.txt, gen3.txt (+5 more)" in row
    assert "gen4.txt" not in row


DAMAGING_DOT = """digraph damaging {
  start [shape=Mdiamond]
  garbage [shape=parallelogram,
           tool_command="cd .orchestrator/evidence && printf 'not json{' > garbage.json"]
  shaped [shape=parallelogram, tool_command="printf '[1, 2]' > .orchestrator/evidence/shaped.json"]
  done [shape=Msquare]
  start -> garbage -> shaped -> done
}"""


def test_a_damaged_node_evidence_file_is_named_with_what_is_wrong_and_left_as_is(
    tmp_path: Path,
) -> None:
    """A node evidence file that is not JSON, or not an object, is said after the table (the
    run's records name it), in a new process, with no traceback; the file is not touched."""
    (tmp_path / "p.dot").write_text(DAMAGING_DOT)
    ran = cli("run", "p.dot", cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    (run_dir,) = (tmp_path / ".freshness" / "runs").iterdir()
    files = tmp_path / ".orchestrator" / "evidence"

    shown = cli("evidence", str(run_dir), cwd=tmp_path)
    assert shown.returncode == 0 and "Traceback" not in shown.stderr
    assert [line.split()[2] for line in shown.stdout.splitlines()[1:]] == [
        "start",
        "garbage",
        "shaped",
        "done",
    ]
    warnings = shown.stderr.splitlines()
    assert warnings == [
        f"warning: evidence file {files / 'garbage.json'} of node 'garbage' is damaged: not "
        "valid JSON (Expecting value: line 1 column 1 (char 0)). It is not counted as the node's "
        "evidence and is left as it is: write it again as a JSON object with version 1, nodeId "
        '"garbage", timestamp (ISO 8601) and summary, or delete it (the run\'s record of each '
        "step is in its evidence.jsonl)",
        f"warning: evidence file {files / 'shaped.json'} of node 'shaped' is damaged: the "
        "document is a JSON list, expected an object. It is not counted as the node's evidence "
        'and is left as it is: write it again as a JSON object with version 1, nodeId "shaped", '
        "timestamp (ISO 8601) and summary, or delete it (the run's record of each step is in its "
        "evidence.jsonl)",
    ]

    one = cli("evidence", str(run_dir), "shaped", "--json", cwd=tmp_path)
    assert one.returncode == 0
    assert [r["nodeId"] for r in json.loads(one.stdout)] == ["shaped"]
    assert one.stderr.count("warning: ") == 1 and "shaped.json of node 'shaped'" in one.stderr

    assert (files / "garbage.json").read_text() == "not json{"
    assert (files / "shaped.json").read_text() == "[1, 2]"
