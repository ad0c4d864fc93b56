"""Engine overhead per step as a run gets long (issue #3 benchmark).

Wall-clock step time on this kind of machine is dominated by fsync (every checkpoint is written
atomically), so the CPU time per step is printed as well: it shows how the engine's own work
grows with the run.

Runs linear pipelines of 100 and 1,000 nodes whose work nodes use a simulated handler (it only
returns an outcome with a small context update, so the measured time is the engine's: outcome
bookkeeping, events.jsonl, status.json, the checkpoint with its history). Prints the median
per-step overhead of each run, the ratio 1,000 : 100 (target <= 2: checkpoints must not make a
long run quadratic), the same ratio inside the 1,000-node run (last 100 steps : first 100 steps),
and the on-disk size of each run directory (bounded checkpoint history).

    .venv/bin/python benchmarks/bench_engine.py [--nodes 1000] [--small 100] [--history 50]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from freshness_magic.engine.context import Context
from freshness_magic.engine.handlers.base import StepEnv
from freshness_magic.engine.handlers.builtin import default_registry
from freshness_magic.engine.model import Node
from freshness_magic.engine.outcome import Outcome
from freshness_magic.engine.pipeline import load_pipeline
from freshness_magic.engine.run import Run


class Simulated:
    """A work node that does nothing but report success and a small context update."""

    def __init__(self) -> None:
        self.spent = 0.0

    def execute(self, node: Node, context: Context, env: StepEnv) -> Outcome:
        began = time.perf_counter()
        outcome = Outcome(
            notes=f"Stage completed: {node.id}",
            context_updates={"last_stage": node.id, "last_response": f"simulated {node.id}"},
        )
        self.spent += time.perf_counter() - began
        return outcome


def linear_dot(n: int) -> str:
    names = [f"n{i:04d}" for i in range(n - 2)]
    lines = ["digraph bench {", '  graph [goal="benchmark"]', "  start [shape=Mdiamond]"]
    lines += [f'  {name} [type="sim", prompt="work {name}"]' for name in names]
    lines += ["  done [shape=Msquare]", "  start -> " + " -> ".join(names) + " -> done", "}"]
    return "\n".join(lines)


def disk_usage(folder: Path) -> tuple[int, int, int]:
    """(bytes on disk, apparent bytes, files) under ``folder``."""
    blocks = apparent = files = 0
    for path in folder.rglob("*"):
        if path.is_file():
            st = path.stat()
            blocks += st.st_blocks * 512
            apparent += st.st_size
            files += 1
    return blocks, apparent, files


def measure(n: int, workdir: Path, history: int) -> tuple[list[float], list[float], Path]:
    handler = Simulated()
    registry = default_registry()
    registry.register("sim", handler)
    run = Run(
        load_pipeline(linear_dot(n)), workdir=workdir, registry=registry, checkpoint_history=history
    )
    run.start()
    overheads: list[float] = []
    cpu: list[float] = []
    while not run.state.finished:
        spent_before = handler.spent
        began = time.perf_counter()
        cpu_began = time.process_time()
        run.step()
        cpu.append(time.process_time() - cpu_began)
        overheads.append(time.perf_counter() - began - (handler.spent - spent_before))
    assert len(run.completed_nodes) == n, run.failure_reason
    return overheads, cpu, run.run_dir


def fmt_bytes(size: int) -> str:
    return f"{size / 1024 / 1024:.1f} MiB" if size >= 1024 * 1024 else f"{size / 1024:.1f} KiB"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--small", type=int, default=100)
    parser.add_argument("--history", type=int, default=50)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-engine-") as tmp:
        root = Path(tmp)
        small, small_cpu, small_dir = measure(args.small, root / "small", args.history)
        big, big_cpu, big_dir = measure(args.nodes, root / "big", args.history)
        med_small = statistics.median(small)
        med_big = statistics.median(big)
        window = min(100, len(big) // 2)
        first = statistics.median(big[:window])
        last = statistics.median(big[-window:])
        print(f"checkpoint history kept: {args.history}")
        print(f"median engine overhead per step, {args.small:>5} nodes: {med_small * 1000:8.2f} ms")
        print(f"median engine overhead per step, {args.nodes:>5} nodes: {med_big * 1000:8.2f} ms")
        print(f"ratio {args.nodes}:{args.small} = {med_big / med_small:.2f} (target <= 2)")
        print(
            f"inside the {args.nodes}-node run: last {window} steps {last * 1000:.2f} ms, "
            f"first {window} steps {first * 1000:.2f} ms, ratio {last / first:.2f}"
        )
        cpu_small, cpu_big = statistics.median(small_cpu), statistics.median(big_cpu)
        print(
            f"median CPU time per step (no fsync waits): {args.small} nodes "
            f"{cpu_small * 1000:.2f} ms, {args.nodes} nodes {cpu_big * 1000:.2f} ms, "
            f"ratio {cpu_big / cpu_small:.2f}"
        )
        for label, folder in ((f"{args.small} nodes", small_dir), (f"{args.nodes} nodes", big_dir)):
            on_disk, apparent, files = disk_usage(folder)
            print(
                f"run dir ({label}): {fmt_bytes(on_disk)} on disk, {fmt_bytes(apparent)} "
                f"apparent, {files} files"
            )


if __name__ == "__main__":
    main()
