"""A node's output in the notebook is its latest attempt's: a retry or a new visit starts it
again (a real InteractiveShell, a real tool command)."""

from __future__ import annotations

from pathlib import Path

from IPython.core.interactiveshell import InteractiveShell

from freshness_magic.notebook.pipeline import Pipeline
from freshness_magic.views.details import node_details
from tests.pipelines import one_step

FLAKY = """digraph flaky {
  start [shape=Mdiamond]
  evaluate [shape=parallelogram, tool_command="%s"]
  tune [shape=parallelogram, tool_command="echo tuned"]
  done [shape=Msquare]
  start -> evaluate
  evaluate -> done [condition="outcome=success"]
  evaluate -> tune [condition="outcome=fail"]
  tune -> evaluate
}
"""
COMMAND = (
    "if [ -f tuned.flag ]; then echo auc 0.81; "
    "else echo AUC too low on first attempt >&2; touch tuned.flag; exit 1; fi"
)


def load(shell: InteractiveShell, workdir: Path, dot: str) -> Pipeline:
    pipeline = shell.run_cell_magic("pipeline", f"flaky --workdir {workdir}", dot)
    assert isinstance(pipeline, Pipeline)
    return pipeline


def test_a_second_visit_shows_only_its_own_output(shell: InteractiveShell, workdir: Path):
    pipeline = load(shell, workdir, FLAKY % COMMAND)
    assert shell.run_line_magic("pipeline", "run").text.splitlines()[-1].endswith("completed")
    assert node_details(pipeline.view, "evaluate").output.strip() == "auc 0.81"
    why = shell.run_line_magic("pipeline", "why evaluate").text.splitlines()
    assert [line for line in why if line.startswith("  output:")] == ["  output: auc 0.81"]


RETRIED = one_step("max_retries=1", name="retried")


def test_a_retried_attempt_shows_only_its_own_output(shell: InteractiveShell, workdir: Path):
    pipeline = shell.run_cell_magic("pipeline", f"retried --workdir {workdir}", RETRIED)
    assert isinstance(pipeline, Pipeline)
    shell.user_ns["tries"] = []
    shell.run_cell_magic(
        "node",
        "work",
        "tries.append(1)\nprint(f'attempt {len(tries)}')\n"
        "outcome = 'retry' if len(tries) == 1 else 'success'\n",
    )
    assert shell.run_line_magic("pipeline", "run").text.splitlines()[-1].endswith("completed")
    assert shell.user_ns["tries"] == [1, 1]
    assert node_details(pipeline.view, "work").output.strip() == "attempt 2"


def test_outputs_and_routes_so_far_come_back_with_a_run_reopened_after_a_restart(
    shell: InteractiveShell, workdir: Path
):
    """A terminal trial: after a restart `%pipeline why NODE` had lost its `output:` line, which
    `freshness-magic why RUN NODE` still printed."""
    gated = (FLAKY % "echo auc 0.81").replace(
        'evaluate -> done [condition="outcome=success"]',
        'gate [shape=hexagon, label="Ship?"]\n  evaluate -> gate [condition="outcome=success"]\n'
        '  gate -> done [label="[Y] Yes"]',
    )
    first = load(shell, workdir, gated)
    shell.run_line_magic("pipeline", "run")
    run_id = first.current_run.run_id
    before = shell.run_line_magic("pipeline", "why evaluate").text.splitlines()
    assert "  output: auc 0.81" in before
    del shell.user_ns["flaky"]  # a kernel restart
    again = load(shell, workdir, gated)
    shell.run_line_magic("pipeline", "resume")
    assert again.current_run.run_id == run_id
    assert shell.run_line_magic("pipeline", "why evaluate").text.splitlines() == before
    assert again.view.model.running is None and again.view.views()["gate"].state.value == "waiting"
