"""Reading the pipeline view in the page: theme switching, on-screen sizes, contrast, zoom."""

from __future__ import annotations

from typing import Any

from tests.browser.lab import TIMEOUT_MS, WAIT_MS

THEMES = {"light": "JupyterLab Light", "dark": "JupyterLab Dark"}


def set_theme(page: Any, theme: str) -> None:
    """Switch the front end's theme with its own command and wait until the page uses it."""
    page.evaluate(
        "(t) => window.jupyterapp.commands.execute('apputils:change-theme', {theme: t})",
        THEMES[theme],
    )
    page.wait_for_function(
        "(light) => document.body.dataset.jpThemeLight === light",
        arg="true" if theme == "light" else "false",
        timeout=TIMEOUT_MS,
    )
    # The theme's stylesheet is in place once the attribute is set; wait until two frames have
    # been painted with it (rather than a fixed time) so screenshots show the new colours.
    page.evaluate("() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")


_CONTRAST_JS = """(s) => {
    const parse = (c) => {
        const m = /rgba?\\(([\\d.]+),\\s*([\\d.]+),\\s*([\\d.]+)(?:,\\s*([\\d.]+))?/.exec(c);
        return m ? [+m[1], +m[2], +m[3], m[4] === undefined ? 1 : +m[4]] : null;
    };
    const lum = ([r, g, b]) => {
        const f = (v) => {
            v /= 255;
            return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4;
        };
        return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b);
    };
    const ratio = (a, b) => { const [x, y] = [lum(a), lum(b)].sort((p, q) => q - p);
                              return (x + 0.05) / (y + 0.05); };
    const root = document.querySelector(s);
    const viewport = root.querySelector('.fm-viewport, .fm-static-view');
    let bgEl = viewport, bg = parse(getComputedStyle(bgEl).backgroundColor);
    while (bg && bg[3] === 0 && bgEl.parentElement) {
        bgEl = bgEl.parentElement; bg = parse(getComputedStyle(bgEl).backgroundColor);
    }
    const probe = document.createElement('span');
    root.appendChild(probe);
    const states = {};
    for (const item of root.querySelectorAll('.fm-legend-item')) {
        const state = item.dataset.state;
        probe.style.color = `var(--fm-${state}-stroke)`;
        const stroke = parse(getComputedStyle(probe).color);
        probe.style.color = `var(--fm-${state}-fill)`;
        const fill = parse(getComputedStyle(probe).color);
        states[state] = {stroke: ratio(stroke, bg), fill_vs_text: 0};
        const g = root.querySelector(`svg g.fm-node[data-state="${state}"]`);
        if (g) {
            const shape = g.querySelector(':scope > polygon, :scope > ellipse, :scope > path');
            const text = g.querySelector('text');
            const cs = getComputedStyle(shape);
            states[state].painted_stroke = ratio(parse(cs.stroke), bg);
            states[state].text_on_fill = ratio(parse(getComputedStyle(text).fill), parse(cs.fill));
        }
    }
    probe.remove();
    const edge = root.querySelector('svg g.fm-edge path');
    const edgeText = root.querySelector('svg g.fm-edge text');
    const cluster = root.querySelector('svg g.fm-cluster text');
    return {
        background: getComputedStyle(bgEl).backgroundColor,
        states,
        edge: edge ? ratio(parse(getComputedStyle(edge).stroke), bg) : null,
        edge_label: edgeText ? ratio(parse(getComputedStyle(edgeText).fill), bg) : null,
        cluster_label: cluster ? ratio(parse(getComputedStyle(cluster).fill), bg) : null,
    };
}"""


def contrast(page: Any, scope: str) -> dict[str, Any]:
    """Contrast ratios computed from computed styles: each legend state's outline against the
    graph's background (and painted nodes' text on their fill), edges and labels too."""
    return dict(page.evaluate(_CONTRAST_JS, scope))


def label_font_px(page: Any, scope: str) -> dict[str, float]:
    """On-screen font size of node labels: the SVG font size times the drawn scale."""
    return dict(
        page.evaluate(
            """(s) => {
                const svg = document.querySelector(s + ' .fm-viewport svg');
                const sizes = [...svg.querySelectorAll('g.fm-node text:not(.fm-glyph)')].map(t =>
                    parseFloat(t.getAttribute('font-size')) * t.getScreenCTM().a);
                return {min: Math.min(...sizes), max: Math.max(...sizes)};
            }""",
            scope,
        )
    )


def viewport_state(page: Any, scope: str) -> dict[str, float]:
    """Scroll position, sizes and the drawn SVG size of the graph's viewport."""
    return dict(
        page.evaluate(
            """(s) => {
                const v = document.querySelector(s + ' .fm-viewport');
                const svg = v.querySelector('svg');
                return {left: v.scrollLeft, top: v.scrollTop, scrollWidth: v.scrollWidth,
                        clientWidth: v.clientWidth, clientHeight: v.clientHeight,
                        svgWidth: svg.getBoundingClientRect().width};
            }""",
            scope,
        )
    )


def wait_attr(page: Any, selector: str, timeout: int = WAIT_MS) -> None:
    """Wait until ``selector`` matches an element (attribute selectors included)."""
    page.wait_for_function("(sel) => !!document.querySelector(sel)", arg=selector, timeout=timeout)


def in_window(page: Any, selector: str) -> bool:
    """Whether the element is fully inside the browser window (not pushed off screen)."""
    return bool(
        page.evaluate(
            """(sel) => { const r = document.querySelector(sel).getBoundingClientRect();
                return r.top >= 0 && r.left >= 0 && r.bottom <= innerHeight
                    && r.right <= innerWidth && r.width > 0; }""",
            selector,
        )
    )
