"""Which layout engine draws the graph: ``dot`` on PATH, else pygraphviz, else a one-line note.

``PATH`` is pointed at an empty folder so no ``dot`` program can be found; a missing pygraphviz is
``sys.modules["pygraphviz"] = None`` (its import then fails as if it were not installed).
"""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from freshness_magic.engine.pipeline import load_pipeline
from freshness_magic.views.render import LayoutUnavailable, build_layout, run_dot

PIPELINE = """digraph g {
  start [shape=Mdiamond]
  work  [label="Work <b>&amp;</b>"]
  done  [shape=Msquare]
  start -> work -> done [label="on"]
}
"""


@pytest.fixture
def no_dot(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))


def test_without_dot_pygraphviz_lays_the_graph_out(no_dot: None) -> None:
    layout = build_layout(load_pipeline(PIPELINE))
    assert set(layout.index) == {"start", "work", "done"}
    assert "<svg" in layout.svg


def test_without_any_engine_the_error_is_one_line_with_the_install_hint(
    no_dot: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "pygraphviz", None)
    with pytest.raises(LayoutUnavailable) as caught:
        run_dot("digraph { a -> b }")
    message = str(caught.value)
    assert "\n" not in message
    assert "apt-get install graphviz" in message
    assert "brew install graphviz" in message
    assert "conda install" in message


def test_a_kernel_without_any_engine_shows_the_note_and_the_text_view(tmp_path: Path) -> None:
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [
        nbformat.v4.new_code_cell(
            f'import os, sys\nos.environ["PATH"] = {str(empty)!r}\nsys.modules["pygraphviz"] = None'
        ),
        nbformat.v4.new_code_cell("%load_ext freshness_magic"),
        nbformat.v4.new_code_cell(f"%%pipeline g\n{PIPELINE}"),
    ]
    NotebookClient(
        notebook,
        timeout=120,
        kernel_name="python3",
        resources={"metadata": {"path": str(tmp_path)}},
        extra_arguments=["--IPKernelApp.log_level=ERROR"],
    ).execute()
    outputs = notebook.cells[2].outputs
    assert [o.output_type for o in outputs if o.output_type == "error"] == []
    text = "".join(o.get("data", {}).get("text/plain", "") for o in outputs)
    first, *rest = text.splitlines()
    assert first.startswith("no graph layout: the Graphviz program `dot` is not installed")
    assert any("work" in line for line in rest)
    assert "Traceback" not in text
