"""The marimo example's exported page in headless Chromium, offline: the view renders there.

The page loads marimo's front end from a CDN; here every such request is answered from the
assets marimo's Python package bundles, and every other request off the machine is refused,
so the test shows the page works with nothing but what is installed.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import marimo
import pytest

from tests.browser.conftest import VIEWPORT
from tests.browser.fm import WIDGET
from tests.browser.lab import WAIT_MS, save_screenshot
from tests.test_examples import export_marimo_example

pytestmark = pytest.mark.browser

BUNDLED = Path(marimo.__file__).parent / "_static"
CDN = "https://cdn.jsdelivr.net/npm/@marimo-team/frontend@"


@pytest.fixture
def offline_page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport=VIEWPORT)
    page = context.new_page()
    page.refused = []

    def answer(route: Any) -> None:
        url = route.request.url
        if url.startswith(CDN):
            local = BUNDLED / url.split("/dist/", 1)[1].split("?", 1)[0]
            if local.is_file():
                route.fulfill(path=str(local))
                return
        if url.startswith(("file:", "data:", "blob:")):
            route.continue_()
            return
        page.refused.append(url)
        route.abort()

    page.route("**/*", answer)
    try:
        yield page
    finally:
        context.close()


def test_the_exported_marimo_page_shows_the_view_offline(offline_page: Any, tmp_path: Path) -> None:
    exported = export_marimo_example(tmp_path)
    page = offline_page
    page.goto(exported.as_uri())
    nodes = page.locator(f"{WIDGET} svg g.fm-node")
    nodes.nth(4).wait_for(timeout=WAIT_MS)
    states = {
        node.get_attribute("data-node"): node.get_attribute("data-state") for node in nodes.all()
    }
    assert states == {
        "start": "succeeded",
        "lint": "succeeded",
        "draft": "succeeded",
        "approve": "next",
        "done": "pending",
    }
    assert "next: approve" in page.locator(f"{WIDGET} .fm-status").inner_text()
    assert not [url for url in page.refused if url.startswith(CDN)]  # all assets were bundled
    save_screenshot(page, "marimo_export", page.locator(WIDGET), "the marimo example's page")
