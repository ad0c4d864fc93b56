"""The pipeline view on a 40-stage pipeline (clusters, fan-outs, a rework loop) in a real browser:
readable at the default zoom, pan and zoom, contrast in light and dark, node details, the failure
banner, the condition playground and the gate with a comment.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.browser.factory import FACTORY_DOT, FACTORY_NODES, FACTORY_TB, write_factory
from tests.browser.fm import (
    DARK_PAINT,
    PAINT,
    WIDGET,
    node_paint,
    node_states,
    wait_node_states,
    widget_log_errors,
)
from tests.browser.lab import (
    WAIT_MS,
    error_outputs,
    open_lab_notebook,
    open_nb7_notebook,
    page_errors,
    publish_picture,
    run_all_cells,
    save_screenshot,
    write_notebook,
)
from tests.browser.view import (
    contrast,
    in_window,
    label_font_px,
    set_theme,
    viewport_state,
    wait_attr,
)
from tests.waiting import wait_until

pytestmark = pytest.mark.browser

OPENERS = {"lab": open_lab_notebook, "nb7": open_nb7_notebook}
UI_NAMES = {"lab": "JupyterLab", "nb7": "Notebook 7"}
RUN_TO_GATE = "%pipeline run"


def start_factory(
    page: Any,
    server: Any,
    folder: str,
    ui: str = "lab",
    extra: list[str] | None = None,
    dot: str = FACTORY_DOT,
) -> None:
    """Write the factory notebook, open it, run every cell and wait for the whole graph."""
    write_factory(server.root / folder, extra=extra, dot=dot)
    OPENERS[ui](page, server, f"{folder}/factory.ipynb")
    run_all_cells(page)
    page.locator(f"{WIDGET} svg g.fm-node").nth(FACTORY_NODES - 1).wait_for(timeout=WAIT_MS)


def svg_texts(page: Any, selector: str) -> list[str]:
    """The text content of the SVG elements matching ``selector`` in the widget's graph."""
    return list(
        page.evaluate(
            "([s, q]) => [...document.querySelectorAll(s + ' svg ' + q)].map(t => t.textContent)",
            [WIDGET, selector],
        )
    )


def assert_clean(page: Any) -> None:
    assert error_outputs(page) == []
    assert widget_log_errors(page) == []
    assert page.dialogs == []
    assert page_errors(page) == []


@pytest.mark.parametrize("theme", ["light", "dark"])
@pytest.mark.parametrize("ui", ["lab", "nb7"])
def test_factory_graph_is_readable_and_contrasting(
    lab_server: Any, page: Any, ui: str, theme: str
) -> None:
    """42 nodes in 8 labelled clusters: labels at least 9 px on screen (the graph scrolls instead
    of shrinking), controls in the window, every state's outline at least 3:1 against the
    background, edges and labels readable; in both themes."""
    start_factory(page, lab_server, f"view_{ui}_{theme}", ui, [RUN_TO_GATE])
    set_theme(page, theme)
    try:
        check_readable_and_contrasting(page, ui, theme)
        save_screenshot(page, f"window_factory_{ui}_{theme}", caption=f"the whole window, {theme}")
    finally:
        set_theme(page, "light")  # the theme is a server-side setting: later tests expect light


def check_readable_and_contrasting(page: Any, ui: str, theme: str) -> None:
    painted = DARK_PAINT if theme == "dark" else PAINT
    wait_node_states(page, {"read_issue": "succeeded", "design_ok": "waiting"})
    assert node_paint(page)["design_ok"][:2] == list(painted["waiting"])  # type: ignore[index]
    clusters = svg_texts(page, "g.fm-cluster text")
    assert {"Intake", "Design", "Build", "Backend", "Frontend", "Verify", "Docs", "Release"} <= set(
        clusters
    )
    fonts = label_font_px(page, WIDGET)
    assert fonts["min"] >= 9, fonts
    box = viewport_state(page, WIDGET)
    assert box["scrollWidth"] > box["clientWidth"]  # wider than the cell: it scrolls
    assert box["clientHeight"] <= 600
    page.locator(f"{WIDGET} .fm-toolbar").scroll_into_view_if_needed()
    for control in (".fm-step", ".fm-run", ".fm-zoom-in", ".fm-fit", ".fm-viewport"):
        assert in_window(page, f"{WIDGET} {control}"), control
    edge_texts = svg_texts(page, "g.fm-edge text")
    assert "tests pass if outcome=success" in edge_texts
    assert any(t.startswith("if context.release.rehear") and t.endswith("…") for t in edge_texts)
    title = page.evaluate(
        "(s) => document.querySelector(s + ' g.fm-edge[data-source=deploy][data-target=retro]"
        " > title').textContent",
        WIDGET,
    )
    assert "condition: context.release.rehearsal=true" in title

    found = contrast(page, WIDGET)
    legend = page.locator(f"{WIDGET} .fm-legend-item").evaluate_all(
        "items => items.map(i => i.dataset.state)"
    )
    assert "waiting" in legend and "stale" in legend and "blocked" not in legend
    for state, ratios in found["states"].items():
        assert ratios["stroke"] >= 3, (state, ratios, found["background"])
        if "painted_stroke" in ratios:
            assert ratios["painted_stroke"] >= 3, (state, ratios)
            assert ratios["text_on_fill"] >= 4.5, (state, ratios)
    assert found["edge"] >= 3 and found["edge_label"] >= 4.5 and found["cluster_label"] >= 3
    assert_clean(page)
    ratios = sorted((s, round(r["stroke"], 1)) for s, r in found["states"].items())
    save_screenshot(
        page,
        f"view_factory_{ui}_{theme}",
        page.locator(WIDGET),
        f"{UI_NAMES[ui]}, {theme} theme: the 42-node factory pipeline after `%pipeline run`"
        " (waiting at design_ok): clusters with labels, readable labels, scrollable graph,"
        f" contrast ratios {ratios}",
    )


_SWATCHES_JS = """(s) => {
    const paint = (shape) => { const cs = getComputedStyle(shape);
                               return [cs.fill, cs.stroke, cs.strokeDasharray]; };
    const out = {};
    for (const item of document.querySelectorAll(s + ' .fm-legend-item')) {
        const shape = item.querySelector('svg.fm-swatch g.fm-key > polygon');
        const key = item.dataset.state + (item.dataset.stale ? ':' + item.dataset.stale : '');
        const label = item.querySelector('.fm-legend-text').innerText.trim();
        const mark = item.querySelector('svg.fm-swatch text.fm-glyph');
        out[key] = {paint: shape ? paint(shape) : null, label,
                    width: shape ? getComputedStyle(shape).strokeWidth : null,
                    glyph: mark ? mark.textContent : ''};
    }
    return out;
}"""
"""Each legend entry's swatch as painted (fill, stroke, dash), its outline width and corner mark,
keyed ``state[:stale kind]``."""

_MARKS_JS = """(s) => Object.fromEntries(
  [...document.querySelectorAll(s + ' svg g.fm-node')].map(g => {
    const shape = g.querySelector(':scope > polygon, :scope > ellipse, :scope > path');
    const mark = g.querySelector(':scope > text.fm-glyph');
    return [g.dataset.node, [shape ? getComputedStyle(shape).strokeWidth : null,
                             mark ? mark.textContent : '']];
}))"""
"""Each node's outline width and corner mark as drawn."""


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_the_legend_draws_stale_and_outdated_as_the_nodes_are(
    lab_server: Any, page: Any, theme: str
) -> None:
    """An input of a node that ran changes (stale since it ran: dotted; scope_work, which read
    its output: outdated) and an input of a node still to run (stale since baseline: dashed). The
    legend has a swatch for each kind painted exactly as those nodes are, and the three look
    different from each other, in the light and the dark theme."""
    folder = lab_server.root / f"view_legend_{theme}"
    start_factory(page, lab_server, f"view_legend_{theme}", extra=[RUN_TO_GATE])
    wait_node_states(page, {"gather": "succeeded", "design_ok": "waiting"})
    (folder / "docs" / "notes.md").write_text("# Notes\n\nSearch must be fast and exact.\n")
    (folder / "src" / "search.py").write_text("def search(q: str) -> list[str]:\n    return [q]\n")
    wait_node_states(page, {"gather": "stale", "be_tests": "stale", "scope_work": "outdated"})
    set_theme(page, theme)
    try:
        nodes = node_paint(page)
        swatches = page.evaluate(_SWATCHES_JS, WIDGET)
        drawn = {"stale:run": "gather", "stale:baseline": "be_tests", "outdated": "scope_work"}
        for key, node in drawn.items():
            assert swatches[key]["paint"] == nodes[node], (key, swatches[key], nodes[node])
        assert swatches["stale:run"]["label"] == "stale since it ran"
        assert swatches["stale:baseline"]["label"] == "stale since baseline"
        dashes = {swatches[key]["paint"][2] for key in drawn}
        assert len(dashes) == 3 and "none" not in dashes, dashes  # three patterns
        assert swatches["outdated"]["paint"][1] != swatches["stale:run"]["paint"][1]
        # Not only a shade: each has its own corner mark and outline weight, node and swatch alike.
        marks = page.evaluate(_MARKS_JS, WIDGET)
        for key, node in drawn.items():
            assert [swatches[key]["width"], swatches[key]["glyph"]] == marks[node], (key, node)
        assert {swatches[key]["glyph"] for key in drawn} == {"Δ", "!", "↑"}
        assert len({swatches[key]["width"] for key in drawn}) == 3
        ratios = contrast(page, WIDGET)["states"]
        for state in ("stale", "outdated"):  # outline on the background, label on the fill
            assert ratios[state]["painted_stroke"] >= 3, (theme, state, ratios[state])
            assert ratios[state]["text_on_fill"] >= 4.5, (theme, state, ratios[state])
        page.locator(f"{WIDGET} g.fm-node[data-node='gather']").scroll_into_view_if_needed()
        shot = save_screenshot(
            page,
            f"view_legend_stale_{theme}",
            page.locator(WIDGET),
            f"{theme} theme: docs/notes.md and src/search.py changed while waiting at design_ok:"
            " gather stale since it ran (heavy dotted, !), scope_work that read its output"
            " outdated (dash-dot, ↑), be_tests stale since baseline (dashed, Δ); the legend"
            " draws each the same way",
        )
        # the documentation's picture of the marks (docs/concepts/freshness.md)
        publish_picture(shot, f"marks-{theme}.png")
    finally:
        set_theme(page, "light")
    assert_clean(page)


def test_pan_and_zoom(lab_server: Any, page: Any) -> None:
    """Dragging pans the graph; the buttons and Ctrl+wheel zoom; Fit shows the whole graph (the
    view opened at the readable minimum: 42 nodes in a row do not fit at a readable size)."""
    start_factory(page, lab_server, "view_zoom")
    viewport = page.locator(f"{WIDGET} .fm-viewport")
    page.locator(f"{WIDGET} .fm-toolbar").scroll_into_view_if_needed()
    before = viewport_state(page, WIDGET)
    scale = page.locator(f"{WIDGET} .fm-scale")
    first_scale = scale.inner_text()
    box = viewport.bounding_box()
    assert box is not None
    page.mouse.move(box["x"] + box["width"] * 0.7, box["y"] + box["height"] / 2)
    page.mouse.down()
    page.mouse.move(box["x"] + box["width"] * 0.2, box["y"] + box["height"] / 2, steps=8)
    page.mouse.up()
    panned = viewport_state(page, WIDGET)
    assert panned["left"] > before["left"] + 100
    assert page.locator(f"{WIDGET} .fm-details").is_hidden()  # a drag is not a click

    page.locator(f"{WIDGET} .fm-zoom-in").click()
    zoomed = viewport_state(page, WIDGET)
    assert zoomed["svgWidth"] == pytest.approx(before["svgWidth"] * 1.25, rel=0.02)
    assert scale.inner_text() != first_scale
    page.mouse.move(box["x"] + 200, box["y"] + 60)
    page.keyboard.down("Control")
    page.mouse.wheel(0, 300)
    page.keyboard.up("Control")
    page.wait_for_function(
        "([s, w]) => document.querySelector(s + ' .fm-viewport svg')"
        ".getBoundingClientRect().width < w * 0.9",
        arg=[WIDGET, zoomed["svgWidth"]],
        timeout=WAIT_MS,
    )
    page.locator(f"{WIDGET} .fm-fit").click()
    fitted = viewport_state(page, WIDGET)
    assert fitted["svgWidth"] <= fitted["clientWidth"], fitted
    assert fitted["left"] == 0 and fitted["svgWidth"] < before["svgWidth"] / 3, (before, fitted)
    assert label_font_px(page, WIDGET)["min"] < 9  # an outline: zoom in to read
    assert_clean(page)
    save_screenshot(
        page,
        "view_pan_zoom",
        page.locator(WIDGET),
        "after dragging, zooming in, Ctrl+wheel zooming out and Fit: the whole graph",
    )


NOTEBOOK_SCROLL_JS = """(s) => {
    for (let e = document.querySelector(s).parentElement; e; e = e.parentElement) {
        const y = getComputedStyle(e).overflowY;
        if ((y === 'auto' || y === 'scroll') && e.scrollHeight > e.clientHeight) return e.scrollTop;
    }
    return document.scrollingElement.scrollTop;
}"""


def test_the_wheel_scrolls_the_notebook_until_the_graph_is_clicked_and_keys_move_it(
    lab_server: Any, page: Any
) -> None:
    """A tall graph (top to bottom) took every wheel turn over it and the notebook would not
    scroll past it; the arrow keys went to JupyterLab (a JupyterLab trial)."""
    start_factory(page, lab_server, "view_wheel", dot=FACTORY_TB)
    viewport = page.locator(f"{WIDGET} .fm-viewport")
    viewport.scroll_into_view_if_needed()
    box = viewport.bounding_box()
    assert box is not None
    before, notebook = viewport_state(page, WIDGET), page.evaluate(NOTEBOOK_SCROLL_JS, WIDGET)
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    page.mouse.wheel(0, 200)
    wait_until(
        lambda: page.evaluate(NOTEBOOK_SCROLL_JS, WIDGET) > notebook + 100, "the notebook scrolls"
    )
    assert viewport_state(page, WIDGET)["top"] == before["top"]

    viewport.focus()  # as a click on the graph, or Tab, gives it
    page.keyboard.press("ArrowDown")
    wait_until(lambda: viewport_state(page, WIDGET)["top"] > before["top"], "ArrowDown moves it")
    moved = viewport_state(page, WIDGET)["top"]
    box = viewport.bounding_box()
    assert box is not None
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    page.mouse.wheel(0, 200)
    wait_until(lambda: viewport_state(page, WIDGET)["top"] > moved + 100, "the wheel scrolls it")
    scale = page.locator(f"{WIDGET} .fm-scale").inner_text()
    page.keyboard.press("+")
    wait_until(lambda: page.locator(f"{WIDGET} .fm-scale").inner_text() != scale, "+ zooms")
    assert page.evaluate("() => document.activeElement.classList.contains('fm-viewport')")
    assert_clean(page)


FOCUSED_NODE_JS = """(s) => {
    const el = document.activeElement;
    if (!el || !el.matches(s + ' svg g.fm-node')) return null;
    const r = el.getBoundingClientRect();
    return {node: el.dataset.node, x: (r.left + r.right) / 2, y: (r.top + r.bottom) / 2,
            label: el.getAttribute('aria-label'),
            tabbable: document.querySelectorAll(s + ' svg g.fm-node[tabindex="0"]').length};
}"""
"""The widget's node that has the focus: its id, the centre of its box, its label, and how many
nodes are in the Tab order (one); null when the focus is not on a node."""


ACTIVE_CELL_JS = """() => [...document.querySelectorAll('.jp-Notebook .jp-Cell')]
    .findIndex((c) => c.classList.contains('jp-mod-active'))"""


@pytest.mark.parametrize("ui", ["lab", "nb7"])
def test_the_nodes_are_reached_and_opened_by_keyboard(lab_server: Any, page: Any, ui: str) -> None:
    """A node's details, Run to here and Retry from here needed a mouse: the graph panned by
    keyboard but its nodes could not be reached (a keyboard-only JupyterLab trial). A second
    trial: JupyterLab's one-key shortcuts acted on the cells (d d deleted the pipeline's cell),
    End went to the last node written, not the exit, and a sideways arrow in a top-to-bottom
    graph went down the chain. In Notebook 7, which reads keys before the page's elements do,
    the arrows still moved the notebook's active cell (a Notebook 7 trial)."""
    start_factory(page, lab_server, f"view_node_keys_{ui}", ui=ui, dot=FACTORY_TB)
    cells = page.locator(".jp-Notebook .jp-Cell")
    before = cells.count()
    active = page.evaluate(ACTIVE_CELL_JS)
    page.locator(f"{WIDGET} .fm-viewport").focus()
    page.keyboard.press("Tab")  # from the graph to its nodes: one stop, the first node
    first = page.evaluate(FOCUSED_NODE_JS, WIDGET)
    assert first is not None and first["node"] == "start", first
    assert first["label"] == "start: next" and first["tabbable"] == 1
    page.keyboard.press("ArrowDown")  # top to bottom: the next node is below
    second = page.evaluate(FOCUSED_NODE_JS, WIDGET)
    assert second is not None and second["node"] == "read_issue", second
    assert second["y"] > first["y"] and second["tabbable"] == 1
    page.keyboard.press("ArrowRight")  # nothing lies to the right of the chain's head
    assert page.evaluate(FOCUSED_NODE_JS, WIDGET)["node"] == "read_issue"
    page.keyboard.press("ArrowUp")
    assert page.evaluate(FOCUSED_NODE_JS, WIDGET)["node"] == "start"
    for key in ("a", "b", "m", "d", "d", "j", "k"):  # notebook shortcuts, on a node
        page.keyboard.press(key)
    assert cells.count() == before
    assert page.evaluate(ACTIVE_CELL_JS) == active  # the arrows moved no cell either
    assert page.evaluate(FOCUSED_NODE_JS, WIDGET)["node"] == "start"
    page.keyboard.press("ArrowDown")
    page.keyboard.press("Enter")  # its details
    details = page.locator(f"{WIDGET} .fm-details")
    details.wait_for(state="visible", timeout=WAIT_MS)
    assert details.locator(".fm-details-title").inner_text() == "read_issue"
    page.keyboard.press("Tab")  # on into the panel: its buttons come next
    assert page.evaluate("() => document.activeElement.closest('.fm-details') !== null")
    page.keyboard.press("Escape")  # closes it, back on its node
    details.wait_for(state="hidden", timeout=WAIT_MS)
    assert page.evaluate(FOCUSED_NODE_JS, WIDGET)["node"] == "read_issue"
    page.keyboard.press("End")  # the exit, scrolled into the graph and into the window
    assert page.evaluate(FOCUSED_NODE_JS, WIDGET)["node"] == "done"
    done = f"{WIDGET} svg g.fm-node[data-node='done']"
    wait_until(lambda: in_window(page, done), "the exit is scrolled into the window")
    assert page.locator(done).evaluate(
        "(g) => { const r = g.getBoundingClientRect(),"
        " v = g.closest('.fm-viewport').getBoundingClientRect();"
        " return r.left >= v.left && r.right <= v.right"
        " && r.top >= v.top && r.bottom <= v.bottom; }"
    ), "the node reached by keyboard is scrolled into the graph's view"
    save_screenshot(
        page,
        f"view_node_keys_{ui}",
        page.locator(WIDGET),
        f"the exit reached with the keyboard (End), {UI_NAMES[ui]}",
    )
    page.keyboard.press("Home")
    assert page.evaluate(FOCUSED_NODE_JS, WIDGET)["node"] == "start"
    page.keyboard.press("Escape")  # back to the graph, where the arrows pan
    assert page.evaluate("() => document.activeElement.classList.contains('fm-viewport')")
    page.keyboard.press("ArrowDown")  # pans the graph, moves no cell
    assert page.evaluate("() => document.activeElement.classList.contains('fm-viewport')")
    assert cells.count() == before and page.evaluate(ACTIVE_CELL_JS) == active
    assert_clean(page)


def drawn_box(page: Any) -> dict[str, float]:
    """Where the graph is drawn inside its viewport (left and right gaps), its drawn height and
    the height of the viewport that shows it."""
    return dict(
        page.evaluate(
            """(s) => {
                const v = document.querySelector(s + ' .fm-viewport');
                const g = v.querySelector('svg').getBoundingClientRect();
                const r = v.getBoundingClientRect();
                return {left: g.left - r.left, right: r.right - g.right, height: g.height,
                        shown: v.clientHeight};
            }""",
            WIDGET,
        )
    )


@pytest.mark.parametrize("stages", [4, 36])
def test_fit_shows_the_whole_graph_or_as_much_as_stays_readable(
    lab_server: Any, page: Any, stages: int
) -> None:
    """A short chain opens whole; a tall one is not enlarged to the cell's width (only its top
    would show) but drawn at the readable minimum; either way it is centred. Fit after a zoom
    shows the whole graph, centred: the view it opened with for the short chain, an outline of
    the tall one."""
    chain = " -> ".join(["start", *(f"stage_{i}" for i in range(stages)), "done"])
    dot = (
        "digraph chain {\n  start [shape=Mdiamond]\n  done [shape=Msquare]\n"
        f'  node [prompt="work"]\n  {chain}\n}}'
    )
    folder = f"fit_{stages}"
    write_notebook(
        lab_server.root / folder / "chain.ipynb",
        ["%load_ext freshness_magic", "%%pipeline chain\n" + dot],
    )
    open_lab_notebook(page, lab_server, f"{folder}/chain.ipynb")
    run_all_cells(page)
    page.locator(f"{WIDGET} svg g.fm-node").nth(stages + 1).wait_for(timeout=WAIT_MS)
    page.wait_for_function(  # fitted: the view gave the drawing its size
        "(s) => document.querySelector(s + ' .fm-viewport svg').hasAttribute('width')",
        arg=WIDGET,
        timeout=WAIT_MS,
    )
    box = drawn_box(page)
    assert abs(box["left"] - box["right"]) <= 4, box  # centred in the cell
    fonts = label_font_px(page, WIDGET)
    assert fonts["min"] >= 9, fonts
    if stages == 4:
        assert box["height"] <= box["shown"], box  # all of it in view
    else:
        assert fonts["min"] < 10, fonts  # the readable minimum, not the width's 125%
    first = viewport_state(page, WIDGET)["svgWidth"]
    page.locator(f"{WIDGET} .fm-zoom-in").click()
    page.locator(f"{WIDGET} .fm-fit").click()
    fitted = drawn_box(page)
    assert fitted["height"] <= fitted["shown"] + 1, fitted  # all of it in view
    assert abs(fitted["left"] - fitted["right"]) <= 4, fitted
    if stages == 4:
        assert viewport_state(page, WIDGET)["svgWidth"] == pytest.approx(first, rel=0.02)
    assert_clean(page)
    save_screenshot(
        page,
        f"view_fit_chain_{stages}",
        page.locator(WIDGET),
        f"a chain of {stages + 2} nodes after Fit: centred, whole",
    )


NARROW_JS = """(s) => {
    const root = document.querySelector(s);
    const box = (q) => root.querySelector(q).getBoundingClientRect();
    const status = root.querySelector('.fm-status');
    const summaries = [...root.querySelectorAll('.fm-ev-summary')].map(e => e.clientWidth);
    return {statusCut: status.scrollWidth > status.clientWidth + 1,
            detailsTop: box('.fm-details').top, graphBottom: box('.fm-viewport').bottom,
            detailsWidth: box('.fm-details').width, summaryMin: Math.min(...summaries)};
}"""


def test_a_narrow_notebook_keeps_the_header_details_and_evidence_readable(
    lab_server: Any, page: Any
) -> None:
    """In a 900px window the header hid its counts and time, the details panel broke values to
    a few letters a line, and the evidence summary column shrank to 12px (a JupyterLab trial)."""
    size = page.viewport_size
    page.set_viewport_size({"width": 900, "height": size["height"]})
    try:
        start_factory(page, lab_server, "view_narrow", extra=[RUN_TO_GATE])
        wait_node_states(page, {"design_ok": "waiting"})
        page.locator(f"{WIDGET} svg g.fm-node[data-node='gather']").click()
        page.locator(f"{WIDGET} .fm-details-attributes").wait_for(timeout=WAIT_MS)
        seen = page.evaluate(NARROW_JS, WIDGET)
        assert not seen["statusCut"], seen
        assert seen["detailsTop"] >= seen["graphBottom"] - 1, seen  # below the graph
        assert seen["detailsWidth"] > 400 and seen["summaryMin"] > 100, seen
        save_screenshot(
            page,
            "view_narrow",
            page.locator(WIDGET),
            "a 900px window: the header wraps, the details of 'Gather notes' sit below the graph,"
            " the evidence keeps its summary column",
        )
    finally:
        page.set_viewport_size(size)
    assert_clean(page)


def test_node_details_open_on_click(lab_server: Any, page: Any) -> None:
    """A click on a node opens its details: state, attributes, evidence; the actions."""
    start_factory(page, lab_server, "view_details", extra=[RUN_TO_GATE])
    run_to = page.locator(f"{WIDGET} select.fm-run-to-node")
    assert run_to.input_value() == "done"  # the Run to list starts at the exit
    page.locator(f"{WIDGET} svg g.fm-node[data-node='gather']").click()
    details = page.locator(f"{WIDGET} .fm-details[data-node='gather']")
    details.wait_for(state="visible", timeout=WAIT_MS)
    page.locator(f"{WIDGET} .fm-details-attributes").wait_for(timeout=WAIT_MS)
    text = details.inner_text()
    assert "echo notes" in text  # tool_command attribute
    assert "docs/*.md" in text  # source_files
    assert "succeeded" in page.locator(f"{WIDGET} .fm-details .fm-state-chip").inner_text()
    assert "Tool completed" in page.locator(f"{WIDGET} .fm-details-evidence").inner_text()
    for action in ("fm-act-run-to", "fm-act-accept"):  # Retry shows where the pipeline has retry()
        assert page.locator(f"{WIDGET} .fm-details .{action}").is_visible()
    assert page.locator(f"{WIDGET} svg g.fm-node.fm-selected").get_attribute("data-node") == (
        "gather"
    )
    assert run_to.input_value() == "gather"  # a clicked node becomes the one to run to
    assert_clean(page)
    save_screenshot(
        page,
        "view_node_details",
        page.locator(WIDGET),
        "a click on 'Gather notes': the side panel with its state, attributes (tool_command,"
        " source_files) and evidence, and Run to here / Retry from here / Accept changes",
    )
    page.locator(f"{WIDGET} .fm-details-close").click()
    assert details.is_hidden()


def test_failed_run_shows_its_banner(lab_server: Any, page: Any) -> None:
    """The security scan fails: a banner names the node and the reason; the node is drawn
    failed and highlighted; the details say why."""
    folder = lab_server.root / "view_failed"
    folder.mkdir()
    (folder / "fail.flag").write_text("fail\n")
    start_factory(
        page,
        lab_server,
        "view_failed",
        extra=[RUN_TO_GATE, "%pipeline resume design_ok --choice A"],
    )
    banner = page.locator(f"{WIDGET} .fm-banner[data-kind='failed']")
    banner.wait_for(state="visible", timeout=WAIT_MS)
    assert banner.get_attribute("data-node") == "security"
    assert "security" in banner.inner_text()
    assert "exit" in banner.inner_text().lower()
    wait_node_states(page, {"security": "failed", "perf": "succeeded"})
    assert page.locator(f"{WIDGET} svg g.fm-node.fm-focus").get_attribute("data-node") == (
        "security"
    )
    assert node_states(page)["verify_ok"] == "pending"
    save_screenshot(
        page,
        "view_failed_banner",
        page.locator(WIDGET),
        "the run failed at the security scan: the banner with the reason, the failed node red"
        " and highlighted (Retry appears where the pipeline has retry())",
    )
    page.locator(f"{WIDGET} .fm-banner-node").click()
    page.locator(f"{WIDGET} .fm-details[data-node='security']").wait_for(timeout=WAIT_MS)
    page.locator(f"{WIDGET} .fm-details-failure_reason").wait_for(timeout=WAIT_MS)


def test_playground_highlights_the_chosen_edge(lab_server: Any, page: Any) -> None:
    """With a node chosen, the edge routing would take is drawn highlighted; the context keys
    are listed and completed while typing."""
    start_factory(page, lab_server, "view_playground", extra=[RUN_TO_GATE])
    page.locator(f"{WIDGET} .fm-playground-node select").select_option("unit")
    field = page.locator(f"{WIDGET} .fm-playground-input input")
    field.fill("outcome=success")
    chosen = f"{WIDGET} svg g.fm-edge.fm-chosen"
    result = page.locator(f"{WIDGET} .fm-playground-result")
    # the reply to the typed condition: choosing the node alone already drew the same edge
    result.locator("text=result:").wait_for(timeout=WAIT_MS)
    wait_attr(page, f"{chosen}[data-source='unit'][data-target='e2e']")
    assert page.locator(chosen).count() == 1
    assert result.get_attribute("data-edge") == "unit->e2e"
    assert "result: true" in result.inner_text()

    page.locator(f"{WIDGET} .fm-playground-node select").select_option("design_ok")
    wait_attr(page, f"{chosen}[data-source='design_ok']")
    field.fill("")
    field.press_sequentially("cont")
    page.locator(f"{WIDGET} .fm-suggest-item").first.wait_for(timeout=WAIT_MS)
    keys = page.locator(f"{WIDGET} .fm-suggest-item").evaluate_all(
        "items => items.map(i => i.dataset.key)"
    )
    assert keys and all(k.startswith("context.") for k in keys)
    field.press("Tab")
    assert field.input_value() == keys[0]
    page.locator(f"{WIDGET} .fm-context-keys summary").click()
    assert page.locator(f"{WIDGET} .fm-keys tr").count() >= len(keys)
    assert_clean(page)
    save_screenshot(
        page,
        "view_playground",
        page.locator(WIDGET),
        "condition playground: unit's edge to e2e highlighted for outcome=success, then a"
        " context key completed with Tab and the key list open",
    )


def test_gate_with_comment_routes(lab_server: Any, page: Any) -> None:
    """The gate shows the question, what is approved and one button per choice; a comment goes
    with the answer and the accelerator key answers."""
    start_factory(page, lab_server, "view_gate", extra=[RUN_TO_GATE])
    gate = page.locator(f"{WIDGET} .fm-gate")
    gate.wait_for(state="visible", timeout=WAIT_MS)
    assert "Design OK?" in page.locator(f"{WIDGET} .fm-gate-question").inner_text()
    assert "merge_design" in page.locator(f"{WIDGET} .fm-gate-approving").inner_text()
    buttons = page.locator(f"{WIDGET} .fm-gate-choice").all_inner_texts()
    assert buttons == ["[A] Approve", "[R] Rework"]
    save_screenshot(
        page,
        "view_gate_waiting",
        gate,
        "the gate panel: question, the result being approved, a comment box, one button per choice",
    )
    newest = page.locator(f"{WIDGET} .fm-evidence-row").first.get_attribute("data-seq")
    page.locator(f"{WIDGET} .fm-gate-comment").fill("API first, UI later")
    page.locator(f"{WIDGET} .fm-gate-question").click()
    page.keyboard.press("r")
    page.wait_for_function(
        "([s, n]) => { const r = document.querySelector(s + ' .fm-evidence-row');"
        " return !!r && Number(r.dataset.seq) >= Number(n) + 4; }",
        arg=[WIDGET, newest],
        timeout=WAIT_MS,
    )
    wait_node_states(page, {"design_ok": "waiting", "triage": "succeeded"})
    rows = page.locator(f"{WIDGET} .fm-evidence-row").evaluate_all(
        "rows => rows.map(r => r.dataset.node)"
    )
    assert "triage" in rows and "be_model" not in rows
    asked = page.locator(f"{WIDGET} .fm-gate-visit")  # the same gate again, said so
    asked.wait_for(timeout=WAIT_MS)
    assert asked.inner_text() == "asked again: visit 2"
    page.locator(f"{WIDGET} .fm-gate-choice-A").click()
    wait_node_states(page, {"design_ok": "succeeded", "be_model": "succeeded"})
    wait_node_states(page, {"verify_ok": "waiting"})
    save_screenshot(
        page,
        "view_gate_answered",
        page.locator(WIDGET),
        "after [R] (key r, with a comment) the design loop ran again; after [A] the build ran",
    )


SLOW_DOT = """digraph slow {
  start [shape=Mdiamond]
  work  [label="Slow work"]
  done  [shape=Msquare]
  start -> work -> done
}
"""


_RUN_ELAPSED_JS = """(s) => {
    const m = /· ([\\d.]+s|\\d+m \\d+s)\\s*$/.exec(document.querySelector(s + ' .fm-status')
        .textContent);
    return m ? m[1] : null;
}"""
"""The run's elapsed time at the end of the status line (``... · 4.2s``)."""


def test_running_node_shows_a_live_timer(lab_server: Any, page: Any) -> None:
    """While a node runs (Run on the kernel's worker thread), the header names it with an
    elapsed time that keeps counting, and the run's elapsed time in the status line counts too;
    the node is drawn running; afterwards the timer is gone and the run took 4 s or more."""
    write_notebook(
        lab_server.root / "view_timer" / "slow.ipynb",
        [
            "%load_ext freshness_magic",
            "%%pipeline slow\n" + SLOW_DOT,
            "%%node work\nimport time\ntime.sleep(4)",
        ],
    )
    open_lab_notebook(page, lab_server, "view_timer/slow.ipynb")
    run_all_cells(page)
    page.locator(f"{WIDGET} svg g.fm-node").nth(2).wait_for(timeout=WAIT_MS)
    page.locator(f"{WIDGET} .fm-run").click()
    timer = page.locator(f"{WIDGET} .fm-timer[data-node='work']")
    timer.wait_for(state="visible", timeout=WAIT_MS)
    first = timer.inner_text()
    assert first.startswith("running work · ")
    page.wait_for_function(
        "([s, t]) => { const e = document.querySelector(s + ' .fm-timer');"
        " return !!e && !e.hidden && e.textContent !== t; }",
        arg=[WIDGET, first],
        timeout=WAIT_MS,
    )
    run_elapsed = page.evaluate(f"(s) => ({_RUN_ELAPSED_JS})(s)", WIDGET)
    page.wait_for_function(  # the run's elapsed time ticks while the node still runs
        f"([s, t]) => !document.querySelector(s + ' .fm-timer').hidden"
        f" && ({_RUN_ELAPSED_JS})(s) !== t",
        arg=[WIDGET, run_elapsed],
        timeout=WAIT_MS,
    )
    assert node_states(page)["work"] == "running"
    assert page.locator(f"{WIDGET} .fm-step").is_disabled()  # busy: one action at a time
    save_screenshot(
        page,
        "view_running_timer",
        page.locator(WIDGET),
        "a 4-second %%node cell running after Run: the header says 'running work' with a"
        " counting elapsed time, the node drawn running (pulsing blue), Step disabled",
    )
    wait_node_states(page, {"work": "succeeded", "done": "succeeded"})
    timer.wait_for(state="hidden", timeout=WAIT_MS)
    took = page.evaluate(f"(s) => ({_RUN_ELAPSED_JS})(s)", WIDGET)
    assert float(took.rstrip("s")) >= 4.0, took  # the run's active time, not the last step's
    assert_clean(page)


_IN_VIEWPORT_JS = """([s, node]) => {
    const g = document.querySelector(s + ` svg g.fm-node[data-node="${node}"]`);
    const v = g.closest('.fm-viewport').getBoundingClientRect(), r = g.getBoundingClientRect();
    return r.left >= v.left && r.right <= v.right && r.top >= v.top && r.bottom <= v.bottom;
}"""
"""Whether a node lies wholly inside the graph's viewport."""


def test_the_view_follows_a_cell_driven_run_to_its_gate(lab_server: Any, page: Any) -> None:
    """A run driven from a cell stops at a gate far to the right of where the view opened: the
    view scrolls the graph so the waiting gate is in sight (the user did not pan or zoom)."""
    start_factory(page, lab_server, "view_follow", extra=[RUN_TO_GATE])
    wait_node_states(page, {"design_ok": "waiting"})
    gate = [WIDGET, "design_ok"]
    wait_until(lambda: page.evaluate(_IN_VIEWPORT_JS, gate), "the waiting gate is in sight")
    scrolled = page.evaluate(
        "(s) => document.querySelector(s + ' .fm-viewport').scrollLeft", WIDGET
    )
    assert scrolled > 0  # it opened at the start: the graph moved to the gate
    save_screenshot(
        page,
        "view_follows_to_gate",
        page.locator(WIDGET),
        "a run driven from a cell waits at design_ok: the graph scrolled to keep it in sight",
    )
    assert_clean(page)
