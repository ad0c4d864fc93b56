"""The view under VS Code's rules, in Chromium without VS Code (it cannot be installed offline).

What VS Code's Jupyter extension gives an output, as its documentation states it: a webview
whose ``body`` has the class ``vscode-light``, ``vscode-dark`` or ``vscode-high-contrast`` and
whose theme colours are ``--vscode-*`` CSS variables (no ``--jp-*`` ones); widget scripts are
loaded from the kernel environment's ``share/jupyter/nbextensions`` (anywidget ships its
``index.js`` there: no CDN), and that script imports a widget's ES module from its text through a
``Blob`` URL and calls ``render({model, el})`` with a model proxy offering ``get``, ``set``,
``save_changes``, ``send``, ``on`` and ``off``.

These tests build such a page: the ``text/html`` bundle (what VS Code shows without a widget
manager) and the widget's own ES module and CSS driven through that model contract, with the
model's values taken from a real :class:`PipelineWidget`. They check the painted state colours,
the contrast of text, edges and outlines against the page, and that a click sends its action.
They do not run VS Code, its Jupyter extension or its widget manager.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from freshness_magic.engine.pipeline import load_pipeline
from freshness_magic.notebook.pipeline import Pipeline
from freshness_magic.notebook.widget import STATIC, PipelineWidget
from freshness_magic.views.render import LayoutCache
from tests.browser.fm import DARK_PAINT, PAINT, node_states
from tests.browser.lab import WAIT_MS, save_screenshot
from tests.browser.view import contrast

pytestmark = pytest.mark.browser

THEMES = {
    "vscode-dark": {
        "--vscode-editor-background": "#1f1f1f",
        "--vscode-editor-foreground": "#cccccc",
        "--vscode-descriptionForeground": "#9d9d9d",
        "--vscode-editorWidget-background": "#202020",
        "--vscode-panel-border": "#2b2b2b",
        "--vscode-widget-border": "#313131",
        "--vscode-focusBorder": "#0078d4",
        "--vscode-font-family": "system-ui, sans-serif",
    },
    "vscode-light": {
        "--vscode-editor-background": "#ffffff",
        "--vscode-editor-foreground": "#3b3b3b",
        "--vscode-descriptionForeground": "#3b3b3b",
        "--vscode-editorWidget-background": "#f8f8f8",
        "--vscode-panel-border": "#e5e5e5",
        "--vscode-widget-border": "#e5e5e5",
        "--vscode-focusBorder": "#005fb8",
        "--vscode-font-family": "system-ui, sans-serif",
    },
}
"""The variables of VS Code's default Dark Modern and Light Modern themes the view can use."""

GATED = """digraph review {
  start   [shape=Mdiamond]
  draft   [prompt="draft the change"]
  check   [shape=parallelogram, tool_command="true"]
  approve [shape=hexagon, label="Ship it?"]
  done    [shape=Msquare]
  start -> draft -> check -> approve
  approve -> done  [label="[Y] Yes"]
  approve -> draft [label="[N] No", condition="outcome=success"]
}
"""


def webview(theme: str, body: str) -> str:
    """A page themed like a VS Code notebook output webview, with ``body`` in it."""
    variables = ";".join(f"{k}:{v}" for k, v in THEMES[theme].items())
    return (
        f"<!doctype html><html style='{variables}'><head><meta charset='utf-8'><style>"
        "html,body{background:var(--vscode-editor-background);"
        "color:var(--vscode-editor-foreground);font-family:var(--vscode-font-family)}"
        f"</style></head><body class='{theme}'>{body}</body></html>"
    )


@pytest.fixture(scope="module")
def waiting_widget(tmp_path_factory: pytest.TempPathFactory) -> PipelineWidget:
    """A real widget of a run waiting at its gate (succeeded, waiting and pending nodes)."""
    pipeline = Pipeline.loaded(
        "review",
        load_pipeline(GATED),
        tmp_path_factory.mktemp("vscode"),
        layout_cache=LayoutCache(),
    )
    widget = PipelineWidget(pipeline)
    pipeline.run_to()
    assert pipeline.view.state_name == "waiting"
    return widget


def check_theme(page: Any, scope: str, theme: str) -> dict[str, Any]:
    painted = DARK_PAINT if theme == "vscode-dark" else PAINT
    states = node_states(page, scope)
    assert states["draft"] == "succeeded" and states["approve"] == "waiting", states
    assert states["done"] == "pending", states
    colours = page.evaluate(
        """(s) => Object.fromEntries([...document.querySelectorAll(s + ' svg g.fm-node')]
            .map(g => { const c = getComputedStyle(g.querySelector(
                ':scope > polygon, :scope > ellipse, :scope > path'));
                return [g.dataset.node, [c.fill, c.stroke]]; }))""",
        scope,
    )
    assert colours["approve"] == list(painted["waiting"])
    found = contrast(page, scope)
    for state, ratios in found["states"].items():
        assert ratios["stroke"] >= 3, (theme, state, ratios, found["background"])
        if "painted_stroke" in ratios:
            assert ratios["text_on_fill"] >= 4.5, (theme, state, ratios)
    assert found["edge"] >= 3 and found["edge_label"] >= 4.5, (theme, found)
    return found


@pytest.mark.parametrize("theme", ["vscode-dark", "vscode-light"])
def test_static_bundle_in_a_vscode_webview(
    page: Any, waiting_widget: PipelineWidget, theme: str
) -> None:
    """VS Code without a widget manager shows the ``text/html`` of the bundle."""
    bundle = waiting_widget._repr_mimebundle_()
    page.set_content(webview(theme, bundle["text/html"]))
    page.locator(".fm-static g.fm-node").first.wait_for(timeout=WAIT_MS)
    found = check_theme(page, ".fm-static", theme)
    save_screenshot(
        page,
        f"vscode_static_{theme}",
        page.locator(".fm-static"),
        f"the text/html bundle in a page themed like a VS Code {theme[7:]} webview (body class,"
        f" --vscode-* variables; not VS Code itself): state colours, edge contrast"
        f" {found['edge']:.1f}, edge labels {found['edge_label']:.1f}",
    )


_MOUNT_JS = """async ([source, state]) => {
    const values = JSON.parse(state);
    const listeners = {};
    window.fmSent = [];
    const model = {
        get: (name) => values[name],
        set: (name, value) => { values[name] = value; },
        save_changes: () => {},
        on: (name, fn) => { (listeners[name] = listeners[name] || []).push(fn); },
        off: (name, fn) => {
            listeners[name] = (listeners[name] || []).filter((f) => f !== fn);
        },
        send: (msg) => { window.fmSent.push(msg); },
    };
    const url = URL.createObjectURL(new Blob([source], { type: 'text/javascript' }));
    const module = await import(url);
    const el = document.createElement('div');
    document.body.append(el);
    await module.default.render({ model, el });
}"""
"""Import the ES module from its text and render it with a model of anywidget's contract."""


@pytest.mark.parametrize("theme", ["vscode-dark", "vscode-light"])
def test_widget_module_in_a_vscode_webview(
    page: Any, waiting_widget: PipelineWidget, theme: str
) -> None:
    """The widget's ES module and CSS, rendered as anywidget renders them, under VS Code's
    theme: state colours and contrast, the gate's buttons, and a click sends its action."""
    css = PipelineWidget._css
    page.set_content(webview(theme, f"<style>{css}</style>"))
    state = {
        name: getattr(waiting_widget, name)
        for name in ("graph", "states", "notes", "run", "banner", "gate", "evidence", "note")
    }
    source = Path(STATIC / "graph.js").read_text(encoding="utf-8")
    page.evaluate(_MOUNT_JS, [source, json.dumps(state)])
    page.locator(".fm-widget svg g.fm-node").first.wait_for(timeout=WAIT_MS)
    found = check_theme(page, ".fm-widget", theme)
    assert page.locator(".fm-widget .fm-gate-choice-Y").is_visible()
    page.locator(".fm-widget .fm-gate-choice-Y").click()
    sent = page.evaluate("() => window.fmSent")
    assert {"action": "answer", "node": "approve", "choice": "Y", "comment": ""} in sent
    save_screenshot(
        page,
        f"vscode_widget_{theme}",
        page.locator(".fm-widget"),
        f"the widget's ES module rendered through anywidget's model contract in a page themed"
        f" like a VS Code {theme[7:]} webview (not VS Code itself): edge contrast"
        f" {found['edge']:.1f}, edge labels {found['edge_label']:.1f}",
    )
