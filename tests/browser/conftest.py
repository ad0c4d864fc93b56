"""A real JupyterLab server and a real headless Chromium for the end-to-end tests.

The server runs on 127.0.0.1 with a random port and token, its own config, data, runtime,
settings and workspace folders, and a temporary root holding the test notebooks. It is stopped
by killing only the process group this fixture started.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.browser.lab import (
    SCREENSHOTS,
    close_lab_documents,
    record_screenshot,
    reset_screenshot_index,
    shutdown_sessions,
)

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
]
VIEWPORT = {"width": 1400, "height": 1000}
REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.browser


def _chromium_available() -> bool:
    return shutil.which("chromium") is not None or Path(CHROMIUM).exists()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Outside CI, skip with a clear reason only when Chromium truly is not installed."""
    if _chromium_available() or os.environ.get("CI") == "true":
        return
    reason = (
        "Debian chromium is not installed and could not be installed "
        "(run scripts/system-deps.sh chromium); with CI=true this is a failure"
    )
    for item in items:
        if "browser" in item.keywords:
            item.add_marker(pytest.mark.skip(reason=reason))


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class LabServer:
    """A running Jupyter server: where it is, how to log in, and its root folder."""

    url: str
    token: str
    root: Path
    log: Path

    def page_url(self, path: str) -> str:
        joiner = "&" if "?" in path else "?"
        return f"{self.url}{path}{joiner}token={self.token}"


def _write_settings(settings: Path) -> None:
    """Turn notebook windowing off (every cell in the DOM) and silence news pop-ups."""
    tracker = settings / "@jupyterlab" / "notebook-extension" / "tracker.jupyterlab-settings"
    tracker.parent.mkdir(parents=True, exist_ok=True)
    tracker.write_text(json.dumps({"windowingMode": "none"}))
    notes = settings / "@jupyterlab" / "apputils-extension" / "notification.jupyterlab-settings"
    notes.parent.mkdir(parents=True, exist_ok=True)
    notes.write_text(json.dumps({"fetchNews": "false", "checkForUpdates": False}))


@pytest.fixture(scope="session")
def lab_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabServer]:
    base = tmp_path_factory.mktemp("jupyter")
    root = base / "root"
    root.mkdir()
    dirs = {
        name: base / name for name in ("config", "data", "runtime", "settings", "workspaces", "tmp")
    }
    for folder in dirs.values():
        folder.mkdir()
    _write_settings(dirs["settings"])
    (dirs["config"] / "jupyter_server_config.json").write_text(
        json.dumps({"ServerApp": {"disable_check_xsrf": False}})
    )
    port = _free_port()
    token = secrets.token_hex(16)
    env = dict(os.environ)
    env.update(
        JUPYTER_CONFIG_DIR=str(dirs["config"]),
        JUPYTER_DATA_DIR=str(dirs["data"]),
        JUPYTER_RUNTIME_DIR=str(dirs["runtime"]),
        JUPYTER_PLATFORM_DIRS="1",
        PYTHONPATH=str(REPO),
        TMPDIR=str(dirs["tmp"]),
        PATH=os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")]),
    )
    log = base / "server.log"
    command = [
        sys.executable,
        "-m",
        "jupyterlab",
        "--no-browser",
        "--allow-root",
        "--ServerApp.ip=127.0.0.1",
        f"--ServerApp.port={port}",
        "--ServerApp.port_retries=0",
        f"--IdentityProvider.token={token}",
        f"--ServerApp.root_dir={root}",
        f"--LabApp.user_settings_dir={dirs['settings']}",
        f"--LabApp.workspaces_dir={dirs['workspaces']}",
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
        "--LabApp.expose_app_in_browser=True",
        "--JupyterNotebookApp.expose_app_in_browser=True",
    ]
    with log.open("wb") as log_handle:
        process = subprocess.Popen(
            command,
            cwd=root,
            env=env,
            stdout=log_handle,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"JupyterLab exited early:\n{log.read_text()[-3000:]}")
            try:
                with urllib.request.urlopen(f"{url}/api/status?token={token}", timeout=2):
                    break
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise RuntimeError(
                        f"JupyterLab did not answer:\n{log.read_text()[-3000:]}"
                    ) from None
                time.sleep(0.25)
        yield LabServer(url=url, token=token, root=root, log=log)
    finally:
        try:
            os.killpg(process.pid, signal.SIGTERM)
            process.wait(timeout=20)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)


@pytest.fixture(scope="session")
def browser() -> Iterator[object]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        instance = playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS
        )
        try:
            yield instance
        finally:
            instance.close()


class SharedPage:
    """One browser page kept for the whole session, so a JupyterLab front end loaded by one test
    serves the next (loading and starting it costs seconds per test).

    The page records browser dialogs (dismissed), console errors and HTTP errors in lists the
    ``page`` fixture empties before each test. A page that could not be cleaned is discarded.
    """

    def __init__(self, browser: object) -> None:
        self.browser = browser
        self.context: Any = None
        self.page: Any = None

    def get(self) -> Any:
        if self.page is None or self.page.is_closed():
            self.discard()
            self.context = self.browser.new_context(viewport=VIEWPORT)  # type: ignore[attr-defined]
            self.page = self.context.new_page()
            self._listen(self.page)
        return self.page

    @staticmethod
    def _listen(page: Any) -> None:
        def on_dialog(dialog: Any) -> None:
            page.dialogs.append(dialog.message)
            dialog.dismiss()

        page.on(
            "response",
            lambda r: page.bad_responses.append(f"{r.status} {r.url}") if r.status >= 400 else None,
        )
        page.on("dialog", on_dialog)
        page.on(
            "console",
            lambda msg: (
                page.console_errors.append(f"{msg.text} @ {msg.location.get('url', '')}")
                if msg.type == "error"
                else None
            ),
        )

    def discard(self) -> None:
        if self.context is not None:
            with contextlib.suppress(Exception):
                self.context.close()
        self.context = None
        self.page = None


@pytest.fixture(scope="session")
def shared_page(browser: object) -> Iterator[SharedPage]:
    holder = SharedPage(browser)
    try:
        yield holder
    finally:
        holder.discard()


@pytest.fixture
def page(
    shared_page: SharedPage, lab_server: LabServer, request: pytest.FixtureRequest
) -> Iterator[object]:
    """The session's page with a fixed viewport and empty records of dialogs, console errors and
    HTTP errors.

    Afterwards the page is saved as a screenshot, every document the test opened is closed and
    every kernel it started is stopped, so the next test finds an empty JupyterLab (``open_lab_
    notebook`` checks that before reusing it, and loads a fresh page otherwise).
    """
    page = shared_page.get()
    page.dialogs = []
    page.console_errors = []
    page.bad_responses = []
    page.set_viewport_size(VIEWPORT)
    try:
        yield page
    finally:
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        try:
            shot = SCREENSHOTS / f"{request.node.name}.png"
            page.screenshot(path=str(shot), full_page=True)
            record_screenshot(shot, f"the whole window at the end of {request.node.name}")
        except Exception as exc:  # a failed screenshot must not hide the test result
            print(f"screenshot of {request.node.name} failed: {exc}")
        try:
            close_lab_documents(page)
        except Exception:  # a page that cannot be emptied is not reused
            shared_page.discard()
        shutdown_sessions(lab_server)


@pytest.fixture(scope="session", autouse=True)
def screenshot_index() -> Iterator[None]:
    """Start each run with an empty screenshot index (and without the last run's pictures); the
    index is listed at the end of the run by tests/conftest.py."""
    reset_screenshot_index()
    yield
