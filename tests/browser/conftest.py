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

import pytest

from tests.browser.lab import (
    SCREENSHOTS,
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


@pytest.fixture
def page(
    browser: object, lab_server: LabServer, request: pytest.FixtureRequest
) -> Iterator[object]:
    """A fresh page with a fixed viewport; dialogs, console errors and HTTP errors are recorded.

    Afterwards the page is saved as a screenshot and every kernel the test started is stopped.
    """
    context = browser.new_context(viewport=VIEWPORT)  # type: ignore[attr-defined]
    page = context.new_page()
    page.dialogs = []  # type: ignore[attr-defined]
    page.console_errors = []  # type: ignore[attr-defined]

    def on_dialog(dialog: object) -> None:
        page.dialogs.append(dialog.message)  # type: ignore[attr-defined]
        dialog.dismiss()  # type: ignore[attr-defined]

    page.bad_responses = []  # type: ignore[attr-defined]
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
        context.close()
        shutdown_sessions(lab_server)


@pytest.fixture(scope="session", autouse=True)
def screenshot_index() -> Iterator[None]:
    """Start each run with an empty screenshot index (and without the last run's pictures); the
    index is listed at the end of the run by tests/conftest.py."""
    reset_screenshot_index()
    yield
