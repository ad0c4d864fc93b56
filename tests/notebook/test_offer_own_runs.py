"""A notebook is offered only the runs it started: a trial with two notebooks in one work
directory saw one notebook's banner offer the other's run (and its Resume refused). A run opened
from a notebook records which notebook started it (``started_by.json``); runs with no record
(the command line, older runs) are offered to every notebook as before."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from IPython.core.interactiveshell import InteractiveShell

from tests.pipelines import one_gate

GATED = one_gate("Go?", node="review", name="g")


def load(shell: InteractiveShell, tmp_path: Path) -> object:
    shell.run_cell_magic("pipeline", f"g --workdir {tmp_path}", GATED)
    return shell.user_ns["g"]


def test_two_notebooks_in_one_folder_are_each_offered_their_own_runs(
    shell: InteractiveShell, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("JPY_SESSION_NAME", str(tmp_path / "a.ipynb"))
    load(shell, tmp_path)
    shell.run_line_magic("pipeline", "run")
    shell.run_line_magic("pipeline", "reset")  # the run waits at review, on disk
    (run_dir,) = (tmp_path / ".freshness" / "runs").iterdir()
    recorded = json.loads((run_dir / "started_by.json").read_text())
    assert recorded == {"notebook": str(tmp_path / "a.ipynb")}

    monkeypatch.setenv("JPY_SESSION_NAME", str(tmp_path / "b.ipynb"))
    assert load(shell, tmp_path).view.resume_offer is None  # a's run, not offered in b

    monkeypatch.setenv("JPY_SESSION_NAME", str(tmp_path / "a.ipynb"))
    offer = load(shell, tmp_path).view.resume_offer
    assert offer is not None and offer.run_dir == run_dir and offer.where == "review"

    monkeypatch.delenv("JPY_SESSION_NAME")  # a terminal IPython: no notebook to tell apart
    assert load(shell, tmp_path).view.resume_offer is not None
