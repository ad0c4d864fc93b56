"""Fixtures for the notebook tests: the review pipeline and a working directory with the files it
reads. The shell with the extension loaded (``shell``, ``magics``) is in tests/conftest.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from IPython.core.interactiveshell import InteractiveShell

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
def workdir(tmp_path: Path) -> Path:
    return make_workdir(tmp_path / "work")


def load_review(shell: InteractiveShell, workdir: Path, dot: str = REVIEW_DOT) -> Any:
    return shell.run_cell_magic("pipeline", f"review --workdir {workdir}", dot)
