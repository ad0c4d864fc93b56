"""Reuse lookup cost per step against how many earlier runs the work directory holds.

The reuse index is keyed by what is known before a node runs (pipeline, node, definition,
declared inputs), one file per key, so a lookup opens one small file and verifies the reads of
at most ``KEEP_PER_KEY`` candidates, however many runs recorded executions before. This fills
one work directory's index as ``--runs`` earlier runs of a ``--nodes``-node pipeline would
(every run with other inputs, so every run adds a key per node, plus runs with nothing changed,
which share their keys), and times the lookup of one step that finds its earlier execution
(reads verified, outputs present) and of one that finds nothing, after 1 and after ``--runs``
runs, interleaved ``--reps`` times in this process. It prints the median per lookup and the
ratio many : one (flat: about 1.0).

    .venv/bin/python benchmarks/bench_reuse.py [--runs 100] [--nodes 20] [--reps 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from freshness_magic.engine.context import Context  # noqa: E402
from freshness_magic.engine.model import Node  # noqa: E402
from freshness_magic.engine.outcome import Outcome  # noqa: E402
from freshness_magic.engine.reuse import ReuseIndex, Reuser  # noqa: E402
from freshness_magic.engine.trace import Trace  # noqa: E402

HANDLER = "codergen:simulated"


def fill(workdir: Path, runs: int, nodes: int) -> None:
    """Record ``runs`` earlier runs of a ``nodes``-node pipeline: each node read three context
    values and left one output file; every other run had other inputs (new keys)."""
    reuser = Reuser(ReuseIndex(workdir), "bench")
    context = Context({"goal": "g", "tool.output": "same", "last_response": "r"})
    for run in range(runs):
        run_dir = workdir / ".freshness" / "runs" / f"run{run:04d}"
        inputs = {"src/a.py": f"digest-{run // 2}"}  # two runs with each input
        for index in range(nodes):
            node = Node(f"n{index:03d}", attrs={"prompt": f"work {index} on {{tool.output}}"})
            node_dir = run_dir / "nodes" / node.id
            reuser.lookup(
                node, context, definition="d", inputs=inputs, handler=HANDLER, run_dir=run_dir
            )
            node_dir.mkdir(parents=True, exist_ok=True)
            (node_dir / "response.md").write_text(f"response {run} {index}")
            trace = Trace(node_id=node.id, run_id=f"run{run:04d}", definition="d")
            for key in ("goal", "tool.output", "last_response"):
                trace.record_read(key, context[key], None)
            trace.seal(index + 1, "success")
            reuser.executed(node, Outcome(notes="ok"), trace, run_dir, f"run{run:04d}")
        reuser.flush()


def time_lookups(workdir: Path, hit: bool, count: int = 200) -> float:
    """Seconds per lookup of node n010 with the last run's inputs (``hit``) or new ones."""
    reuser = Reuser(ReuseIndex(workdir), "bench")
    context = Context({"goal": "g", "tool.output": "same", "last_response": "r"})
    node = Node("n010", attrs={"prompt": "work 10 on {tool.output}"})
    inputs = {"src/a.py": "digest-0" if hit else "digest-new"}
    run_dir = workdir / "probe"
    started = time.perf_counter()
    for _ in range(count):
        found = reuser.lookup(
            node, context, definition="d", inputs=inputs, handler=HANDLER, run_dir=run_dir
        )
        assert (found is not None) == hit
    return (time.perf_counter() - started) / count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--nodes", type=int, default=20)
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as one_dir, tempfile.TemporaryDirectory() as many_dir:
        one, many = Path(one_dir), Path(many_dir)
        fill(one, 1, args.nodes)
        started = time.perf_counter()
        fill(many, args.runs, args.nodes)
        filled = time.perf_counter() - started
        keys = ReuseIndex(many).count()
        print(f"index after {args.runs} runs of {args.nodes} nodes: {keys} keys ({filled:.1f}s)")
        for hit in (True, False):
            small, large = [], []
            for _ in range(args.reps):
                small.append(time_lookups(one, hit))
                large.append(time_lookups(many, hit))
            a, b = statistics.median(small), statistics.median(large)
            what = "found (reads verified)" if hit else "nothing found"
            print(
                f"lookup, {what}: after 1 run {a * 1e6:.1f} us, after {args.runs} runs "
                f"{b * 1e6:.1f} us; ratio {b / a:.2f}x"
            )


if __name__ == "__main__":
    main()
