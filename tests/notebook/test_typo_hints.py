"""A misspelt subcommand, pipeline name or condition says what was likely meant: the same
near-miss hints as ``validate`` gives in DOT."""

from __future__ import annotations

from pathlib import Path

import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell

from tests.notebook.conftest import load_review


def _refusal(shell: InteractiveShell, line: str) -> str:
    with pytest.raises(UsageError) as refused:
        shell.run_line_magic("pipeline", line)
    return str(refused.value)


def test_a_misspelt_subcommand_names_the_likely_one(shell: InteractiveShell) -> None:
    said = _refusal(shell, "stauts")
    assert "invalid choice: 'stauts' (did you mean 'status'?" in said
    assert "'evidence'" in said  # the choices are still listed
    assert "did you mean" not in _refusal(shell, "frobnicate")
    # swapped letters name the command spelt with them, not the one that halts the run
    assert "(did you mean 'step'?" in _refusal(shell, "stpe")
    assert "(did you mean 'step' or 'stop'?" in _refusal(shell, "stp")  # a tie names both


def test_an_unknown_option_points_at_its_subcommands_help(
    shell: InteractiveShell, workdir: Path
) -> None:
    load_review(shell, workdir)
    assert _refusal(shell, "step --to draft") == (
        "%pipeline step: unrecognized arguments: --to draft (see %pipeline step --help)"
    )
    # an empty argument (an unset variable) is shown as one, not as a blank
    assert _refusal(shell, 'status ""') == (
        "%pipeline status: unrecognized arguments: '' (see %pipeline status --help)"
    )


def test_a_misspelt_pipeline_name_names_the_likely_one(
    shell: InteractiveShell, workdir: Path
) -> None:
    load_review(shell, workdir)
    said = _refusal(shell, "step --name reveiw")
    assert said == "no pipeline named 'reveiw' (did you mean 'review'?); loaded: review"
    assert "did you mean" in _refusal(shell, "show reviw")
    assert _refusal(shell, "status --name zzz") == "no pipeline named 'zzz'; loaded: review"


def test_cond_warns_about_a_key_or_a_value_as_validate_does(
    shell: InteractiveShell, workdir: Path
) -> None:
    load_review(shell, workdir)
    out = shell.run_line_magic("pipeline", 'cond "outcom=success" --from lint').text
    assert out.splitlines()[0] == "result: false"
    assert (
        "warning: key `outcom` looks like a typo of `outcome`; as written it reads the context "
        "key `outcom`" in out
    )
    assert "(fix: write `outcome` instead of `outcom`)" in out
    assert "edge lint" not in out.replace("edge from lint:", "")  # no stand-in edge named
    out = shell.run_line_magic("pipeline", 'cond "outcome=succes"').text
    assert (
        "warning: `outcome=succes` can never hold: 'succes' is not an outcome status "
        "(fix: write `outcome=success`)" in out
    )
    out = shell.run_line_magic("pipeline", 'cond "outcome=success && context.x=1"').text
    assert "warning" not in out
