"""The README's magic sequence, typed as written into a real InteractiveShell: the headline
``%%pipeline review`` cell, then ``step``, ``run --to approve`` and
``resume approve --choice Y``."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell

from freshness_magic.notebook.pipeline import Pipeline
from tests.notebook.conftest import make_workdir
from tests.test_readme_headline import REPO, headline


def readme_magic_lines() -> list[str]:
    """The README's block of ``%pipeline`` lines, as written (their comments included: a magic
    line takes a trailing shell comment)."""
    text = (REPO / "README.md").read_text()
    match = re.search(r"```text\n(%pipeline step.*?)\n```", text, re.S)
    assert match, "the README's block of magic lines moved; update this test"
    return match.group(1).splitlines()


def test_the_readme_sequence_runs_to_the_gate_answers_it_and_completes(
    shell: InteractiveShell, tmp_path: Path
) -> None:
    lines = readme_magic_lines()
    assert [re.split(r"\s{2,}#", line)[0].strip() for line in lines[:3]] == [
        "%pipeline step",
        "%pipeline run --to approve",
        '%pipeline resume approve --choice Y --comment "checked"',
    ]
    make_workdir(tmp_path)  # the folder the shell fixture changed to
    shell.run_cell_magic("pipeline", "review", headline() + "\n")
    pipeline = shell.user_ns["review"]
    assert isinstance(pipeline, Pipeline)
    results = []
    for line in lines[:3]:
        name, _, rest = line[1:].partition(" ")
        results.append(str(shell.run_line_magic(name, rest)))
        if len(results) == 2:  # `run --to approve` stops in front of the gate
            assert (pipeline.current_run.state.value, pipeline.current_run.next_node) == (
                "paused",
                "approve",
            )
            assert pipeline.current_run.pending_gate is None
    answered = results[2]
    assert answered.splitlines()[0] == "step: approve -> success; next: done", answered
    assert pipeline.current_run.state.value == "completed", answered
    assert pipeline.current_run.context.get("human.gate.comment") == "checked"


def test_resume_of_a_gate_the_run_is_not_in_front_of_says_what_to_run(
    shell: InteractiveShell, tmp_path: Path
) -> None:
    make_workdir(tmp_path)
    shell.run_cell_magic("pipeline", "review", headline() + "\n")
    shell.run_line_magic("pipeline", "step")
    with pytest.raises(UsageError) as info:
        shell.run_line_magic("pipeline", "resume approve --choice Y")
    assert str(info.value) == (
        "gate 'approve' is not waiting: the run is paused before 'lint'; run to it first "
        "(%pipeline run --to approve, or %pipeline run, which stops when a gate waits)"
    )
    with pytest.raises(UsageError, match="'lint' is not a human gate"):
        shell.run_line_magic("pipeline", "resume lint --choice Y")
    assert shell.user_ns["review"].current_run.next_node == "lint"  # nothing ran
