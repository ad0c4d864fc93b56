"""A pipeline that does not load says why with everything ``freshness-magic validate`` says:
its errors, and its warnings with them in source order (a near-miss attribute explains the
error it causes)."""

from __future__ import annotations

from pathlib import Path

import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell

from tests.notebook.conftest import load_review

BAD1 = """digraph bad1 {
  start [shape=Mdiamond]
  fetch [shape=parallelogram, tool_comand="echo hi", source_file="data/customers.csv"]
  train [prompt="train", max_retry=2]
  done  [shape=Msquare]
  start -> fetch -> train -> done
}
"""


def _refusal_lines(shell: InteractiveShell, workdir: Path) -> list[str]:
    with pytest.raises(UsageError) as refused:
        shell.run_cell_magic("pipeline", f"bad1 --workdir {workdir}", BAD1)
    return str(refused.value).splitlines()


def test_a_refused_cell_shows_its_warnings_with_its_errors_in_source_order(
    shell: InteractiveShell, workdir: Path
) -> None:
    head, *listed = _refusal_lines(shell, workdir)
    assert head.startswith("pipeline `bad1` did not load: 1 validation error to fix")
    assert "3 warnings" in head
    # body line 3 is cell line 4: the error first (column 10), then the attributes it names
    assert listed[0].startswith("  %%pipeline bad1 cell:4:10: error tool_command_present:")
    assert listed[1].startswith("  %%pipeline bad1 cell:4:31: warning node_attr_known:")
    assert "did you mean `tool_command`?" in listed[1]
    assert "did you mean `source_files`?" in listed[2]
    assert listed[3].startswith("  %%pipeline bad1 cell:5:26: warning")
    assert "did you mean `max_retries`?" in listed[3]
    assert len(listed) == 4
    assert "bad1" not in shell.user_ns


def test_a_refused_file_shows_its_warnings_too(shell: InteractiveShell, workdir: Path) -> None:
    path = workdir / "bad1.dot"
    path.write_text(BAD1, encoding="utf-8")
    with pytest.raises(UsageError) as refused:
        shell.run_line_magic("pipeline", f"load {path} --workdir {workdir}")
    message = str(refused.value)
    assert f"{path}:3:10: error tool_command_present" in message
    assert f"{path}:3:31: warning node_attr_known" in message
    assert "did you mean `max_retries`?" in message


def test_a_cell_that_loads_still_prints_warnings_not_a_refusal(
    shell: InteractiveShell, workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fixed = BAD1.replace("tool_comand", "tool_command")
    shell.run_cell_magic("pipeline", f"bad1 --workdir {workdir}", fixed)
    err = capsys.readouterr().err
    assert "%%pipeline bad1 cell:4:55: warning node_attr_known" in err
    assert "did not load" not in err
    assert "bad1" in shell.user_ns


def test_an_error_from_a_pipeline_objects_method_is_one_line_as_a_magics(
    shell: InteractiveShell, workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A trial called ``fp.why("nosuch")`` in a cell: the magic says one line, the method
    showed a traceback through the package's modules."""
    load_review(shell, workdir)
    capsys.readouterr()
    result = shell.run_cell('review.why("nosuch")')
    assert result.error_in_exec is not None
    shown = capsys.readouterr()
    assert (shown.out + shown.err).strip().splitlines() == [
        "RunError: no node 'nosuch' in review; nodes: start, lint, draft, approve, done"
    ]


def test_a_pipeline_name_given_as_an_argument_points_at_name(
    shell: InteractiveShell, workdir: Path
) -> None:
    """A trial wrote ``%pipeline status review``: it said only "unrecognized arguments"."""
    load_review(shell, workdir)
    with pytest.raises(UsageError) as raised:
        shell.run_line_magic("pipeline", "status review")
    assert str(raised.value).endswith(
        "; a pipeline is named with --name: %pipeline status --name review"
    )
    with pytest.raises(UsageError) as other:
        shell.run_line_magic("pipeline", "status nosuch")
    assert "--name" not in str(other.value)


def test_a_load_path_with_an_undefined_variable_names_it(
    shell: InteractiveShell, workdir: Path
) -> None:
    """``%pipeline load {folder}/gate.dot`` with no ``folder`` said only "no such file"."""
    with pytest.raises(UsageError) as raised:
        shell.run_line_magic("pipeline", "load {nosuchfolder}/gate.dot")
    assert str(raised.value).endswith(
        "; {nosuchfolder} names no variable of this notebook (it is expanded from the "
        "notebook's variables: define it first, or write the path)"
    )
