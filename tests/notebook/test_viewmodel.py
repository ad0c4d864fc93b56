"""The view model's own states in a real InteractiveShell: next, skipped, outdated."""

from __future__ import annotations

from pathlib import Path

from IPython.core.interactiveshell import InteractiveShell

from freshness_magic.notebook.pipeline import Pipeline
from freshness_magic.views.render import NodeState
from tests.pipelines import one_tool

BRANCH_DOT = """digraph branch {
  start [shape=Mdiamond]
  check [shape=diamond]
  ship  [label="Ship"]
  fix   [label="Fix"]
  done  [shape=Msquare]
  start -> check
  check -> ship [condition="outcome=success"]
  check -> fix  [condition="outcome=fail"]
  ship -> done
  fix -> done
}
"""


def states(pipeline: Pipeline) -> dict[str, str]:
    return {n: v.state.value for n, v in pipeline.view.views().items()}


def test_next_then_untaken_branch_skipped(shell: InteractiveShell, workdir: Path):
    pipeline = shell.run_cell_magic("pipeline", f"branch --workdir {workdir}", BRANCH_DOT)
    assert states(pipeline)["start"] == "next"  # no run yet: Step starts there
    shell.run_line_magic("pipeline", "run --to ship")
    assert states(pipeline) == {
        "start": "succeeded",
        "check": "succeeded",
        "ship": "next",
        "fix": "skipped",  # the run can no longer reach it
        "done": "pending",
    }
    assert pipeline.view.views()["fix"].why == "not on the path taken"
    shell.run_line_magic("pipeline", "run")
    assert states(pipeline)["fix"] == "skipped" and states(pipeline)["done"] == "succeeded"
    assert NodeState.SKIPPED.value in shell.run_line_magic("pipeline", "status").text


STREAMING_DOT = one_tool("printf 'building...\\\\n'; sleep 1; echo built", name="streaming")


def test_a_running_nodes_tooltip_shows_its_latest_output(
    shell: InteractiveShell, workdir: Path
) -> None:
    """Streamed output reaches the running node's tooltip while it runs."""
    pipeline: Pipeline = shell.run_cell_magic(
        "pipeline", f"streaming --workdir {workdir}", STREAMING_DOT
    )
    seen: list[str] = []

    def watch(_event: object = None) -> None:
        view = pipeline.view.views()["work"]
        if view.state is NodeState.RUNNING:
            seen.append(view.why)

    pipeline.live.subscribe(watch)
    shell.run_line_magic("pipeline", "run")
    assert "running: building..." in seen
    assert pipeline.view.views()["work"].state is NodeState.SUCCEEDED


FAN_DOT = """digraph fan {
  start [shape=Mdiamond]  done [shape=Msquare]
  fan [shape=component]  join [shape=tripleoctagon]
  quick [shape=parallelogram, tool_command="true"]
  slow [shape=parallelogram, tool_command="while [ ! -f go ]; do sleep 0.05; done"]
  start -> fan; fan -> quick; fan -> slow; quick -> join; slow -> join; join -> done
}
"""


def test_branch_nodes_show_their_state_while_the_fan_out_runs(
    shell: InteractiveShell, workdir: Path
):
    """Inside the parallel node's step: a finished branch shows succeeded, a busy one running."""
    import threading

    from tests.waiting import wait_until

    pipeline = shell.run_cell_magic("pipeline", f"fan --workdir {workdir}", FAN_DOT)
    run = pipeline.current_run
    driver = threading.Thread(target=run.run)
    driver.start()
    try:
        wait_until(
            lambda: (
                states(pipeline)["quick"] == "succeeded" and states(pipeline)["slow"] == "running"
            ),
            "the branches' live states",
        )
        assert states(pipeline)["join"] == "pending"
    finally:
        (workdir / "go").write_text("")
        driver.join(timeout=60)
    pipeline.live.publish()
    assert states(pipeline)["slow"] == "succeeded" and states(pipeline)["done"] == "succeeded"


GATED_DOT = """digraph gated {
  start [shape=Mdiamond]  exit [shape=Msquare]
  prep  [shape=parallelogram, tool_command="date +%s%N"]
  other [shape=parallelogram, tool_command="true"]
  gate  [shape=hexagon, label="Ship it?"]
  after [prompt="Ship the build of {tool.output}"]
  start -> prep -> gate
  gate -> after [label="[Y] Yes"]
  gate -> other [label="[N] No"]
  after -> exit
  other -> exit
}
"""


def test_nodes_that_read_a_retried_node_s_result_are_outdated_until_the_run_reaches_them(
    shell: InteractiveShell, workdir: Path
):
    """``after`` read the earlier result of ``prep``, which a retry ran again with another
    output: shown ``outdated`` (no Accept clears it), and ``succeeded`` again once the run
    passes it. ``exit`` read nothing of it: never marked, though it comes after."""
    from freshness_magic.views.state import state_code

    pipeline = shell.run_cell_magic("pipeline", f"gated --workdir {workdir}", GATED_DOT)
    shell.run_line_magic("pipeline", "run")
    shell.run_line_magic("pipeline", "resume --choice Y")
    assert states(pipeline)["after"] == "succeeded"

    shell.run_line_magic("pipeline", "retry prep")  # runs prep, then waits at the gate again
    views = pipeline.view.views()
    assert states(pipeline)["gate"] == "waiting"
    assert views["after"].state is NodeState.OUTDATED
    said = "`after` read `tool.output` of `prep` (step 2), and `prep` ran again (step 6) and "
    said += "wrote a different value"
    assert views["after"].why == said
    assert state_code(views["after"]) == "O"  # the view offers no Accept for it
    assert states(pipeline)["exit"] == "succeeded"
    assert states(pipeline)["start"] == "succeeded" and states(pipeline)["prep"] == "succeeded"
    assert "1 outdated" in pipeline.view.status_line()
    why = str(shell.run_line_magic("pipeline", "why after")).splitlines()
    assert why[:2] == ["after: outdated", f"  {said}"]
    assert why[-1] == "  next: it runs again if the run gets there after the gate is answered"
    assert "note: upstream" not in str(shell.run_line_magic("pipeline", "status"))  # no inputs

    shell.run_line_magic("pipeline", "resume --choice Y")
    assert states(pipeline)["after"] == "succeeded" and states(pipeline)["exit"] == "succeeded"


def test_a_branch_the_retried_run_did_not_take_again_stays_outdated(
    shell: InteractiveShell, workdir: Path
):
    pipeline = shell.run_cell_magic("pipeline", f"gated --workdir {workdir}", GATED_DOT)
    shell.run_line_magic("pipeline", "run")
    shell.run_line_magic("pipeline", "resume --choice Y")
    shell.run_line_magic("pipeline", "retry prep")
    shell.run_line_magic("pipeline", "resume --choice N")
    assert states(pipeline)["other"] == "succeeded" and states(pipeline)["exit"] == "succeeded"
    assert pipeline.view.views()["after"].state is NodeState.OUTDATED
    assert "and `prep` ran again" in pipeline.view.views()["after"].why
    why = str(shell.run_line_magic("pipeline", "why after")).splitlines()
    assert why[-2:] == [
        "  next: run it again on the new results, and go on:",
        "      %pipeline retry after",
    ]
    shell.run_line_magic("pipeline", "retry after")
    assert set(states(pipeline).values()) == {"succeeded"}


LOOP_DOT = """digraph loop {
  start [shape=Mdiamond]  exit [shape=Msquare]
  fix  [shape=parallelogram, tool_command="true"]
  test [shape=parallelogram, tool_command="test -f once || { touch once; false; }"]
  start -> fix -> test
  test -> fix  [condition="outcome=fail"]
  test -> exit [condition="outcome=success"]
}
"""


def test_a_loop_that_ran_its_course_leaves_nothing_outdated(shell: InteractiveShell, workdir: Path):
    """``fix`` ran again after ``test`` in the loop: that is the pipeline's own path, and the
    edge back to ``fix`` is no reason to doubt either node's result."""
    pipeline = shell.run_cell_magic("pipeline", f"loop --workdir {workdir}", LOOP_DOT)
    shell.run_line_magic("pipeline", "run")
    assert pipeline.current_run.completed_nodes == ["start", "fix", "test", "fix", "test", "exit"]
    assert set(states(pipeline).values()) == {"succeeded"}


REDO_DOT = """digraph redo {
  start [shape=Mdiamond]  exit [shape=Msquare]
  review [shape=hexagon, label="Review"]
  fixes  [shape=parallelogram, tool_command="true"]
  ship   [shape=parallelogram, tool_command="true"]
  start -> review
  review -> ship  [label="[A] Approve"]
  review -> fixes [label="[F] Fix"]
  fixes -> review
  ship -> exit
}
"""


def test_a_gate_that_sent_the_run_round_its_loop_leaves_nothing_outdated(
    shell: InteractiveShell, workdir: Path
):
    """``review`` ran again after ``fixes`` because ``fixes`` leads back to it: approving
    the fixes is no reason to doubt them (a trial found them shown outdated)."""
    pipeline = shell.run_cell_magic("pipeline", f"redo --workdir {workdir}", REDO_DOT)
    shell.run_line_magic("pipeline", "run")
    shell.run_line_magic("pipeline", "resume --choice F")
    shell.run_line_magic("pipeline", "resume --choice A")
    completed = ["start", "review", "fixes", "review", "ship", "exit"]
    assert pipeline.current_run.completed_nodes == completed
    assert states(pipeline)["fixes"] == "succeeded"
    assert "outdated" not in pipeline.view.status_line()
