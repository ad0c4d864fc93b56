"""Fixtures that tests in several folders share: a real IPython kernel, and the in-process
InteractiveShell with the extension loaded. IPython and jupyter_client are imported only by the
tests that ask for them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

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
