"""Driving JupyterLab and Notebook 7 pages: open a notebook, run it, wait for the kernel."""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import urllib.request
from pathlib import Path
from typing import Any

import nbformat

REPO = Path(__file__).resolve().parents[2]
SCREENSHOTS = REPO / "build" / "screenshots"
PICTURES = REPO / "docs" / "images"
"""The documentation's pictures: `make pictures` renews them; a test run leaves them alone."""
"""Where every browser test leaves pictures of its final state (reported at the end of the run)."""
SCREENSHOT_INDEX = SCREENSHOTS / "browser-screenshots.md"
"""One line per picture of the last browser test run: file name and what it shows."""
TIMEOUT_MS = 120_000
WAIT_MS = 60_000
"""How long a widget update may take to show up after a click or a cell run."""


def write_notebook(path: Path, cells: list[str]) -> Path:
    """Write a notebook of code cells (no outputs) for the browser to run."""
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_code_cell(source) for source in cells]
    notebook.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(nbformat.writes(notebook))
    return path


def open_lab_notebook(page: Any, server: Any, name: str) -> None:
    """Open ``name`` in JupyterLab, alone, and wait until its kernel is idle.

    A JupyterLab page left empty by the previous test (no document, dialog or kernel) opens the
    notebook with its own command; any other page loads JupyterLab afresh with a new, empty
    workspace, so notebooks opened by earlier tests are not restored (they would start kernels
    again and take the focus).
    """
    if lab_is_empty(page, server):
        page.evaluate(
            """async (path) => {
                const app = window.jupyterapp;
                await app.commands.execute(
                    'filebrowser:open-path', {path, dontShowBrowser: true});
                for (const widget of [...app.shell.widgets('main')]) {
                    if (widget.id.startsWith('launcher')) widget.dispose();
                }
            }""",
            name,
        )
    else:
        workspace = "t" + secrets.token_hex(6)
        page.goto(server.page_url(f"/lab/workspaces/{workspace}/tree/{name}"), timeout=TIMEOUT_MS)
    wait_notebook_ready(page, name)


def lab_is_empty(page: Any, server: Any) -> bool:
    """Whether ``page`` is a JupyterLab of ``server`` with nothing open: nothing in the main area
    but the launcher JupyterLab shows when it is emptied, no dialog, and no kernel session on the
    server. Opening a notebook the way a ``/lab/tree/...`` address does (the file browser goes to
    its folder) and closing that launcher then leaves the same window as a fresh page."""
    if not page.url.startswith(f"{server.url}/lab"):
        return False
    empty = page.evaluate(
        """() => {
            const app = window.jupyterapp;
            return !!(app && app.shell && app.commands
                      && [...app.shell.widgets('main')].every(w => w.id.startsWith('launcher'))
                      && !document.querySelector('.jp-Dialog'));
        }"""
    )
    return bool(empty) and not list_sessions(server)


def close_lab_documents(page: Any) -> None:
    """Dispose every widget of JupyterLab's main area (without a save prompt) and move the mouse
    away, so the next test starts from an empty lab; nothing to do on any other page."""
    page.mouse.move(0, 0)
    page.evaluate(
        """() => {
            const app = window.jupyterapp;
            if (!app || !app.shell || !app.shell.widgets) return;
            for (const widget of [...app.shell.widgets('main')]) widget.dispose();
        }"""
    )


def open_nb7_notebook(page: Any, server: Any, name: str) -> None:
    """Open ``name`` in the Notebook 7 interface and wait until its kernel is idle."""
    page.goto(server.page_url(f"/notebooks/{name}"), timeout=TIMEOUT_MS)
    wait_notebook_ready(page, name)


def wait_notebook_ready(page: Any, name: str) -> None:
    """Wait until the notebook ``name`` is the current widget, with its cells and an idle kernel."""
    page.wait_for_function(
        """(name) => {
            const app = window.jupyterapp;
            const widget = app && app.shell.currentWidget;
            return !!(widget && widget.context && widget.context.path === name
                      && widget.node.querySelector('.jp-Notebook .jp-Cell'));
        }""",
        arg=name,
        timeout=TIMEOUT_MS,
    )
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


def execution_count(page: Any, index: int) -> int | None:
    """The execution count shown in the prompt of code cell ``index`` (None if never run)."""
    text = page.evaluate(
        "(i) => document.querySelectorAll('.jp-CodeCell .jp-InputPrompt')[i].textContent", index
    )
    digits = "".join(ch for ch in str(text) if ch.isdigit())
    return int(digits) if digits else None


def run_cell(page: Any, index: int) -> None:
    """Run cell ``index`` with JupyterLab's command and wait for its new execution count."""
    before = execution_count(page, index)
    page.evaluate(
        """(i) => {
            const app = window.jupyterapp;
            app.shell.currentWidget.content.activeCellIndex = i;
            return app.commands.execute('notebook:run-cell');
        }""",
        index,
    )
    page.wait_for_function(
        """([i, before]) => {
            const prompt = document.querySelectorAll('.jp-CodeCell .jp-InputPrompt')[i];
            const m = /\\[(\\d+)\\]/.exec(prompt.textContent);
            return !!m && Number(m[1]) !== before;
        }""",
        arg=[index, before],
        timeout=TIMEOUT_MS,
    )
    wait_kernel_idle(page)


def cell_text(page: Any, index: int) -> str:
    """The text shown in the outputs of code cell ``index``."""
    return str(
        page.evaluate(
            "(i) => document.querySelectorAll('.jp-CodeCell')[i]"
            ".querySelector('.jp-OutputArea').innerText",
            index,
        )
    )


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


_FONT = re.compile(r"/static/[\w/.-]+\.(woff2?|ttf|eot)(\?.*)?$")
"""Icon fonts of the Jupyter front ends: Notebook 7 sometimes answers 403 for them, which
says nothing about the page under test (the icons fall back to text)."""


def page_errors(page: Any) -> list[str]:
    """Console errors and HTTP error responses of the page, except the front ends' own fonts."""
    found = list(page.console_errors) + list(page.bad_responses)
    return [e for e in found if not _FONT.search(e.rsplit(" ", 1)[-1])]


def save_screenshot(page: Any, name: str, target: Any = None, caption: str = "") -> Path:
    """Save ``target`` (a locator) or the whole page as ``<name>.png`` and list it in the index.

    For an element taller than the window the window is made tall enough first (JupyterLab
    scrolls inside its own panels, so a plain element shot would be cut off).
    """
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    if target is None:
        page.screenshot(path=str(path), full_page=True)
    else:
        size = page.viewport_size
        height = int(target.evaluate("e => e.getBoundingClientRect().height"))
        if size and height + 250 > size["height"]:
            page.set_viewport_size({"width": size["width"], "height": height + 250})
        target.scroll_into_view_if_needed()
        target.screenshot(path=str(path))
    record_screenshot(path, caption)
    return path


def publish_picture(shot: Path, name: str) -> None:
    """Copy ``shot`` to the documentation's pictures when asked (``FM_UPDATE_PICTURES=1``,
    which `make pictures` sets), so the suite never changes files the repository tracks."""
    if os.environ.get("FM_UPDATE_PICTURES") == "1":
        PICTURES.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(shot, PICTURES / name)


def record_screenshot(path: Path, caption: str) -> None:
    """Add (or replace) ``path``'s line in the screenshot index of this test run."""
    lines = SCREENSHOT_INDEX.read_text().splitlines() if SCREENSHOT_INDEX.exists() else []
    entry = f"- `{path.name}`: {caption or 'final state'}"
    lines = [line for line in lines if not line.startswith(f"- `{path.name}`")] + [entry]
    SCREENSHOT_INDEX.write_text("\n".join(lines) + "\n")


def reset_screenshot_index() -> None:
    """Remove the pictures listed by the previous run's index, and the index itself."""
    if not SCREENSHOT_INDEX.exists():
        return
    for line in SCREENSHOT_INDEX.read_text().splitlines():
        if line.startswith("- `") and "`" in line[3:]:
            (SCREENSHOTS / line[3 : line.index("`", 3)]).unlink(missing_ok=True)
    SCREENSHOT_INDEX.unlink()


def list_sessions(server: Any) -> list[dict[str, Any]]:
    """The server's kernel sessions."""
    listing = urllib.request.Request(f"{server.url}/api/sessions?token={server.token}")
    with urllib.request.urlopen(listing, timeout=10) as response:
        return list(json.loads(response.read()))


def shutdown_sessions(server: Any) -> None:
    """Stop every kernel session of the server (each test opens its own notebook and kernel)."""
    for session in list_sessions(server):
        request = urllib.request.Request(
            f"{server.url}/api/sessions/{session['id']}?token={server.token}", method="DELETE"
        )
        with urllib.request.urlopen(request, timeout=30):
            pass


def dumps(value: object) -> str:
    return json.dumps(value)
