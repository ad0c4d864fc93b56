"""``%pipeline hub`` in a real InteractiveShell, live stale highlights, symbol-level why."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell

from freshness_magic.hub import daemon
from freshness_magic.notebook.extension import instance
from freshness_magic.notebook.hubcmd import NotebookHub
from freshness_magic.views.details import hub_symbol_lines
from tests.pipelines import one_step
from tests.waiting import wait_until

from .conftest import write

DOT = one_step(
    'prompt="Review", source_files="src/*.py", freshness="warn"', node="code", name="review"
)


@pytest.fixture
def shell(hub_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[InteractiveShell]:
    monkeypatch.chdir(hub_dir)
    sh = InteractiveShell.instance()
    sh.run_line_magic("load_ext", "freshness_magic")
    yield sh
    sh.run_line_magic("unload_ext", "freshness_magic")
    sh.user_ns.pop("review", None)


def test_hub_magics_and_live_refresh_without_running_a_cell(
    shell: InteractiveShell, hub_dir: Path
) -> None:
    magics = instance(shell)
    assert magics is not None and isinstance(magics.hub_handler, NotebookHub)
    assert shell.run_line_magic("pipeline", "hub status").text.startswith("no hub running")
    shell.run_cell_magic("pipeline", "review", DOT)
    pipeline = shell.user_ns["review"]
    pipeline.step()
    pipeline.step()
    assert "code" not in pipeline.view.stale
    assert "caught up" in shell.run_line_magic("pipeline", "hub start").text
    hub = magics.hub_handler
    assert isinstance(hub, NotebookHub) and hub_dir.resolve() in hub.subscriptions
    query = shell.run_line_magic("pipeline", "hub query src/auth.py:login").text
    assert "def login(user, pw):" in query
    write(hub_dir, "src/auth.py", "def login(user):\n    return user\n")
    wait_until(lambda: "code" in pipeline.view.stale, "the widget state to turn stale")
    assert [f.path for f in pipeline.view.stale["code"].files] == ["src/auth.py"]
    assert hub_symbol_lines(pipeline.current_run, "code") == [
        "src/auth.py: helper() removed; login() signature changed; login() body changed; "
        "login() docstring changed (first indexed by the hub after that point; earlier changes "
        "not seen)"
    ]
    why = shell.run_line_magic("pipeline", "why code").text
    assert "login() signature changed" in why
    with pytest.raises(UsageError, match="usage: %pipeline hub"):
        shell.run_line_magic("pipeline", "hub restart")
    assert shell.run_line_magic("pipeline", "hub stop").text.startswith("hub stopped")
    assert hub_dir.resolve() not in hub.subscriptions
    assert not daemon.status(hub_dir).running
