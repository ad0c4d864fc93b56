"""With several pipelines loaded, magics act on the last loaded one unless ``--name`` says
otherwise. A trial's ``%pipeline resume release_gate`` answered "no node 'release_gate' in
sleeper" without naming the pipeline that has it; ``%pipeline?`` did not say which one a line
acts on."""

from __future__ import annotations

from pathlib import Path

import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell

from tests.pipelines import one_gate, one_step

RELEASE = one_gate("Release?", node="release_gate", name="release_sync")
SLEEPER = one_step('prompt="nap"', node="nap", name="sleeper")


def load_both(shell: InteractiveShell, tmp_path: Path) -> None:
    shell.run_cell_magic("pipeline", f"release_sync --workdir {tmp_path}", RELEASE)
    shell.run_cell_magic("pipeline", f"sleeper --workdir {tmp_path}", SLEEPER)


def refusal(shell: InteractiveShell, line: str) -> str:
    with pytest.raises(UsageError) as refused:
        shell.run_line_magic("pipeline", line)
    return str(refused.value)


def test_a_node_of_another_pipeline_is_refused_naming_it_and_the_name_to_add(
    shell: InteractiveShell, tmp_path: Path
) -> None:
    load_both(shell, tmp_path)
    assert refusal(shell, "resume release_gate --choice Y") == (
        "%pipeline resume: no node 'release_gate' in sleeper (the last loaded, which magics act"
        " on); 'release_gate' is a node of release_sync: add --name release_sync"
    )
    assert refusal(shell, "run --to release_gate --name sleeper") == (
        "%pipeline run --to: no node 'release_gate' in sleeper (named by --name); 'release_gate'"
        " is a node of release_sync: add --name release_sync"
    )
    assert refusal(shell, "why nowhere") == (
        "%pipeline why: no node 'nowhere' in sleeper; nodes: start, nap, done"
    )
    shell.run_line_magic("pipeline", "run --name release_sync")  # as it says: it waits there
    shell.run_line_magic("pipeline", "resume release_gate --choice Y --name release_sync")
    assert shell.user_ns["release_sync"].view.state_name == "completed"


def test_pipeline_help_says_which_pipeline_a_magic_acts_on(
    shell: InteractiveShell, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def help_text() -> str:
        shell.run_cell("%pipeline?")
        return capsys.readouterr().out

    assert "Now: no pipeline is loaded, so a %pipeline action has nothing to act on." in help_text()
    load_both(shell, tmp_path)
    assert (
        "Now: without --name, %pipeline acts on sleeper (the last loaded); loaded: release_sync,"
        " sleeper (add --name NAME for another)." in help_text()
    )
    shell.run_line_magic("pipeline", "status")  # the help is the magic's own, still in use
    assert "usage: %pipeline [-h] SUBCOMMAND" in help_text()
