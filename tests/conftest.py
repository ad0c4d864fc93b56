"""What the whole suite shares: fixtures that tests in several folders use (a real IPython
kernel, the in-process InteractiveShell with the extension loaded), how its tests are split
between pytest-xdist workers, and the list of browser screenshots at the end of a run. IPython and
jupyter_client are imported only by the tests that ask for them.

``make test`` runs the suite on two workers (``-n 2 --dist loadgroup``). The scheduler below gives
each worker whole files: a module's fixtures (a built docs site, a built wheel, a Dask cluster, a
recorded run) are made once, and the cells of a notebook (nbval) run in order in one kernel. All
the browser tests form one unit, as they share one JupyterLab server, one Chromium and one
screenshot folder. Units start longest first, so no long one is left for the end of the run.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from IPython.core.interactiveshell import InteractiveShell
    from jupyter_client.blocking.client import BlockingKernelClient
    from jupyter_client.manager import KernelManager

    from freshness_magic.notebook.magics import PipelineMagics


@pytest.fixture
def kernel(tmp_path: Path) -> Iterator[tuple[KernelManager, BlockingKernelClient]]:
    """A real IPython kernel working in ``tmp_path`` and its client (tests/kernels.py); shut
    down after the test."""
    from tests.kernels import running_kernel

    with running_kernel(tmp_path) as started:
        yield started


@pytest.fixture
def shell(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[InteractiveShell]:
    """The process-wide InteractiveShell with freshness_magic loaded, working in ``tmp_path``;
    unloaded afterwards, and the names the test's cells made taken out of its namespace."""
    from IPython.core.interactiveshell import InteractiveShell

    monkeypatch.chdir(tmp_path)
    sh = InteractiveShell.instance()
    sh.run_line_magic("load_ext", "freshness_magic")
    before = set(sh.user_ns)
    yield sh
    sh.run_line_magic("unload_ext", "freshness_magic")
    sh.config.pop("PipelineMagics", None)
    for key in set(sh.user_ns) - before:
        sh.user_ns.pop(key, None)
    for key in ("review", "gates", "xss", "other"):
        sh.user_ns.pop(key, None)


@pytest.fixture
def magics(shell: InteractiveShell) -> PipelineMagics:
    """The extension's magics object in ``shell``."""
    from freshness_magic.notebook.extension import instance

    found = instance(shell)
    assert found is not None
    return found


STARTED = pytest.StashKey[float]()

BROWSER = "tests/browser/"
LONG_FIRST = (
    BROWSER,
    "tests/cluster/test_dask.py",
    "tests/engine/test_kill_windows.py",
    "tests/test_packaging.py",
    "tests/engine/test_crash_resume.py",
    "tests/engine/test_journal.py",
    "tests/test_docs.py",
)
"""The units that take longest (the browser tests minutes, the others tens of seconds), started
before all others in this order; the rest follow by their number of tests."""


def unit_of(nodeid: str) -> str:
    """The unit of work ``nodeid`` belongs to: the browser tests, or its file."""
    if nodeid.startswith(BROWSER):
        return BROWSER
    return nodeid.split("::", 1)[0]


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """With ``--dist loadgroup``, schedule whole files and the browser tests as one unit.

    xdist's own ``loadgroup`` reads ``xdist_group`` marks through a rewritten node id, which this
    pytest no longer honours; a scheduler that derives the unit from the node id does not depend
    on it.
    """
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class FileScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return unit_of(nodeid)

        def _assign_work_unit(self, node: Any) -> None:
            if not getattr(self, "ranked", False):
                order = {unit: index for index, unit in enumerate(LONG_FIRST)}
                units = sorted(
                    self.workqueue.items(),
                    key=lambda item: (order.get(item[0], len(order)), -len(item[1])),
                )
                self.workqueue.clear()
                self.workqueue.update(units)
                self.ranked = True
            super()._assign_work_unit(node)

    return FileScheduling(config, log)


def pytest_collection(session: pytest.Session) -> None:
    """On a fresh checkout every worker compiles the test modules (pytest rewrites their asserts)
    and the modules they import as it first loads them, all workers the same ones at the same
    time. Worker k of n first imports the test modules from k/n of the way on, so each compiles
    its own share while the others compile theirs, and all then collect from compiled files. A
    module that fails here is left to the collection, which reports it as usual."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if not worker.startswith("gw") or workers < 2:
        return
    from _pytest.pathlib import import_path

    config = session.config
    roots = [config.rootpath / arg for arg in config.args]
    modules = sorted(
        path
        for root in roots
        if root.is_dir()
        for path in root.rglob("test_*.py")
        if "__pycache__" not in path.parts
    )
    for path in modules[len(modules) * int(worker[2:]) // workers :]:
        try:
            import_path(
                path,
                mode=config.getoption("importmode"),
                root=config.rootpath,
                consider_namespace_packages=config.getini("consider_namespace_packages"),
            )
        except Exception:  # the collection imports it again and reports what is wrong
            continue


def pytest_sessionstart(session: pytest.Session) -> None:
    session.config.stash[STARTED] = time.time()


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    """List the pictures this run took (only when browser tests ran in it, on any worker)."""
    from tests.browser.lab import SCREENSHOT_INDEX, SCREENSHOTS

    started = config.stash.get(STARTED, None)
    if started is None or not SCREENSHOT_INDEX.exists():
        return
    if SCREENSHOT_INDEX.stat().st_mtime < started:
        return
    terminalreporter.write_line(f"browser screenshots in {SCREENSHOTS} ({SCREENSHOT_INDEX.name}):")
    for line in SCREENSHOT_INDEX.read_text().splitlines():
        terminalreporter.write_line(f"  {line}")
