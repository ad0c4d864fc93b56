"""Benchmark: node work on a Dask cluster against local threads.

Two measurements, interleaved round by round so load on the machine hits both sides alike:

- a fan-out of 16 branches of ``sleep 1`` (``max_parallel=16``): the wall time of the parallel
  node with local execution (threads in this process) and on a 2-worker ``LocalCluster``;
- the dispatch overhead per node: a linear pipeline of 20 ``true`` tool nodes, per node, local
  and on the cluster (the difference is what sending a node to a worker costs: pickling the
  call, the scheduler round trip, the marker file and the replayed events).

Freshness and evidence are on, as the CLI and the notebook run. The cluster is started once,
before the rounds (its start-up is printed separately).

    python benchmarks/bench_cluster.py [--reps N] [--threads-per-worker N]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

BRANCHES = 16
LINEAR = 20


def fan_out() -> str:
    body = "\n".join(
        f'  b{i} [shape=parallelogram, tool_command="sleep 1"]\n  fan -> b{i}; b{i} -> join'
        for i in range(BRANCHES)
    )
    return (
        "digraph fan {\n  start [shape=Mdiamond]\n  done [shape=Msquare]\n"
        f"  fan [shape=component, max_parallel={BRANCHES}]\n  join [shape=tripleoctagon]\n"
        f"{body}\n  start -> fan\n  join -> done\n}}\n"
    )


def linear() -> str:
    nodes = "\n".join(f'  t{i} [shape=parallelogram, tool_command="true"]' for i in range(LINEAR))
    chain = " -> ".join(["start", *(f"t{i}" for i in range(LINEAR)), "done"])
    return (
        "digraph line {\n  start [shape=Mdiamond]\n  done [shape=Msquare]\n"
        f"{nodes}\n  {chain}\n}}\n"
    )


def timed_run(dot: str, executor: object) -> float:
    from freshness_magic.engine import RunState
    from freshness_magic.session import open_run

    with tempfile.TemporaryDirectory() as folder:
        run = open_run(dot, workdir=Path(folder), executor=executor)
        with run:
            start = time.perf_counter()
            result = run.run()
            seconds = time.perf_counter() - start
        if result.state is not RunState.COMPLETED:
            raise SystemExit(f"benchmark run did not complete: {result.summary()}")
    return seconds


def main() -> int:
    import distributed

    from freshness_magic.cluster.daskcluster import DaskCluster

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=3, help="rounds (default 3)")
    parser.add_argument("--threads-per-worker", type=int, default=8, help="default 8")
    args = parser.parse_args()
    started = time.perf_counter()
    local_cluster = distributed.LocalCluster(
        n_workers=2,
        threads_per_worker=args.threads_per_worker,
        host="127.0.0.1",
        dashboard_address=":0",
    )
    client = distributed.Client(local_cluster)
    startup = time.perf_counter() - started
    cluster = DaskCluster.attach(client)
    times: dict[str, list[float]] = {
        k: [] for k in ("fan local", "fan dask", "lin local", "lin dask")
    }
    try:
        timed_run(linear(), cluster)  # warm the workers' imports
        for _ in range(args.reps):
            times["fan local"].append(timed_run(fan_out(), "local"))
            times["fan dask"].append(timed_run(fan_out(), cluster))
            times["lin local"].append(timed_run(linear(), "local"))
            times["lin dask"].append(timed_run(linear(), cluster))
    finally:
        client.close()
        local_cluster.close()
    med = {k: statistics.median(v) for k, v in times.items()}
    print(
        f"cluster: LocalCluster, 2 workers x {args.threads_per_worker} threads; "
        f"start-up {startup:.2f}s; {args.reps} interleaved rounds, medians"
    )
    print(f"{BRANCHES} branches of sleep 1, local threads: {med['fan local']:.2f}s")
    print(
        f"{BRANCHES} branches of sleep 1, dask cluster:  {med['fan dask']:.2f}s "
        f"(ratio {med['fan dask'] / med['fan local']:.2f}x local)"
    )
    per_local = med["lin local"] / LINEAR * 1000
    per_dask = med["lin dask"] / LINEAR * 1000
    print(
        f"per tool node (true), local: {per_local:.1f} ms; dask: {per_dask:.1f} ms; "
        f"dispatch overhead {per_dask - per_local:.1f} ms per node"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
