"""The view model's own states in a real InteractiveShell: next, skipped, outdated."""

from __future__ import annotations

from pathlib import Path

from IPython.core.interactiveshell import InteractiveShell

from freshness_magic.notebook.pipeline import NotebookPipeline
from freshness_magic.notebook.render import NodeState

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


def states(pipeline: NotebookPipeline) -> dict[str, str]:
    return {n: v.state.value for n, v in pipeline.views().items()}


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
    assert pipeline.views()["fix"].why == "not on the path taken"
    shell.run_line_magic("pipeline", "run")
    assert states(pipeline)["fix"] == "skipped" and states(pipeline)["done"] == "succeeded"
    assert NodeState.SKIPPED.value in shell.run_line_magic("pipeline", "status").text


STREAMING_DOT = """digraph streaming {
  start [shape=Mdiamond]
  work  [shape=parallelogram, tool_command="printf 'building...\\\\n'; sleep 1; echo built"]
  done  [shape=Msquare]
  start -> work -> done
}
"""


def test_a_running_nodes_tooltip_shows_its_latest_output(
    shell: InteractiveShell, workdir: Path
) -> None:
    """Issue 16: streamed output reaches the running node's tooltip while it runs."""
    pipeline: NotebookPipeline = shell.run_cell_magic(
        "pipeline", f"streaming --workdir {workdir}", STREAMING_DOT
    )
    seen: list[str] = []

    def watch(_event: object = None) -> None:
        view = pipeline.views()["work"]
        if view.state is NodeState.RUNNING:
            seen.append(view.why)

    pipeline.subscribe(watch)
    shell.run_line_magic("pipeline", "run")
    assert "running: building..." in seen
    assert pipeline.views()["work"].state is NodeState.SUCCEEDED


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
    run = pipeline.run
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
    pipeline.publish()
    assert states(pipeline)["slow"] == "succeeded" and states(pipeline)["done"] == "succeeded"
