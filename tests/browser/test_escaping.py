"""Scenario 6: pipeline text that looks like HTML is shown as text and never runs in the page."""

from __future__ import annotations

from typing import Any

import pytest

from freshness_magic.engine.model import Edge
from freshness_magic.views.render import NodeState, edge_text
from tests.browser.fm import (
    WIDGET,
    click,
    node_states,
    wait_node_states,
    wait_status,
    wait_tooltip,
)
from tests.browser.lab import (
    WAIT_MS,
    error_outputs,
    open_lab_notebook,
    page_errors,
    run_all_cells,
    run_cell,
    save_screenshot,
    write_notebook,
)

pytestmark = pytest.mark.browser

SCRIPT = "<script>window.__pwned=1;alert('script')</script>"
IMG = "<img src=x onerror=\"window.__pwned=1;alert('img')\">"
SVG = '"><svg onload="window.__pwned=1;alert(\'svg\')">'
TITLE = "</title><script>window.__pwned=1</script>"
FILE_NAME = "<img src=x onerror=window.__pwned=1>.md"
"""An input file whose name is markup (a file name may hold anything but a slash)."""


def _dot(text: str) -> str:
    """``text`` as a DOT quoted string."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


HOSTILE_DOT = f"""digraph hostile {{
  graph [goal={_dot(SCRIPT)}]
  start [shape=Mdiamond, label={_dot(SCRIPT)}]
  work  [label={_dot(IMG)}, prompt={_dot(IMG + " for $goal " + SVG)},
         source_files="docs/*.md", freshness="warn"]
  gate  [shape=hexagon, label={_dot(SVG)}]
  note  [label={_dot(SCRIPT)}, prompt="Note on {{last_response}}"]
  done  [shape=Msquare, label={_dot(TITLE)}]
  start -> work -> gate
  gate -> note [label={_dot("[Y] " + IMG)}]
  note -> done
  gate -> work [label={_dot("[N] " + SVG)}]
}}
"""


def edge_text_of(label: str) -> str:
    """What the graph shows for an edge labelled ``label`` (cut to size; whole in the title)."""
    return edge_text(Edge("a", "b", {"label": label}))


def pwned(page: Any) -> str:
    return str(page.evaluate("() => typeof window.__pwned"))


def live_elements(page: Any) -> dict[str, int]:
    """Elements a payload would have created if it had been parsed as markup."""
    return dict(
        page.evaluate(
            """(s) => ({
                img: document.querySelectorAll('img[src="x"]').length,
                svgOnload: document.querySelectorAll('svg[onload]').length,
                handlers: [...document.querySelectorAll(s + ' *')].filter(
                    e => [...e.attributes].some(a => a.name.startsWith('on'))).length,
                scripts: document.querySelectorAll(s + ' script').length,
            })""",
            WIDGET,
        )
    )


def test_hostile_labels_render_as_text(lab_server: Any, page: Any) -> None:
    folder = lab_server.root / "s6_escaping"
    (folder / "docs").mkdir(parents=True)
    (folder / "docs" / "notes.md").write_text("notes\n")
    write_notebook(
        folder / "hostile.ipynb",
        ["%load_ext freshness_magic", "%%pipeline hostile\n" + HOSTILE_DOT, "%pipeline status"],
    )
    open_lab_notebook(page, lab_server, "s6_escaping/hostile.ipynb")
    run_all_cells(page)
    page.locator(f"{WIDGET} svg g.fm-node").nth(3).wait_for(timeout=WAIT_MS)

    labels = page.evaluate(
        """(s) => Object.fromEntries([...document.querySelectorAll(s + ' svg g.fm-node')]
            .map(g => [g.dataset.node, [...g.querySelectorAll('text:not(.fm-glyph)')]
                                       .map(t => t.textContent).join('')]))""",
        WIDGET,
    )
    assert labels == {"start": SCRIPT, "work": IMG, "gate": SVG, "note": SCRIPT, "done": TITLE}
    edge_text = page.evaluate(
        "(s) => [...document.querySelectorAll(s + ' svg g.fm-edge text')].map(t => t.textContent)",
        WIDGET,
    )
    assert sorted(edge_text) == sorted(
        edge_text_of(label) for label in ("[Y] " + IMG, "[N] " + SVG)
    )
    edge_titles = page.evaluate(
        "(s) => [...document.querySelectorAll(s + ' svg g.fm-edge > title')]"
        ".map(t => t.textContent)",
        WIDGET,
    )
    assert any(("[N] " + SVG) in title for title in edge_titles)

    click(page, "fm-run")
    wait_node_states(page, {"gate": NodeState.WAITING.value})
    page.locator(f"{WIDGET} .fm-gate").wait_for(state="visible", timeout=WAIT_MS)
    question = page.locator(f"{WIDGET} .fm-gate-question").inner_text()
    assert SVG in question
    buttons = page.locator(f"{WIDGET} .fm-gate-choice").all_inner_texts()
    assert [b.strip() for b in buttons] == ["[Y] " + IMG, "[N] " + SVG]
    assert SVG in wait_tooltip(page, "gate", "waiting")
    page.locator(f"{WIDGET} .fm-playground-input input").fill(f"context.x={SCRIPT}")
    page.wait_for_function(
        "(s) => document.querySelector(s + ' .fm-playground-result').textContent.length > 0",
        arg=WIDGET,
        timeout=WAIT_MS,
    )
    assert SCRIPT in page.locator(f"{WIDGET} .fm-playground-result").inner_text()

    (folder / "docs" / FILE_NAME).write_text("added by the test\n")
    run_cell(page, 2)
    wait_node_states(page, {"work": NodeState.STALE.value})
    assert f"{FILE_NAME} (added)" in wait_tooltip(page, "work", FILE_NAME)
    page.locator(f"{WIDGET} svg g.fm-node[data-node='work']").click()
    page.locator(f"{WIDGET} .fm-details-stale_files").wait_for(timeout=WAIT_MS)
    assert FILE_NAME in page.locator(f"{WIDGET} .fm-details").inner_text()
    save_screenshot(
        page,
        "s6_escaping_gate",
        page.locator(WIDGET),
        'hostile pipeline waiting at its gate: <script>, <img onerror>, "><svg onload> shown as'
        " text in node and edge labels, gate question, choice buttons, evidence rows and the"
        " playground, and an added input file named like an <img onerror> tag in the tooltip"
        " and the details of the stale node; nothing ran",
    )

    assert pwned(page) == "undefined"
    assert page.dialogs == []
    assert live_elements(page) == {"img": 0, "svgOnload": 0, "handlers": 0, "scripts": 0}

    page.locator(f"{WIDGET} .fm-gate-choice").first.click()
    # `work`'s inputs changed after it ran: `note` read its response, so it is outdated; the
    # gate and the exit read nothing of it and stay succeeded.
    outdated = NodeState.OUTDATED.value
    wait_node_states(page, {"note": outdated})
    wait_status(page, "completed")
    states = node_states(page)
    assert states.pop("work") == NodeState.STALE.value
    assert states.pop("note") == outdated
    assert set(states.values()) == {NodeState.SUCCEEDED.value}
    assert pwned(page) == "undefined"
    assert page.dialogs == []
    assert live_elements(page) == {"img": 0, "svgOnload": 0, "handlers": 0, "scripts": 0}
    assert page_errors(page) == []
    assert error_outputs(page) == []
    save_screenshot(
        page,
        "s6_escaping_completed",
        page.locator(WIDGET),
        "hostile pipeline after a click on its first choice button: completed, every node green"
        " but the stale one and the one that read its response (outdated), no dialog,"
        " window.__pwned still undefined",
    )
