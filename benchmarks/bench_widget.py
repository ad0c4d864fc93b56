"""What the pipeline view costs and sends, measured on the wire, for pipelines of 20, 200 and
1,000 nodes; and how long Stop takes to show a killed ``sleep 30`` tool as interrupted.

The widget's comm is replaced by one that records every message ipywidgets publishes (the comm
package's documented hook, ``comm.create_comm``), so the bytes are those of the real JSON
messages: the ``comm_open`` carrying the first render, and per step the ``update`` messages
(state sync) and any custom replies. Prints per size: first render time (``dot`` layout + widget
build, cold layout cache) and bytes; per step (mean and max over the steps in the middle of the
run): messages, bytes, the widget's own refresh time and, for reference, the engine's step time
measured in the same run. Goal: ONE message and under 2 KB per step at 200 nodes.

Stop: a pipeline whose tool runs ``sleep 30`` is run from the view's Run button (on the view's
worker thread, as in a kernel); once the view shows the node running, Stop is pressed and the
time until the view's state says ``interrupted`` (its process group killed and reaped) is
measured, against a reference measured in the same run: starting ``sleep 30`` in its own process
group and killing that group directly. Goal: Stop interrupts it within 2 s.

``--against REV`` measures the same against commit REV of this repository (``against.py``): each
round runs every size and the Stops once per tree, in a fresh process per tree, the trees taking
turns; it prints the medians over ``--reps`` rounds side by side, with their ratio (goal: at most
1.10x), in wall time and in CPU time (on a loaded machine a process waits for a core, so its wall
time follows the load while its CPU time mostly does not). Each tree is driven through the names
it has (the notebook pipeline and the layout cache moved between modules), so the same work is
measured.

    .venv/bin/python benchmarks/bench_widget.py [--sizes 20,200,1000] [--steps 20] [--stops 3]
        [--against REV] [--reps 5]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import against
import comm
from comm.base_comm import BaseComm

GOAL_BYTES = 2048
GOAL_MESSAGES = 1
GOAL_STOP_SECONDS = 2.0
STOP_DOT = """digraph stop {
  start [shape=Mdiamond]
  work  [shape=parallelogram, tool_command="sleep 30"]
  done  [shape=Msquare]
  start -> work -> done
}
"""


class RecordingComm(BaseComm):  # type: ignore[misc]
    """A comm that keeps the size of every message it would send to the front end."""

    log: ClassVar[list[tuple[str, int]]] = []

    def publish_msg(
        self,
        msg_type: str,
        data: Any = None,
        metadata: Any = None,
        buffers: Any = None,
        **keys: Any,
    ) -> None:
        method = data.get("method", "") if isinstance(data, dict) else ""
        size = len(json.dumps(data, separators=(",", ":"), default=str).encode("utf-8"))
        RecordingComm.log.append((f"{msg_type}:{method}", size))


def pipeline_dot(n: int) -> str:
    """``n`` nodes: a main chain in clusters of 20 with a conditional back edge every 10 nodes."""
    work = n - 2
    lines = ["digraph bench {", "  start [shape=Mdiamond]", "  done [shape=Msquare]"]
    for first in range(0, work, 20):
        lines.append(f'  subgraph cluster_{first} {{ label="stages {first}+"')
        lines += [
            f'    s{i} [label="stage {i}", prompt="work {i}"]'
            for i in range(first, min(first + 20, work))
        ]
        lines.append("  }")
    chain = ["start", *(f"s{i}" for i in range(work)), "done"]
    lines += [f"  {a} -> {b}" for a, b in itertools.pairwise(chain)]
    lines += [
        f'  s{i} -> s{i - 5} [condition="context.redo{i}=yes", label="redo"]'
        for i in range(10, work, 10)
    ]
    lines.append("}")
    return "\n".join(lines) + "\n"


def notebook() -> tuple[Callable[[str, str, Path], Any], Any]:
    """(a function making a notebook pipeline of a DOT source, the widget class), through the
    names the imported tree has: the pipeline became ``Pipeline.loaded`` and the layout cache
    moved to ``views``."""
    from freshness_magic.engine.pipeline import load_pipeline
    from freshness_magic.notebook.widget import PipelineWidget

    try:
        from freshness_magic.notebook.pipeline import Pipeline
        from freshness_magic.views.render import LayoutCache
    except ImportError:  # the older tree
        from freshness_magic.notebook.render import LayoutCache  # type: ignore[no-redef]

        from freshness_magic.notebook.pipeline import NotebookPipeline

        def make(name: str, dot: str, workdir: Path) -> Any:
            return NotebookPipeline(
                name=name, graph=load_pipeline(dot), workdir=workdir, layout_cache=LayoutCache()
            )

        return make, PipelineWidget

    def loaded(name: str, dot: str, workdir: Path) -> Any:
        return Pipeline.loaded(name, load_pipeline(dot), workdir, layout_cache=LayoutCache())

    return loaded, PipelineWidget


def measure(n: int, root: Path, steps: int) -> dict[str, float]:
    make, PipelineWidget = notebook()
    pipeline = make("bench", pipeline_dot(n), root / f"w{n}")
    RecordingComm.log.clear()
    started, cpu = time.perf_counter(), against.cpu_seconds()
    widget = PipelineWidget(pipeline)
    first = time.perf_counter() - started
    first_cpu = against.cpu_seconds() - cpu
    first_bytes = sum(size for kind, size in RecordingComm.log)
    pipeline.run_to(max_steps=n // 2 - steps // 2)
    per_step: list[tuple[int, int, float, float, float]] = []
    for _ in range(steps):
        RecordingComm.log.clear()
        widget.update_stats.clear()
        started, cpu = time.perf_counter(), against.cpu_seconds()
        pipeline.step()
        total = time.perf_counter() - started
        step_cpu = against.cpu_seconds() - cpu
        view = sum(seconds for seconds, _ in widget.update_stats)
        sent = [size for kind, size in RecordingComm.log if kind.startswith("comm_msg")]
        per_step.append((len(sent), sum(sent), view, total - view, step_cpu))
    return {
        "first": first,
        "first_cpu": first_cpu,
        "step_cpu": statistics.median(s[4] for s in per_step),
        "first_bytes": first_bytes,
        "msgs": statistics.mean(s[0] for s in per_step),
        "max_msgs": max(s[0] for s in per_step),
        "bytes": statistics.mean(s[1] for s in per_step),
        "max_bytes": max(s[1] for s in per_step),
        "view": statistics.mean(s[2] for s in per_step),
        "engine": statistics.mean(s[3] for s in per_step),
    }


def wait_for(condition: Any, what: str, timeout: float = 60.0) -> None:
    give_up = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > give_up:
            raise SystemExit(f"gave up waiting for {what}")
        time.sleep(0.002)


def bare_kill() -> float:
    """Seconds to kill a ``sleep 30`` process group directly and reap it (the reference)."""
    process = subprocess.Popen(["sh", "-c", "sleep 30; true"], start_new_session=True)
    time.sleep(0.05)
    started = time.perf_counter()
    os.killpg(process.pid, signal.SIGTERM)
    process.wait()
    return time.perf_counter() - started


def measure_stop(root: Path) -> float:
    """Seconds from pressing Stop to the view's state showing the tool node interrupted."""
    make, PipelineWidget = notebook()
    pipeline = make("stop", STOP_DOT, root)
    widget = PipelineWidget(pipeline)
    widget.background = True  # as in a kernel: the run goes on the view's worker thread
    work = widget.graph["nodes"].index("work")
    widget.handle({"action": "run"})
    wait_for(lambda: widget.states[work] == "r", "the view to show the tool running")
    started = time.perf_counter()
    widget.handle({"action": "stop"})
    wait_for(lambda: widget.states[work] == "i", "the view to show the tool interrupted")
    seconds = time.perf_counter() - started
    widget.wait(60)
    return seconds


def worker(sizes: list[int], steps: int, stops: int) -> dict[str, Any]:
    """One round on the imported tree: every size, then ``stops`` Stops (see :func:`measure`)."""
    comm.create_comm = RecordingComm
    with tempfile.TemporaryDirectory() as tmp:
        measure(5, Path(tmp), 2)  # warm-up: imports and first widget construction
        found = {str(n): measure(n, Path(tmp), min(steps, n // 2)) for n in sizes}
        times = [measure_stop(Path(tmp) / f"stop{i}") for i in range(stops)]
    return {"sizes": found, "stops": times}


COMPARED = (
    ("first render", "first", 1000, "ms"),
    ("first render, CPU (with dot's)", "first_cpu", 1000, "ms"),
    ("first render bytes", "first_bytes", 1, "B"),
    ("messages per step", "msgs", 1, ""),
    ("bytes per step", "bytes", 1, "B"),
    ("view refresh per step", "view", 1000, "ms"),
    ("engine step (for reference)", "engine", 1000, "ms"),
    ("whole step with the view, CPU", "step_cpu", 1000, "ms"),
)


def compare(rev: str, sizes: list[int], steps: int, stops: int, reps: int) -> None:
    """Every size and the Stops on this tree and on ``rev``, alternating, a fresh process per
    tree and round; medians over the rounds side by side."""
    print(f"{against.machine_load()}; {reps} rounds, alternating, a fresh process each")
    args = (",".join(map(str, sizes)), str(steps), str(stops))
    with against.trees(rev) as trees:
        found: dict[str, list[dict[str, Any]]] = {tree.label: [] for tree in trees}
        for _, tree in against.rounds(trees, reps):
            found[tree.label].append(against.run_worker(__file__, tree, *args))
        labels = [tree.label for tree in trees]
    for n in sizes:
        print(f"-- {n} nodes (medians of {reps} rounds)")
        for name, key, scale, unit in COMPARED:
            mine, theirs = (
                against.median([r["sizes"][str(n)][key] * scale for r in found[label]])
                for label in labels
            )
            against.verdict(name, mine, theirs, labels, unit)
    if stops > 0:
        print("-- Stop on a running `sleep 30` tool until the view shows it interrupted")
        mine, theirs = (
            against.median([t * 1000 for r in found[label] for t in r["stops"]]) for label in labels
        )
        against.verdict("Stop -> interrupted", mine, theirs, labels)
    print(f"at the end: {against.machine_load()}")


def main() -> None:
    if len(sys.argv) == 6 and sys.argv[1] == "--worker":
        against.imported_from(sys.argv[2])
        sizes = [int(x) for x in sys.argv[3].split(",")]
        print(json.dumps(worker(sizes, int(sys.argv[4]), int(sys.argv[5]))))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="20,200,1000")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--stops", type=int, default=3, help="Stop measurements (0: none)")
    parser.add_argument(
        "--against", default=None, metavar="REV", help="compare with this commit (git archive)"
    )
    parser.add_argument("--reps", type=int, default=5, help="rounds per tree with --against")
    args = parser.parse_args()
    sizes = [int(x) for x in args.sizes.split(",")]
    if args.against is not None:
        compare(args.against, sizes, args.steps, args.stops, args.reps)
        return
    comm.create_comm = RecordingComm
    print(
        f"{'nodes':>6} {'first render':>13} {'first bytes':>12} {'msgs/step':>9} "
        f"{'bytes/step':>10} {'max bytes':>9} {'view/step':>10} {'engine/step':>12} {'ratio':>7}"
    )
    with tempfile.TemporaryDirectory() as tmp:
        measure(5, Path(tmp), 2)  # warm-up: imports and first widget construction
        for n in sizes:
            r = measure(n, Path(tmp), min(args.steps, n // 2))
            ratio = r["first"] / r["view"] if r["view"] else float("inf")
            print(
                f"{n:>6} {r['first'] * 1000:>10.1f} ms {int(r['first_bytes']):>12} "
                f"{r['msgs']:>9.1f} {r['bytes']:>10.0f} {int(r['max_bytes']):>9} "
                f"{r['view'] * 1000:>7.2f} ms {r['engine'] * 1000:>9.2f} ms {ratio:>6.0f}x"
            )
            if n == 200:
                met = r["max_bytes"] < GOAL_BYTES and r["max_msgs"] == GOAL_MESSAGES
                print(
                    f"       at 200 nodes: {r['msgs']:.1f} messages per step (most"
                    f" {int(r['max_msgs'])}; goal {GOAL_MESSAGES}), {r['bytes']:.0f} bytes per"
                    f" step (most {int(r['max_bytes'])}; goal < {GOAL_BYTES}); view refresh is"
                    f" {r['view'] / r['engine']:.2f}x the engine's step time;"
                    f" goal met: {'yes' if met else 'no'}"
                )
        if args.stops > 0:
            stops = [measure_stop(Path(tmp) / f"stop{i}") for i in range(args.stops)]
            reference = statistics.median(bare_kill() for _ in range(args.stops))
            worst = max(stops)
            print(
                f"Stop on a running `sleep 30` tool -> view shows interrupted: median"
                f" {statistics.median(stops):.3f} s, worst {worst:.3f} s over {args.stops};"
                f" a bare process-group kill takes {reference * 1000:.1f} ms"
                f" ({worst / reference:.0f}x); goal < {GOAL_STOP_SECONDS:g} s;"
                f" goal met: {'yes' if worst < GOAL_STOP_SECONDS else 'no'}"
            )


if __name__ == "__main__":
    main()
