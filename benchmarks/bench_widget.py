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

``--against REV`` measures the same against commit REV of this repository (``against.py``). At
20 nodes a render takes about 25 ms and a step about 6 ms, so one collector pass or one slow
write moves a single measurement by a third; the comparison therefore takes many samples and
pairs them in time. Each round starts a fresh process per tree; the two take turns sample by
sample (the order reversed every other sample), every size in turn, then the Stops. A sample is
the mean over ``pipelines_per_sample`` fresh pipelines (5 at 20 nodes, so 5 first renders and 50
steps; 1 from 100 nodes), each with its own folder, its own cold layout cache and conditions its
process has not parsed, so every render is a first render with a real ``dot`` as before; the
collector runs before each sample, outside the timing, so a sample does not pay for the garbage
of the one before while paying for its own. Per round each tree's median sample gives a ratio;
printed are the medians over ``--reps`` rounds side by side, the median ratio of the samples
taken side by side (goal: at most 1.10x) with its quartiles, and the lowest and highest round
ratio (the noise a reader should see), in wall time and in CPU time (on a loaded machine a
process waits for a core, so its wall time follows the load while its CPU time mostly does not),
and the collector passes per render and per step. Each tree is driven through the names it has
(the notebook pipeline and the layout cache moved between modules), so the same work is
measured.

    .venv/bin/python benchmarks/bench_widget.py [--sizes 20,200,1000] [--steps 20] [--stops 3]
        [--against REV] [--reps 5] [--samples 8]
"""

from __future__ import annotations

import argparse
import gc
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


def pipeline_dot(n: int, tag: str = "") -> str:
    """``n`` nodes: a main chain in clusters of 20 with a conditional back edge every 10 nodes.

    ``tag`` goes into the conditions' keys, so that a process measuring several renders parses
    each render's conditions afresh (the parser caches by text), as its first render did."""
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
        f'  s{i} -> s{i - 5} [condition="context.redo{i}{tag}=yes", label="redo"]'
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


def measure(n: int, root: Path, steps: int, count: int = 1, tag: str = "") -> dict[str, float]:
    """First renders and steps of ``count`` fresh pipelines of ``n`` nodes, each in its own
    folder with its own cold layout cache (so ``dot`` lays each out): per render its time and
    CPU time (``dot``'s included); per step, over the ``steps`` in the middle of each run, the
    messages and bytes sent, the view's refresh time, the rest (the engine's) and the CPU time
    of the whole step. Times are means over all renders and all steps, so the collector passes
    the work causes are counted in proportion."""
    make, PipelineWidget = notebook()
    renders: list[tuple[float, float, int]] = []
    per_step: list[tuple[int, int, float, float, float]] = []
    collections = {"render": 0, "step": 0}
    phase = [""]

    def counted(stage: str, info: dict[str, int]) -> None:
        if stage == "start" and phase[0]:
            collections[phase[0]] += 1

    gc.callbacks.append(counted)
    try:
        for index in range(count):
            pipeline = make("bench", pipeline_dot(n, f"{tag}x{index}"), root / f"w{n}{tag}x{index}")
            RecordingComm.log.clear()
            phase[0] = "render"
            started, cpu = time.perf_counter(), against.cpu_seconds()
            widget = PipelineWidget(pipeline)
            renders.append(
                (
                    time.perf_counter() - started,
                    against.cpu_seconds() - cpu,
                    sum(size for kind, size in RecordingComm.log),
                )
            )
            phase[0] = ""
            pipeline.run_to(max_steps=n // 2 - steps // 2)
            for _ in range(steps):
                RecordingComm.log.clear()
                widget.update_stats.clear()
                phase[0] = "step"
                started, cpu = time.perf_counter(), against.cpu_seconds()
                pipeline.step()
                total = time.perf_counter() - started
                step_cpu = against.cpu_seconds() - cpu
                phase[0] = ""
                view = sum(seconds for seconds, _ in widget.update_stats)
                sent = [size for kind, size in RecordingComm.log if kind.startswith("comm_msg")]
                per_step.append((len(sent), sum(sent), view, total - view, step_cpu))
            widget.close()  # out of ipywidgets' registry: the next render finds the heap as it was
    finally:
        gc.callbacks.remove(counted)
    return {
        "first": statistics.mean(r[0] for r in renders),
        "first_cpu": statistics.mean(r[1] for r in renders),
        "first_bytes": statistics.mean(r[2] for r in renders),
        "step_cpu": statistics.mean(s[4] for s in per_step),
        "msgs": statistics.mean(s[0] for s in per_step),
        "max_msgs": max(s[0] for s in per_step),
        "bytes": statistics.mean(s[1] for s in per_step),
        "max_bytes": max(s[1] for s in per_step),
        "view": statistics.mean(s[2] for s in per_step),
        "engine": statistics.mean(s[3] for s in per_step),
        "gc_render": collections["render"] / len(renders),
        "gc_step": collections["step"] / len(per_step),
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


def serve_tree() -> None:
    """The worker of ``--against``: one process on the imported tree, asked for one sample at a
    time, so the trees take turns sample by sample (see :func:`compare`)."""
    comm.create_comm = RecordingComm
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)

        def sample(n: int, steps: int, count: int, tag: str) -> dict[str, float]:
            gc.collect()  # the garbage of the previous sample is not this sample's to collect
            return measure(n, root, steps, count, tag)

        def stop(index: int) -> float:
            return measure_stop(root / f"stop{index}")

        measure(5, root, 2)  # warm-up: imports and first widget construction
        against.serve({"sample": sample, "stop": stop})


def samples_per_round(n: int, samples: int) -> int:
    """Samples per round at ``n`` nodes: ``samples`` up to 200 nodes, fewer above, where one
    render and its run already take a second or more."""
    return max(1, min(samples, samples * 200 // n))


def pipelines_per_sample(n: int) -> int:
    """Pipelines rendered and stepped per sample: enough at small sizes that a sample is a
    hundred milliseconds or more of work (one collector pass or one slow write no longer moves
    it by a third)."""
    return max(1, 100 // n)


def spread(values: list[float]) -> tuple[float, float, float]:
    """The first quartile, the median and the third quartile of ``values``."""
    if len(values) < 2:
        return values[0], values[0], values[0]
    q1, median, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return q1, median, q3


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


def compare(rev: str, sizes: list[int], steps: int, stops: int, reps: int, samples: int) -> None:
    """Every size and the Stops on this tree and on ``rev``: per round a fresh process per tree,
    the two taking turns sample by sample (the order reversed every other sample). Prints each
    tree's median over the rounds of its median sample per round; the verdict, the median ratio
    of the samples taken side by side (each pair a few seconds apart, so a change of load hits
    both), with its quartiles; and the lowest and highest ratio of a round's two medians.

    The median of the rounds' ratios was tried as the verdict and swung from 1.06 to 1.24 for
    the same two trees at 20 nodes (five rounds give five noisy values), while the side-by-side
    median stayed within 1.11 to 1.14."""
    print(f"{against.machine_load()}; {reps} rounds, a fresh process per tree and round")
    plan = {n: (samples_per_round(n, samples), pipelines_per_sample(n)) for n in sizes}
    for n, (count, per) in plan.items():
        print(
            f"  {n} nodes: {count} samples per round, each {per} first render(s) and"
            f" {per * min(steps, n // 2)} steps"
        )
    with against.trees(rev) as trees:
        labels = [tree.label for tree in trees]
        # found[n][label][round] = that tree's samples in that round
        found: dict[int, dict[str, list[list[dict[str, float]]]]] = {
            n: {label: [[] for _ in range(reps)] for label in labels} for n in sizes
        }
        stopped: dict[str, list[float]] = {label: [] for label in labels}
        for rep in range(reps):
            drivers = {tree.label: against.Driver(__file__, tree) for tree in trees}
            turn = 0
            for n, (count, per) in plan.items():
                for k in range(count):
                    order = labels if (rep + turn) % 2 == 0 else labels[::-1]
                    turn += 1
                    for label in order:
                        answer = drivers[label].ask("sample", n, min(steps, n // 2), per, f"s{k}")
                        found[n][label][rep].append(answer)
            for i in range(stops):
                for label in labels if (rep + i) % 2 == 0 else labels[::-1]:
                    stopped[label].append(drivers[label].ask("stop", i))
            for driver in drivers.values():
                driver.close()
    mine, theirs = labels
    for n in sizes:
        print(f"-- {n} nodes (medians of {reps} rounds; ratio: of the samples side by side)")
        rounds = found[n]
        for name, key, scale, unit in COMPARED:
            per_round = {
                label: [against.median([s[key] * scale for s in r]) for r in rounds[label]]
                for label in labels
            }
            ratios = [
                a / b if b else float("inf") for a, b in zip(*per_round.values(), strict=True)
            ]
            side_by_side = [
                a[key] / b[key] if b[key] else float("inf")
                for ra, rb in zip(rounds[mine], rounds[theirs], strict=True)
                for a, b in zip(ra, rb, strict=True)
            ]
            q1, ratio, q3 = spread(side_by_side)
            ok = "yes" if ratio <= against.LIMIT else "NO"
            print(
                f"  {name:<34} {mine} {against.median(per_round[mine]):9.2f} {unit:<2}"
                f" {theirs} {against.median(per_round[theirs]):9.2f} {unit:<2} ratio {ratio:5.2f}"
                f" (<= {against.LIMIT:.2f}: {ok:>3}); quartiles {q1:.2f}-{q3:.2f};"
                f" rounds {min(ratios):.2f}-{max(ratios):.2f}"
            )
        passes = {
            label: (
                against.median([s["gc_render"] for r in rounds[label] for s in r]),
                against.median([s["gc_step"] for r in rounds[label] for s in r]),
            )
            for label in labels
        }
        print(
            "  collector passes (median per sample):"
            + "".join(
                f" {label} {render:.1f} per render, {step:.2f} per step;"
                for label, (render, step) in passes.items()
            )
        )
    if stops > 0:
        print("-- Stop on a running `sleep 30` tool until the view shows it interrupted")
        current, earlier = (against.median([t * 1000 for t in stopped[label]]) for label in labels)
        against.verdict("Stop -> interrupted", current, earlier, labels)
    print(f"at the end: {against.machine_load()}")


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "--serve":
        against.imported_from(sys.argv[2])
        serve_tree()
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="20,200,1000")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--stops", type=int, default=3, help="Stop measurements (0: none)")
    parser.add_argument(
        "--against", default=None, metavar="REV", help="compare with this commit (git archive)"
    )
    parser.add_argument("--reps", type=int, default=5, help="rounds per tree with --against")
    parser.add_argument(
        "--samples",
        type=int,
        default=8,
        help="samples per round and tree with --against, up to 200 nodes (fewer above)",
    )
    args = parser.parse_args()
    sizes = [int(x) for x in args.sizes.split(",")]
    if args.against is not None:
        compare(args.against, sizes, args.steps, args.stops, args.reps, args.samples)
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
