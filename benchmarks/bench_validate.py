"""Benchmark: ``validate`` (all built-in rules) on generated pipelines of 100, 1,000, 5,000 nodes.

Uses the pipelines of ``bench_load.py``. For each size prints the median time of ``validate``,
of ``parse_dot`` on the same text as the reference measured in this run, their ratio, and the
growth factor from 1,000 to 5,000 nodes (linear is 5x).

    python benchmarks/bench_validate.py [--reps N]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_load import generate_pipeline

from freshness_magic.engine.dot_parser import parse_dot
from freshness_magic.engine.pipeline import load_pipeline
from freshness_magic.engine.validation import validate


def median_time(func: Callable[[], object], reps: int) -> float:
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        func()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--reps", type=int, default=7)
    args = parser.parse_args()
    medians: dict[int, float] = {}
    print(
        f"{'nodes':>6} {'edges':>6} {'diags':>6} {'validate ms':>12} {'parse ms':>9} {'ratio':>6}"
    )
    for size in (100, 1000, 5000):
        text = generate_pipeline(size)
        graph = load_pipeline(text)
        diagnostics = validate(graph)
        check = median_time(lambda graph=graph: validate(graph), args.reps)
        parse = median_time(lambda text=text: parse_dot(text), args.reps)
        medians[size] = check
        print(
            f"{len(graph.nodes):>6} {len(graph.edges):>6} {len(diagnostics):>6} "
            f"{check * 1000:>12.2f} {parse * 1000:>9.2f} {check / parse:>6.2f}"
        )
    print(f"growth 1,000 -> 5,000 nodes: {medians[5000] / medians[1000]:.2f}x (linear: 5x)")
    print("(for information: the load goals, validation included, are bench_load.py's)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
