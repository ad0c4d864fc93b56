"""Real IPython kernels (started with ``jupyter_client``), for what only a kernel process shows:
the driver lock it holds between cells, Kernel > Interrupt, a restart.

The ``kernel`` fixture (tests/conftest.py) starts one per test; :func:`running_kernel` starts
one more inside a test, or one whose end the test must see before it asserts on.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from jupyter_client.blocking.client import BlockingKernelClient
from jupyter_client.manager import KernelManager, start_new_kernel

REPO = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(REPO)}
"""A kernel's environment: this checkout first on its path, so it loads the code under test."""


@contextmanager
def running_kernel(cwd: Path) -> Iterator[tuple[KernelManager, BlockingKernelClient]]:
    """A python3 kernel working in ``cwd`` and its client; shut down when the block ends."""
    manager, client = start_new_kernel(kernel_name="python3", cwd=str(cwd), env=ENV)
    try:
        yield manager, client
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)


def execute(client: BlockingKernelClient, code: str) -> str:
    """Run ``code`` in the kernel; its text output (an error fails the test)."""
    texts: list[str] = []

    def keep(message: dict[str, Any]) -> None:
        content = message["content"]
        if message["msg_type"] == "stream":
            texts.append(content["text"])
        elif message["msg_type"] in ("execute_result", "display_data"):
            texts.append(content["data"].get("text/plain", ""))

    reply = client.execute_interactive(code, output_hook=keep, timeout=120)
    assert reply["content"]["status"] == "ok", (code, texts, reply["content"])
    return "".join(texts)
