"""Run control from a real InteractiveShell: kernel interrupt, stop, retry, gate comments,
and what a ``%%node`` cell prints."""

from __future__ import annotations

import json
import signal
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell

from freshness_magic.engine.context import partial_key
from freshness_magic.errors import RunError
from freshness_magic.notebook.pipeline import Pipeline
from freshness_magic.views.render import NodeState
from freshness_magic.views.text import TextResult
from tests.notebook.conftest import load_review
from tests.pipelines import GATED_CHILD, ONE_ENDS_ONE_WAITS, TWO_BRANCHES, managing
from tests.waiting import wait_until

CELLS_DOT = """digraph cells {
  start [shape=Mdiamond]
  work  [label="Work"]
  after [label="After"]
  done  [shape=Msquare]
  start -> work -> after -> done
}
"""


def line(shell: InteractiveShell, text: str) -> TextResult:
    result = shell.run_line_magic("pipeline", text)
    assert isinstance(result, TextResult), result
    return result


def load_cells(shell: InteractiveShell, workdir: Path) -> Pipeline:
    pipeline = shell.run_cell_magic("pipeline", f"cells --workdir {workdir}", CELLS_DOT)
    assert isinstance(pipeline, Pipeline)
    return pipeline


def events_of(pipeline: Pipeline) -> list[dict[str, object]]:
    path = pipeline.current_run.run_dir / "events.jsonl"
    return [json.loads(raw) for raw in path.read_text().splitlines()]


@pytest.fixture
def sigint_raises() -> Iterator[None]:
    """Python's own SIGINT handler (a KeyboardInterrupt), as a kernel and a terminal have it: a
    test process started in the background inherits SIGINT ignored, and whether an earlier test
    put the handler back depended on the order the tests ran in."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


@pytest.mark.usefixtures("sigint_raises")
def test_kernel_interrupt_in_a_node_is_one_line_and_leaves_it_interrupted(
    shell: InteractiveShell, workdir: Path
):
    pipeline = load_cells(shell, workdir)
    # A real SIGINT, as Jupyter's "interrupt kernel" sends, while the node runs.
    shell.run_cell_magic(
        "node",
        "work",
        "import os, signal, time\nos.kill(os.getpid(), signal.SIGINT)\ntime.sleep(5)\n",
    )
    out = line(shell, "run").text
    assert out.splitlines() == [
        "step: start -> success; next: work",
        "interrupted at work; %pipeline run or step goes on from there",
        "run: 1 step(s); paused",
    ]
    views = pipeline.view.views()
    assert views["work"].state is NodeState.INTERRUPTED
    assert all(v.state is not NodeState.RUNNING for v in views.values())
    assert pipeline.view.state_name == "paused" and pipeline.view.next_node() == "work"
    assert "stage_interrupted" in [e["type"] for e in events_of(pipeline)]
    why = line(shell, "why work").text.splitlines()
    assert why[0] == "work: interrupted" and "interrupted" not in "\n".join(why[1:])
    row = next(r for r in line(shell, "status").text.splitlines() if r.split()[:1] == ["work"])
    assert row.split() == ["work", "interrupted"]  # the state word once, no reason repeating it
    shell.run_cell_magic("node", "work", "context['work.done'] = 'yes'\n")
    out = line(shell, "run").text
    assert out.splitlines()[-1] == "run: 3 step(s); completed"
    assert pipeline.view.views()["work"].state is NodeState.SUCCEEDED
    assert pipeline.current_run.context["work.done"] == "yes"


def test_stop_from_another_thread_pauses_before_the_next_node(
    shell: InteractiveShell, workdir: Path
):
    pipeline = load_cells(shell, workdir)
    started, release = threading.Event(), threading.Event()
    shell.user_ns.update(started=started, release=release)
    shell.run_cell_magic("node", "work", "started.set()\nrelease.wait(30)\n")
    answers: list[TextResult] = []
    worker = threading.Thread(target=lambda: answers.append(pipeline.run_to()))
    worker.start()
    wait_until(started.is_set, "the work node started")
    wait_until(
        lambda: pipeline.view.views()["work"].state is NodeState.RUNNING, "work shown running"
    )
    assert pipeline.view.views()["work"].details["started_at"] > 0  # the view's live timer
    assert pipeline.view.views()["after"].state is NodeState.PENDING
    with pytest.raises(RunError, match="busy with another action"):
        pipeline.step()
    assert pipeline.stop().text == "stop requested at work"
    release.set()
    worker.join(30)
    text = answers[0].text
    assert "stopped at work; %pipeline run or step goes on from there" in text
    assert text.splitlines()[-1] == "run: 1 step(s); paused"
    assert pipeline.view.views()["work"].state is NodeState.INTERRUPTED
    assert "after" not in pipeline.view.outcomes()
    assert line(shell, "run").text.splitlines()[-1] == "run: 3 step(s); completed"


def test_stop_in_a_fan_out_keeps_the_branches_that_had_ended_and_why_names_them(
    shell: InteractiveShell, workdir: Path
):
    """A JupyterLab trial: after Stop nothing said which branches would run again."""
    pipeline = shell.run_cell_magic("pipeline", f"fanned --workdir {workdir}", ONE_ENDS_ONE_WAITS)
    answers: list[TextResult] = []
    worker = threading.Thread(target=lambda: answers.append(pipeline.run_to()))
    worker.start()
    wait_until(
        lambda: (
            (workdir / "slow.txt").exists()
            and partial_key("fan") in pipeline.current_run.result().context
        ),
        "quick ended while slow runs",
    )
    wait_until(  # the header counts it before the parallel node's step ends (start, quick)
        lambda: "· 2/6 nodes run" in pipeline.view.status_line(), "quick counted as run"
    )
    pipeline.stop()
    worker.join(30)
    assert answers[0].text.splitlines()[-1] == "run: 1 step(s); paused"
    assert "%pipeline run or step goes on from there" in answers[0].text
    assert line(shell, "why fan").text.splitlines()[-2:] == [
        "  next: run it again and go on from it (quick had ended: not run again):",
        "      %pipeline run",  # as the stop's own line says
    ]
    (workdir / "go").touch()
    assert line(shell, "run").text.splitlines()[-1] == "run: 3 step(s); completed"
    assert (workdir / "quick.txt").read_text() == "quick\n"


def test_stop_with_nothing_running_says_so_and_changes_nothing(
    shell: InteractiveShell, workdir: Path
):
    pipeline = load_cells(shell, workdir)
    said = "nothing to stop: no step or run of cells is running"
    assert line(shell, "stop").text == said
    assert line(shell, "step").text == "step: start -> success; next: work"
    assert line(shell, "stop").text == said
    assert pipeline.view.state_name == "paused" and "work" not in pipeline.view.model.interrupted
    assert line(shell, "run").text.splitlines()[-1] == "run: 3 step(s); completed"


def test_retry_after_a_failed_node(shell: InteractiveShell, workdir: Path):
    pipeline = load_cells(shell, workdir)
    shell.run_cell_magic("node", "work", "outcome = 'fail'\n")
    line(shell, "run")
    assert pipeline.view.state_name == "failed"
    shell.run_cell_magic("node", "work", "outcome = 'success'\n")
    out = line(shell, "retry work").text
    assert out.splitlines()[-1] == "run: 3 step(s); completed"


def test_gate_comment_goes_to_context_and_evidence(shell: InteractiveShell, workdir: Path):
    pipeline = load_review(shell, workdir)
    line(shell, "run")
    out = line(shell, 'resume approve --choice Y --comment "checked the login path"').text
    assert out.splitlines()[-1] == "run: 2 step(s); completed"
    assert pipeline.current_run.context["human.gate.comment"] == "checked the login path"
    records = [r for r in pipeline.view.evidence_records("approve")]
    assert "comment: checked the login path" in records[-1]["outcome"]["engine"]["notes"]
    answered = [e for e in events_of(pipeline) if e["type"] == "gate_answered"]
    assert answered[-1]["data"]["comment"] == "checked the login path"


def test_gate_comment_through_the_method(shell: InteractiveShell, workdir: Path):
    pipeline = load_review(shell, workdir)
    pipeline.run_to()
    pipeline.resume("approve", "N", comment="redo the summary")
    assert pipeline.current_run.context["human.gate.comment"] == "redo the summary"
    assert pipeline.view.pending_gate() is not None  # back at the gate after the redo


def test_node_cell_output_goes_to_the_node_folder_not_the_cell(
    shell: InteractiveShell, workdir: Path, capsys: pytest.CaptureFixture[str]
):
    pipeline = load_cells(shell, workdir)
    shell.run_cell_magic("node", "work", "print('hello from work')\n")
    capsys.readouterr()
    line(shell, "run")
    printed = capsys.readouterr()
    assert "hello from work" not in printed.out + printed.err
    saved = pipeline.current_run.run_dir / "nodes" / "work" / "cell_output.txt"
    assert saved.read_text() == "hello from work\n"
    from freshness_magic.views.details import node_details

    assert node_details(pipeline.view, "work").output == "hello from work\n"
    details = pipeline.view.details("work")
    assert details["output"] == "hello from work\n" and details["state"] == "succeeded"
    assert details["evidence"][0]["node"] == "work"
    assert "output: hello from work" in line(shell, "why work").text
    outputs = [e for e in events_of(pipeline) if e["type"] == "stage_output"]
    assert outputs[0]["node_id"] == "work"
    assert outputs[0]["data"] == {"stream": "stdout", "text": "hello from work\n"}


def test_step_lines_can_come_as_each_step_ends(
    shell: InteractiveShell, workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``step_lines = live`` (what terminal IPython gets by default): each step's line is printed
    when the step ends, and the result keeps only what follows (the gate, the summary)."""
    review = load_review(shell, workdir)
    at_each_line: list[tuple[str, list[str]]] = []
    shell.run_line_magic("config", "PipelineMagics.step_lines = 'live'")
    try:
        capsys.readouterr()
        result = line(shell, "run")
        printed = capsys.readouterr().out.splitlines()
        assert [text.split()[:2] for text in printed[:3]] == [
            ["step:", "start"],
            ["step:", "lint"],
            ["step:", "draft"],
        ]
        assert not any(text in result.text for text in printed[:3])
        assert result.text.splitlines()[-1] == "run: 4 step(s); waiting"
        review.live_lines = lambda text: at_each_line.append(
            (text, review.current_run.completed_nodes)
        )
        line(shell, "resume approve --choice N")
    finally:
        shell.run_line_magic("config", "PipelineMagics.step_lines = 'auto'")
    assert at_each_line == []  # the magic sets where lines go for every action
    review.live_lines = lambda text: at_each_line.append(
        (text, list(review.current_run.completed_nodes))
    )
    review.resume("approve", "Y")
    steps = [(text.split()[1], done[-1]) for text, done in at_each_line if text[:5] == "step:"]
    assert steps[:2] == [("approve", "approve"), ("done", "done")]


def test_retry_before_anything_ran_is_refused_with_the_way_to_run_the_node(
    shell: InteractiveShell, workdir: Path
):
    """A trial: retry NODE on a run that had not started ran only NODE and the exit, skipping
    start, and reported completed; retry without a node said the run did not fail at one."""
    pipeline = load_cells(shell, workdir)
    with pytest.raises(UsageError) as refused:
        shell.run_line_magic("pipeline", "retry after")
    assert str(refused.value) == (
        "nothing to retry: no node of cells has run yet; %pipeline run --to after runs up to "
        "after, then %pipeline step runs it"
    )
    with pytest.raises(UsageError) as refused:
        shell.run_line_magic("pipeline", "retry")
    assert str(refused.value) == (
        "nothing to retry: no node of cells has run yet; %pipeline step runs the first node, "
        "%pipeline run runs on to a gate or the end"
    )
    with pytest.raises(UsageError, match=r"has run yet; %pipeline step runs start$"):
        shell.run_line_magic("pipeline", "retry start")
    assert pipeline.view.outcomes() == {} and pipeline.view.state_name == "ready"
    line(shell, "run --to after")
    assert line(shell, "step").text == "step: after -> success; next: done"
    line(shell, "reset")
    with pytest.raises(UsageError, match=r"nothing to retry in this kernel yet; an unfinished run"):
        shell.run_line_magic("pipeline", "retry work")  # the run just left: resume goes back
    line(shell, "reset")
    with pytest.raises(UsageError, match="no node of cells has run yet"):
        shell.run_line_magic("pipeline", "retry work")
    assert pipeline.view.outcomes() == {}


def test_a_step_in_terminal_ipython_shows_its_line_once_as_its_result(
    shell: InteractiveShell, workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Terminal IPython prints step lines live; a single step's line was printed, then its
    empty result showed an empty ``Out[N]:``. The line is now the step's result, shown once
    and kept by code that captures it."""
    load_cells(shell, workdir)
    shell.run_line_magic("config", "PipelineMagics.step_lines = 'live'")  # terminal's 'auto'
    try:
        capsys.readouterr()
        shell.run_cell("%pipeline step", store_history=True)
        printed = capsys.readouterr().out
        assert printed.count("step: start -> success; next: work") == 1
        assert not any(row.rstrip().endswith("]:") for row in printed.splitlines())
        shell.run_cell("r = %pipeline step")
        assert str(shell.user_ns["r"]) == "step: work -> success; next: after"
        assert capsys.readouterr().out == ""
        shell.run_cell("%pipeline run", store_history=True)
        printed = capsys.readouterr().out
        assert "step: after -> success; next: done\n" in printed
        assert printed.rstrip().endswith("run: 2 step(s); completed")
    finally:
        shell.run_line_magic("config", "PipelineMagics.step_lines = 'auto'")


@pytest.mark.usefixtures("sigint_raises")
def test_going_on_after_an_interrupt_takes_the_edited_inputs_as_a_resume_does(
    shell: InteractiveShell, workdir: Path
):
    """A trial: interrupted in a freshness=block node, its script fixed, then `%pipeline run`:
    the node was held back as stale (and failed), while the CLI's resume (and one after a
    restart) ran it on the fixed file. Going on after a stop is now a resume everywhere."""
    (workdir / "src" / "clean.py").write_text("v1\n")
    pipeline = shell.run_cell_magic(
        "pipeline",
        f"cells --workdir {workdir}",
        CELLS_DOT.replace('[label="Work"]', '[source_files="src/clean.py", freshness="block"]'),
    )
    shell.run_cell_magic(
        "node",
        "work",
        "import os, signal, time\nos.kill(os.getpid(), signal.SIGINT)\ntime.sleep(5)\n",
    )
    assert line(shell, "run").text.splitlines()[-1] == "run: 1 step(s); paused"
    (workdir / "src" / "clean.py").write_text("v2: fixed\n")
    shell.run_cell_magic("node", "work", "pass\n")
    out = line(shell, "run").text.splitlines()
    assert out[0] == "changed while the run was stopped:"
    assert out[1] == (
        "  work: inputs changed since its baseline: src/clean.py; it has not run yet and will "
        "use them (its baseline is taken again now)"
    )
    assert "step: work -> success; next: after" in out
    assert out[-1] == "run: 3 step(s); completed"
    assert pipeline.view.views()["work"].state is NodeState.SUCCEEDED


@pytest.mark.usefixtures("sigint_raises")
def test_a_resume_after_a_restart_says_once_what_changed_while_the_run_was_stopped(
    shell: InteractiveShell, workdir: Path
):
    """Interrupted, the kernel restarted, the pipeline loaded again and ``%pipeline resume``:
    the changed inputs were listed twice (the run was reopened a second time to go on)."""
    (workdir / "src" / "clean.py").write_text("v1\n")
    dot = CELLS_DOT.replace('[label="Work"]', '[source_files="src/clean.py", freshness="warn"]')
    shell.run_cell_magic("pipeline", f"cells --workdir {workdir}", dot)
    shell.run_cell_magic(
        "node",
        "work",
        "import os, signal, time\nos.kill(os.getpid(), signal.SIGINT)\ntime.sleep(5)\n",
    )
    assert line(shell, "run").text.splitlines()[-1] == "run: 1 step(s); paused"
    (workdir / "src" / "clean.py").write_text("v2\n")
    shell.run_line_magic("pipeline", "reset")  # as a restart leaves it: only the disk knows
    shell.run_cell_magic("pipeline", f"cells --workdir {workdir}", dot)
    shell.run_cell_magic("node", "work", "pass\n")
    out = line(shell, "resume").text.splitlines()
    drift = [row for row in out if row.startswith("  work: inputs changed")]
    assert len(drift) == 1, out
    assert "changed while the run was stopped:" not in out
    assert out[-1] == "run: 3 step(s); completed"


def test_sys_exit_in_a_node_cell_fails_the_node_and_the_run_can_go_on(
    shell: InteractiveShell, workdir: Path
):
    """``sys.exit()`` in a cell is the node's failure, as any exception: it used to escape the
    engine and leave the run shown ``running`` with nothing running and nothing to retry."""
    pipeline = load_cells(shell, workdir)
    shell.run_cell_magic("node", "work", "import sys\nsys.exit(0)\n")
    out = line(shell, "run").text
    assert pipeline.view.state_name == "failed"
    reason = pipeline.view.outcomes()["work"].failure_reason
    assert reason.startswith("SystemExit: 0 (cell line 2); a %%node cell sets outcome")
    assert reason in out
    assert json.loads((workdir / ".orchestrator" / "evidence" / "work.json").read_text())
    shell.run_cell_magic("node", "work", "outcome = 'success'\n")
    assert line(shell, "retry").text.splitlines()[-1] == "run: 3 step(s); completed"


def test_a_node_cell_replacing_a_gate_says_what_it_takes_away(
    shell: InteractiveShell, workdir: Path
):
    """A ``%%node`` on a gate ran in place of the question without a word."""
    pipeline = shell.run_cell_magic(
        "pipeline",
        f"gated --workdir {workdir}",
        'digraph gated { start [shape=Mdiamond]; g [shape=hexagon, label="Ship?"]; '
        'done [shape=Msquare]; start -> g; g -> done [label="[Y] Yes"] }',
    )
    out = shell.run_cell_magic("node", "g", "outcome = 'success'\n")
    assert out.text == (
        "gated.g: handled by this cell\n"
        "note: it was a human gate: the run no longer asks there, the cell's outcome routes on"
    )
    assert line(shell, "run").text.splitlines()[-1] == "run: 3 step(s); completed"
    assert pipeline.view.pending_gate() is None


def test_wrong_types_from_python_are_one_line_errors(shell: InteractiveShell, workdir: Path):
    """``review.run_to(5)`` gave a TypeError from deep inside the did-you-mean search."""
    pipeline = load_cells(shell, workdir)
    for call in (lambda: pipeline.run_to(5), lambda: pipeline.why(None)):  # type: ignore[arg-type]
        with pytest.raises(RunError, match=r"^a node id is a string such as 'start', not "):
            call()
    with pytest.raises(RunError, match=r"^choice is a string such as 'Y', not 5$"):
        pipeline.resume("work", 5)  # type: ignore[arg-type]
    assert not pipeline.view.has_run


def test_retry_of_a_branch_node_says_its_parallel_node_runs_again(
    shell: InteractiveShell, workdir: Path
):
    shell.run_cell_magic("pipeline", f"fanned --workdir {workdir}", TWO_BRANCHES)
    line(shell, "run")
    out = line(shell, "retry b2").text.splitlines()
    assert out[0] == (
        "note: b2 runs as a branch of parallel node 'fan': fan runs again with all its "
        "branches, so its fan-in joins results of one pass"
    )
    assert out[-1].endswith("completed")
    assert out[1] == "step: fan -> success; next: join"
    assert sorted(out[2:4]) == [
        "  b1 -> success (branch of fan)",
        "  b2 -> success (branch of fan)",
    ]
    assert (workdir / "b1.txt").read_text() == "b1\nb1\n"


def test_a_begun_run_goes_on_with_the_backend_a_retry_names(shell: InteractiveShell, workdir: Path):
    """The model failed: the run goes on with another backend, keeping what ran so far (it was
    refused, and only reset, losing the run, or the CLI could change it)."""
    pipeline = load_cells(shell, workdir)
    line(shell, "step --backend command:false")  # start
    failed = line(shell, "run").text
    assert pipeline.view.state_name == "failed", failed
    run_dir = pipeline.current_run.run_dir
    out = line(shell, "retry work --backend simulated").text
    assert out.splitlines()[-1] == "run: 3 step(s); completed"
    assert pipeline.current_run.run_dir == run_dir  # the same run, reopened
    assert pipeline.current_run.completed_nodes[:2] == ["start", "work"]
    with pytest.raises(UsageError, match="unknown backend 'simulatd'"):
        line(shell, "retry work --backend simulatd")


def test_a_child_pipelines_gate_is_answered_at_its_manager_node(
    shell: InteractiveShell, workdir: Path
):
    (workdir / "child.dot").write_text(GATED_CHILD)
    shell.run_cell_magic("pipeline", f"managed --workdir {workdir}", managing("child.dot"))
    out = line(shell, "run").text.splitlines()
    assert out[1:5] == [
        "step: manage -> waiting",
        "waiting at manage: Approve the sprint? (gate 'approve' of the child pipeline)",
        "  choices: [A] Approve  [R] Reject",
        "  answer with: %pipeline resume manage --choice <key> [--comment TEXT]",
    ]
    out = line(shell, "resume manage --choice R").text.splitlines()
    assert out[0] == (
        "step: manage: answer for gate 'approve' of the child pipeline kept; manager node "
        "'manage' passes it on when it runs again"
    )
    assert out[1:] == [
        "step: manage -> success; next: done",
        "step: done -> success",
        "run: 3 step(s); completed",
    ]
    assert (workdir / "verdict.txt").read_text() == "rejected\n"


def test_a_node_upstream_of_a_waiting_gate_runs_again_and_the_gate_is_asked_again(
    shell: InteractiveShell, workdir: Path
):
    """A terminal trial: lint's inputs changed while the run waited at approve, and `retry
    lint` was refused ("answer it instead"), so the only way on shipped the stale result."""
    pipeline = load_review(shell, workdir)
    line(shell, "run")
    (workdir / "src/login.py").write_text("def login():\n    return False\n")
    line(shell, "accept lint")
    out = line(shell, "retry lint").text
    assert out.splitlines()[-1] == "run: 3 step(s); waiting", out
    assert pipeline.current_run.completed_nodes == ["start", "lint", "draft", "lint", "draft"]
    assert pipeline.view.pending_gate() is not None
    with pytest.raises(UsageError, match="answer it, or name the node to run again"):
        line(shell, "retry")
    with pytest.raises(UsageError, match=r"'done' is not a node before it.*never goes past"):
        line(shell, "retry done")
    assert pipeline.view.pending_gate() is not None
    assert line(shell, "resume approve --choice Y").text.splitlines()[-1].endswith("completed")


def test_a_failure_line_ends_with_the_tool_s_error_not_its_stderr_heading(
    shell: InteractiveShell, workdir: Path
):
    """A terminal trial read `... on the node or the graph stderr (last 20 lines): T…`: the
    whole reason folded onto one line, the error cut off."""
    dot = """digraph t {
      start [shape=Mdiamond]
      done  [shape=Msquare]
      test  [shape=parallelogram,
             tool_command="printf 'T:\\\\n  File x\\\\nAssertionError: 2 != 3\\\\n' >&2; exit 1"]
      start -> test -> done
    }"""
    shell.run_cell_magic("pipeline", f"t --workdir {workdir}", dot)
    out = line(shell, "run").text.splitlines()
    assert out[1].startswith("step: test -> fail (exit code 1: ")
    assert out[1].endswith(" · AssertionError: 2 != 3)")
    assert out[-1].startswith("run: 2 step(s); failed: node 'test' failed (exit code 1: ")
    assert out[-1].endswith(" · AssertionError: 2 != 3") and "stderr (last" not in out[-1]
    status = line(shell, "status").text.splitlines()
    error = " · AssertionError: 2 != 3"
    assert next(row for row in status if row.startswith("test ")).endswith(error)
    assert status[-1].endswith(error)


def test_running_the_cell_again_while_its_run_is_mid_step_is_refused_and_the_step_kept(
    shell: InteractiveShell, workdir: Path
):
    """A JupyterLab trial: Shift+Enter on the %%pipeline cell while the view's Run ran a tool
    cut the step off; the new view ran the node a second time."""
    pipeline = load_cells(shell, workdir)
    started, release = threading.Event(), threading.Event()
    shell.user_ns.update(started=started, release=release)
    shell.run_cell_magic("node", "work", "started.set()\nrelease.wait(30)\n")
    answers: list[TextResult] = []
    worker = threading.Thread(target=lambda: answers.append(pipeline.run_to("after")))
    worker.start()
    wait_until(started.is_set, "the work node started")
    with pytest.raises(UsageError, match=r"cells is running work .*wait for it to end, or stop"):
        shell.run_cell_magic("pipeline", f"cells --workdir {workdir}", CELLS_DOT)
    assert shell.user_ns["cells"] is pipeline and not pipeline.view.superseded
    release.set()
    worker.join(30)
    assert pipeline.current_run.completed_nodes == ["start", "work"]
    again = load_cells(shell, workdir)
    assert again is not pipeline and pipeline.view.superseded
