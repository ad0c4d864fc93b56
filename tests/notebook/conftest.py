"""Fixtures for the notebook tests: a real InteractiveShell with the extension loaded."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from IPython.core.interactiveshell import InteractiveShell

from freshness_magic.notebook.extension import instance
from freshness_magic.notebook.magics import PipelineMagics

REVIEW_DOT = """digraph review {
  graph [goal="Ship the login fix"]
  start   [shape=Mdiamond]
  lint    [shape=parallelogram, tool_command="true", source_files="src/**/*.py", freshness="block"]
  draft   [prompt="Summarise the change for $goal: {tool.output}",
           source_files="docs/spec.md", freshness="warn"]
  approve [shape=hexagon, label="Ship it?"]
  done    [shape=Msquare]
  start -> lint -> draft -> approve
  approve -> done  [label="[Y] Yes"]
  approve -> draft [label="[N] No, redo"]
}
"""


def make_workdir(root: Path) -> Path:
    """A working directory with the files the review pipeline reads."""
    (root / "src").mkdir(parents=True, exist_ok=True)
    (root / "docs").mkdir(parents=True, exist_ok=True)
    (root / "src" / "login.py").write_text("def login():\n    return True\n")
    (root / "docs" / "spec.md").write_text("# Spec\nLogin must work.\n")
    return root


@pytest.fixture
def shell(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[InteractiveShell]:
    """The process-wide InteractiveShell with freshness_magic loaded; unloaded afterwards."""
    monkeypatch.chdir(tmp_path)
    sh = InteractiveShell.instance()
    sh.run_line_magic("load_ext", "freshness_magic")
    before = set(sh.user_ns)
    yield sh
    sh.run_line_magic("unload_ext", "freshness_magic")
    sh.config.pop("PipelineMagics", None)
    for key in set(sh.user_ns) - before:
        sh.user_ns.pop(key, None)
    for key in ("review", "gates", "xss", "other"):
        sh.user_ns.pop(key, None)


@pytest.fixture
def magics(shell: InteractiveShell) -> PipelineMagics:
    found = instance(shell)
    assert found is not None
    return found


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    return make_workdir(tmp_path / "work")


def load_review(shell: InteractiveShell, workdir: Path, dot: str = REVIEW_DOT) -> Any:
    return shell.run_cell_magic("pipeline", f"review --workdir {workdir}", dot)
