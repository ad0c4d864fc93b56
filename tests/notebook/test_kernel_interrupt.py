"""Kernel > Interrupt stops a run the view's Run started, in a real kernel.

ipykernel ignores SIGINT between messages, and the view's action runs on a worker thread after
its message: a JupyterLab trial pressed the toolbar's square during a Run and nothing stopped.
The interrupt now does what the view's Stop does, and a cell's Ctrl-C is as before.
"""

from __future__ import annotations

from pathlib import Path

from jupyter_client.blocking.client import BlockingKernelClient
from jupyter_client.manager import KernelManager

from tests.kernels import execute as ok
from tests.pipelines import SLOW_TOOL
from tests.processes import group_alive
from tests.waiting import wait_until

HANDLER_BETWEEN_MESSAGES = """
import asyncio, signal
between = []
asyncio.get_running_loop().call_soon(lambda: between.append(signal.getsignal(signal.SIGINT)))
"""


def test_kernel_interrupt_stops_the_views_run_and_cells_are_interrupted_as_before(
    tmp_path: Path, kernel: tuple[KernelManager, BlockingKernelClient]
) -> None:
    manager, client = kernel
    ok(client, "%load_ext freshness_magic")
    ok(client, "%%pipeline slow\n" + SLOW_TOOL)
    ok(client, "slow.widget.handle({'action': 'run'})")  # what the Run button's message does
    started = tmp_path / "pgid.txt"
    wait_until(lambda: started.exists() and started.read_text().strip(), "the tool starts")
    pgid = int(started.read_text())

    manager.interrupt_kernel()
    wait_until(lambda: not group_alive(pgid), "the tool stops on the kernel's interrupt")
    ok(client, "slow.widget.wait(30)")
    assert "paused" in ok(client, "print(slow.view.status_line())")
    assert not (tmp_path / "work.log").exists()

    ok(client, HANDLER_BETWEEN_MESSAGES)
    assert ok(client, "print(between)") == "[<Handlers.SIG_IGN: 1>]\n"  # ipykernel's own again
    # Short sleeps: a signal the kernel took on another thread is acted on at the next one
    # (CPython wakes only the thread that received it), so the reply does not wait a minute.
    client.execute(
        "import time\nopen('sleeping', 'w').close()\nfor _ in range(600): time.sleep(0.1)"
    )
    wait_until((tmp_path / "sleeping").exists, "the kernel runs the cell")
    manager.interrupt_kernel()
    reply = client.get_shell_msg(timeout=30)["content"]
    assert reply["status"] == "error" and reply["ename"] == "KeyboardInterrupt", reply
