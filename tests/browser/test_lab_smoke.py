"""The browser harness itself works: JupyterLab loads, a kernel runs, ipywidgets render."""

from __future__ import annotations

import pytest

from tests.browser.lab import open_lab_notebook, run_all_cells, write_notebook

pytestmark = pytest.mark.browser


def test_widget_button_renders_and_clicks(lab_server, page):
    write_notebook(
        lab_server.root / "smoke.ipynb",
        [
            "import ipywidgets as w\n"
            "b = w.Button(description='press me')\n"
            "b.add_class('smoke-button')\n"
            "b.on_click(lambda _b: setattr(_b, 'description', 'pressed'))\n"
            "b",
        ],
    )
    open_lab_notebook(page, lab_server, "smoke.ipynb")
    run_all_cells(page)
    button = page.locator(".smoke-button")
    button.wait_for(timeout=60_000)
    assert button.inner_text() == "press me"
    button.click()
    page.wait_for_function(
        "() => document.querySelector('.smoke-button').textContent.includes('pressed')",
        timeout=30_000,
    )
    assert page.dialogs == []
