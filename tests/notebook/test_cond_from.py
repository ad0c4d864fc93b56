"""``%pipeline cond EXPR --from NODE`` and the playground evaluate in the context and outcome of
NODE's execution (its latest, or ``--step N``), not in the latest context of the run."""

from __future__ import annotations

from pathlib import Path

import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell

RELEASE = """digraph release {
  start       [shape=Mdiamond]
  route       [shape=parallelogram, tool_command="cat RELEASE_KIND"]
  minor_notes [shape=parallelogram, tool_command="echo '## 1.3.0'"]
  major_notes [shape=parallelogram, tool_command="echo '## 2.0.0'"]
  gate        [shape=hexagon, label="Publish?"]
  done        [shape=Msquare]
  start -> route
  route -> minor_notes [condition="context.tool.output=minor"]
  route -> major_notes [condition="context.tool.output=major"]
  route -> gate
  minor_notes -> gate
  major_notes -> gate
  gate -> done [label="[Y] Yes"]
}
"""


def cond(shell: InteractiveShell, args: str) -> str:
    return str(shell.run_line_magic("pipeline", f"cond {args}"))


def release(shell: InteractiveShell, tmp_path: Path) -> object:
    (tmp_path / "RELEASE_KIND").write_text("minor\n")
    pipeline = shell.run_cell_magic("pipeline", f"release --workdir {tmp_path}", RELEASE)
    shell.run_line_magic("pipeline", "run")  # route -> minor_notes -> waits at the gate
    return pipeline


def test_cond_from_a_node_reads_the_context_that_node_saw(
    shell: InteractiveShell, tmp_path: Path
) -> None:
    pipeline = release(shell, tmp_path)
    run = pipeline.view.live_run
    assert run.context["tool.output"] == "## 1.3.0"  # the latest tool's, not route's
    said = cond(shell, '"context.tool.output=minor" --from route').splitlines()
    assert said[0] == "in the context after route ran (step 2)"
    assert said[1] == "result: true"
    assert said[-1].startswith("edge from route: -> minor_notes")
    # without --from: the live context, as before
    assert cond(shell, '"context.tool.output=minor"').splitlines()[0] == "result: false"
    # the playground asks the same way, and highlights the edge routing took from route
    answer = pipeline.view.explain("context.tool.output=minor", "route", infer_node=True)
    assert answer.step == 2 and answer.edge is not None
    assert (answer.edge.source, answer.edge.target) == ("route", "minor_notes")


def test_cond_step_reads_an_earlier_execution(shell: InteractiveShell, tmp_path: Path) -> None:
    pipeline = release(shell, tmp_path)
    (tmp_path / "RELEASE_KIND").write_text("major\n")
    shell.run_line_magic("pipeline", "retry route")  # route again: major this time
    run = pipeline.view.live_run
    steps = [t.step for t in run.traces if t.node_id == "route"]
    assert len(steps) == 2
    latest = cond(shell, '"context.tool.output=major" --from route').splitlines()
    assert latest[:2] == [f"in the context after route ran (step {steps[1]})", "result: true"]
    assert latest[-1].startswith("edge from route: -> major_notes")
    earlier = cond(shell, f'"context.tool.output=major" --from route --step {steps[0]}')
    assert earlier.splitlines()[:2] == [
        f"in the context after route ran (step {steps[0]})",
        "result: false",
    ]
    assert earlier.splitlines()[-1].startswith("edge from route: -> minor_notes")
    with pytest.raises(UsageError, match=r"no execution of 'route' at step 1 \(its steps: 2, "):
        cond(shell, '"outcome=success" --from route --step 1')


def test_cond_from_a_node_that_has_not_run_uses_the_live_context(
    shell: InteractiveShell, tmp_path: Path
) -> None:
    release(shell, tmp_path)
    said = cond(shell, '"context.tool.output=minor" --from major_notes').splitlines()
    assert said[0] == "result: false"


def test_the_details_panel_shows_what_an_execution_read_and_wrote(
    shell: InteractiveShell, tmp_path: Path
) -> None:
    dot = RELEASE.replace(
        'gate        [shape=hexagon, label="Publish?"]',
        'notes [prompt="Announce {tool.output}"]\n  gate [shape=hexagon, label="Publish?"]',
    ).replace("minor_notes -> gate", "minor_notes -> notes -> gate")
    (tmp_path / "RELEASE_KIND").write_text("minor\n")
    pipeline = shell.run_cell_magic("pipeline", f"release --workdir {tmp_path}", dot)
    shell.run_line_magic("pipeline", "run")
    details = pipeline.view.details("notes")
    assert details["execution"] == "step 4 (success)"
    assert details["read"] == [
        "tool.output = '## 1.3.0', from minor_notes (step 3)",
        "which context.* keys were set (its fidelity carries them): none",
    ]
    assert "last_stage = 'notes'" in details["wrote"]
    assert pipeline.view.details("route")["read"] == ["nothing from the context"]
    assert "execution" not in pipeline.view.details("major_notes")
