"""Paths and answers given in the wrong place: one line, exit 2, nothing on disk touched.

A file where a state folder goes (``.freshness``, ``.freshness/runs``), a working directory or a
file given as ``RUN_DIR``, an ``--answer`` for a node that is not a gate or answers that
conflict, ``evidence --json`` of an unknown node, and the start command ``hub query`` suggests;
``status`` and ``check`` with no RUN_DIR where there is no run.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.processes import cli, cli_without_privilege, one_line_error, waiting_run
from tests.test_cli_run import write

GATE = """digraph review {
  start   [shape=Mdiamond]
  lint    [shape=parallelogram, tool_command="true"]
  approve [shape=hexagon, label="Ship it?"]
  fix     [prompt="fix it"]
  done    [shape=Msquare]
  start -> lint -> approve
  approve -> done [label="[Y] Yes"]
  approve -> fix  [label="[N] No"]
  fix -> approve
}
"""


NOT_STATE = ("driver.lock", "events.jsonl")


@pytest.mark.parametrize("blocker", [".freshness", ".freshness/runs", ".orchestrator"])
@pytest.mark.parametrize("as_json", [False, True])
def test_a_file_where_the_state_folder_goes_is_a_one_line_error(
    tmp_path: Path, blocker: str, as_json: bool
) -> None:
    work = tmp_path / "w"
    (work / blocker).parent.mkdir(parents=True)
    (work / blocker).write_text("precious\n")
    write(work, "p.dot", GATE)
    proc = cli("run", "p.dot", *(["--json"] if as_json else []), cwd=work)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    said = f"{work / blocker} is a file, not a folder"
    if as_json:
        error = json.loads(proc.stdout)
        assert error["kind"] == "NotAFolderError" and said in error["error"]
        assert error["file"] == str(work / blocker)
    else:
        one_line_error(proc, said, "move the file away")
    assert (work / blocker).read_text() == "precious\n"
    assert not (work / ".freshness" / "runs").is_dir()  # refused before the run began


def test_a_working_directory_given_as_the_run_dir_lists_its_runs(tmp_path: Path) -> None:
    work = tmp_path / "w"
    work.mkdir()
    run_dir = waiting_run(work, GATE)
    listed = f"{run_dir.relative_to(tmp_path)} (waiting at gate 'approve')"
    for given in ("w", "w/.freshness", "w/.freshness/runs"):
        for command in (["status"], ["resume"], ["why", given, "approve"], ["evidence"]):
            argv = [*command, given] if len(command) == 1 else command
            proc = cli(*argv, cwd=tmp_path)
            one_line_error(proc, f"{given} holds runs, not one run: pass one of them", listed)
            assert "start the pipeline again" not in proc.stderr
    as_json = cli("status", "w", "--json", cwd=tmp_path)
    assert as_json.returncode == 2
    assert "holds runs, not one run" in json.loads(as_json.stdout)["error"]
    # nothing was resumed: the run still waits at its gate
    assert cli("status", str(run_dir), cwd=tmp_path).returncode == 3


def test_status_and_check_without_run_dir_read_the_newest_run_here(tmp_path: Path) -> None:
    work = tmp_path / "w"
    work.mkdir()
    for command in ("status", "check"):
        one_line_error(cli(command, cwd=work), f"no runs under {work}", "run PIPELINE.dot")
    first = waiting_run(work, GATE)
    status = cli("status", cwd=work)
    assert status.returncode == 3 and status.stderr == ""
    assert status.stdout.startswith(f"run {first.name}: waiting")
    done = cli("run", "p.dot", "--answer", "approve=Y", "--json", cwd=work)
    second = Path(json.loads(done.stdout)["run_dir"])
    for command, code in (("status", 0), ("check", 0)):
        proc = cli(command, cwd=work)
        assert proc.returncode == code, proc.stderr
        assert proc.stderr == (
            f"python -m freshness_magic {command}: reading {second.relative_to(work)}, the "
            f"newest of 2 runs here (others: {first.relative_to(work)} (waiting at gate "
            "'approve'))\n"
        )
    assert cli("status", cwd=work).stdout.startswith(f"run {second.name}: completed")
    as_json = cli("status", "--json", cwd=work)
    assert json.loads(as_json.stdout)["run_dir"] == str(second)


@pytest.mark.parametrize(
    "argv",
    [
        ["run", "p.dot", "--workdir", ""],
        ["run", "p.dot", "--runs-dir", ""],
        ["run", ""],
        ["validate", ""],
        ["status", ""],
        ["resume", "RUN", "--workdir", ""],
        ["hub", "status", "--workdir", ""],
    ],
    ids=lambda argv: " ".join(a or '""' for a in argv),
)
def test_an_empty_path_is_refused_not_taken_for_the_current_folder(
    tmp_path: Path, argv: list[str]
) -> None:
    """``--workdir "$DIR"`` with DIR unset would run the pipeline's commands wherever the shell
    stands; nothing is written and the option is named."""
    run_dir = waiting_run(tmp_path, GATE)
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    proc = cli(*[str(run_dir) if a == "RUN" else a for a in argv], cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    option = next((a for a in argv if a.startswith("--")), None)
    named = f"argument {option}" if option else "argument "
    assert f"{named}" in proc.stderr and "is empty (an unset variable?): give a path" in (
        proc.stderr
    ), proc.stderr
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before


def test_a_file_given_as_the_run_dir_is_named_as_a_file(tmp_path: Path) -> None:
    write(tmp_path, "notes.txt", "precious\n")
    for argv in (["status"], ["resume"], ["evidence"], ["check"]):
        one_line_error(
            cli(*argv, "notes.txt", cwd=tmp_path), "notes.txt is a file, not a run directory"
        )
    assert (tmp_path / "notes.txt").read_text() == "precious\n"


def test_evidence_json_of_an_unknown_node_is_an_error_object(tmp_path: Path) -> None:
    run_dir = waiting_run(tmp_path, GATE)
    proc = cli("evidence", "--json", str(run_dir), "nosuch", cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout
    error = json.loads(proc.stdout)
    assert error["kind"] == "EvidenceError" and "no node 'nosuch'" in error["error"]
    known = cli("evidence", "--json", str(run_dir), "lint", cwd=tmp_path)
    assert known.returncode == 0 and json.loads(known.stdout)[0]["nodeId"] == "lint"


def test_conflicting_answers_for_one_gate_are_refused_before_anything_runs(
    tmp_path: Path,
) -> None:
    run_dir = waiting_run(tmp_path, GATE)
    before = (run_dir / "events.jsonl").read_text().splitlines()
    answers = ["--answer", "approve=Y", "--answer", "approve=N"]
    proc = cli("resume", str(run_dir), *answers, cwd=tmp_path)
    one_line_error(proc, "--answer approve=Y and --answer approve=N conflict")
    after = (run_dir / "events.jsonl").read_text().splitlines()
    assert after[: len(before)] == before
    assert [json.loads(e)["type"] for e in after[len(before) :]] == ["pipeline_resumed"]
    assert cli("status", str(run_dir), cwd=tmp_path).returncode == 3
    # answers for later visits are fine: N goes through fix back to approve, then Y
    in_order = ["--answer", "approve=N", "--answer", "approve=Y"]
    again = cli("resume", str(run_dir), *in_order, cwd=tmp_path)
    assert again.returncode == 0, again.stderr


def test_an_answer_for_a_node_that_is_not_a_gate_is_refused(tmp_path: Path) -> None:
    write(tmp_path, "p.dot", GATE)
    one_line_error(
        cli("run", "p.dot", "--answer", "lint=Y", cwd=tmp_path),
        "--answer lint=Y: 'lint' is not a human gate",
        "approve",
    )
    one_line_error(
        cli("run", "p.dot", "--answer", "aprove=Y", cwd=tmp_path), "did you mean 'approve'?"
    )
    assert not (tmp_path / ".freshness").exists()  # refused before the run began


def test_an_answer_for_a_gate_never_reached_is_a_warning_after_work(tmp_path: Path) -> None:
    run_dir = waiting_run(tmp_path, GATE)
    # N is taken, then the run stops before fix (--to): Y, for the next visit, is not used
    answers = ["--answer", "approve=N", "--answer", "approve=Y"]
    proc = cli("resume", str(run_dir), *answers, "--to", "fix", cwd=tmp_path)
    assert proc.returncode == 3, proc.stderr  # paused before fix, as asked: not a usage error
    assert "warning: --answer approve=Y not used" in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize("way", ["script", "module"])
def test_no_hub_says_the_start_command_as_this_one_was_called(tmp_path: Path, way: str) -> None:
    script = Path(sys.executable).with_name("freshness-magic")
    called = [str(script)] if way == "script" else [sys.executable, "-m", "freshness_magic"]
    name = "freshness-magic" if way == "script" else "python -m freshness_magic"
    proc = subprocess.run(
        [*called, "hub", "query", "x.py"], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    one_line_error(proc, f"no hub running for {tmp_path}; start it with `{name} hub start`")


def test_a_run_of_a_moved_project_is_refused_until_told_where_it_is(tmp_path: Path) -> None:
    """After the project folder moved, resume recreated the old folder, empty, and ran the
    pipeline's tools there."""
    old, new = tmp_path / "old", tmp_path / "new"
    old.mkdir()
    run_dir = waiting_run(old, GATE)
    old.rename(new)
    moved = new / run_dir.relative_to(old)
    before = {p: p.read_bytes() for p in moved.rglob("*") if p.is_file()}
    refused = cli("resume", str(moved), "--answer", "approve=Y", cwd=tmp_path)
    one_line_error(
        refused,
        f"the run's working directory {old} is not there (moved or deleted?); nothing was run "
        f"or written; if the project moved to {new}, resume with --workdir {new}",
    )
    assert not old.exists()
    assert {p: p.read_bytes() for p in moved.rglob("*") if p.is_file()} == before
    done = cli("resume", str(moved), "--answer", "approve=Y", "--workdir", str(new), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert not old.exists()


def test_reading_a_run_of_a_moved_project_says_so_and_makes_no_folder(tmp_path: Path) -> None:
    """A trial: ``status`` (also ``why``, ``check``) of a moved project's run made the old folder
    again, blamed the inputs ("stale: lint"), and so let a resume run the tools in the empty
    folder."""
    old, new = tmp_path / "old", tmp_path / "new"
    (old / "src").mkdir(parents=True)
    write(old, "src/a.py", "x = 1\n")
    tracked = GATE.replace(
        'tool_command="true"', 'tool_command="true", source_files="src/*.py", freshness="warn"'
    )
    run_dir = waiting_run(old, tracked)
    old.rename(new)
    moved = new / run_dir.relative_to(old)
    gone = f"{moved}: the run's working directory {old} is not there (moved or deleted?); "
    status = cli("status", str(moved), cwd=tmp_path)
    assert status.returncode == 3, status.stderr
    assert "(stale)" not in status.stdout
    assert status.stdout.splitlines()[-1] == (
        f"note: {gone}if the project moved to {new}, resume with --workdir {new} (workdir= in "
        "Python); its inputs were not checked"
    )
    assert json.loads(cli("status", str(moved), "--json", cwd=tmp_path).stdout)[
        "workdir_missing"
    ].startswith(gone)
    why = cli("why", str(moved), "lint", cwd=tmp_path)
    assert why.returncode == 0 and why.stdout.startswith("lint: succeeded"), why.stdout
    one_line_error(cli("check", str(moved), cwd=tmp_path), gone)
    assert not old.exists()
    refused = cli("resume", str(moved), "--answer", "approve=Y", cwd=tmp_path)
    one_line_error(refused, "is not there (moved or deleted?); nothing was run or written")
    assert not old.exists()


def test_a_folder_the_user_may_not_write_is_one_line_that_names_it(tmp_path: Path) -> None:
    """A trial: a read-only working directory, a run directory made read-only and an unreadable
    event log each ended in a 30-line PermissionError traceback (with ``--json``: nothing on
    stdout)."""
    work = tmp_path / "w"
    work.mkdir()
    write(work, "p.dot", GATE)
    work.chmod(0o555)
    try:
        refused = cli_without_privilege("run", "p.dot", cwd=work)
        one_line_error(refused, f"permission denied ({work / '.freshness'}): give your user access")
        as_json = json.loads(cli_without_privilege("run", "p.dot", "--json", cwd=work).stdout)
        assert as_json["kind"] == "FileAccessError" and as_json["file"] == str(work / ".freshness")
    finally:
        work.chmod(0o755)
    run_dir = waiting_run(work, GATE)
    events = run_dir / "events.jsonl"
    events.chmod(0)
    try:
        one_line_error(
            cli_without_privilege("why", str(run_dir), "approve", cwd=work),
            f"permission denied ({events})",
        )
    finally:
        events.chmod(0o644)

    def saved() -> dict[Path, bytes]:
        """The run's state; the lock file says who held it last, the event log what was tried."""
        kept = (p for p in run_dir.rglob("*") if p.is_file() and p.name not in NOT_STATE)
        return {p: p.read_bytes() for p in kept}

    before = saved()
    for folder in (run_dir, *(p for p in run_dir.rglob("*") if p.is_dir())):
        folder.chmod(0o555)
    try:
        refused = cli_without_privilege("resume", str(run_dir), "--answer", "approve=Y", cwd=work)
        one_line_error(refused, f"permission denied ({run_dir}", "): give your user access")
    finally:
        for folder in (run_dir, *(p for p in run_dir.rglob("*") if p.is_dir())):
            folder.chmod(0o755)
    assert saved() == before
    done = cli("resume", str(run_dir), "--answer", "approve=Y", cwd=work)
    assert done.returncode == 0, done.stderr
