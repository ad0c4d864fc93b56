"""Where node work runs: executor specs (``dask``, ``dask://host:8786``) turned into a cluster.

:func:`open_cluster` reads a spec; the result gives the engine a
:class:`~freshness_magic.engine.dispatch.Dispatch` and checks that every worker sees the work
directory at the same path. The engine itself knows only ``concurrent.futures``; Dask is loaded
here, and only when a spec asks for it (the ``distributed`` extra).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple, Protocol

from freshness_magic.errors import ClusterError

if TYPE_CHECKING:
    import concurrent.futures
    from pathlib import Path

    from freshness_magic.engine.dispatch import Dispatch

__all__ = [
    "Cluster",
    "ClusterPool",
    "ExecutorSpec",
    "PlainExecutor",
    "open_cluster",
    "parse_executor",
]

LOCAL_SPECS = ("", "local")
SPEC_HELP = (
    'use "local" (run node work in this process), "dask" (a Dask LocalCluster on this machine) '
    'or "dask://HOST:PORT" (an existing Dask scheduler)'
)


class Cluster(Protocol):
    """A running cluster the driver sends node work to."""

    @property
    def dispatch(self) -> Dispatch: ...

    def check_workdir(self, workdir: Path) -> None:
        """Raise ClusterError naming each worker that cannot see ``workdir``."""

    def unavailable(self) -> str | None:
        """Why the cluster cannot run work now (None when it can)."""

    def close(self) -> None: ...


class ExecutorSpec(NamedTuple):
    """A parsed executor spec: ``kind`` is ``local`` or ``dask``; ``address`` a scheduler's.

    A named tuple, not a frozen dataclass, for start-up time (see ``engine.model.Position``).
    """

    kind: str
    address: str = ""

    @property
    def local(self) -> bool:
        return self.kind == "local"

    def text(self) -> str:
        if self.address:
            return self.address
        return self.kind


def parse_executor(spec: str) -> ExecutorSpec:
    """Parse ``spec`` (see :data:`SPEC_HELP`); ClusterError on anything else."""
    scheme, sep, rest = spec.strip().partition("://")
    text = f"{scheme.lower()}{sep}{rest}" if sep else scheme.lower()  # DASK as dask, as backends
    if text in LOCAL_SPECS:
        return ExecutorSpec("local")
    if text == "dask":
        return ExecutorSpec("dask")
    if text.startswith(("dask://", "tcp://", "tls://")):
        rest = text.split("://", 1)[1]
        host, _, port = rest.rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ClusterError(
                f"executor {spec!r}: the scheduler address needs a host and a port "
                "(dask://HOST:PORT, e.g. dask://127.0.0.1:8786)"
            )
        scheme = "tcp" if text.startswith("dask://") else text.split("://", 1)[0]
        return ExecutorSpec("dask", f"{scheme}://{rest}")
    if text.startswith("dask:"):
        raise ClusterError(
            f"executor {spec!r}: a scheduler address is written dask://HOST:PORT "
            f"(did you mean 'dask://{text[5:].lstrip('/')}'?)"
        )
    from freshness_magic.engine.validation.attrs import closest

    near = closest(text.lower(), ["local", "dask"])
    meant = f" (did you mean {near!r}?)" if near is not None else ""
    raise ClusterError(f"executor {spec!r} is not known{meant}; {SPEC_HELP}")


def open_cluster(spec: str) -> Cluster | None:
    """The cluster ``spec`` names, started or connected (None for local execution)."""
    parsed = parse_executor(spec)
    if parsed.local:
        return None
    from freshness_magic.cluster.daskcluster import DaskCluster

    return DaskCluster.open(parsed)


class PlainExecutor:
    """Any ``concurrent.futures.Executor`` on this machine (a process pool, say) as a cluster:
    its workers share this file system, so there is nothing to check."""

    def __init__(self, executor: concurrent.futures.Executor) -> None:
        self.executor = executor

    @property
    def dispatch(self) -> Dispatch:
        from freshness_magic.engine.dispatch import Dispatch

        return Dispatch(self.executor, type(self.executor).__name__)

    def check_workdir(self, workdir: Path) -> None:
        return None

    def unavailable(self) -> str | None:
        return None

    def close(self) -> None:
        return None


class ClusterPool:
    """Clusters kept open for a long-lived driver (a kernel), one per spec, shared by its runs."""

    def __init__(self) -> None:
        self._open: dict[str, Cluster] = {}

    def get(self, spec: str) -> Cluster | None:
        """The open cluster for ``spec``, started or connected on first use, and again when the
        one kept can no longer run work (None: local)."""
        parsed = parse_executor(spec)
        if parsed.local:
            return None
        cluster = self._open.get(parsed.text())
        if cluster is not None and cluster.unavailable() is not None:
            self._open.pop(parsed.text())  # lost (its workers died, say): start or connect anew
            cluster.close()
            cluster = None
        if cluster is None:
            cluster = open_cluster(spec)
            assert cluster is not None
            self._open[parsed.text()] = cluster
        return cluster

    def close(self) -> None:
        """Close every cluster (a later :meth:`get` opens a new one)."""
        while self._open:
            self._open.popitem()[1].close()
