"""``python -m freshness_magic why RUN_DIR NODE`` as a user runs it (subprocesses, real runs).

It says what ``%pipeline why`` says (one explanation, ``freshness_magic.views.why``) and ends with
command-line commands that work when pasted: each test runs one of them and checks the run goes
on. It reads the run without taking its lock: a run held open by a kernel, a failed, a waiting,
a paused and a killed run all explain themselves.
"""

from __future__ import annotations

import itertools
import json
import os
import shlex
import signal
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.pipelines import BLOCKED_BY_OWN_EDIT, GO_GATE, ONE_ENDS_ONE_WAITS, one_tool
from tests.processes import cli, fresh_python
from tests.waiting import wait_until

if TYPE_CHECKING:
    from jupyter_client.blocking.client import BlockingKernelClient
    from jupyter_client.manager import KernelManager

REPO = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(REPO)}
PROGRAM = "python -m freshness_magic"

REVIEW = """digraph review {
  graph [goal="Ship the login fix"]
  start   [shape=Mdiamond]
  lint    [shape=parallelogram, tool_command="cat src/login.py", source_files="src/*.py",
           freshness="block"]
  draft   [prompt="Summarise the change for $goal: {tool.output}",
           source_files="docs/spec.md", freshness="warn"]
  approve [shape=hexagon, label="Ship it?"]
  done    [shape=Msquare]
  start -> lint -> draft -> approve
  approve -> done  [label="[Y] Yes"]
  approve -> draft [label="[N] No, redo"]
}
"""

FAILING = one_tool("test -f fixed.txt || { echo not fixed >&2; exit 7; }", node="boom", name="bad")

SLOW = one_tool("echo started; echo $$ > pgid.txt; exec sleep 60", node="wait", name="slow")


def paste(command: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run a command line ``why`` printed, as a shell would split it."""
    words = shlex.split(command)
    assert words[:3] == PROGRAM.split(), command
    return cli(*words[3:], cwd=cwd)


def why(run_dir: Path, node: str, cwd: Path) -> list[str]:
    proc = cli("why", str(run_dir), node, cwd=cwd)
    assert proc.returncode == 0 and proc.stderr == "", proc
    return proc.stdout.splitlines()


def next_steps(said: list[str]) -> dict[str, str]:
    """The ``next:``/``or:`` steps ``why`` ends with: each sentence (without its colon), and the
    command alone on the line under it, indented under the sentence."""
    found = {}
    for line, under in itertools.pairwise(said):
        if line.startswith(("  next: ", "  or: ")) and line.endswith(":"):
            assert under.startswith("      ") and not under[6].isspace(), under
            found[line.strip()[:-1]] = under.strip()
    return found


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "login.py").write_text("def login():\n    return True\n")
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "spec.md").write_text("# Spec\n")
    (tmp_path / "review.dot").write_text(REVIEW)
    return tmp_path


def start(workdir: Path, *args: str, dot: str = "review.dot") -> Path:
    """Run the pipeline (to where ``args`` stop it); its run directory."""
    proc = cli("run", dot, "--workdir", str(workdir), "--json", *args, cwd=workdir)
    assert proc.returncode in (1, 3), proc.stderr
    return Path(json.loads(proc.stdout)["run_dir"])


def test_a_failed_node_says_its_failure_and_the_retry_line_goes_on(tmp_path: Path) -> None:
    (tmp_path / "bad.dot").write_text(FAILING)
    run_dir = start(tmp_path, dot="bad.dot")
    said = why(run_dir, "boom", tmp_path)
    assert said[0] == "boom: failed"
    assert said[1].startswith("  exit code 7: test -f fixed.txt")
    assert "    not fixed" in said  # the stderr tail, under its reason
    assert "  last outcome: fail" in said
    assert said[-2:] == [
        "  next: fix the cause, then run it again and go on from it:",
        f"      {PROGRAM} resume {run_dir} --retry boom",
    ]
    (tmp_path / "fixed.txt").write_text("yes\n")
    done = paste(said[-1].strip(), tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "  ok      boom" in done.stdout
    assert why(run_dir, "boom", tmp_path)[0] == "boom: succeeded"


GOAL_GATE = """digraph p {
  start [shape=Mdiamond]
  tests  [shape=parallelogram, tool_command="test -f fixed.txt", goal_gate=true]
  notify [shape=parallelogram, tool_command="echo notified"]
  done [shape=Msquare]
  start -> tests
  tests -> notify [condition="outcome=fail"]
  tests -> done [condition="outcome=success"]
  notify -> done
}
"""


def test_a_goal_gate_that_stopped_the_run_says_so_and_its_retry_line_runs_the_gate(
    tmp_path: Path,
) -> None:
    """The run "failed at" the node that reached the exit; its retry ran that node, which
    reached the same gate again."""
    (tmp_path / "gate.dot").write_text(GOAL_GATE)
    run_dir = start(tmp_path, dot="gate.dot")
    said = why(run_dir, "tests", tmp_path)
    assert said[0] == "tests: failed"
    assert "  then the run went on to notify: condition `outcome=fail` held" in said
    assert (
        "  it is a goal gate: the run failed when it reached the exit, which needs every goal "
        "gate it visited to have succeeded"
    ) in said
    assert said[-1] == f"      {PROGRAM} resume {run_dir} --retry tests"
    (tmp_path / "fixed.txt").write_text("yes\n")
    done = cli("resume", str(run_dir), "--retry", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "  ok      tests" in done.stdout and "notify" not in done.stdout


def test_a_node_stale_after_its_input_changed_names_the_file_and_offers_accept_and_retry(
    workdir: Path,
) -> None:
    run_dir = start(workdir, "--to", "approve")  # lint and draft ran; paused before the gate
    (workdir / "src" / "login.py").write_text("def login():\n    return False\n")
    said = why(run_dir, "lint", workdir)
    assert said[0] == "lint: stale(run)"
    assert said[1] == "  inputs changed since it ran: src/login.py (modified)"
    assert "  inputs: src/*.py (freshness=block)" in said
    accept = f"{PROGRAM} resume {run_dir} --accept lint --to approve"  # accepts, runs nothing
    assert next_steps(said) == {
        "next: take its current inputs as its new baseline without running it again (it is no "
        "longer stale, nor the 1 node after it shown outdated); without that, freshness=block "
        "holds it back if the run reaches it again, until accepted or the files are restored": (
            accept
        ),
        "or: run it again on the current files, and go on from it": (
            f"{PROGRAM} resume {run_dir} --accept lint --retry lint"
        ),
    }
    outdated = why(run_dir, "draft", workdir)
    assert outdated[0] == "draft: outdated"
    assert outdated[-2:] == [
        "  next: clear this mark without running anything again:",
        f"      {accept}",
    ]

    accepted = paste(accept, workdir)
    assert accepted.returncode == 3, accepted.stdout + accepted.stderr
    assert "  accept  lint" in accepted.stdout and "  ok " not in accepted.stdout  # ran nothing
    assert why(run_dir, "lint", workdir)[0] == "lint: succeeded"
    assert why(run_dir, "draft", workdir)[0] == "draft: succeeded"

    (workdir / "src" / "login.py").write_text("def login():\n    return None\n")
    retried = paste(why(run_dir, "lint", workdir)[-1].strip(), workdir)
    assert retried.returncode == 3, retried.stdout + retried.stderr  # on to the gate
    assert "  ok      lint" in retried.stdout
    assert "waiting at gate 'approve'" in retried.stdout
    assert why(run_dir, "lint", workdir)[0] == "lint: succeeded"


def test_an_outdated_node_after_two_changed_nodes_gets_one_line_that_accepts_both(
    workdir: Path,
) -> None:
    """``why`` offered ``--accept`` of the first changed node only: pasted, it left the node
    outdated by the second."""
    (workdir / "two.dot").write_text(
        """digraph two {
  start  [shape=Mdiamond]
  prep   [shape=parallelogram, tool_command="true", source_files="src/*.py", freshness="warn"]
  spec   [prompt="Read the spec", source_files="docs/spec.md", freshness="warn"]
  report [prompt="Report on {tool.output} and {last_response}"]
  done   [shape=Msquare]
  start -> prep -> spec -> report -> done
}
"""
    )
    run_dir = start(workdir, "--to", "done", dot="two.dot")
    (workdir / "src" / "login.py").write_text("changed\n")
    (workdir / "docs" / "spec.md").write_text("changed\n")
    said = why(run_dir, "report", workdir)
    assert said[:2] == [
        "report: outdated",
        "  `report` read `tool.output` of `prep` (step 2), whose input `src/login.py` changed; "
        "it also rests on `spec`, changed too",
    ]
    accept = f"{PROGRAM} resume {run_dir} --accept prep --accept spec --to done"
    assert next_steps(said) == {
        "next: clear this mark without running anything again (accept all 2: each of them keeps "
        "it outdated)": accept
    }
    accepted = paste(accept, workdir)
    assert accepted.returncode == 3, accepted.stdout + accepted.stderr  # paused before done
    assert why(run_dir, "report", workdir)[0] == "report: succeeded"
    assert why(run_dir, "spec", workdir)[0] == "spec: succeeded"


def test_a_node_whose_freshness_is_ignored_is_not_stale_and_says_its_inputs_are_not_checked(
    workdir: Path,
) -> None:
    ignored = REVIEW.replace('freshness="block"', 'freshness="ignore"')
    (workdir / "ignored.dot").write_text(ignored)
    run_dir = start(workdir, "--to", "approve", dot="ignored.dot")  # lint and draft ran
    (workdir / "src" / "login.py").write_text("def login():\n    return False\n")
    said = why(run_dir, "lint", workdir)
    assert said[0] == "lint: succeeded", said
    assert "  inputs: src/*.py (freshness=ignore: not checked, never shown stale)" in said
    assert not any("accept" in w or "changed" in w for w in said), said
    assert why(run_dir, "draft", workdir)[0] == "draft: succeeded"  # not outdated
    status = cli("status", str(run_dir), "--json", cwd=workdir)
    assert "stale_nodes" not in json.loads(status.stdout)
    assert "stale" not in cli("status", str(run_dir), cwd=workdir).stdout
    audit = cli("check", str(run_dir), cwd=workdir)  # the audit lists it, and passes
    assert audit.returncode == 0, audit.stdout + audit.stderr
    assert "lint: stale_changed (since baseline and run) [not checked: freshness=ignore]" in (
        audit.stdout.splitlines()
    )
    assert audit.stdout.splitlines()[-1] == (
        "nothing stale; changed but not checked (freshness=ignore): lint"
    )
    report = json.loads(cli("check", str(run_dir), "--json", cwd=workdir).stdout)
    assert report["all_fresh"] and report["stale_nodes"] == []
    assert report["unchecked_nodes"] == ["lint"]


def test_a_node_a_block_held_back_offers_the_accept_and_retry_that_goes_on(
    tmp_path: Path,
) -> None:
    """The engine's note names no command (it cannot know the front end, and it said
    ``resume RUN --accept prep``, a placeholder, and the magic); the command line gets the line
    to paste, with the run directory."""
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "input.txt").write_text("one\n")
    (tmp_path / "blk.dot").write_text(BLOCKED_BY_OWN_EDIT)
    run_dir = start(tmp_path, dot="blk.dot")
    said = why(run_dir, "prep", tmp_path)
    assert said[0] == "prep: blocked"
    assert "  inputs changed since baseline: data/input.txt (modified)" in said
    assert (
        "  notes: freshness=block: inputs changed since the baseline snapshot; accept them as its "
        "new baseline or restore the files"
    ) in said
    assert not any("RUN" in line or "%pipeline" in line for line in said), said
    record = json.loads(cli("evidence", str(run_dir), "prep", "--json", cwd=tmp_path).stdout)
    assert "RUN" not in record[-1]["outcome"]["engine"]["notes"]
    assert said[-2:] == [
        "  next: run it on its changed inputs, and go on from it:",
        f"      {PROGRAM} resume {run_dir} --accept prep --retry prep",
    ]
    done = paste(said[-1].strip(), tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert why(run_dir, "prep", tmp_path)[0] == "prep: succeeded"


ROUTED = BLOCKED_BY_OWN_EDIT.replace(
    "start -> edit -> prep -> done",
    'start -> edit -> prep\n  prep -> done [condition="outcome=success"]\n'
    '  prep -> report [condition="outcome=fail"]\n  report -> done\n'
    '  report [shape=parallelogram, tool_command="true"]',
)


def test_a_node_held_back_that_the_run_went_past_offers_the_accept_with_the_run_dir(
    tmp_path: Path,
) -> None:
    """A failure edge took the run past the blocked node: ``why`` offers the accept that lifts
    the block, spelled with the run directory (the engine's note said ``resume RUN``)."""
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "input.txt").write_text("one\n")
    (tmp_path / "routed.dot").write_text(ROUTED)
    ran = cli("run", "routed.dot", "--json", cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    run_dir = Path(json.loads(ran.stdout)["run_dir"])
    said = why(run_dir, "prep", tmp_path)
    assert said[0] == "prep: blocked"
    assert not any("RUN" in line for line in said), said
    accept = f"{PROGRAM} resume {run_dir} --accept prep"
    assert next_steps(said) == {
        "next: take its changed inputs as its new baseline, so that it runs when the run gets "
        "there again": accept
    }
    accepted = paste(accept, tmp_path)
    assert accepted.returncode == 0, accepted.stdout + accepted.stderr
    assert why(run_dir, "prep", tmp_path)[0] == "prep: failed"  # the block is lifted


def test_a_waiting_gate_lists_answer_lines_that_answer_it_when_pasted(workdir: Path) -> None:
    run_dir = start(workdir)
    (workdir / "src" / "login.py").write_text("changed\n")
    said = why(run_dir, "approve", workdir)
    assert said[0] == "approve: waiting"
    assert said[-4:] == [
        f"  note: upstream of approve: lint stale, 1 outdated (inputs changed; {PROGRAM} why "
        f"{run_dir} lint)",
        "  answer with one of:",
        f"    [Y] Yes -> done:        {PROGRAM} resume {run_dir} --answer approve=Y",
        f"    [N] No, redo -> draft:  {PROGRAM} resume {run_dir} --answer approve=N",
    ]
    lint = why(run_dir, "lint", workdir)
    retry = f"{PROGRAM} resume {run_dir} --accept lint --retry lint"
    assert next_steps(lint) == {
        "next: take its current inputs as its new baseline without running it again (it is no "
        "longer stale, nor the 1 node after it shown outdated); without that, freshness=block "
        "holds it back if the run reaches it again, until accepted or the files are restored": (
            f"{PROGRAM} resume {run_dir} --accept lint"
        ),
        "or: run it again on the current files, and go on from it (gate 'approve' is asked "
        "again when the run gets back to it)": retry,
    }
    again = paste(retry, workdir)  # a terminal trial: this was refused, "answer it instead"
    assert again.returncode == 3, again.stdout + again.stderr
    status = json.loads(cli("status", str(run_dir), "--json", cwd=workdir).stdout)
    assert status["completed_nodes"][-3:] == ["draft", "lint", "draft"]
    assert "stale_nodes" not in status and status["pending_gate"]["node"] == "approve"
    answered = paste(said[-2].split(":  ", 1)[1], workdir)
    assert answered.returncode == 0, answered.stdout + answered.stderr
    assert answered.stdout.splitlines()[-1].startswith("completed:")
    status = json.loads(cli("status", str(run_dir), "--json", cwd=workdir).stdout)
    assert status["completed_nodes"][-2:] == ["approve", "done"]
    assert why(run_dir, "approve", workdir)[0] == "approve: succeeded"  # lint ran again first


def test_an_unknown_node_and_a_folder_that_is_no_run_are_one_line_errors(workdir: Path) -> None:
    run_dir = start(workdir)
    typo = cli("why", str(run_dir), "lnit", cwd=workdir)
    assert (typo.returncode, typo.stdout) == (2, "")
    assert typo.stderr == f"{PROGRAM} why: no node 'lnit' (did you mean 'lint'?)\n"
    unknown = cli("why", str(run_dir), "zzz", "--json", cwd=workdir)
    assert unknown.returncode == 2 and unknown.stderr == ""
    error = json.loads(unknown.stdout)
    assert (error["kind"], error["command"]) == ("RunError", "why")
    assert error["error"] == (
        "no node 'zzz' in the run's pipeline; nodes: start, lint, draft, approve, done"
    )
    for folder in (workdir, workdir / "nowhere"):
        refused = cli("why", str(folder), "lint", cwd=workdir)
        status = cli("status", str(folder), cwd=workdir)
        assert refused.returncode == 2 and "Traceback" not in refused.stderr
        assert refused.stderr == status.stderr.replace(f"{PROGRAM} status:", f"{PROGRAM} why:")
    missing = cli("why", str(run_dir), cwd=workdir)
    assert missing.returncode == 2 and "the following arguments are required: NODE" in (
        missing.stderr
    )


def test_json_gives_the_facts_and_the_next_commands(workdir: Path) -> None:
    run_dir = start(workdir, "--to", "approve")
    (workdir / "src" / "login.py").write_text("changed\n")
    (workdir / "src" / "new.py").write_text("x = 1\n")
    proc = cli("why", str(run_dir), "lint", "--json", cwd=workdir)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert set(data) == {
        "run_dir",
        "run_state",
        "node",
        "state",
        "stale_since",
        "reason",
        "outcome",
        "went_on_to",
        "stale_files",
        "symbols",
        "inputs",
        "freshness",
        "missing_inputs",
        "output",
        "gate",
        "next",
        "text",
    }
    assert (data["run_dir"], data["run_state"]) == (str(run_dir), "paused")
    assert (data["node"], data["state"], data["stale_since"]) == ("lint", "stale", "run")
    assert data["outcome"]["status"] == "success"
    assert data["stale_files"] == [
        {"path": "src/login.py", "label": "modified"},
        {"path": "src/new.py", "label": "added"},
    ]
    assert (data["inputs"], data["freshness"], data["missing_inputs"]) == (
        ["src/*.py"],
        "block",
        [],
    )
    assert data["output"] == "def login():\n    return True\n"
    assert data["gate"] is None
    assert data["next"] == [
        f"{PROGRAM} resume {run_dir} --accept lint --to approve",
        f"{PROGRAM} resume {run_dir} --accept lint --retry lint",
    ]
    assert data["text"] == why(run_dir, "lint", workdir)

    cli("resume", str(run_dir), cwd=workdir)  # on to the gate (draft is fresh; lint not run)
    gate = json.loads(cli("why", str(run_dir), "approve", "--json", cwd=workdir).stdout)
    assert (gate["state"], gate["run_state"]) == ("waiting", "waiting")
    assert gate["gate"]["question"] == "Ship it?"
    assert [c["key"] for c in gate["gate"]["choices"]] == ["Y", "N"]
    assert gate["next"] == [
        f"{PROGRAM} resume {run_dir} --answer approve=Y",
        f"{PROGRAM} resume {run_dir} --answer approve=N",
    ]


def test_a_killed_run_names_the_node_cut_off_and_the_resume_line(tmp_path: Path) -> None:
    (tmp_path / "slow.dot").write_text(SLOW)
    process = subprocess.Popen(
        [sys.executable, "-m", "freshness_magic", "run", "slow.dot", "--workdir", str(tmp_path)],
        cwd=tmp_path,
        env=ENV,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    pgid_file = tmp_path / "pgid.txt"
    try:
        wait_until(lambda: pgid_file.exists() and pgid_file.read_text().strip(), "tool started")
        run_dir = next((tmp_path / ".freshness" / "runs").iterdir())
        during = why(run_dir, "wait", tmp_path)
        assert during[0] == "wait: running"
        assert during[-1].startswith(f"note: the run is driven now by pid {process.pid} (")
        assert during[-1].endswith(", running wait)")  # nothing to paste while it runs
        wait_until(lambda: "  output: started" in why(run_dir, "wait", tmp_path), "output logged")
    finally:
        process.kill()  # -9: no word, no checkpoint
        process.wait(timeout=60)
        if pgid_file.exists() and pgid_file.read_text().strip():
            os.killpg(int(pgid_file.read_text()), signal.SIGKILL)  # the tool the kill left
    said = why(run_dir, "wait", tmp_path)
    assert said[:2] == [
        "wait: interrupted",
        "  was running when its driver stopped without saving (killed?); resume runs it again",
    ]
    assert "  output: started" in said
    assert next_steps(said) == {
        "next: run it again and go on from it": f"{PROGRAM} resume {run_dir}"
    }
    pgid_file.unlink()
    command = shlex.split(said[-1])
    assert command[3:] == ["resume", str(run_dir)]
    resumed = subprocess.Popen(
        [sys.executable, "-m", "freshness_magic", *command[3:]],
        cwd=tmp_path,
        env=ENV,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_until(lambda: pgid_file.exists() and pgid_file.read_text().strip(), "ran again")
    finally:
        resumed.send_signal(signal.SIGTERM)
        resumed.communicate(timeout=60)
    assert why(run_dir, "wait", tmp_path)[0] == "wait: interrupted"  # stopped cleanly this time


def test_why_reads_without_loading_ipython_or_taking_the_lock(workdir: Path) -> None:
    run_dir = start(workdir)
    lock = (run_dir / "driver.lock").read_bytes()
    code = (
        "import sys\n"
        "from freshness_magic import cli\n"
        f"code = cli.main(['why', {str(run_dir)!r}, 'approve'])\n"
        "heavy = sorted(m for m in sys.modules if m.startswith(('IPython', 'ipywidgets', "
        "'anywidget', 'freshness_magic.notebook.widget', 'freshness_magic.notebook.magics')))\n"
        "print('HEAVY', code, heavy)\n"
    )
    assert fresh_python(code, env=ENV).splitlines()[-1] == "HEAVY 0 []"
    assert (run_dir / "driver.lock").read_bytes() == lock


def test_check_reads_without_loading_the_engine_that_runs_pipelines(workdir: Path) -> None:
    """``check`` is a one-shot command timed against ``git status``: it reads the run directory
    and the pipeline's text, never the code that runs, restores or validates a pipeline, nor
    what only a writer or a warning needs (``tempfile``, ``logging``) or the packaged-resource
    machinery (``importlib.resources``, ``zipfile``): together about 20 ms of its time."""
    run_dir = start(workdir)
    (workdir / "src" / "login.py").write_text("def login():\n    return False\n")
    code = (
        "import sys\n"
        "from freshness_magic import cli\n"
        f"code = cli.main(['check', {str(run_dir)!r}])\n"
        "heavy = sorted(m for m in sys.modules if m.startswith(('IPython', "
        "'freshness_magic.engine.persistence', 'freshness_magic.engine.routing', "
        "'freshness_magic.engine.validation', 'freshness_magic.engine.handlers', "
        "'freshness_magic.freshness.extension', 'freshness_magic.session', 'tempfile', "
        "'logging', 'zipfile', 'importlib.resources')))\n"
        "print('HEAVY', code, heavy)\n"
    )
    printed = fresh_python(code, env=ENV, cwd=workdir)
    assert "src/login.py" in printed, printed  # the report still says it
    assert printed.splitlines()[-1] == "HEAVY 1 []", printed


GATED = f"%%pipeline g\n{GO_GATE}"


def test_a_run_held_open_by_a_kernel_is_explained_and_says_where_to_answer(
    tmp_path: Path, kernel: tuple[KernelManager, BlockingKernelClient]
) -> None:
    """A kernel keeps its run (and the driver lock) between cells: ``why`` reads it anyway, and
    notes that the kernel holds it, as ``status`` does; the lock stays the kernel's."""
    from tests.kernels import execute

    _, client = kernel
    execute(client, "%load_ext freshness_magic")
    execute(client, GATED)
    assert "waiting" in execute(client, "%pipeline run")
    (run_dir,) = (tmp_path / ".freshness" / "runs").iterdir()
    lock = (run_dir / "driver.lock").read_bytes()
    said = why(run_dir, "review", tmp_path)
    assert said[0] == "review: waiting"
    assert f"    [Y] Yes -> done:  {PROGRAM} resume {run_dir} --answer review=Y" in said
    assert said[-1].startswith("note: the run is held open by an IPython kernel (pid ")
    assert said[-1].endswith(
        "idle and waiting at gate 'review': answer it there (%pipeline resume review "
        "--choice KEY), or leave the run there (%pipeline reset) to go on from here"
    )
    assert (run_dir / "driver.lock").read_bytes() == lock
    execute(client, "%pipeline reset")  # the kernel lets go of the run
    assert not why(run_dir, "review", tmp_path)[-1].startswith("note:")
    answered = paste(said[-3].split(":  ", 1)[1], tmp_path)
    assert answered.returncode == 0, answered.stdout + answered.stderr


def test_an_interrupted_branch_says_its_parallel_node_runs_again(tmp_path: Path) -> None:
    """It said only ``slow: interrupted``: the run paused at the parallel node, not at it."""
    import threading

    from freshness_magic.engine.context import partial_key
    from freshness_magic.engine.pipeline import load_pipeline
    from freshness_magic.session import open_run

    run = open_run(load_pipeline(ONE_ENDS_ONE_WAITS), workdir=tmp_path)
    stopper = threading.Thread(
        target=lambda: (
            wait_until(
                lambda: (
                    (tmp_path / "slow.txt").exists() and partial_key("fan") in run.result().context
                ),
                "quick ended and slow runs",
            ),
            run.interrupt(),
        )
    )
    stopper.start()
    try:
        run.run()
    finally:
        stopper.join()
        run.close()
    said = why(run.run_dir, "slow", tmp_path)
    assert said[0] == "slow: interrupted"
    assert next_steps(said) == {
        "next: run parallel node 'fan' again (quick had ended: not run again) and go on": (
            f"{PROGRAM} resume {run.run_dir}"
        )
    }
    (tmp_path / "go").touch()  # slow ends this time
    went_on = paste(said[-1].strip(), tmp_path)
    assert went_on.returncode == 0, went_on.stdout + went_on.stderr
    assert "  ok        slow" in went_on.stdout
    assert "  ok        quick" not in went_on.stdout  # it had ended: its result is kept
    assert "quick: ended before the node was interrupted, not run again" in went_on.stdout


def test_a_waiting_gate_with_a_default_says_what_takes_it(workdir: Path) -> None:
    (workdir / "timed.dot").write_text(
        REVIEW.replace(
            'label="Ship it?"', 'label="Ship it?", human.default_choice=Y, human.timeout=30s'
        )
    )
    run_dir = start(workdir, dot="timed.dot")
    assert why(run_dir, "approve", workdir)[2] == (
        "  answer with one of (the default, [Y] Yes, is what --ask takes on an empty line or "
        "after 30s (human.timeout)):"
    )


PACKED = REVIEW.replace(
    'approve -> done  [label="[Y] Yes"]',
    'approve -> pack  [label="[Y] Yes"]\n  pack -> done\n'
    '  pack [shape=parallelogram, tool_command="cat docs/spec.md", source_files="docs/*.md", '
    'freshness="block"]',
)


def test_a_node_not_run_yet_says_a_resume_takes_its_changed_inputs_as_its_baseline(
    workdir: Path,
) -> None:
    """``why`` promised that freshness=block would hold ``pack`` back; the resume that answered
    the gate took its inputs as its new baseline (every node not yet run does) and ran it (a
    recovery trial)."""
    (workdir / "packed.dot").write_text(PACKED)
    run_dir = start(workdir, dot="packed.dot")  # waits at approve; pack has not run
    (workdir / "docs" / "spec.md").write_text("# Spec, changed\n")
    said = why(run_dir, "pack", workdir)
    assert said[:2] == [
        "pack: stale(baseline)",
        "  inputs changed since baseline: docs/spec.md (modified)",
    ]
    assert said[-1] == (
        "  note: it has not run yet: a resume takes its inputs as they are then as its new "
        "baseline, as for every node not run yet, so it runs on them without a freshness "
        "warning or hold-back"
    )
    assert not any("holds it back" in line for line in said), said
    answered = cli("resume", str(run_dir), "--answer", "approve=Y", cwd=workdir)
    assert answered.returncode == 0, answered.stdout + answered.stderr
    assert "it has not run yet and will use them" in answered.stdout  # as the note said
    assert "  ok      pack" in answered.stdout


def test_a_node_whose_inputs_all_moved_away_says_its_source_files_match_nothing(
    workdir: Path,
) -> None:
    """A recovery trial renamed the folder under a node's glob: ``why`` listed the deleted
    files but not that ``src/*.py`` now matches no file at all."""
    run_dir = start(workdir)  # lint read src/login.py
    (workdir / "src").rename(workdir / "lib")
    said = why(run_dir, "lint", workdir)
    assert said[1] == "  inputs changed since it ran: src/login.py (deleted)"
    assert said[2] == (
        "  its source_files match no file now: every input it had is gone (moved or renamed? "
        "fix source_files, or accept to go on without them)"
    )
    (workdir / "src").mkdir()  # one file back: the glob matches again
    (workdir / "src" / "other.py").write_text("x = 1\n")
    assert not any("match no file" in line for line in why(run_dir, "lint", workdir))
