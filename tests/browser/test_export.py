"""The static graph follows the run into exports: ``jupyter nbconvert --to html --execute`` on a
notebook that runs to a gate, opened offline, shows the graph with its last step's states.

A trial's export showed an empty output offline (the saved widget state wins over the
``text/html`` and needs JavaScript from a CDN), and a notebook saved after its run showed the
graph as it was when the cell ran. Now the static graph is its own output, updated at every
step under a display id, so the export shows where the run stands.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.browser.fm import PAINT
from tests.browser.lab import REPO, SCREENSHOTS, record_screenshot, write_notebook

pytestmark = pytest.mark.browser

DOCS = """%%pipeline docs
digraph docs {
  start     [shape=Mdiamond]
  draft     [prompt="draft the docs"]
  docs_gate [shape=hexagon, label="Docs OK?"]
  done      [shape=Msquare]
  start -> draft -> docs_gate
  docs_gate -> done  [label="[A] Approve"]
  docs_gate -> draft [label="[R] Rework"]
}"""

_PAINTED_JS = """() => Object.fromEntries([...document.querySelectorAll(
        '.fm-static-follow .fm-static g.fm-node')]
    .filter(g => g.getClientRects().length > 0)
    .map(g => { const s = getComputedStyle(g.querySelector(
        ':scope > polygon, :scope > ellipse, :scope > path'));
        return [g.dataset.node, [g.dataset.state, s.fill, s.stroke]]; }))"""


def test_an_executed_export_shows_the_gate_it_reached_offline(browser: Any, tmp_path: Path) -> None:
    notebook = write_notebook(
        tmp_path / "gate.ipynb", ["%load_ext freshness_magic", DOCS, "%pipeline run"]
    )
    converted = subprocess.run(
        [sys.executable, "-m", "jupyter", "nbconvert", "--to", "html", "--execute",
         str(notebook)],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=300,
    )  # fmt: skip
    assert converted.returncode == 0, converted.stderr
    html = tmp_path / "gate.html"
    context = browser.new_context(offline=True, viewport={"width": 1200, "height": 1400})
    asked: list[str] = []
    context.route(
        "**/*",
        lambda route: (
            route.continue_()
            if route.request.url.startswith("file:")
            else (asked.append(route.request.url), route.abort())
        ),
    )
    page = context.new_page()
    try:
        page.goto(html.as_uri())
        page.locator(".fm-static-follow g.fm-node").first.wait_for()
        painted = page.evaluate(_PAINTED_JS)
        states = {node: found[0] for node, found in painted.items()}
        assert states == {
            "start": "succeeded",
            "draft": "succeeded",
            "docs_gate": "waiting",
            "done": "pending",
        }, states
        for node, (state, fill, stroke) in painted.items():
            assert (fill, stroke) == PAINT[state], (node, state, fill, stroke)
        fills = {painted[n][1] for n in ("draft", "docs_gate", "done")}
        assert len(fills) == 3  # succeeded, waiting and pending look different
        status = page.locator(".fm-static-follow .fm-static-status").inner_text()
        assert status == "pipeline docs: waiting · waiting at docs_gate · 2/4 nodes run"
        assert page.locator(".fm-static-follow").count() == 1  # one graph, the followed one
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        shot = SCREENSHOTS / "export_executed_offline.png"
        page.locator(".fm-static-follow").screenshot(path=str(shot))
        record_screenshot(
            shot,
            "`jupyter nbconvert --to html --execute` of a notebook that runs to a gate, opened"
            " offline: the graph with its succeeded, waiting and pending nodes",
        )
    finally:
        context.close()
