"""What the pipeline view costs and sends, measured on the wire, for pipelines of 20, 200 and
1,000 nodes.

The widget's comm is replaced by one that records every message ipywidgets publishes (the comm
package's documented hook, ``comm.create_comm``), so the bytes are those of the real JSON
messages: the ``comm_open`` carrying the first render, and per step the ``update`` messages
(state sync) and any custom replies. Prints per size: first render time (``dot`` layout + widget
build, cold layout cache) and bytes; per step (mean and max over the steps in the middle of the
run): messages, bytes, the widget's own refresh time and, for reference, the engine's step time
measured in the same run. Goal (issue 14): under 2 KB per step at 200 nodes.

    .venv/bin/python benchmarks/bench_widget.py [--sizes 20,200,1000] [--steps 20]
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any, ClassVar

import comm
from comm.base_comm import BaseComm

from freshness_magic.engine.pipeline import load_pipeline
from freshness_magic.notebook.pipeline import NotebookPipeline
from freshness_magic.notebook.render import LayoutCache
from freshness_magic.notebook.widget import PipelineWidget

GOAL_BYTES = 2048


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


def measure(n: int, root: Path, steps: int) -> dict[str, float]:
    graph = load_pipeline(pipeline_dot(n))
    pipeline = NotebookPipeline(
        name="bench", graph=graph, workdir=root / f"w{n}", layout_cache=LayoutCache()
    )
    RecordingComm.log.clear()
    started = time.perf_counter()
    widget = PipelineWidget(pipeline)
    first = time.perf_counter() - started
    first_bytes = sum(size for kind, size in RecordingComm.log)
    pipeline.run_to(max_steps=n // 2 - steps // 2)
    per_step: list[tuple[int, int, float, float]] = []
    for _ in range(steps):
        RecordingComm.log.clear()
        widget.update_stats.clear()
        started = time.perf_counter()
        pipeline.step()
        total = time.perf_counter() - started
        view = sum(seconds for seconds, _ in widget.update_stats)
        sent = [size for kind, size in RecordingComm.log if kind.startswith("comm_msg")]
        per_step.append((len(sent), sum(sent), view, total - view))
    return {
        "first": first,
        "first_bytes": first_bytes,
        "msgs": statistics.mean(s[0] for s in per_step),
        "bytes": statistics.mean(s[1] for s in per_step),
        "max_bytes": max(s[1] for s in per_step),
        "view": statistics.mean(s[2] for s in per_step),
        "engine": statistics.mean(s[3] for s in per_step),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="20,200,1000")
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args()
    sizes = [int(x) for x in args.sizes.split(",")]
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
                met = r["max_bytes"] < GOAL_BYTES
                print(
                    f"       at 200 nodes: largest step sent {int(r['max_bytes'])} bytes in"
                    f" {r['msgs']:.1f} messages (goal < {GOAL_BYTES}); view refresh is"
                    f" {r['view'] / r['engine']:.2f}x the engine's step time;"
                    f" goal met: {'yes' if met else 'no'}"
                )


if __name__ == "__main__":
    main()
