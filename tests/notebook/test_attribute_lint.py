"""Loading a pipeline in the notebook runs the freshness and evidence lint rules (registered on
the session's Validator, not built into the engine), with positions counted in the cell."""

from __future__ import annotations

from pathlib import Path

import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell

from freshness_magic.notebook.pipeline import Pipeline

BAD = """digraph bad {
  start [shape=Mdiamond]
  a [prompt="x", freshness=blok, evidence=strict, commit=perhaps]
  done [shape=Msquare]
  start -> a -> done
}
"""


def test_a_cell_with_bad_freshness_and_evidence_values_is_refused(
    shell: InteractiveShell, workdir: Path
) -> None:
    with pytest.raises(UsageError) as info:
        shell.run_cell_magic("pipeline", f"bad --workdir {workdir}", BAD)
    message = str(info.value)
    assert "3 validation errors" in message
    # body line 3 is cell line 4 (the magic line is line 1)
    assert "%%pipeline bad cell:4:18: error freshness_valid: node `a`: freshness 'blok'" in message
    assert "%%pipeline bad cell:4:34: error evidence_valid: node `a`: evidence='strict'" in message
    assert "%%pipeline bad cell:4:51: error attr_type: node `a`: commit='perhaps'" in message
    assert "bad" not in shell.user_ns


def test_load_from_a_file_runs_them_too(shell: InteractiveShell, workdir: Path) -> None:
    path = workdir / "bad.dot"
    path.write_text(BAD.replace("freshness=blok, evidence=strict, ", ""), encoding="utf-8")
    with pytest.raises(UsageError, match=r"bad\.dot:3:18: error attr_type: node `a`: commit="):
        shell.run_line_magic("pipeline", f"load {path} --workdir {workdir}")


def test_their_warnings_do_not_stop_a_load_and_are_shown(
    shell: InteractiveShell, workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    warned = BAD.replace(", freshness=blok, evidence=strict, commit=perhaps", ", freshness=warn")
    warned = warned.replace("start -> a -> done", 'start -> a -> done [condition="outcome=succes"]')
    pipeline = shell.run_cell_magic("pipeline", f"warned --workdir {workdir}", warned)
    assert isinstance(pipeline, Pipeline)
    assert pipeline.graph.nodes["a"].attrs["freshness"] == "warn"
    err = capsys.readouterr().err
    assert "%%pipeline warned cell:6:23: warning condition_values: edge a -> done:" in err
    assert "%%pipeline warned cell:4:18: warning freshness_sources: node `a`" in err
