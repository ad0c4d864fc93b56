"""Fixtures that tests in several folders share."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from jupyter_client.blocking.client import BlockingKernelClient
    from jupyter_client.manager import KernelManager


@pytest.fixture
def kernel(tmp_path: Path) -> Iterator[tuple[KernelManager, BlockingKernelClient]]:
    """A real IPython kernel working in ``tmp_path`` and its client (tests/kernels.py); shut
    down after the test. jupyter_client is imported only by the tests that ask for one."""
    from tests.kernels import running_kernel

    with running_kernel(tmp_path) as started:
        yield started
