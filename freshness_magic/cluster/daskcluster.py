"""Dask distributed as the cluster behind ``executor="dask"`` and ``executor="dask://HOST:PORT"``.

``dask`` starts a ``LocalCluster`` on this machine: one worker process per core, each running
:data:`THREADS_PER_WORKER` node calls at once (node work mostly waits on a subprocess or a model
API), listening on 127.0.0.1 only. ``dask://HOST:PORT`` connects to a scheduler someone started.
Workers import ``freshness_magic`` to run a call, so it must be installed where they run.
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from freshness_magic.backends.base import client_module
from freshness_magic.cluster import ExecutorSpec
from freshness_magic.engine.dispatch import LOST_GRACE_SECONDS, Dispatch
from freshness_magic.engine.remote import local_identity
from freshness_magic.errors import ClusterError
from freshness_magic.pathsafety import make_state_dir

THREADS_PER_WORKER = 4
CONNECT_TIMEOUT = "10s"
PROBE_FILE = "cluster-probe"
WORKER_SETUP = "freshness_magic.cluster.workerprocess"
"""The module each worker process of a LocalCluster started here loads (its own process group)."""


def quiet_logs(level: int = logging.CRITICAL) -> None:
    """Set every ``distributed`` logger to ``level`` (several keep their own level and handler,
    so setting the parent is not enough): the run reports lost workers and calls itself, in
    the CLI's summary and the notebook's text, so Dask's own lines would only be noise."""
    for name in list(logging.root.manager.loggerDict):
        if name == "distributed" or name.startswith("distributed."):
            logging.getLogger(name).setLevel(level)


def worker_identity() -> dict[str, Any]:
    """The Dask worker running this call: its name and address (runs on the worker)."""
    from distributed import get_worker

    try:
        worker = get_worker()
    except ValueError:
        return local_identity()
    return {"worker": str(worker.name), "address": str(worker.address)}


def unshippable(obj: object) -> str | None:
    """Why Dask cannot send ``obj`` to a worker (None: it can)."""
    import cloudpickle  # type: ignore[import-untyped]

    try:
        cloudpickle.dumps(obj)
    except Exception as exc:
        return f"its handler cannot be pickled ({type(exc).__name__}: {exc})"
    return None


def _reachable(address: str) -> None:
    """ClusterError at once (not after the client's connect timeout) when nothing listens."""
    host, _, port = address.split("://", 1)[1].rpartition(":")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=5).close()
    except OSError as exc:
        raise ClusterError(
            f"no Dask scheduler at {address}: {exc.strerror or exc}; start one with "
            "`dask scheduler` and workers with `dask worker ADDRESS`, or give the executor "
            "dask without an address to start a cluster on this machine"
        ) from None


def _probe(path: str, token: str) -> str | None:
    """On a worker: None when ``path`` holds ``token``, else what the worker saw."""
    try:
        with open(path, encoding="utf-8") as handle:
            seen = handle.read()
    except OSError as exc:
        return f"cannot read {path}: {exc.strerror or exc}"
    return None if seen == token else f"{path} has other content (another machine's folder?)"


@dataclass
class DaskCluster:
    """A Dask client (and the LocalCluster it owns, if any) that node work is sent to."""

    client: Any
    label: str
    owned: Any = None
    """The LocalCluster this object started (closed with it); None for a remote scheduler."""
    lost_grace: float = LOST_GRACE_SECONDS
    """How long the cluster may have no worker (workers restarting) before a call is lost."""
    dispatch: Dispatch = field(init=False)

    def __post_init__(self) -> None:
        self.dispatch = Dispatch(
            executor=self.client.get_executor(pure=False),
            label=self.label,
            identify=worker_identity,
            unshippable=unshippable,
            unavailable=self.unavailable,
            lost_grace=self.lost_grace,
        )

    @classmethod
    def open(cls, spec: ExecutorSpec) -> DaskCluster:
        """Start a LocalCluster (``spec.address`` empty) or connect to the scheduler."""
        distributed = client_module("distributed")
        quiet_logs()
        if spec.address:
            _reachable(spec.address)
            try:
                client = distributed.Client(spec.address, timeout=CONNECT_TIMEOUT)
            except (OSError, TimeoutError) as exc:
                raise ClusterError(
                    f"no Dask scheduler answered at {spec.address} ({exc}); start one with "
                    "`dask scheduler` and workers with `dask worker ADDRESS`, or give the "
                    "executor dask without an address to start a cluster on this machine"
                ) from None
            return cls(client, f"dask scheduler {spec.address}")
        try:
            local = distributed.LocalCluster(
                n_workers=os.cpu_count() or 1,
                threads_per_worker=THREADS_PER_WORKER,
                processes=True,
                host="127.0.0.1",
                dashboard_address=":0",
                preload=[WORKER_SETUP],
            )
        except Exception as exc:
            said = " ".join(str(exc).split()) or type(exc).__name__
            raise ClusterError(
                f"the Dask workers on this machine could not start ({said}); a Python script "
                'that opens a cluster must do it under `if __name__ == "__main__":` (each '
                "worker process imports the script again)"
            ) from None
        client = distributed.Client(local)
        return cls(client, f"dask LocalCluster {local.scheduler_address}", owned=local)

    @classmethod
    def attach(cls, client: Any, lost_grace: float = LOST_GRACE_SECONDS) -> DaskCluster:
        """Use a ``distributed.Client`` the caller made (and closes)."""
        return cls(client, f"dask scheduler {client.scheduler.address}", lost_grace=lost_grace)

    def unavailable(self) -> str | None:
        """Why the cluster cannot run work now: the scheduler is gone, or no worker is left."""
        if self.client.status not in ("running", "connecting"):
            return f"lost the connection to the scheduler (client {self.client.status})"
        try:
            count = int(self.client.scheduler_info(n_workers=0).get("n_workers", 0))
        except Exception as exc:
            return f"the scheduler does not answer ({type(exc).__name__}: {exc})"
        return None if count else "the cluster has no workers left"

    def workers(self) -> dict[str, str]:
        """Address -> name of each worker the scheduler knows now."""
        info = self.client.scheduler_info(n_workers=-1).get("workers", {})
        return {address: str(data.get("name", address)) for address, data in info.items()}

    def check_workdir(self, workdir: Path) -> None:
        folder = make_state_dir(Path(workdir).resolve() / ".freshness")
        probe = folder / PROBE_FILE
        token = secrets.token_hex(16)
        probe.write_text(token, encoding="utf-8")
        try:
            seen = self.client.run(_probe, str(probe), token)
        finally:
            probe.unlink(missing_ok=True)
        if not seen:
            raise ClusterError(f"{self.label} has no workers; start some and try again")
        blind = {address: why for address, why in seen.items() if why is not None}
        if blind:
            names = self.workers()
            lines = "; ".join(f"{names.get(a, a)} ({a}): {why}" for a, why in sorted(blind.items()))
            raise ClusterError(
                f"{len(blind)} of {len(seen)} workers of {self.label} cannot see the work "
                f"directory {workdir}: {lines}. Workers must see it at the same path "
                "(a shared file system mounted at the same place)"
            )

    def close(self) -> None:
        self.client.close()
        if self.owned is not None:
            self.owned.close()
