"""A real Dask cluster for the scale-out tests: 2 worker processes on 127.0.0.1."""

from __future__ import annotations

from collections.abc import Iterator

import distributed
import pytest

from freshness_magic.cluster.daskcluster import DaskCluster


def start_cluster() -> tuple[distributed.LocalCluster, distributed.Client]:
    cluster = distributed.LocalCluster(
        n_workers=2,
        threads_per_worker=4,
        processes=True,
        host="127.0.0.1",
        dashboard_address=":0",
    )
    return cluster, distributed.Client(cluster)


@pytest.fixture(scope="module")
def dask_cluster() -> Iterator[DaskCluster]:
    """One 2-worker LocalCluster shared by a module's tests (attached: the test closes it)."""
    cluster, client = start_cluster()
    try:
        yield DaskCluster.attach(client)
    finally:
        client.close()
        cluster.close()
