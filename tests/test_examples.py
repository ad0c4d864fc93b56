"""The examples outside IPython: the plain script runs the quickstart to its end, and
``marimo export html`` runs the marimo notebook headless into a page that holds the view."""

from __future__ import annotations

import html
import os
import re
import subprocess
import sys
from pathlib import Path

from tests.processes import REPO

EXAMPLE = REPO / "examples" / "marimo_quickstart.py"


def export_marimo_example(out: Path) -> Path:
    """``marimo export html`` of the example into ``out``; the written page."""
    page = out / "marimo_quickstart.html"
    done = subprocess.run(
        [sys.executable, "-m", "marimo", "export", "html", str(EXAMPLE), "-o", str(page)],
        cwd=out,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "HOME": str(out)},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return page


def test_the_exported_page_holds_the_view_of_the_run_at_its_gate(tmp_path: Path) -> None:
    page = html.unescape(export_marimo_example(tmp_path).read_text())
    page = page.encode().decode("unicode_escape", errors="ignore")
    drawn = re.findall(r'data-node="(\w+)"', page)
    assert set(drawn) == {"start", "lint", "draft", "approve", "done"}
    # the widget's state: its nodes in order, one state code each (succeeded x3, next, pending)
    assert '"nodes": ["start", "lint", "draft", "approve", "done"]' in page
    assert '"states": "sssnp"' in page
    shown = re.findall(r"pipeline review: [^\n\"]*", page)
    assert any("next: approve" in line and "3/5 nodes run" in line for line in shown), shown
    assert "Traceback" not in page


def test_the_script_example_runs_the_quickstart_through_its_gate(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(REPO / "examples" / "script_quickstart.py")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "step: approve -> waiting" in lines
    assert "step: approve -> success; next: done" in lines
    assert "pipeline review: completed · 5/5 nodes run" in lines
    assert done.stderr == ""
