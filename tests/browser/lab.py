"""Driving JupyterLab and Notebook 7 pages: open a notebook, run it, wait for the kernel."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import nbformat

TIMEOUT_MS = 120_000


def write_notebook(path: Path, cells: list[str]) -> Path:
    """Write a notebook of code cells (no outputs) for the browser to run."""
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_code_cell(source) for source in cells]
    notebook.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    path.write_text(nbformat.writes(notebook))
    return path


def open_lab_notebook(page: Any, server: Any, name: str) -> None:
    """Open ``name`` in JupyterLab and wait until its kernel is idle."""
    page.goto(server.page_url(f"/lab/tree/{name}"), timeout=TIMEOUT_MS)
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=TIMEOUT_MS)
    wait_kernel_idle(page)


def wait_kernel_idle(page: Any) -> None:
    page.wait_for_function(
        """() => {
            const app = window.jupyterapp;
            const widget = app && app.shell.currentWidget;
            const session = widget && widget.sessionContext && widget.sessionContext.session;
            return !!(session && session.kernel && session.kernel.status === 'idle');
        }""",
        timeout=TIMEOUT_MS,
    )


def run_all_cells(page: Any) -> None:
    """Run every cell through JupyterLab's own command and wait for all of them to finish."""
    page.evaluate("window.jupyterapp.commands.execute('notebook:run-all-cells')")
    wait_all_executed(page)


def wait_all_executed(page: Any) -> None:
    page.wait_for_function(
        """() => {
            const prompts = [...document.querySelectorAll('.jp-CodeCell .jp-InputPrompt')];
            return prompts.length > 0 && prompts.every(p => /\\[\\d+\\]/.test(p.textContent));
        }""",
        timeout=TIMEOUT_MS,
    )
    wait_kernel_idle(page)


def error_outputs(page: Any) -> list[str]:
    """Texts of error outputs shown in the notebook (tracebacks, stderr of errors)."""
    return list(
        page.evaluate(
            """() => [...document.querySelectorAll(
                '.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"],'
                + ' .jp-RenderedText[data-mime-type="application/vnd.jupyter.error"]'
            )].map(e => e.textContent)"""
        )
    )


def dumps(value: object) -> str:
    return json.dumps(value)
