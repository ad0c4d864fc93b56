"""The freshness_magic widget as the page shows it: node states read from computed styles,
the panels read from the DOM, and the quickstart notebook of DESIGN.md §2 with its files.

Node states are recovered from what the browser actually paints (the computed ``fill`` and
``stroke`` of each node's shape) and mapped back through the fixed palette of DESIGN.md §7 (light
or dark theme), so a wrong CSS rule, a rule for the wrong node or a rule that does not apply all
show up here.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from freshness_magic.views.render import STALE_DASH, STATE_STYLES, NodeState, StaleKind
from tests.browser.lab import WAIT_MS, write_notebook

WIDGET = ".fm-widget"

QUICKSTART_DOT = """digraph review {
  graph [goal="Ship the login fix"]
  start   [shape=Mdiamond]
  lint    [shape=parallelogram, tool_command="ruff check src",
           source_files="src/**/*.py", freshness="block"]
  draft   [prompt="Summarise the change for $goal", source_files="docs/spec.md", freshness="warn"]
  approve [shape=hexagon, label="Ship it?"]
  done    [shape=Msquare]
  start -> lint -> draft -> approve
  approve -> done  [label="[Y] Yes"]
  approve -> draft [label="[N] No, redo"]
}
"""
QUICKSTART_NODES = ("start", "lint", "draft", "approve", "done")
STATUS_CELL = 2
"""Index of the quickstart's ``%pipeline status`` cell (run again to trigger a freshness check)."""


def write_quickstart(folder: Path, name: str = "quickstart.ipynb") -> Path:
    """The DESIGN.md §2 quickstart as a notebook, with the files its nodes read.

    ``lint`` runs ``ruff check src`` (ruff comes with the test extra and works offline).
    """
    (folder / "src").mkdir(parents=True, exist_ok=True)
    (folder / "docs").mkdir(parents=True, exist_ok=True)
    (folder / "src" / "login.py").write_text("def login(user: str) -> str:\n    return user\n")
    (folder / "docs" / "spec.md").write_text("# Login\n\nUsers log in with a name.\n")
    return write_notebook(
        folder / name,
        ["%load_ext freshness_magic", "%%pipeline review\n" + QUICKSTART_DOT, "%pipeline status"],
    )


def _rgb(colour: str) -> str:
    """``#rrggbb`` as the browser reports a computed colour: ``rgb(r, g, b)``."""
    red, green, blue = (int(colour[i : i + 2], 16) for i in (1, 3, 5))
    return f"rgb({red}, {green}, {blue})"


PAINT: dict[str, tuple[str, str]] = {
    state.value: (_rgb(style.fill), _rgb(style.stroke)) for state, style in STATE_STYLES.items()
}
"""Each state's (fill, stroke) as computed styles in the light theme; all pairs differ."""
DARK_PAINT: dict[str, tuple[str, str]] = {
    state.value: (_rgb(style.dark_fill), _rgb(style.dark_stroke))
    for state, style in STATE_STYLES.items()
}
STATE_OF_PAINT = {paint: state for state, paint in [*PAINT.items(), *DARK_PAINT.items()]}
assert len(STATE_OF_PAINT) == 2 * len(PAINT)

_NODE_PAINT_JS = """(scope) => {
    const out = {};
    for (const g of document.querySelectorAll(scope + ' svg g.fm-node')) {
        const shape = g.querySelector(':scope > polygon, :scope > ellipse, :scope > path');
        const cs = shape && getComputedStyle(shape);
        out[g.dataset.node] = cs ? [cs.fill, cs.stroke, cs.strokeDasharray] : null;
    }
    return out;
}"""


def node_paint(page: Any, scope: str = WIDGET) -> dict[str, list[str] | None]:
    """Each node's computed [fill, stroke, stroke-dasharray] in the widget's graph."""
    return dict(page.evaluate(_NODE_PAINT_JS, scope))


def node_states(page: Any, scope: str = WIDGET) -> dict[str, str]:
    """Each node's state as painted (``?fill/stroke`` when the paint matches no state)."""
    states = {}
    for node, paint in node_paint(page, scope).items():
        key = (paint[0], paint[1]) if paint else ("", "")
        states[node] = STATE_OF_PAINT.get(key, f"?{key[0]}/{key[1]}")
    return states


def stale_dash(kind: StaleKind) -> str:
    """The computed ``stroke-dasharray`` of a node stale since baseline or since it ran."""
    return ", ".join(f"{part}px" for part in STALE_DASH[kind].split(","))


def wait_node_states(page: Any, expected: dict[str, str], scope: str = WIDGET) -> None:
    """Wait until every node in ``expected`` is painted in its state's colours (of the light
    or the dark palette, whichever theme the page shows)."""
    want = {node: [*PAINT[state], *DARK_PAINT[state]] for node, state in expected.items()}
    try:
        page.wait_for_function(
            f"""([scope, want]) => {{
                const paint = ({_NODE_PAINT_JS})(scope);
                return Object.entries(want).every(([node, [fill, stroke, dfill, dstroke]]) =>
                    paint[node] && ((paint[node][0] === fill && paint[node][1] === stroke)
                    || (paint[node][0] === dfill && paint[node][1] === dstroke)));
            }}""",
            arg=[scope, want],
            timeout=WAIT_MS,
        )
    except Exception as exc:
        raise AssertionError(
            f"node states never became {expected}; painted: {node_states(page, scope)}"
        ) from exc


def highlighted(page: Any, scope: str = WIDGET) -> list[str]:
    """The nodes painted as next/running (the highlighted position of the run)."""
    marked = {NodeState.NEXT.value, NodeState.RUNNING.value}
    return [n for n, s in node_states(page, scope).items() if s in marked]


def evidence_rows(page: Any, scope: str = WIDGET) -> list[str]:
    """The node of each row in the evidence panel, newest first."""
    return list(
        page.evaluate(
            "(s) => [...document.querySelectorAll(s + ' .fm-evidence-row')]"
            ".map(r => r.dataset.node)",
            scope,
        )
    )


def wait_evidence_rows(page: Any, count: int, scope: str = WIDGET) -> list[str]:
    page.wait_for_function(
        "([s, n]) => document.querySelectorAll(s + ' .fm-evidence-row').length === n",
        arg=[scope, count],
        timeout=WAIT_MS,
    )
    return evidence_rows(page, scope)


def status_text(page: Any, scope: str = WIDGET) -> str:
    return str(page.locator(f"{scope} .fm-status").inner_text())


def wait_status(page: Any, pattern: str, scope: str = WIDGET) -> str:
    """Wait until the status line matches the regular expression ``pattern``."""
    page.wait_for_function(
        "([s, p]) => { const e = document.querySelector(s + ' .fm-status');"
        " return !!e && new RegExp(p).test(e.textContent); }",
        arg=[scope, pattern],
        timeout=WAIT_MS,
    )
    return status_text(page, scope)


def progress_percent(page: Any, scope: str = WIDGET) -> float:
    """How full the progress bar is drawn, in percent of its track."""
    return float(
        page.evaluate(
            """(s) => {
                const bar = document.querySelector(s + ' .fm-progress .progress-bar');
                const track = bar.parentElement.getBoundingClientRect().width;
                return 100 * bar.getBoundingClientRect().width / track;
            }""",
            scope,
        )
    )


def status_counts(text: str) -> tuple[int, int]:
    """``(run, total)`` from a status line saying ``n/m nodes run``."""
    match = re.search(r"(\d+)/(\d+) nodes run", text)
    assert match, f"no 'n/m nodes run' in the status line {text!r}"
    return int(match.group(1)), int(match.group(2))


_TOOLTIP_JS = """([s, n]) => {
    const group = document.querySelector(`${s} svg g.fm-node[data-node="${n}"]`);
    const title = group && group.querySelector(':scope > title');
    return title ? title.textContent : null;
}"""


def node_tooltip(page: Any, node: str, scope: str = WIDGET) -> str:
    """What hovering ``node`` shows: the ``<title>`` of its group in the graph."""
    return str(page.evaluate(_TOOLTIP_JS, [scope, node]))


def wait_tooltip(page: Any, node: str, text: str, scope: str = WIDGET) -> str:
    """Wait until the tooltip of ``node`` contains ``text``; return the tooltip."""
    try:
        page.wait_for_function(
            f"([s, n, t]) => (({_TOOLTIP_JS})([s, n]) || '').includes(t)",
            arg=[scope, node, text],
            timeout=WAIT_MS,
        )
    except Exception as exc:
        raise AssertionError(
            f"the tooltip of {node} never said {text!r}: {node_tooltip(page, node, scope)!r}"
        ) from exc
    return node_tooltip(page, node, scope)


def hover_target(page: Any, node: str, scope: str = WIDGET) -> dict[str, str | None]:
    """What the mouse is over at the centre of ``node``'s shape (the element whose tooltip the
    browser would show): its tag, class and ``data-node`` (of it or its group)."""
    page.locator(f"{scope} svg g.fm-node[data-node='{node}']").scroll_into_view_if_needed()
    return dict(
        page.evaluate(
            """([s, n]) => {
                const g = document.querySelector(`${s} svg g.fm-node[data-node="${n}"]`);
                const r = g.querySelector(':scope > polygon, :scope > ellipse')
                    .getBoundingClientRect();
                const e = document.elementFromPoint(r.x + r.width / 2, r.y + r.height / 2);
                const owner = e && e.closest('[data-node]');
                return {tag: e && e.tagName, cls: e && e.getAttribute('class'),
                        node: owner && owner.dataset.node};
            }""",
            [scope, node],
        )
    )


def mark_views(page: Any) -> list[str]:
    """Give every widget view on the page its own scope selector (a pipeline shown twice has
    two views of one model); returns the selectors in page order."""
    count = int(
        page.evaluate(
            "() => { const v = [...document.querySelectorAll('.fm-widget')];"
            " v.forEach((e, i) => e.setAttribute('data-fm-view', String(i))); return v.length; }"
        )
    )
    return [f'.fm-widget[data-fm-view="{i}"]' for i in range(count)]


def widget_log_errors(page: Any, scope: str = WIDGET) -> list[str]:
    """Errors the widget's actions reported into its log area."""
    return list(
        page.evaluate(
            "(s) => [...document.querySelectorAll(s + ' .fm-log .fm-error')]"
            ".map(e => e.textContent)",
            scope,
        )
    )


def click(page: Any, css: str, scope: str = WIDGET) -> None:
    """Click the widget control carrying class ``css`` (a ``fm-...`` class)."""
    page.locator(f"{scope} .{css}").first.click()
