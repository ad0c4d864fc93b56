"""Where the graph is on screen, on the 42-node factory pipeline in a real browser: Fit shows the
whole graph centred, the viewport grows with a tall graph and resizes by its handle; opening or
closing a node's details keeps the user's place; a run is followed to the gate it stops at, and
a resize of the cell keeps that node in view unless the user has moved the view since.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.browser.factory import FACTORY_DOT, FACTORY_TB
from tests.browser.fm import WIDGET, wait_node_states
from tests.browser.lab import WAIT_MS, save_screenshot
from tests.browser.test_view import assert_clean, start_factory
from tests.browser.view import label_font_px

pytestmark = pytest.mark.browser

DOTS = {"LR": FACTORY_DOT, "TB": FACTORY_TB}

_PLACE_JS = """(s) => {
    const v = document.querySelector(s + ' .fm-viewport');
    const g = v.querySelector('svg').getBoundingClientRect();
    const r = v.getBoundingClientRect();
    const inner = [r.left + v.clientLeft, r.top + v.clientTop];
    return {left: v.scrollLeft, top: v.scrollTop, width: v.clientWidth, height: v.clientHeight,
            gapLeft: g.left - inner[0], gapRight: inner[0] + v.clientWidth - g.right,
            drawnWidth: g.width, drawnHeight: g.height,
            scale: document.querySelector(s + ' .fm-scale').textContent};
}"""


def place(page: Any) -> dict[str, Any]:
    """The viewport's scroll position and size, the drawn graph's size and gaps, the scale."""
    return dict(page.evaluate(_PLACE_JS, WIDGET))


_IN_VIEW_JS = """([s, n]) => {
    const v = document.querySelector(s + ' .fm-viewport');
    const r = v.getBoundingClientRect();
    const left = r.left + v.clientLeft, top = r.top + v.clientTop;
    const g = document.querySelector(`${s} svg g.fm-node[data-node="${n}"]`)
        .getBoundingClientRect();
    return g.left >= left - 1 && g.right <= left + v.clientWidth + 1
        && g.top >= top - 1 && g.bottom <= top + v.clientHeight + 1;
}"""


def in_view(page: Any, node: str) -> bool:
    """Whether all of ``node`` shows inside the graph's viewport."""
    return bool(page.evaluate(_IN_VIEW_JS, [WIDGET, node]))


def wait_in_view(page: Any, node: str) -> None:
    try:
        page.wait_for_function(_IN_VIEW_JS, arg=[WIDGET, node], timeout=WAIT_MS)
    except Exception as exc:
        raise AssertionError(f"{node} never came into view: {place(page)}") from exc


def settle(page: Any) -> None:
    """Let the page lay out and run its resize observers and animation frames (two frames)."""
    page.evaluate("() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
    page.evaluate("() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")


def open_factory(page: Any, server: Any, folder: str, rankdir: str, extra: list[str]) -> None:
    start_factory(page, server, folder, extra=extra, dot=DOTS[rankdir])
    page.wait_for_function(  # fitted: the view gave the drawing its size
        "(s) => document.querySelector(s + ' .fm-viewport svg').hasAttribute('width')",
        arg=WIDGET,
        timeout=WAIT_MS,
    )
    page.locator(f"{WIDGET} .fm-toolbar").scroll_into_view_if_needed()
    settle(page)


def wheel_over_graph(page: Any, dx: float, dy: float) -> None:
    """Scroll the graph the way a user does: the mouse wheel over its viewport, once the graph
    has the focus (a click on it; until then the wheel scrolls the notebook)."""
    page.locator(f"{WIDGET} .fm-viewport").focus()
    box = page.locator(f"{WIDGET} .fm-viewport").bounding_box()
    page.mouse.move(box["x"] + box["width"] / 3, box["y"] + box["height"] / 2)
    page.mouse.wheel(dx, dy)
    settle(page)


@pytest.mark.parametrize("rankdir", ["LR", "TB"])
def test_fit_shows_the_whole_factory_centred(lab_server: Any, page: Any, rankdir: str) -> None:
    """The view opens readable (labels at least 9 px, the rest scrolls; a tall graph gets a
    taller viewport than the old fixed 560 px). Fit shows all 42 nodes, centred; dragging the
    viewport's handle makes it taller and a fitted graph grows with it. A cut edge label keeps
    its whole text in the tooltip the mouse gets over it."""
    open_factory(page, lab_server, f"place_fit_{rankdir}", rankdir, [])
    opened = place(page)
    assert label_font_px(page, WIDGET)["min"] >= 9
    if rankdir == "TB":  # 2500 px tall at the readable scale: the viewport takes 75% of the window
        assert opened["height"] > 600, opened
        assert opened["height"] <= 0.75 * page.viewport_size["height"] + 2, opened

    edge = f"{WIDGET} svg g.fm-edge[data-source=deploy][data-target=retro]"
    page.locator(f"{edge} text").scroll_into_view_if_needed()
    hover = page.evaluate(
        """(sel) => {
            const t = document.querySelector(sel + ' text').getBoundingClientRect();
            const e = document.elementFromPoint(t.x + t.width / 2, t.y + t.height / 2);
            const g = e && e.closest('g.fm-edge');
            return {label: document.querySelector(sel + ' text').textContent,
                    title: g && g.querySelector(':scope > title').textContent};
        }""",
        edge,
    )
    assert hover["label"].endswith("…"), hover  # cut on the graph...
    assert "condition: context.release.rehearsal=true" in (hover["title"] or ""), hover  # whole

    page.locator(f"{WIDGET} .fm-fit").click()
    settle(page)
    fitted = place(page)
    assert fitted["drawnWidth"] <= fitted["width"] + 1, fitted  # all of it, across...
    assert fitted["drawnHeight"] <= fitted["height"] + 1, fitted  # ...and down
    assert abs(fitted["gapLeft"] - fitted["gapRight"]) <= 4, fitted  # centred
    assert int(fitted["scale"].rstrip("%")) < 65, fitted  # smaller than the readable minimum
    assert page.locator(f"{WIDGET} .fm-scale").get_attribute("title"), "no hint to zoom in"
    save_screenshot(
        page,
        f"view_fit_factory_{rankdir}",
        page.locator(WIDGET),
        f"the 42-node factory ({rankdir}) after Fit: the whole graph in view, centred",
    )

    if rankdir == "TB":  # the viewport's handle (bottom right) makes it taller
        box = page.locator(f"{WIDGET} .fm-viewport").bounding_box()
        corner = (box["x"] + box["width"] - 4, box["y"] + box["height"] - 4)
        page.mouse.move(*corner)
        page.mouse.down()
        page.mouse.move(corner[0], corner[1] + 150, steps=6)
        page.mouse.up()
        settle(page)
        taller = place(page)
        assert taller["height"] >= fitted["height"] + 100, (fitted, taller)
        assert taller["drawnHeight"] > fitted["drawnHeight"] + 50, (fitted, taller)  # refitted
        assert taller["drawnHeight"] <= taller["height"] + 1, taller
    assert_clean(page)


def pick_node(page: Any, where: str) -> str:
    """A node wholly in view: in the lower half ("low") or in the rightmost 300 px ("right")."""
    found = page.evaluate(
        """([s, where]) => {
            const v = document.querySelector(s + ' .fm-viewport');
            const r = v.getBoundingClientRect();
            const right = r.left + v.clientWidth, bottom = r.top + v.clientHeight;
            for (const g of document.querySelectorAll(s + ' svg g.fm-node')) {
                const b = g.getBoundingClientRect();
                if (b.left < r.left + 8 || b.right > right - 8 || b.top < r.top + 8
                    || b.bottom > bottom - 8) continue;
                if (where === 'low' && b.top > r.top + v.clientHeight / 2) return g.dataset.node;
                if (where === 'right' && b.left > right - 300) return g.dataset.node;
            }
            return null;
        }""",
        [WIDGET, where],
    )
    assert found, f"no node in view ({where}): {place(page)}"
    return str(found)


@pytest.mark.parametrize("rankdir", ["TB", "LR"])
def test_the_details_panel_keeps_the_place_in_the_graph(
    lab_server: Any, page: Any, rankdir: str
) -> None:
    """Scrolled down to a node, a click opens its details: the graph keeps its scroll position
    and scale and the node stays in view (a node the narrower viewport would hide is brought back
    by the least scroll); closing the panel changes neither."""
    open_factory(page, lab_server, f"place_details_{rankdir}", rankdir, [])
    if rankdir == "TB":
        wheel_over_graph(page, 0, 900)
    else:
        wheel_over_graph(page, 1200, 0)
    before = place(page)
    assert (before["top"] if rankdir == "TB" else before["left"]) > 500, before
    node = pick_node(page, "low" if rankdir == "TB" else "right")
    page.locator(f"{WIDGET} svg g.fm-node[data-node='{node}']").click()
    page.locator(f"{WIDGET} .fm-details[data-node='{node}']").wait_for(timeout=WAIT_MS)
    settle(page)
    opened = place(page)
    assert in_view(page, node), (node, opened)
    assert opened["scale"] == before["scale"], (before, opened)
    assert abs(opened["top"] - before["top"]) <= 2, (before, opened)
    if rankdir == "LR":  # the panel took 340 px: at most the least scroll that shows the node
        assert 0 <= opened["left"] - before["left"] <= 400, (before, opened)
    save_screenshot(
        page,
        f"view_details_keeps_place_{rankdir}",
        page.locator(WIDGET),
        f"factory ({rankdir}) scrolled, then `{node}` clicked: the details open beside it, the"
        " graph where it was, the node in view",
    )
    page.locator(f"{WIDGET} .fm-details-close").click()
    settle(page)
    closed = place(page)
    assert closed["scale"] == before["scale"], (before, closed)
    assert abs(closed["top"] - opened["top"]) <= 2, (opened, closed)
    assert in_view(page, node), (node, closed)
    assert_clean(page)


def test_a_run_is_followed_to_its_gate_and_a_resize_keeps_it(lab_server: Any, page: Any) -> None:
    """Run stops at a gate: the gate is brought into view, and stays there when the cell gets
    narrower (a refit). After the user scrolls away, a resize no longer moves the view."""
    open_factory(page, lab_server, "place_follow", "TB", [])
    wheel_over_graph(page, 0, 2000)  # the user looks at the bottom of the graph...
    page.locator(f"{WIDGET} .fm-run").click()  # ...and presses Run: the view follows the run
    wait_node_states(page, {"design_ok": "waiting"})
    wait_in_view(page, "design_ok")
    page.locator(f"{WIDGET} .fm-gate-choice-A").click()
    wait_node_states(page, {"verify_ok": "waiting"})
    wait_in_view(page, "verify_ok")  # 1500 px down the graph
    size = page.viewport_size
    page.set_viewport_size({"width": size["width"] - 160, "height": size["height"]})
    settle(page)
    assert in_view(page, "verify_ok"), place(page)  # the refit kept the waiting gate in view
    save_screenshot(
        page,
        "view_follow_gate",
        page.locator(WIDGET),
        "factory (TB) after Run and [A]: waiting at verify_ok, 1500 px down the graph, in view"
        " after the window got narrower",
    )
    wheel_over_graph(page, 0, -3000)  # the user scrolls back to the top
    moved = place(page)
    assert moved["top"] == 0 and not in_view(page, "verify_ok"), moved
    page.set_viewport_size(size)
    settle(page)
    assert place(page)["top"] == 0, place(page)  # their place, not the gate's
    assert_clean(page)
