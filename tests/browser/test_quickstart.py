"""The quickstart pipeline in a real browser: graph, legend, stepping, staleness, gates, conditions.

Scenarios 1 and 2 run in both JupyterLab (``/lab/tree/...``) and Notebook 7
(``/notebooks/...``); the rest in JupyterLab. Every assertion reads the page: elements, classes,
data attributes, computed styles and text.
"""

from __future__ import annotations

import shutil
from typing import Any

import pytest

from freshness_magic.views.render import NodeState, StaleKind
from tests.browser.fm import (
    PAINT,
    QUICKSTART_NODES,
    STATUS_CELL,
    WIDGET,
    click,
    evidence_rows,
    highlighted,
    hover_target,
    mark_views,
    node_paint,
    node_states,
    node_tooltip,
    progress_percent,
    stale_dash,
    status_counts,
    wait_evidence_rows,
    wait_node_states,
    wait_status,
    wait_tooltip,
    widget_log_errors,
    write_quickstart,
)
from tests.browser.lab import (
    REPO,
    WAIT_MS,
    error_outputs,
    open_lab_notebook,
    open_nb7_notebook,
    page_errors,
    run_all_cells,
    run_cell,
    save_screenshot,
)

pytestmark = pytest.mark.browser

OPENERS = {"lab": open_lab_notebook, "nb7": open_nb7_notebook}
UI_NAMES = {"lab": "JupyterLab", "nb7": "Notebook 7"}
PENDING = NodeState.PENDING.value
NEXT = NodeState.NEXT.value
SUCCEEDED = NodeState.SUCCEEDED.value
WAITING = NodeState.WAITING.value
STALE = NodeState.STALE.value
OUTDATED = NodeState.OUTDATED.value


def start_quickstart(page: Any, server: Any, folder: str, ui: str = "lab") -> None:
    """Write the quickstart into its own folder, open it, run every cell, wait for the graph."""
    write_quickstart(server.root / folder)
    OPENERS[ui](page, server, f"{folder}/quickstart.ipynb")
    run_all_cells(page)
    page.locator(f"{WIDGET} svg g.fm-node").nth(len(QUICKSTART_NODES) - 1).wait_for(timeout=WAIT_MS)
    wait_status(page, r"pipeline review")


def assert_no_errors(page: Any) -> None:
    assert error_outputs(page) == []
    assert widget_log_errors(page) == []
    assert page.dialogs == []
    assert page_errors(page) == []


def assert_progress_matches_status(page: Any) -> tuple[int, int]:
    done, total = status_counts(page.locator(f"{WIDGET} .fm-status").inner_text())
    assert progress_percent(page) == pytest.approx(100 * done / total, abs=1.0)
    return done, total


@pytest.mark.parametrize("ui", ["lab", "nb7"])
def test_quickstart_notebook_runs_top_to_bottom(lab_server: Any, page: Any, ui: str) -> None:
    """Scenario 1 (and 7): notebooks/quickstart.ipynb runs; one shape per node, the legend,
    no error in any cell. It shows the widget twice (two views of one model): both agree."""
    folder = lab_server.root / f"s1_{ui}"
    folder.mkdir()
    shutil.copy(REPO / "notebooks" / "quickstart.ipynb", folder / "quickstart.ipynb")
    OPENERS[ui](page, lab_server, f"s1_{ui}/quickstart.ipynb")
    run_all_cells(page)
    page.locator(WIDGET).nth(1).locator("svg g.fm-node").nth(len(QUICKSTART_NODES) - 1).wait_for(
        timeout=WAIT_MS
    )
    views = mark_views(page)
    assert len(views) == 2
    final = {
        "start": SUCCEEDED, "lint": SUCCEEDED, "draft": SUCCEEDED,
        "approve": NEXT, "done": PENDING,
    }  # fmt: skip
    for view in views:
        wait_node_states(page, final, view)
        assert node_states(page, view) == final
        assert_graph_and_legend(page, view)
        status = wait_status(page, r"next: approve", view)
        assert status_counts(status) == (3, 5)
    assert len({page.locator(v).locator(".fm-graph").inner_html() for v in views}) == 1

    texts = page.locator(".jp-CodeCell .jp-OutputArea").all_inner_texts()
    assert any("waiting at approve" in t for t in texts)
    assert any("result: true" in t for t in texts)
    assert_no_errors(page)
    save_screenshot(
        page,
        f"s1_quickstart_{ui}",
        page.locator(views[-1]),
        f"notebooks/quickstart.ipynb run top to bottom in {UI_NAMES[ui]}: the last view of the"
        " widget (start, lint, draft green; approve highlighted as next; done pending; legend)",
    )


def assert_graph_and_legend(page: Any, scope: str) -> None:
    """The quickstart graph: one shape per node, labels, labelled edges, the full legend."""
    groups = page.evaluate(
        """(s) => [...document.querySelectorAll(s + ' svg g.fm-node')].map(g => ({
            node: g.dataset.node,
            shapes: g.querySelectorAll(':scope > polygon, :scope > ellipse').length,
            text: [...g.querySelectorAll('text:not(.fm-glyph)')].map(t => t.textContent).join(' '),
            box: (({width, height}) => width * height)(g.getBoundingClientRect()),
        }))""",
        scope,
    )
    assert sorted(g["node"] for g in groups) == sorted(QUICKSTART_NODES)
    assert all(g["shapes"] == 1 for g in groups), groups
    assert all(g["box"] > 0 for g in groups), groups
    assert {g["node"]: g["text"] for g in groups}["approve"] == "Ship it?"
    edge_labels = page.evaluate(
        "(s) => [...document.querySelectorAll(s + ' svg g.fm-edge')]"
        ".map(g => [g.dataset.source, g.dataset.target,"
        " [...g.querySelectorAll('text:not(.fm-glyph)')].map(t => t.textContent).join('')])",
        scope,
    )
    assert sorted(edge_labels) == [
        ["approve", "done", "[Y] Yes"], ["approve", "draft", "[N] No, redo"],
        ["draft", "approve", ""], ["lint", "draft", ""], ["start", "lint", ""],
    ]  # fmt: skip

    legend = page.locator(f"{scope} .fm-legend")
    assert legend.is_visible()
    swatches = page.evaluate(  # each swatch painted as the nodes of its state are
        """(s) => Object.fromEntries([...document.querySelectorAll(s + ' .fm-legend-item')]
            .map(e => [e.dataset.state, getComputedStyle(
                e.querySelector('.fm-swatch g.fm-key > polygon')).fill]))""",
        scope,
    )
    assert swatches == {state: paint[0] for state, paint in PAINT.items()}


@pytest.mark.parametrize("ui", ["lab", "nb7"])
def test_step_three_times(lab_server: Any, page: Any, ui: str) -> None:
    """Scenario 2 (and 7): each Step moves the highlight and adds one evidence row."""
    start_quickstart(page, lab_server, f"s2_{ui}", ui)
    assert highlighted(page) == ["start"]  # where Step begins, as the status line says
    assert node_states(page)["start"] == NEXT
    assert evidence_rows(page) == []
    assert page.locator(f"{WIDGET} .fm-evidence-empty").is_visible()
    assert assert_progress_matches_status(page) == (0, len(QUICKSTART_NODES))

    order = list(QUICKSTART_NODES)
    for count in (1, 2, 3):
        click(page, "fm-step")
        ran, nxt = order[count - 1], order[count]
        wait_node_states(page, {ran: SUCCEEDED, nxt: NEXT})
        rows = wait_evidence_rows(page, count)
        assert rows == list(reversed(order[:count]))
        assert highlighted(page) == [nxt]
        status = wait_status(page, rf"next: {nxt} · {count}/\d+ nodes run")
        assert f"next: {nxt}" in status
        assert assert_progress_matches_status(page) == (count, len(QUICKSTART_NODES))

    states = node_states(page)
    assert states == {
        "start": SUCCEEDED, "lint": SUCCEEDED, "draft": SUCCEEDED,
        "approve": NEXT, "done": PENDING,
    }  # fmt: skip
    statuses = page.locator(f"{WIDGET} .fm-evidence-row .fm-ev-status").all_inner_texts()
    assert statuses == ["success"] * 3
    assert_no_errors(page)
    save_screenshot(
        page,
        f"s2_step_three_times_{ui}",
        page.locator(WIDGET),
        f"{UI_NAMES[ui]}: after three clicks on Step: start, lint, draft green, approve"
        " highlighted, three evidence rows, progress 3/5 matching the status line",
    )


def test_changed_source_file_shows_stale_until_accepted(lab_server: Any, page: Any) -> None:
    """Scenario 3: a file written by the test makes its node stale (tooltip names the file);
    Accept changes clears it. Later, a change after the node ran is drawn differently."""
    folder = lab_server.root / "s3_stale"
    start_quickstart(page, lab_server, "s3_stale")
    click(page, "fm-step")
    wait_node_states(page, {"start": SUCCEEDED, "lint": NEXT, "draft": PENDING})
    assert "inputs changed" not in node_tooltip(page, "draft")

    (folder / "docs" / "spec.md").write_text("# Login\n\nUsers log in with an e-mail address.\n")
    run_cell(page, STATUS_CELL)

    wait_node_states(page, {"draft": STALE, "lint": NEXT, "start": SUCCEEDED})
    assert node_paint(page)["draft"][2] == stale_dash(StaleKind.BASELINE)  # type: ignore[index]
    tooltip = wait_tooltip(page, "draft", "docs/spec.md (modified)")
    assert "inputs changed since baseline" in tooltip
    assert hover_target(page, "draft")["node"] == "draft"
    assert "docs/spec.md" not in node_tooltip(page, "lint")
    save_screenshot(
        page,
        "s3_stale_since_baseline",
        page.locator(WIDGET),
        "docs/spec.md rewritten by the test: draft (not run yet) drawn stale with a dashed"
        " outline; its tooltip names docs/spec.md (modified)",
    )

    click(page, "fm-accept")
    wait_node_states(page, {"draft": PENDING, "lint": NEXT, "start": SUCCEEDED})
    page.wait_for_function(
        '(s) => !document.querySelector(s + \' [data-node="draft"][data-state="stale"]\')',
        arg=WIDGET,
        timeout=WAIT_MS,
    )
    assert node_paint(page)["draft"][2] == "none"  # type: ignore[index]
    assert "inputs changed" not in node_tooltip(page, "draft")
    save_screenshot(
        page,
        "s3_after_accept",
        page.locator(WIDGET),
        "after Accept changes: draft back to pending (light grey, solid outline)",
    )

    for count in (2, 3):
        click(page, "fm-step")
        wait_evidence_rows(page, count)
    wait_node_states(page, {"lint": SUCCEEDED, "draft": SUCCEEDED, "approve": NEXT})
    (folder / "src" / "login.py").write_text("def login(email: str) -> str:\n    return email\n")
    run_cell(page, STATUS_CELL)
    # draft ran after lint but read nothing lint wrote: marks follow what each execution
    # read, so only lint is marked
    wait_node_states(page, {"lint": STALE, "draft": SUCCEEDED, "approve": NEXT})
    assert node_paint(page)["lint"][2] == stale_dash(StaleKind.RUN)  # type: ignore[index]
    tooltip = wait_tooltip(page, "lint", "src/login.py (modified)")
    assert "inputs changed since it ran" in tooltip
    assert hover_target(page, "lint")["node"] == "lint"
    assert_no_errors(page)
    save_screenshot(
        page,
        "s3_stale_since_run",
        page.locator(WIDGET),
        "src/login.py rewritten after lint ran: lint drawn stale since run (dotted outline),"
        " tooltip names src/login.py (modified); draft, which read nothing of lint's, unmarked",
    )

    click(page, "fm-accept")
    wait_node_states(page, {"lint": SUCCEEDED, "draft": SUCCEEDED, "approve": NEXT})
    assert node_paint(page)["lint"][2] == "none"  # type: ignore[index]
    assert "inputs changed" not in node_tooltip(page, "lint")
    assert_no_errors(page)


def test_gate_buttons_route_the_run(lab_server: Any, page: Any) -> None:
    """Scenario 4: one button per choice; each click follows its own edge."""
    start_quickstart(page, lab_server, "s4_gate")
    gate = page.locator(f"{WIDGET} .fm-gate")
    assert not gate.is_visible()

    click(page, "fm-run")
    wait_node_states(page, {"draft": SUCCEEDED, "approve": WAITING, "done": PENDING})
    gate.wait_for(state="visible", timeout=WAIT_MS)
    choices = page.locator(f"{WIDGET} .fm-gate-choice")
    assert choices.all_inner_texts() == ["[Y] Yes", "[N] No, redo"]
    assert "Ship it?" in page.locator(f"{WIDGET} .fm-gate-question").inner_text()
    assert wait_status(page, "waiting at approve")
    assert evidence_rows(page).count("draft") == 1
    save_screenshot(
        page,
        "s4_gate_waiting",
        page.locator(WIDGET),
        "Run stopped at the gate: approve purple (waiting), gate panel with one button per"
        " choice ([Y] Yes, [N] No, redo)",
    )

    page.locator(f"{WIDGET} .fm-gate-choice", has_text="No, redo").click()
    page.wait_for_function(
        "(s) => [...document.querySelectorAll(s + ' .fm-evidence-row')]"
        ".filter(r => r.dataset.node === 'draft').length === 2",
        arg=WIDGET,
        timeout=WAIT_MS,
    )
    wait_node_states(page, {"approve": WAITING, "done": PENDING, "draft": SUCCEEDED})
    gate.wait_for(state="visible", timeout=WAIT_MS)
    assert wait_status(page, "waiting at approve")
    assert "done" not in evidence_rows(page)
    assert choices.count() == 2

    page.locator(f"{WIDGET} .fm-gate-choice", has_text="Yes").click()
    wait_node_states(page, {"approve": SUCCEEDED, "done": SUCCEEDED})
    gate.wait_for(state="hidden", timeout=WAIT_MS)
    status = wait_status(page, "completed")
    assert status_counts(status) == (5, 5)
    assert progress_percent(page) == pytest.approx(100, abs=1.0)
    page.wait_for_function(  # the exit's record comes with the step's last update
        "(s) => document.querySelector(s + ' .fm-evidence-row').dataset.node === 'done'",
        arg=WIDGET,
        timeout=WAIT_MS,
    )
    rows = evidence_rows(page)
    assert rows[0] == "done"
    assert rows.count("draft") == 2
    assert highlighted(page) == []
    assert_no_errors(page)
    save_screenshot(
        page,
        "s4_gate_answered",
        page.locator(WIDGET),
        "after [N] (draft ran again, gate again) and then [Y]: completed, done green, gate"
        " panel hidden, evidence shows both passes through draft",
    )


def test_condition_playground(lab_server: Any, page: Any) -> None:
    """Scenario 5: typing a condition shows each clause's result; a bad one its error column."""
    start_quickstart(page, lab_server, "s5_playground")
    click(page, "fm-step")
    wait_evidence_rows(page, 1)
    field = page.locator(f"{WIDGET} .fm-playground-input input")
    result = page.locator(f"{WIDGET} .fm-playground-result")

    def shows(text: str) -> str:
        page.wait_for_function(
            "([s, t]) => { const e = document.querySelector(s + ' .fm-playground-result');"
            " return !!e && e.textContent.includes(t); }",
            arg=[WIDGET, text],
            timeout=WAIT_MS,
        )
        return str(result.inner_text())

    field.fill("outcome=success && preferred_label=Yes")
    text = shows("result: false")
    lines = text.splitlines()
    assert any(line.strip().startswith("outcome=success") and "held" in line for line in lines)
    assert any(
        line.strip().startswith("preferred_label=Yes") and line.endswith("failed") for line in lines
    )

    field.fill("outcome=success")
    text = shows("result: true")
    assert "preferred_label" not in text.split("(outcome=", 1)[0]
    assert any(line.strip().startswith("outcome=success") and "held" in line
               for line in text.splitlines())  # fmt: skip

    field.press("End")
    field.press_sequentially(" && context.missing.key")
    text = shows("context.missing.key")
    assert "result: false" in text
    assert any("context.missing.key" in line and "(not set)" in line and line.endswith("failed")
               for line in text.splitlines())  # fmt: skip

    field.fill("outcome==success")
    text = shows("syntax error")
    assert "syntax error at column 8" in text
    assert "==" in text
    caret_line = [line for line in text.splitlines() if line.strip() == "^"]
    assert caret_line and caret_line[0].index("^") == len("  ") + 7
    assert "result:" not in text
    assert_no_errors(page)
    save_screenshot(
        page,
        "s5_playground_error",
        page.locator(f"{WIDGET} .fm-playground"),
        "condition playground after typing outcome==success: syntax error at column 8 with a"
        " caret under the second =",
    )
