"""``python -m freshness_magic run|resume|status`` as a user runs them (subprocesses)."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.pipelines import (
    BLOCKED_BY_OWN_EDIT,
    GATED_CHILD,
    managing,
    one_gate,
    one_step,
    one_tool,
    rework_loop,
)
from tests.processes import cli

REPO = Path(__file__).resolve().parents[1]

REVIEW = rework_loop('prompt="Summarise the change for $goal"', goal="Ship the login fix")

FAILING = one_tool("exit 7", node="boom", name="bad")


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_run_waits_at_gate_with_exit_3_and_json_shape(tmp_path: Path) -> None:
    dot = write(tmp_path, "review.dot", REVIEW)
    (tmp_path / "w").mkdir()
    proc = cli("run", str(dot), "--workdir", str(tmp_path / "w"), "--json", cwd=tmp_path)
    assert proc.returncode == 3, proc.stderr
    data = json.loads(proc.stdout)
    assert set(data) == {
        "status",
        "run_dir",
        "completed_nodes",
        "node_outcomes",
        "next_node",
        "pending_gate",
        "context",
        "failure_reason",
        "failed_node",
        "dead_end",
        "interrupted_node",
        "restarts",
        "summary",
    }
    assert data["status"] == "waiting"
    assert data["completed_nodes"] == ["start", "draft"]
    assert data["node_outcomes"]["draft"] == {
        "status": "success",
        "notes": "Stage completed: draft",
        "failure_reason": "",
    }
    assert data["next_node"] == "approve"
    gate = data["pending_gate"]
    assert gate["node"] == "approve" and gate["question"] == "Ship it?"
    assert [c["key"] for c in gate["choices"]] == ["Y", "N"]
    assert data["context"]["graph.goal"] == "Ship the login fix"
    run_dir = Path(data["run_dir"])
    assert run_dir.parent == (tmp_path / "w" / ".freshness" / "runs").resolve()


def test_run_with_answers_completes_with_exit_0_and_progress_lines(tmp_path: Path) -> None:
    dot = write(tmp_path, "review.dot", REVIEW)
    proc = cli(
        "run",
        str(dot),
        "--workdir",
        str(tmp_path),
        "--answer",
        "approve=N",
        "--answer",
        "approve=[Y] Yes",
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    progress = [line.split()[1] for line in lines if line.startswith("  ok")]
    assert progress == ["start", "draft", "approve", "draft", "approve", "done"]
    assert lines[-1].startswith("completed: 6 node runs; run dir ")


def test_auto_approve_takes_the_first_choice(tmp_path: Path) -> None:
    dot = write(tmp_path, "review.dot", REVIEW)
    proc = cli(
        "run", str(dot), "--workdir", str(tmp_path), "--auto-approve", "--json", cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["completed_nodes"] == ["start", "draft", "approve", "done"]
    assert data["context"]["human.gate.selected"] == "Y"


def test_to_a_node_the_run_never_reached_is_noted(tmp_path: Path) -> None:
    """It ended with exit 0 and no word that --to did nothing."""
    dot = write(
        tmp_path,
        "p.dot",
        """digraph p {
  start [shape=Mdiamond]
  a [shape=parallelogram, tool_command="true"]
  redo [shape=parallelogram, tool_command="true"]
  done [shape=Msquare]
  start -> a
  a -> done [condition="outcome=success"]
  a -> redo [condition="outcome=fail"]
  redo -> a
}
""",
    )
    proc = cli("run", str(dot), "--to", "redo", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.splitlines()[-1] == "note: the run completed without reaching 'redo' (--to)"


def test_a_loop_restart_is_a_line_and_the_summary_counts_since_the_last(tmp_path: Path) -> None:
    """Nothing said the run moved to a fresh run directory, and the summary's "3 node runs"
    left out the five before the restarts."""
    dot = write(
        tmp_path,
        "loop.dot",
        """digraph loop {
  start [shape=Mdiamond]
  step [shape=parallelogram, tool_command="echo x >> n; wc -l < n"]
  check [shape=diamond]
  done [shape=Msquare]
  start -> step -> check
  check -> step [condition="context.tool.output!=3", loop_restart=true]
  check -> done [condition="context.tool.output=3"]
}
""",
    )
    proc = cli("run", str(dot), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    restarts = [line for line in proc.stdout.splitlines() if line.startswith("  restart ")]
    assert len(restarts) == 2
    assert re.fullmatch(
        r"  restart step +loop_restart: the run goes on at step in a fresh run directory, "
        r"\S+-r1",
        restarts[0],
    ), restarts
    last = proc.stdout.splitlines()[-1]
    assert last.startswith("completed: 3 node runs since its last loop_restart (2 in all); ")
    assert last.endswith("-r2")


def test_to_pauses_with_exit_3_then_resume_and_status(tmp_path: Path) -> None:
    dot = write(tmp_path, "review.dot", REVIEW)
    runs = tmp_path / "runs"
    proc = cli("run", str(dot), "--runs-dir", str(runs), "--to", "draft", "--json", cwd=tmp_path)
    assert proc.returncode == 3, proc.stderr
    data = json.loads(proc.stdout)
    assert (data["status"], data["next_node"], data["completed_nodes"]) == (
        "paused",
        "draft",
        ["start"],
    )
    run_dir = data["run_dir"]
    assert Path(run_dir).parent == runs.resolve()

    status = cli("status", run_dir, cwd=tmp_path)
    assert status.returncode == 3
    assert "paused" in status.stdout.splitlines()[0]
    assert "next node: draft" in status.stdout

    resumed = cli("resume", run_dir, cwd=tmp_path)
    assert resumed.returncode == 3
    assert "waiting at gate 'approve': Ship it?" in resumed.stdout
    assert "[Y] Yes -> done" in resumed.stdout
    assert f"resume {run_dir} --answer approve=Y" in resumed.stdout

    bad = cli("resume", run_dir, "--answer", "approve=maybe", cwd=tmp_path)
    assert bad.returncode == 2
    assert "'maybe' is not a choice of gate 'approve'" in bad.stderr
    assert "Traceback" not in bad.stderr

    done = cli("resume", run_dir, "--answer", "approve=done", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["completed_nodes"] == ["start", "draft", "approve", "done"]

    final = cli("status", run_dir, "--json", cwd=tmp_path)
    assert final.returncode == 0
    info = json.loads(final.stdout)
    assert info["status"] == "completed"
    nodes = info.pop("nodes")  # each node's view state: status's own
    assert {n: v["state"] for n, v in nodes.items()} == {
        "start": "succeeded",
        "draft": "succeeded",
        "approve": "succeeded",
        "done": "succeeded",
    }
    assert info == json.loads(done.stdout)


def test_failed_run_exits_1_with_reason(tmp_path: Path) -> None:
    dot = write(tmp_path, "bad.dot", FAILING)
    proc = cli("run", str(dot), "--workdir", str(tmp_path), cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    assert "FAIL" in proc.stdout
    lines = proc.stdout.splitlines()
    assert lines[-3].startswith("failed at 'boom': node 'boom' failed (")
    assert lines[-1].endswith("--retry")
    data = json.loads(
        cli("run", str(dot), "--workdir", str(tmp_path), "--json", cwd=tmp_path).stdout
    )
    assert data["status"] == "failed"
    assert data["failed_node"] == "boom"
    assert data["node_outcomes"]["boom"]["status"] == "fail"
    assert "7" in data["node_outcomes"]["boom"]["failure_reason"]
    assert data["failure_reason"].startswith("node 'boom' failed")


@pytest.mark.parametrize("way", ["script", "module"])
def test_hints_and_usage_name_the_command_as_it_was_called(tmp_path: Path, way: str) -> None:
    """Without the venv on PATH a user runs ``python -m freshness_magic``: the commands it
    suggests must work as typed, so they are worded the way this run was started."""
    dot = write(tmp_path, "bad.dot", FAILING)
    script = Path(sys.executable).with_name("freshness-magic")
    assert script.exists(), "make setup installs the freshness-magic script into the venv"
    called = [str(script)] if way == "script" else [sys.executable, "-m", "freshness_magic"]
    name = "freshness-magic" if way == "script" else "python -m freshness_magic"

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*called, *args], cwd=tmp_path, capture_output=True, text=True, timeout=120
        )

    failed = run("run", str(dot), "--workdir", str(tmp_path))
    assert failed.returncode == 1, failed.stderr
    run_dir = next((tmp_path / ".freshness" / "runs").iterdir())
    assert failed.stdout.splitlines()[-1] == f"retry with: {name} resume {run_dir} --retry"
    usage = run("run")
    assert usage.returncode == 2 and usage.stderr.startswith(f"usage: {name} run "), usage.stderr
    assert run("--version").stdout.startswith("freshness-magic ")
    assert run("-h").stdout.startswith(f"usage: {name} ")


def test_retry_of_a_run_that_did_not_fail_names_the_command_s_option(tmp_path: Path) -> None:
    """The engine's advice names its Python call (``retry(node_id)``); the command says its own."""
    dot = write(tmp_path, "review.dot", REVIEW)
    paused = cli(
        "run", str(dot), "--workdir", str(tmp_path), "--to", "approve", "--json", cwd=tmp_path
    )
    run_dir = json.loads(paused.stdout)["run_dir"]
    retried = cli("resume", run_dir, "--retry", cwd=tmp_path)
    assert retried.returncode == 2 and "Traceback" not in retried.stderr
    assert retried.stderr.strip() == (
        "python -m freshness_magic resume: nothing to retry: the run is paused, not failed; "
        f"name the node to run again (python -m freshness_magic resume {run_dir} --retry NODE)"
    )


def test_resume_says_when_the_pipeline_file_changed_since_the_run_started(tmp_path: Path) -> None:
    """A user who fixed the file and retries must learn that the run keeps its own copy."""
    dot = write(tmp_path, "fail.dot", FAILING)
    data = json.loads(
        cli("run", str(dot), "--workdir", str(tmp_path), "--json", cwd=tmp_path).stdout
    )
    unchanged = cli("resume", data["run_dir"], "--retry", cwd=tmp_path)
    assert "has changed" not in unchanged.stderr
    dot.write_text(FAILING.replace('"exit 7"', '"true"'))
    retried = cli("resume", data["run_dir"], "--retry", cwd=tmp_path)
    assert retried.returncode == 1  # the run's own copy still exits 7
    assert (
        f"note: {dot} has changed since this run started; the run goes on with the pipeline it "
        f"started with ({data['run_dir']}/pipeline.dot). To run the changed file, start a new "
        f"run: python -m freshness_magic run {dot}"
    ) in retried.stderr.splitlines()


def test_an_answer_that_is_no_choice_of_its_gate_is_refused_before_anything_runs(
    tmp_path: Path,
) -> None:
    dot = write(tmp_path, "review.dot", REVIEW)
    refused = cli(
        "run", str(dot), "--workdir", str(tmp_path), "--answer", "approve=X", cwd=tmp_path
    )
    assert refused.returncode == 2 and refused.stdout == ""
    assert refused.stderr.strip() == (
        "python -m freshness_magic run: --answer approve=X: 'X' is not a choice of gate 'approve'; "
        "answer with a key, label or target id of one of: Y ([Y] Yes -> done), N ([N] No, redo -> "
        "draft)"
    )
    assert not (tmp_path / ".freshness" / "runs").exists()
    done = cli("run", str(dot), "--workdir", str(tmp_path), "--answer", "approve=yes", cwd=tmp_path)
    assert done.returncode == 0, done.stderr


def test_a_run_directory_that_does_not_exist_and_a_node_that_is_not_there_are_named(
    tmp_path: Path,
) -> None:
    missing = tmp_path / "nowhere"
    for command in ("status", "resume", "evidence"):
        result = cli(command, str(missing), cwd=tmp_path)
        assert result.returncode == 2 and "Traceback" not in result.stderr
        assert "does not exist" in result.stderr or "no such directory" in result.stderr
    assert cli("status", str(missing), cwd=tmp_path).stderr.strip() == (
        f"python -m freshness_magic status: {missing}: no such directory; a run directory is "
        ".freshness/runs/<run_id> under the working directory the run used"
    )
    dot = write(tmp_path, "review.dot", REVIEW)
    done = cli(
        "run", str(dot), "--workdir", str(tmp_path), "--auto-approve", "--json", cwd=tmp_path
    )
    run_dir = json.loads(done.stdout)["run_dir"]
    typo = cli("evidence", run_dir, "drat", cwd=tmp_path)
    assert typo.returncode == 2
    assert typo.stderr.strip() == (
        "python -m freshness_magic evidence: no node 'drat' (did you mean 'draft'?)"
    )
    assert cli("evidence", run_dir, "draft", cwd=tmp_path).returncode == 0


def test_status_keeps_each_node_on_one_row(tmp_path: Path) -> None:
    """A reason with a stderr tail takes one row of the status table, saying what is left out."""
    dot = write(
        tmp_path, "tail.dot", FAILING.replace('"exit 7"', '"echo a >&2; echo b >&2; exit 7"')
    )
    data = json.loads(
        cli("run", str(dot), "--workdir", str(tmp_path), "--json", cwd=tmp_path).stdout
    )
    status = cli("status", data["run_dir"], cwd=tmp_path).stdout.splitlines()
    (row,) = [line for line in status if line.split()[:2] == ["fail", "boom"]]
    assert row.endswith(
        "exit code 7: echo a >&2; echo b >&2; exit 7 (+3 more lines in status --json)"
    )
    assert status[status.index(row) + 1].startswith("failed at 'boom': node 'boom' failed")
    from freshness_magic.commands.status import _first_line

    assert _first_line("exit code 1\nstderr: x") == "exit code 1 (+1 more line in status --json)"


def test_usage_and_input_errors_exit_2(tmp_path: Path) -> None:
    broken = write(tmp_path, "broken.dot", "digraph g {\n  start [shape=Mdiamond]\n  a -- b\n}\n")
    proc = cli("run", str(broken), cwd=tmp_path)
    assert proc.returncode == 2
    assert f"{broken}:3:5:" in proc.stderr
    assert "Traceback" not in proc.stderr

    invalid = write(
        tmp_path, "invalid.dot", "digraph g { a [prompt=x] done [shape=Msquare] a -> done }"
    )
    proc = cli("run", str(invalid), cwd=tmp_path)
    assert proc.returncode == 2
    assert "start" in proc.stderr

    review = write(tmp_path, "review.dot", REVIEW)
    proc = cli("run", str(review), "--answer", "approve", cwd=tmp_path)
    assert proc.returncode == 2
    assert "expected NODE=CHOICE" in proc.stderr
    proc = cli("run", str(review), "--answer", "nosuch=Y", cwd=tmp_path)
    assert proc.returncode == 2
    assert "--answer names node 'nosuch'" in proc.stderr
    proc = cli("run", str(review), "--to", "nosuch", cwd=tmp_path)
    assert proc.returncode == 2
    proc = cli("status", str(tmp_path), cwd=tmp_path)
    assert proc.returncode == 2
    assert "no usable checkpoint" in proc.stderr
    proc = cli("run", str(tmp_path / "missing.dot"), cwd=tmp_path)
    assert proc.returncode == 2


def started(tmp_path: Path, *args: str) -> subprocess.Popen[str]:
    """``python -m freshness_magic ARGS`` in ``tmp_path``, returned once its tool (or agent)
    has written its process group id into ``pgid.txt``."""
    from tests.waiting import wait_until

    process = subprocess.Popen(
        [sys.executable, "-m", "freshness_magic", *args],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    pgid_file = tmp_path / "pgid.txt"
    wait_until(lambda: pgid_file.exists() and pgid_file.read_text().strip(), "the tool started")
    return process


SLOW = one_tool("echo $$ > pgid.txt; exec sleep 60", node="wait", name="slow")


@pytest.mark.parametrize("signame", ["SIGTERM", "SIGHUP"])
def test_a_stop_signal_stops_the_tool_and_leaves_the_run_resumable(
    tmp_path: Path, signame: str
) -> None:
    """`status` names the process driving a run while it runs. SIGTERM (what `timeout`,
    systemd and CI send) and SIGHUP (a closed terminal) are handled as Ctrl-C is: the running
    tool's process group is stopped, the run pauses, and `resume` would run the node again."""
    import signal

    from tests.processes import group_alive

    dot = write(tmp_path, "slow.dot", SLOW)
    process = started(tmp_path, "run", str(dot), "--workdir", str(tmp_path))
    pgid_file = tmp_path / "pgid.txt"
    run_dir = next((tmp_path / ".freshness" / "runs").iterdir())
    during = cli("status", str(run_dir), cwd=tmp_path)
    first = during.stdout.splitlines()[0]
    assert f"driven now by pid {process.pid} (freshness-magic, since " in first, during.stdout
    assert ", running wait); its last checkpoint says paused" in during.stdout.splitlines()[0]
    assert (
        json.loads(cli("status", str(run_dir), "--json", cwd=tmp_path).stdout)["driver"]["pid"]
        == process.pid
    )
    process.send_signal(getattr(signal, signame))
    out, err = process.communicate(timeout=60)
    assert process.returncode == 3, out + err  # paused, resumable
    assert "Traceback" not in err
    said = {"SIGTERM": "SIGTERM", "SIGHUP": "the terminal hung up"}[signame]
    assert f"stopped by {said}: the running node was interrupted" in out
    assert not group_alive(int(pgid_file.read_text()))
    status = cli("status", str(run_dir), "--json", cwd=tmp_path)
    info = json.loads(status.stdout)
    assert (info["status"], info["next_node"]) == ("paused", "wait"), info
    assert "driver" not in info  # nobody drives it now


OUTLIVES = one_tool(
    "sleep 120 & echo $! > child.txt; echo $$ > pgid.txt; wait",
    node="wait",
    name="outlives",
    more='timeout="300s"',
)


@pytest.mark.parametrize("signame", ["SIGTERM", "SIGINT"])
def test_a_stop_signal_stops_a_tools_children_when_the_node_has_a_timeout(
    tmp_path: Path, signame: str
) -> None:
    """A node with a timeout runs its handler on a worker thread; SIGTERM stops its process
    group (the child the command started in the background too) before the command exits, as
    Ctrl-C does, instead of leaving the child running."""
    import signal

    from freshness_magic.engine.runlock import pid_alive
    from tests.processes import group_alive
    from tests.waiting import wait_until

    dot = write(tmp_path, "outlives.dot", OUTLIVES)
    process = started(tmp_path, "run", str(dot), "--workdir", str(tmp_path))
    child_file = tmp_path / "child.txt"
    wait_until(lambda: child_file.exists() and child_file.read_text().strip(), "child started")
    run_dir = next((tmp_path / ".freshness" / "runs").iterdir())
    wait_until((run_dir / "nodes" / "wait" / "pgid").exists, "the tool's group id recorded")
    child = int(child_file.read_text())
    process.send_signal(getattr(signal, signame))
    out, err = process.communicate(timeout=60)
    assert process.returncode == 3, out + err
    assert "the running node was interrupted" in out
    assert not group_alive(int((tmp_path / "pgid.txt").read_text()))
    wait_until(lambda: not pid_alive(child), "the background child reaped")  # not a zombie


AGENT = one_step('prompt="plan it"', node="plan", name="agent")


@pytest.mark.parametrize("signame", ["SIGINT", "SIGTERM"])
def test_a_stop_signal_stops_a_command_backends_agent(tmp_path: Path, signame: str) -> None:
    """A new-user trial: after Ctrl-C the agent of a `command:` backend ran on, and a resume
    started a second one beside it, both writing the work tree. Now it is stopped as a tool is."""
    import signal

    from tests.processes import group_alive
    from tests.waiting import wait_until

    dot = write(tmp_path, "agent.dot", AGENT)
    agent = "command:echo $$ > pgid.txt; sleep 60; echo late >> agent.txt"
    process = started(tmp_path, "run", str(dot), "--backend", agent)
    pgid_file = tmp_path / "pgid.txt"
    process.send_signal(getattr(signal, signame))
    out, err = process.communicate(timeout=60)
    assert process.returncode == 3, out + err
    assert "the running node was interrupted" in out and "Traceback" not in err
    pgid = int(pgid_file.read_text())
    wait_until(lambda: not group_alive(pgid), "the agent's process group to end", timeout=10)


LOOP = """digraph loop {
  start [shape=Mdiamond]
  a [shape=parallelogram, tool_command="true"]
  b [shape=parallelogram, tool_command="true"]
  done [shape=Msquare]
  start -> a -> b
  b -> a [condition="outcome=success"]
  b -> done [condition="outcome=fail"]
}
"""


def _blocked_writing_a_pipe(pid: int) -> bool:
    """Whether the main thread of ``pid`` sleeps in a pipe write (Linux's ``wchan``)."""
    return "pipe_write" in Path(f"/proc/{pid}/wchan").read_text()


@pytest.mark.parametrize("signame", ["SIGINT", "SIGTERM"])
def test_a_stop_signal_between_nodes_pauses_the_run_with_the_resume_hint(
    tmp_path: Path, signame: str
) -> None:
    """A signal that lands between nodes (here: while a progress line waits for a full output
    pipe, after one node finished and before the next starts) pauses the run as one during a
    node does: exit 3, the `continue with:` hint, and `resume` goes on from the checkpoint."""
    import fcntl
    import signal

    from tests.waiting import wait_until

    dot = write(tmp_path, "loop.dot", LOOP)
    reader, writer = os.pipe()  # not read until the signal: the progress lines fill it
    fcntl.fcntl(writer, fcntl.F_SETPIPE_SZ, 4096)  # after some 60 lines, not 900
    process = subprocess.Popen(
        [sys.executable, "-m", "freshness_magic", "run", str(dot), "--workdir", str(tmp_path)],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        stdout=writer,
        stderr=subprocess.PIPE,
        text=True,
    )
    os.close(writer)
    try:
        wait_until(
            lambda: _blocked_writing_a_pipe(process.pid), "progress output blocked", timeout=90
        )
        process.send_signal(getattr(signal, signame))
        with os.fdopen(reader) as output:
            out = output.read()
        err = process.communicate(timeout=60)[1]
    finally:
        process.kill()
    assert process.returncode == 3, err
    assert "Traceback" not in err and "interrupted" not in err, err
    said = {"SIGINT": "Ctrl-C", "SIGTERM": "SIGTERM"}[signame]
    assert f"stopped by {said}: the run paused between nodes, at its last checkpoint" in out
    run_dir = next((tmp_path / ".freshness" / "runs").iterdir())
    assert out.splitlines()[-1] == f"continue with: python -m freshness_magic resume {run_dir}", out
    info = json.loads(cli("status", str(run_dir), "--json", cwd=tmp_path).stdout)
    assert info["status"] == "paused" and "driver" not in info, info
    following = {"a": "b", "b": "a"}[info["next_node"]]
    again = cli("resume", str(run_dir), "--to", following, cwd=tmp_path)
    assert again.returncode == 3, again.stderr
    assert f"paused before '{following}'" in again.stdout


def test_run_prints_the_pipelines_warnings_before_it_starts(tmp_path: Path) -> None:
    """Warnings (not notes) go to stderr, as `validate` prints them; the run still goes ahead
    and `--json` keeps stdout one JSON document."""
    dot = write(
        tmp_path,
        "warn.dot",
        """digraph w {
  start [shape=Mdiamond]
  a [shape=parallelogram, tool_command="true"]
  done [shape=Msquare]
  start -> a
  a -> done [condition="outcome=succes"]
  a -> done
}
""",
    )
    for extra in ([], ["--json"]):
        proc = cli("run", str(dot), "--workdir", str(tmp_path), *extra, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        assert (
            f"{dot}:6:14: warning condition_values: edge a -> done: `outcome=succes` can never "
            "hold" in proc.stderr
        )
        assert f"{dot}: 1 warning(s); running anyway" in proc.stderr
        if extra:
            assert json.loads(proc.stdout)["status"] == "completed"


def test_progress_says_when_a_node_runs_or_is_held_with_changed_inputs(tmp_path: Path) -> None:
    (tmp_path / "in.txt").write_text("1\n")
    dot = write(
        tmp_path,
        "s.dot",
        """digraph s {
  start [shape=Mdiamond]
  touch [shape=parallelogram, tool_command="echo 2 >> in.txt"]
  use   [shape=parallelogram, tool_command="true", source_files="in.txt", freshness=warn]
  hold  [shape=parallelogram, tool_command="true", source_files="in.txt", freshness=block,
         max_retries=2]
  done  [shape=Msquare]
  start -> touch -> use -> hold -> done
}
""",
    )
    proc = cli("run", str(dot), "--workdir", str(tmp_path), cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    stale = [line.split() for line in proc.stdout.splitlines() if line.split()[:1] == ["stale"]]
    assert [" ".join(words[1:]) for words in stale] == [
        "use inputs changed since its baseline: in.txt; ran anyway (freshness=warn)",
        "hold inputs changed since its baseline: in.txt; held back (freshness=block): accept "
        "the change or restore the files",
    ]  # once, although each of the block's three attempts checked the inputs
    retries = [line.split()[1:3] for line in proc.stdout.splitlines() if line.startswith("  retry")]
    assert retries == [["hold", "attempt"]] * 2


def test_a_block_failure_says_so_and_its_hint_is_the_command_that_goes_on(tmp_path: Path) -> None:
    """A node `freshness=block` held back did not run: the progress line and the summary say it
    was blocked by changed inputs (not "max retries exceeded"), and the printed command, run
    as printed, accepts the change and goes on; a bare `--retry` would be blocked again."""
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "input.txt").write_text("one\n")
    dot = write(tmp_path, "blk.dot", BLOCKED_BY_OWN_EDIT)
    proc = cli("run", str(dot), "--workdir", str(tmp_path), cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    run_dir = next((tmp_path / ".freshness" / "runs").iterdir())
    lines = proc.stdout.splitlines()
    fail = next(line.split(None, 2) for line in lines if line.startswith("  FAIL"))
    assert fail[1] == "prep"
    assert fail[2].endswith("blocked by changed inputs (freshness=block): data/input.txt")
    assert "max retries" not in proc.stdout
    assert (
        "failed at 'prep': blocked by changed inputs (freshness=block): data/input.txt; "
        "the node did not run"
    ) in lines
    hint = "accept the change and retry with: "
    command = next(line for line in lines if line.startswith(hint))[len(hint) :]
    command = command.split(" (or restore")[0]
    assert command == f"python -m freshness_magic resume {run_dir} --accept prep --retry"

    again = cli("resume", str(run_dir), "--retry", cwd=tmp_path)  # the change is not accepted
    assert again.returncode == 1 and "blocked by changed inputs" in again.stdout, again.stdout

    words = command.split()
    assert words[:3] == ["python", "-m", "freshness_magic"]
    done = cli(*words[3:], cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "  ok      prep" in done.stdout
    assert done.stdout.splitlines()[-1].startswith("completed:")


@pytest.mark.parametrize("damage", ["changed", "missing"])
def test_resume_with_a_damaged_stored_pipeline_says_what_to_do_on_the_command_line(
    tmp_path: Path, damage: str
) -> None:
    """`status` notes the damage; the engine's advice names its Python API (`graph=`), the CLI
    its own option `--pipeline FILE`; that option resumes the run and puts the copy back."""
    dot = write(tmp_path, "review.dot", REVIEW)
    first = cli("run", str(dot), "--workdir", str(tmp_path), "--json", cwd=tmp_path)
    assert first.returncode == 3, first.stderr
    run_dir = json.loads(first.stdout)["run_dir"]
    stored = Path(run_dir) / "pipeline.dot"
    if damage == "changed":
        stored.write_text(REVIEW.replace("Ship it?", "Ship?"))
    else:
        stored.unlink()

    shown = cli("status", run_dir, cwd=tmp_path)
    assert shown.returncode == 3, shown.stderr
    note = shown.stdout.splitlines()[-1]
    assert note.startswith(f"note: {'cannot read' if damage == 'missing' else 'the stored'}")
    assert note.endswith(
        f"resume and why need the file the run was started with: python -m freshness_magic "
        f"resume {run_dir} --pipeline FILE (or copy it over {run_dir}/pipeline.dot)"
    ), note
    told = json.loads(cli("status", run_dir, "--json", cwd=tmp_path).stdout)
    assert str(stored) in told["stored_pipeline_problem"]

    refused = cli("resume", run_dir, "--answer", "approve=Y", cwd=tmp_path)
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    [line] = refused.stderr.splitlines()
    assert "graph=" not in line
    assert line.endswith(
        f"give the pipeline file the run was started with: python -m freshness_magic resume "
        f"{run_dir} "
        f"--pipeline FILE (or copy that file over {run_dir}/pipeline.dot)"
    ), line

    other = write(tmp_path, "other.dot", REVIEW.replace("Ship it?", "Ship?"))
    wrong = cli("resume", run_dir, "--pipeline", str(other), cwd=tmp_path)
    assert wrong.returncode == 2 and "belongs to another pipeline" in wrong.stderr

    done = cli("resume", run_dir, "--pipeline", str(dot), "--answer", "approve=Y", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1].startswith("completed:")
    # the run's copy is put back from the file given, the altered one kept, and said so
    assert stored.read_text() == REVIEW
    kept = Path(run_dir) / "pipeline.dot.damaged"
    assert kept.exists() == (damage == "changed")
    if damage == "changed":
        assert "Ship?" in kept.read_text()
    assert f"put back the run's copy of its pipeline, {stored}, from the pipeline given" in (
        done.stderr
    )
    assert "stored_pipeline_problem" not in cli("status", run_dir, "--json", cwd=tmp_path).stdout
    assert cli("why", run_dir, "approve", cwd=tmp_path).returncode == 0


def test_a_stored_pipeline_copied_back_resumes(tmp_path: Path) -> None:
    dot = write(tmp_path, "review.dot", REVIEW)
    run_dir = json.loads(
        cli("run", str(dot), "--workdir", str(tmp_path), "--json", cwd=tmp_path).stdout
    )["run_dir"]
    stored = Path(run_dir) / "pipeline.dot"
    stored.write_text("digraph broken {")
    assert cli("resume", run_dir, cwd=tmp_path).returncode == 2
    stored.write_text(dot.read_text())
    done = cli("resume", run_dir, "--answer", "approve=Y", cwd=tmp_path)
    assert done.returncode == 0, done.stderr


def test_the_backend_line_is_printed_only_when_the_run_goes_ahead(tmp_path: Path) -> None:
    """A usage error (`--to` a node that does not exist, an answer that is no choice) stops
    before any node runs: its one line is all the command prints."""
    dot = write(tmp_path, "review.dot", REVIEW)
    bad_to = cli("run", str(dot), "--workdir", str(tmp_path), "--to", "nosuch", cwd=tmp_path)
    assert bad_to.returncode == 2
    assert bad_to.stdout == ""
    assert bad_to.stderr.startswith("python -m freshness_magic run: run to: no node 'nosuch'")
    first = cli("run", str(dot), "--workdir", str(tmp_path), cwd=tmp_path)
    assert first.returncode == 3
    assert first.stdout.startswith("codergen backend: simulated")  # before the first node
    run_dir = next((tmp_path / ".freshness" / "runs").iterdir())
    bad_answer = cli("resume", str(run_dir), "--answer", "approve=Q", cwd=tmp_path)
    assert bad_answer.returncode == 2
    assert bad_answer.stdout == ""
    assert "'Q' is not a choice of gate 'approve'" in bad_answer.stderr
    answered = cli("resume", str(run_dir), "--answer", "approve=Y", cwd=tmp_path)
    assert answered.returncode == 0
    assert answered.stdout.splitlines()[:2] == [
        "codergen backend: simulated (no model is called; use --backend openai:MODEL, "
        "anthropic:MODEL or command:...)",
        "  ok      approve                     0.00s  Human selected [Y] Yes -> done",
    ]


def test_a_run_remembers_its_pipeline_file_by_its_absolute_path(tmp_path: Path) -> None:
    """Given as a relative path, the pipeline file is stored absolute: ``status`` from another
    folder names it, and a resume from there finds the ``@prompt`` file next to it."""
    project = tmp_path / "project"
    (project / "prompts").mkdir(parents=True)
    (project / "prompts" / "draft.md").write_text("Summarise the change\n")
    write(
        project,
        "review.dot",
        REVIEW.replace('prompt="Summarise the change for $goal"', 'prompt="@prompts/draft.md"'),
    )
    assert cli("run", "review.dot", cwd=project).returncode == 3
    (run_dir,) = (project / ".freshness" / "runs").iterdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    status = cli("status", str(run_dir), cwd=elsewhere)
    assert f"pipeline: {project / 'review.dot'}" in status.stdout.splitlines()
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["pipeline_path"] == str(project / "review.dot")
    again = cli("resume", str(run_dir), "--answer", "approve=N", "--to", "approve", cwd=elsewhere)
    assert again.returncode == 3, again.stderr + again.stdout
    assert "draft" in again.stdout and "prompt" not in again.stderr


def test_a_branch_a_block_held_back_is_named_by_its_fan_out_and_the_summary(
    tmp_path: Path,
) -> None:
    """A fan-out whose branch did not run still goes on (partial success, wait_all): its line
    names the branch and why, and the last line says the run completed only partly."""
    (tmp_path / "params.yaml").write_text("a\n")
    dot = write(
        tmp_path,
        "par.dot",
        """digraph par {
  start [shape=Mdiamond]
  edit  [shape=parallelogram, tool_command="echo b > params.yaml"]
  fan   [shape=component]
  gbm   [shape=parallelogram, tool_command="echo gbm", source_files="params.yaml",
         freshness="block"]
  lr    [shape=parallelogram, tool_command="echo lr"]
  join  [shape=tripleoctagon]
  done  [shape=Msquare]
  start -> edit -> fan
  fan -> gbm
  fan -> lr
  gbm -> join
  lr -> join
  join -> done
}
""",
    )
    proc = cli("run", str(dot), "--workdir", str(tmp_path), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    fan = next(line for line in lines if line.split()[:2] == ["partial", "fan"])
    assert fan.endswith(
        "1 of 2 branches succeeded (wait_all); gbm: stale input: params.yaml; not retried: "
        "max_retries is 0"
    )
    assert lines[-1].startswith("completed (fan: partial success): 7 node runs; run dir ")


CHANGED = """digraph changed {
  start   [shape=Mdiamond]
  lint    [shape=parallelogram, tool_command="cat in.txt", source_files="in.txt", freshness=warn]
  notes   [shape=parallelogram, tool_command="cat notes.txt", source_files="notes.txt",
           freshness=warn]
  approve [shape=hexagon]
  done    [shape=Msquare]
  start -> lint -> approve
  approve -> notes [label="[Y] Yes"]
  approve -> lint  [label="[N] No"]
  notes -> done
}
"""


def test_status_names_nodes_whose_inputs_changed_and_notes_them_at_the_gate(
    tmp_path: Path,
) -> None:
    """Before answering a gate from the CLI, status says which nodes upstream of it have changed
    inputs, as the notebook's status does."""
    dot = write(tmp_path, "changed.dot", CHANGED)
    (tmp_path / "in.txt").write_text("v1\n")
    (tmp_path / "notes.txt").write_text("n1\n")
    data = json.loads(
        cli("run", str(dot), "--workdir", str(tmp_path), "--json", cwd=tmp_path).stdout
    )
    run_dir = data["run_dir"]
    fresh = cli("status", run_dir, cwd=tmp_path)
    assert "stale" not in fresh.stdout and fresh.returncode == 3
    (tmp_path / "in.txt").write_text("v2\n")
    (tmp_path / "notes.txt").write_text("n2\n")
    lines = cli("status", run_dir, cwd=tmp_path).stdout.splitlines()
    check = f"python -m freshness_magic check {run_dir}"
    note = f"note: upstream of approve: lint stale (inputs changed; {check})"
    assert lines[lines.index(note) + 1] == "waiting at gate 'approve': Select an option:"
    assert f"stale: notes (inputs changed; {check})" in lines  # not upstream of the gate
    assert [line.split()[:3] for line in lines if "lint" in line.split()[:3]] == [
        ["success", "(stale)", "lint"]  # its row says it, not only the note
    ]
    as_json = json.loads(cli("status", run_dir, "--json", cwd=tmp_path).stdout)
    assert as_json["stale_nodes"] == ["lint", "notes"]


def test_status_marks_the_nodes_that_read_a_changed_one_outdated(tmp_path: Path) -> None:
    """A recovery trial: the table marked nothing, and the node that ran on the changed node's
    results was named nowhere, while the notebook showed it outdated. A node after it that read
    nothing of it (``done``) is not marked."""
    dot = write(
        tmp_path,
        "after.dot",
        """digraph after {
  start  [shape=Mdiamond]
  lint   [shape=parallelogram, tool_command="cat in.txt", source_files="in.txt", freshness=warn]
  report [prompt="Report on {tool.output}"]
  done   [shape=Msquare]
  start -> lint -> report -> done
}""",
    )
    (tmp_path / "in.txt").write_text("v1\n")
    ran = cli("run", str(dot), "--workdir", str(tmp_path), "--json", cwd=tmp_path)
    run_dir = json.loads(ran.stdout)["run_dir"]
    (tmp_path / "in.txt").write_text("v2\n")
    lines = cli("status", run_dir, cwd=tmp_path).stdout.splitlines()
    rows = {line.split()[2]: line.split()[:2] for line in lines if "(" in line.split()[1]}
    assert rows == {"lint": ["success", "(stale)"], "report": ["success", "(outdated)"]}
    as_json = json.loads(cli("status", run_dir, "--json", cwd=tmp_path).stdout)
    assert as_json["stale_nodes"] == ["lint"]
    assert as_json["outdated_nodes"] == ["report"]  # it read lint's old output
    states = {n: v["state"] for n, v in as_json["nodes"].items()}
    assert states == {
        "start": "succeeded",
        "lint": "stale",
        "report": "outdated",
        "done": "succeeded",
    }
    assert as_json["nodes"]["report"]["why"] == (
        "`report` read `tool.output` of `lint` (step 2), whose input `in.txt` changed"
    )
    table = [re.match(r"  success(?: \(\w+\))? +(\w+)", line) for line in lines]
    assert len([m for m in table if m]) == 4
    assert len({m.start(1) for m in table if m}) == 1  # the labels' column fits the longest


def test_a_child_pipelines_gate_is_answered_through_its_manager_node(tmp_path: Path) -> None:
    """It failed saying to give --auto-approve, which changed nothing, and --answer refused
    both the manager and the child's gate."""
    write(tmp_path, "child.dot", GATED_CHILD)
    write(tmp_path, "p.dot", managing("child.dot"))
    started = cli("run", "p.dot", cwd=tmp_path)
    assert started.returncode == 3, started.stderr
    assert "waiting at gate 'manage': Approve the sprint? (gate 'approve' of the child " in (
        started.stdout
    )
    assert "--answer manage=A" in started.stdout
    wrong = cli("run", "p.dot", "--answer", "approve=R", cwd=tmp_path)
    assert wrong.returncode == 2
    assert wrong.stderr.strip().endswith(
        "gates: (none); a child pipeline's gate is answered by its manager node: manage"
    )
    run_dir = started.stdout.rsplit("resume ", 1)[1].split()[0]
    answered = cli("resume", run_dir, "--answer", "manage=R", cwd=tmp_path)
    assert answered.returncode == 0, answered.stdout + answered.stderr
    assert (tmp_path / "verdict.txt").read_text() == "rejected\n"
    auto = cli("run", "p.dot", "--auto-approve", cwd=tmp_path)
    assert auto.returncode == 0, auto.stdout + auto.stderr
    assert (tmp_path / "verdict.txt").read_text() == "approved\n"


def test_a_multi_line_tool_command_is_quoted_on_one_line_with_its_error(tmp_path: Path) -> None:
    """The progress line ended at the script's first line (`python3 -c "`), and the summary
    printed the whole script before the error."""
    script = "python3 -c \"\nimport sys\nprint('checking')\nsys.exit('no such file: x.py')\n\""
    write(
        tmp_path,
        "p.dot",
        "digraph s { start [shape=Mdiamond]\n"
        f"  check [shape=parallelogram, tool_command={json.dumps(script)}]\n"
        "  done [shape=Msquare]\n  start -> check -> done }\n",
    )
    proc = cli("run", "p.dot", cwd=tmp_path)
    assert proc.returncode == 1
    failed = next(line for line in proc.stdout.splitlines() if "FAIL" in line)
    assert failed.endswith(
        "exit code 1: python3 -c \" import sys print('checking') sys.exit('no such file: x.py') "
        '" (5 lines) · no such file: x.py'
    ), failed
    assert "\nimport sys" not in proc.stdout


def _asked(tmp_path: Path, *args: str, typed: str | None) -> subprocess.CompletedProcess[str]:
    """``run ARGS --ask`` with ``typed`` on its standard input (None: a pipe left open with
    nothing written, as a terminal nobody types at)."""
    command = [sys.executable, "-m", "freshness_magic", "run", *args, "--ask"]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    if typed is not None:
        return subprocess.run(
            command, cwd=tmp_path, env=env, input=typed, capture_output=True, text=True, timeout=60
        )
    with subprocess.Popen(
        command,
        cwd=tmp_path,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as proc:
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        code = proc.wait(timeout=60)  # a few lines of output: the pipes never fill
        out, err = proc.stdout.read(), proc.stderr.read()
        proc.stdin.close()
    return subprocess.CompletedProcess(command, code, out, err)


def test_ask_asks_each_gate_on_the_terminal_and_goes_on_with_the_answer(tmp_path: Path) -> None:
    write(tmp_path, "p.dot", REVIEW)
    proc = _asked(tmp_path, "p.dot", typed="x\nN\nY\n")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "[?] Ship it?\n  [Y] Yes\n  [N] No, redo\nSelect: x\n'x' is not a choice." in proc.stdout
    assert "Select: N\n  ok      approve" in proc.stdout
    assert proc.stdout.count("Stage completed: draft") == 2
    nobody = _asked(tmp_path, "p.dot", typed="")  # the input ends: the gate stays open
    assert nobody.returncode == 3
    assert "answer with: " in nobody.stdout
    defaulted = REVIEW.replace('label="Ship it?"', 'label="Ship it?", human.default_choice=Y')
    write(tmp_path, "d.dot", defaulted)
    closed = _asked(tmp_path, "d.dot", typed="")  # `< /dev/null`: not the default, no answer
    assert closed.returncode == 3, closed.stdout + closed.stderr
    assert "Select: \n(input closed: the gate stays open)\n" in closed.stdout
    assert "Human selected" not in closed.stdout
    both = cli("run", "p.dot", "--ask", "--auto-approve", cwd=tmp_path)
    assert both.returncode == 2
    assert "not allowed with argument" in both.stderr


def test_ask_takes_the_default_when_the_gates_timeout_passes(tmp_path: Path) -> None:
    """Spec §6: human.timeout with human.default_choice; before --ask nothing on the command
    line ever waited for it."""
    write(
        tmp_path,
        "p.dot",
        """digraph timed {
  start [shape=Mdiamond]
  approve [shape=hexagon, label="Ship it?", human.default_choice=N, human.timeout="1s"]
  hold [prompt="hold the release"]
  done [shape=Msquare]
  start -> approve
  approve -> done [label="[Y] Yes"]
  approve -> hold [label="[N] No, hold"]
  hold -> done
}
""",
    )
    proc = _asked(tmp_path, "p.dot", typed=None)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "  [N] No, hold (default)\nSelect: \n(no answer)\n" in proc.stdout
    assert "No answer in 1s: took the default [N] No, hold -> hold" in proc.stdout
    assert "Human selected" not in proc.stdout


WAITS = one_tool(
    "echo $$ >> started.txt; until test -f go; do sleep 0.05; done", node="w", name="waits"
)


def test_a_second_run_of_a_pipeline_running_in_the_folder_says_so(tmp_path: Path) -> None:
    """A trial ran one pipeline twice at once in one folder: both tools ran, on the same
    files, and nothing said so."""
    from tests.waiting import wait_until

    (tmp_path / "waits.dot").write_text(WAITS)
    first = subprocess.Popen(
        [sys.executable, "-m", "freshness_magic", "run", "waits.dot"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        started = tmp_path / "started.txt"
        wait_until(started.exists, "the first run's tool starts")
        (first_dir,) = (tmp_path / ".freshness" / "runs").iterdir()
        second = cli("run", "waits.dot", "--to", "w", cwd=tmp_path)  # its tool does not run
        assert second.returncode == 3, second.stderr  # paused before w
        assert second.stderr.splitlines()[0] == (
            f"note: another run of waits is running w here (pid {first.pid}, {first_dir}); "
            "both run their tools at the same time, on the same files"
        )
    finally:
        (tmp_path / "go").touch()
        first.wait(timeout=60)
    again = cli("run", "waits.dot", "--to", "w", cwd=tmp_path)
    assert "another run" not in again.stderr


def test_the_commands_a_run_suggests_work_pasted_in_a_folder_with_spaces(tmp_path: Path) -> None:
    """A trial: in ``my proj ünï``, ``answer with: … resume /…/my proj ünï/… --answer …`` split
    into three words at the spaces when pasted."""
    work = tmp_path / "my proj ünï"
    work.mkdir()
    dot = write(work, "p.dot", one_gate("Go?", node="approve"))
    waiting = cli("run", str(dot), "--workdir", str(work), cwd=work)
    assert waiting.returncode == 3, waiting.stderr
    said = next(line for line in waiting.stdout.splitlines() if line.startswith("answer with: "))
    words = shlex.split(said.removeprefix("answer with: "))
    assert words[:3] == ["python", "-m", "freshness_magic"], said
    done = cli(*words[3:], cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
