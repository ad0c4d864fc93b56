"""The pictures of the README and the documentation, taken from the real view in JupyterLab.

Each run takes them into ``build/screenshots/``; `make pictures` copies them into ``docs/images/``,
so the pictures show the view as it is: the quickstart run to its gate, in the light and the dark
theme.
"""

from __future__ import annotations

import shutil
from typing import Any

import pytest

from freshness_magic.views.render import NodeState
from tests.browser.fm import QUICKSTART_NODES, WIDGET, mark_views, node_states, wait_node_states
from tests.browser.lab import (
    REPO,
    WAIT_MS,
    open_lab_notebook,
    publish_picture,
    run_all_cells,
    save_screenshot,
)
from tests.browser.view import set_theme

pytestmark = pytest.mark.browser

AT_THE_GATE = {
    "start": NodeState.SUCCEEDED.value,
    "lint": NodeState.SUCCEEDED.value,
    "draft": NodeState.SUCCEEDED.value,
    "approve": NodeState.NEXT.value,
    "done": NodeState.PENDING.value,
}


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_the_documentation_pictures_show_the_quickstart_at_its_gate(
    lab_server: Any, page: Any, theme: str
) -> None:
    folder = lab_server.root / f"pictures_{theme}"
    folder.mkdir()
    shutil.copy(REPO / "notebooks" / "quickstart.ipynb", folder / "quickstart.ipynb")
    open_lab_notebook(page, lab_server, f"pictures_{theme}/quickstart.ipynb")
    run_all_cells(page)
    page.locator(WIDGET).nth(1).locator("svg g.fm-node").nth(len(QUICKSTART_NODES) - 1).wait_for(
        timeout=WAIT_MS
    )
    view = mark_views(page)[-1]
    wait_node_states(page, AT_THE_GATE, view)
    assert node_states(page, view) == AT_THE_GATE
    set_theme(page, theme)
    try:
        shot = save_screenshot(
            page, f"docs_view_{theme}", page.locator(view), f"the documentation's picture, {theme}"
        )
        assert shot.stat().st_size > 10_000  # a drawn view, not an empty box
        publish_picture(shot, f"view-{theme}.png")
    finally:
        set_theme(page, "light")  # the theme is a server-side setting: later tests expect light
