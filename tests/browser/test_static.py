"""The static fallback: ``make demo``'s HTML export (no widget runtime) shows the graph with its
state colours, in nbconvert's light and dark themes; the browser reports the painted fills."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from freshness_magic.notebook.demo import _without_widget_views, build_quickstart
from freshness_magic.views.state import STATE_STYLES, NodeState
from tests.browser.fm import DARK_PAINT, PAINT, _rgb
from tests.browser.lab import REPO, save_screenshot
from tests.browser.view import contrast

pytestmark = pytest.mark.browser

_PAINTED_JS = """() => Object.fromEntries([...document.querySelectorAll('.fm-static g.fm-node')]
    .map(g => { const s = getComputedStyle(g.querySelector(
        ':scope > polygon, :scope > ellipse, :scope > path'));
        return [g.dataset.node, [g.dataset.state, s.fill, s.stroke]]; }))"""


@pytest.fixture(scope="module")
def exports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The quickstart executed once, exported with nbconvert's light (``make demo``) and dark
    themes."""
    import nbformat
    from nbconvert import HTMLExporter

    out = tmp_path_factory.mktemp("demo")
    ipynb, light = build_quickstart(out, REPO / "notebooks" / "quickstart.ipynb")
    notebook = _without_widget_views(nbformat.read(ipynb, as_version=4))
    body, _ = HTMLExporter(theme="dark").from_notebook_node(notebook)
    dark = out / "quickstart-dark.html"
    dark.write_text(body, encoding="utf-8")
    return {"light": light, "dark": dark}


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_demo_html_shows_state_colours(page: Any, exports: dict[str, Path], theme: str) -> None:
    page.goto(exports[theme].as_uri())
    page.locator(".fm-static g.fm-node").first.wait_for()
    painted = page.evaluate(_PAINTED_JS)
    palette = DARK_PAINT if theme == "dark" else PAINT
    assert set(painted) == {"start", "lint", "draft", "approve", "done"}
    for node, (state, fill, stroke) in painted.items():
        assert [fill, stroke] == list(palette[state]), (node, state, fill, stroke)
    states = {node: found[0] for node, found in painted.items()}
    assert states["lint"] == NodeState.SUCCEEDED.value
    fills = {found[1] for found in painted.values()}
    assert len(fills) >= 3 and _rgb("#ffffff") not in fills  # not an all-white graph
    found = contrast(page, ".fm-static")
    assert found["edge"] >= 3 and found["edge_label"] >= 4.5
    for state, ratios in found["states"].items():
        assert ratios["stroke"] >= 3, (state, ratios)
    assert {s for s in found["states"]} >= {"pending", "succeeded"}
    assert len(STATE_STYLES) == len(PAINT)
    save_screenshot(
        page,
        f"static_demo_{theme}",
        page.locator(".fm-static").last,
        f"build/quickstart.html ({theme} nbconvert theme), no widget runtime: the graph with its"
        " state colours and the legend",
    )
