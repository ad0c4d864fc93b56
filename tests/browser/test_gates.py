"""A gate is answered only by an act aimed at it, in a real JupyterLab and Notebook 7.

A trial answered "Approve docs" with one key: the user clicked an empty part of the graph to pan
it and pressed ``a`` (JupyterLab's "insert cell above"), and a keydown listener on the whole view
clicked the matching choice. Now a key pressed on the graph, or in the notebook's command mode,
leaves the gate waiting; a click on a choice answers; a choice that goes on to a node that looks
irreversible (here a tool node that publishes) is armed by the first click and answered by the
second.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import nbformat
import pytest

from tests.browser.fm import WIDGET, wait_node_states, widget_log_errors
from tests.browser.lab import (
    REPO,
    WAIT_MS,
    error_outputs,
    open_lab_notebook,
    open_nb7_notebook,
    run_all_cells,
    save_screenshot,
    wait_notebook_ready,
    write_notebook,
)
from tests.waiting import wait_until

pytestmark = pytest.mark.browser

DOCS = """digraph docs {
  start     [shape=Mdiamond]
  draft     [prompt="draft the docs"]
  docs_gate [shape=hexagon, label="Docs OK?"]
  publish   [shape=parallelogram, tool_command="touch published.txt"]
  done      [shape=Msquare]
  start -> draft -> docs_gate
  docs_gate -> done    [label="[A] Approve docs"]
  docs_gate -> draft   [label="[R] Rework"]
  docs_gate -> publish [label="[P] Publish now"]
  publish -> done
}
"""

CELLS = ".jp-Notebook .jp-Cell"


@pytest.mark.parametrize("ui", ["lab", "nb7"])
def test_only_a_click_on_a_choice_answers_a_gate(lab_server: Any, page: Any, ui: str) -> None:
    """Keys on the graph and in command mode leave the gate waiting; the clicked choice answers
    it; Publish (a tool node) needs a second click, and Escape disarms the first."""
    folder = lab_server.root / f"gates_{ui}"
    write_notebook(
        folder / "docs.ipynb",
        ["%load_ext freshness_magic", "%%pipeline docs\n" + DOCS, "%pipeline run"],
    )
    opener = open_lab_notebook if ui == "lab" else open_nb7_notebook
    opener(page, lab_server, f"gates_{ui}/docs.ipynb")
    run_all_cells(page)
    wait_node_states(page, {"draft": "succeeded", "docs_gate": "waiting", "done": "pending"})
    cells = page.locator(CELLS)
    before = cells.count()

    # An empty corner of the graph, clicked as one does to pan, then the gate's keys.
    page.locator(f"{WIDGET} .fm-viewport").click(position={"x": 3, "y": 3})
    assert page.evaluate("() => document.activeElement.classList.contains('fm-viewport')")
    for key in ("a", "p", "p", "r", "y"):
        page.keyboard.press(key)
    assert cells.count() == before  # nor did they act on the notebook's cells
    assert page.locator(f"{WIDGET} .fm-gate-armed").count() == 0

    # The notebook in command mode (a cell selected, not edited): `a` is its "insert cell above".
    page.locator(f"{CELLS} .jp-InputPrompt").first.click()
    page.keyboard.press("Escape")
    page.keyboard.press("a")
    wait_until(lambda: cells.count() == before + 1, "the notebook inserted a cell above")
    page.keyboard.press("p")
    page.keyboard.press("p")

    # A click on Rework answers: the run goes back to draft and asks again (visit 2). Had a key
    # answered before it, the run would be past the gate and this click would find no gate.
    page.locator(f"{WIDGET} .fm-gate-choice-R").click()
    visit = page.locator(f"{WIDGET} .fm-gate-visit")
    visit.wait_for(timeout=WAIT_MS)
    assert visit.inner_text() == "asked again: visit 2"
    wait_node_states(page, {"docs_gate": "waiting", "done": "pending", "publish": "pending"})
    assert not (folder / "published.txt").exists()

    # Publish goes on to a tool node: the first click arms it and says why, Escape disarms it.
    publish = page.locator(f"{WIDGET} .fm-gate-choice-P")
    assert page.locator(f"{WIDGET} .fm-gate-choice-A.fm-gate-choice-confirm").count() == 0
    publish.click()
    assert publish.inner_text() == "Confirm: [P] Publish now"
    line = page.locator(f"{WIDGET} .fm-gate-confirm")
    assert line.is_visible()
    assert "publish, which runs a command: touch published.txt" in line.inner_text()
    save_screenshot(
        page,
        f"gate_confirm_{ui}",
        page.locator(f"{WIDGET} .fm-gate"),
        "a choice that goes on to a tool node, after its first click: armed, saying why and"
        " that a second click answers",
    )
    page.keyboard.press("Escape")
    assert publish.inner_text() == "[P] Publish now" and not line.is_visible()
    publish.click()
    publish.click()
    wait_node_states(page, {"publish": "succeeded", "done": "succeeded"})
    assert (folder / "published.txt").exists()
    assert page.locator(f"{WIDGET} .fm-gate").is_hidden()
    save_screenshot(
        page,
        f"gate_answered_by_click_{ui}",
        page.locator(WIDGET),
        "keys on the graph and in command mode left the gate waiting; the clicked Rework and"
        " the confirmed Publish answered it",
    )
    assert page.locator(".fm-static-follow").first.is_hidden()  # the view is drawn instead

    # Saved now, the notebook's static graph (for exports and GitHub) shows the completed run.
    page.evaluate("() => window.jupyterapp.commands.execute('docmanager:save')")
    wait_until(lambda: "completed" in followed_status(folder / "docs.ipynb"), "saved follow")
    assert error_outputs(page) == []
    assert widget_log_errors(page) == []


def followed_status(path: Path) -> str:
    """The status line of the static graph saved in the notebook at ``path``."""
    notebook = nbformat.read(path, as_version=4)
    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            html = output.get("data", {}).get("text/html", "")
            if "fm-static-follow" in html:
                return html.split('fm-static-status">', 1)[1].split("<", 1)[0]
    return ""


HELD = """digraph held {
  start   [shape=Mdiamond]
  approve [shape=hexagon, label="Go?"]
  work    [shape=parallelogram, tool_command="until test -f go; do sleep 0.1; done"]
  done    [shape=Msquare]
  start -> approve
  approve -> work [label="[Y] Yes"]
  work -> done
}
"""


def test_a_refused_action_says_why_next_to_its_button(lab_server: Any, page: Any) -> None:
    """A trial's Resume click on the banner showed its refusal as a raw RunError about 1,000 px
    below the button. Here the run the banner offers is driven meanwhile by the command line:
    the refusal is shown right under the banner, without the exception's class name."""
    folder = lab_server.root / "gates_refused"
    write_notebook(
        folder / "held.ipynb",
        ["%load_ext freshness_magic", "%%pipeline held\n" + HELD, "%pipeline run"],
    )
    open_lab_notebook(page, lab_server, "gates_refused/held.ipynb")
    run_all_cells(page)
    wait_node_states(page, {"approve": "waiting"})
    page.locator(f"{WIDGET} .fm-reset").click()  # the run stays on disk, offered
    offer = page.locator(f"{WIDGET} .fm-banner[data-kind='resume']")
    offer.wait_for(state="visible", timeout=WAIT_MS)
    (run_dir,) = (folder / ".freshness" / "runs").iterdir()
    driver = subprocess.Popen(
        [sys.executable, "-m", "freshness_magic", "resume", str(run_dir), "--answer",
         "approve=Y"],
        cwd=folder,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        wait_until(lambda: (run_dir / "nodes" / "work").exists(), "the command line drives it")
        page.locator(f"{WIDGET} .fm-banner-resume").click()
        refusal = page.locator(f"{WIDGET} .fm-banner + .fm-refusal")
        refusal.wait_for(state="visible", timeout=WAIT_MS)
        said = refusal.inner_text()
        assert said.startswith(f"run directory {run_dir} is driven by another process"), said
        gap = page.evaluate(
            """(s) => document.querySelector(s + ' .fm-refusal').getBoundingClientRect().top
                - document.querySelector(s + ' .fm-banner').getBoundingClientRect().bottom""",
            WIDGET,
        )
        assert 0 <= gap < 20, gap
        save_screenshot(
            page,
            "gate_refusal_beside_resume",
            page.locator(WIDGET),
            "Resume refused (the command line drives that run now): the reason under the banner",
        )
    finally:
        (folder / "go").touch()
        driver.wait(timeout=60)


CHAIN = """digraph chain {
  start [shape=Mdiamond]
  a     [prompt="a"]
  b     [prompt="b"]
  done  [shape=Msquare]
  start -> a -> b -> done
}
"""


def test_after_each_of_five_reloads_run_and_reset_are_answered(lab_server: Any, page: Any) -> None:
    """A Notebook 7 trial dropped one Run click in three after a page reload (the server said
    ``Unknown subshell_id``; the view then had Run off and Stop on, the kernel idle). Five times:
    save, reload, and the restored view's Run runs the pipeline and its Reset starts over."""
    name = "gates_reload/chain.ipynb"
    write_notebook(
        lab_server.root / name, ["%load_ext freshness_magic", "%%pipeline chain\n" + CHAIN]
    )
    open_nb7_notebook(page, lab_server, name)
    run_all_cells(page)
    wait_node_states(page, {"start": "next", "done": "pending"})
    for attempt in range(5):
        page.evaluate("() => window.jupyterapp.commands.execute('docmanager:save')")
        page.reload()
        wait_notebook_ready(page, name)
        wait_node_states(page, {"start": "next", "done": "pending"})
        page.locator(f"{WIDGET} .fm-run").click()
        try:
            wait_node_states(page, {"a": "succeeded", "b": "succeeded", "done": "succeeded"})
        except AssertionError as exc:
            notice = page.locator(f"{WIDGET} .fm-notice").inner_text()
            raise AssertionError(
                f"reload {attempt + 1}: Run not answered; notice: {notice}"
            ) from exc
        page.locator(f"{WIDGET} .fm-reset").click()
        wait_node_states(page, {"start": "next", "a": "pending", "done": "pending"})
    save_screenshot(
        page,
        "gate_reload_run_5",
        page.locator(WIDGET),
        "Notebook 7, after the fifth reload: Run ran the pipeline and Reset started over",
    )
    assert error_outputs(page) == []
    assert widget_log_errors(page) == []
