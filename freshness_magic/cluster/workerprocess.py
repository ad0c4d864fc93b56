"""Set-up of each worker process of a LocalCluster this package starts (a Dask ``preload``).

The workers leave the driver's process group, so a Ctrl-C in the terminal (which signals the
whole foreground group) reaches the driver only: it stops the running nodes through the stop
files, and the cluster stays usable for the next step. Dask's own warnings about the calls
cancelled that way are kept out of the terminal.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any


def dask_setup(worker: Any) -> None:
    """Called by Dask in the worker process before it starts work."""
    with contextlib.suppress(OSError):
        os.setpgid(0, 0)
    from freshness_magic.cluster.daskcluster import quiet_logs

    quiet_logs()
