"""A kernel restarted behind the page (by the server's REST API, as another client or tool would
do it) must not make the view's buttons fail in silence.

JupyterLab 4.6 sends widget messages on a kernel subshell it creates once per comm target and
forgets only when it restarts the kernel itself; after an outside restart it keeps sending on a
subshell the new kernel process does not have, and ipykernel 7.4 drops every widget message it
routes there (its log says "Unknown subshell_id"). The first click after the restart still
arrives; the next ones may not, and a reload alone does not help (the kernel keeps routing that
widget's messages to the missing subshell). The view says that the kernel has not answered and
to reload the page and run the cell again: a view created after the reload works.
"""

from __future__ import annotations

import json
import urllib.request
from typing import Any

import pytest

from tests.browser.fm import WIDGET, node_states, wait_node_states
from tests.browser.lab import (
    WAIT_MS,
    open_lab_notebook,
    run_cell,
    save_screenshot,
    wait_kernel_idle,
    wait_notebook_ready,
    write_notebook,
)
from tests.browser.test_control import GATED

pytestmark = pytest.mark.browser

NOTEBOOK = "control_outside/gate.ipynb"


def restart_behind_the_page(server: Any) -> None:
    """Restart every running kernel through the server's REST API (not through the page)."""
    with urllib.request.urlopen(server.page_url("/api/kernels"), timeout=30) as reply:
        kernels = json.load(reply)
    for kernel in kernels:
        request = urllib.request.Request(
            server.page_url(f"/api/kernels/{kernel['id']}/restart"), method="POST", data=b""
        )
        with urllib.request.urlopen(request, timeout=60):
            pass


def answer_or_notice(page: Any) -> str:
    """Wait until the run finished ("routed") or the view says the kernel has not answered."""
    page.wait_for_function(
        """(s) => {
            const notice = document.querySelector(s + ' .fm-notice');
            const done = document.querySelector(s + ' svg g.fm-node[data-node="done"]');
            return (notice && !notice.hidden)
                || (done && done.dataset.state === 'succeeded');
        }""",
        arg=WIDGET,
        timeout=WAIT_MS,
    )
    return "routed" if node_states(page)["done"] == "succeeded" else "notice"


def test_a_click_lost_after_an_outside_restart_is_reported(lab_server: Any, page: Any) -> None:
    write_notebook(
        lab_server.root / NOTEBOOK,
        ["pass", "%load_ext freshness_magic", "%%pipeline gated\n" + GATED, "%pipeline run"],
    )
    open_lab_notebook(page, lab_server, NOTEBOOK)
    for index in range(4):
        run_cell(page, index)
    wait_node_states(page, {"approve": "waiting"})
    restart_behind_the_page(lab_server)
    wait_kernel_idle(page)
    run_cell(page, 1)
    run_cell(page, 2)
    page.locator(f"{WIDGET} .fm-banner-resume").click(timeout=WAIT_MS)
    page.locator(f"{WIDGET} .fm-gate-question [data-node='approve']").wait_for(timeout=WAIT_MS)
    page.locator(f"{WIDGET} .fm-gate-choice-Y").click()
    outcome = answer_or_notice(page)
    if outcome == "notice":
        notice = page.locator(f"{WIDGET} .fm-notice").inner_text()
        assert '"answer"' in notice and "outside this page, reload the page first" in notice
        assert node_states(page)["approve"] == "waiting"
        save_screenshot(
            page,
            "control_outside_restart_notice",
            page.locator(WIDGET),
            "after a kernel restart behind the page, JupyterLab sent the Y click on a subshell"
            " the new kernel does not have: the view says the kernel has not answered and what to"
            " do",
        )
        page.evaluate("() => window.jupyterapp.commands.execute('docmanager:save')")
        page.reload()
        wait_notebook_ready(page, NOTEBOOK)
        run_cell(page, 2)  # a new view of the run waiting on disk: Resume, then Yes
        page.locator(f"{WIDGET} .fm-banner-resume").click(timeout=WAIT_MS)
        page.locator(f"{WIDGET} .fm-gate-question [data-node='approve']").wait_for(timeout=WAIT_MS)
        page.locator(f"{WIDGET} .fm-gate-choice-Y").click()
        outcome = answer_or_notice(page)
    assert outcome == "routed"
    wait_node_states(page, {"approve": "succeeded", "done": "succeeded"})
