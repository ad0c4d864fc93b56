"""Widget cost for pipelines of 20, 200 and 1,000 nodes.

Prints, per size: the first render (``dot`` layout + widget build, cold layout cache), the state
update the widget does for one step in the middle of the run (all refreshes the step triggers,
engine time excluded), the bytes that update sends for the graph/status and separately for the
gate/evidence panels, and the ratio first render / update. Targets (issue #6): at 200 nodes the
update is at least 20x cheaper than the first render and the graph update is under 5 KB.

    .venv/bin/python benchmarks/bench_widget.py [--sizes 20,200,1000]
"""

from __future__ import annotations

import argparse
import itertools
import tempfile
import time
from pathlib import Path

from freshness_magic.engine.pipeline import load_pipeline
from freshness_magic.notebook.pipeline import NotebookPipeline
from freshness_magic.notebook.render import LayoutCache


def pipeline_dot(n: int) -> str:
    """``n`` nodes: a main chain with a conditional back edge every 10 nodes (a real layout)."""
    work = n - 2
    lines = ["digraph bench {", "  start [shape=Mdiamond]", "  done [shape=Msquare]"]
    lines += [f'  s{i} [label="stage {i}", prompt="work {i}"]' for i in range(work)]
    chain = ["start", *(f"s{i}" for i in range(work)), "done"]
    lines += [f"  {a} -> {b}" for a, b in itertools.pairwise(chain)]
    lines += [
        f'  s{i} -> s{i - 5} [condition="context.redo{i}=yes", label="redo"]'
        for i in range(10, work, 10)
    ]
    lines.append("}")
    return "\n".join(lines) + "\n"


def measure(n: int, root: Path) -> dict[str, float]:
    graph = load_pipeline(pipeline_dot(n))
    pipeline = NotebookPipeline(
        name="bench", graph=graph, workdir=root / f"w{n}", layout_cache=LayoutCache()
    )
    started = time.perf_counter()
    widget = pipeline.widget
    first = time.perf_counter() - started
    first_bytes = widget.update_stats[0][1]
    pipeline.run_to(max_steps=n // 2)
    widget.update_stats.clear()
    pipeline.step()
    update = sum(s[0] for s in widget.update_stats)
    graph_bytes = sum(s[1] for s in widget.update_stats)
    panel_bytes = sum(s[2] for s in widget.update_stats)
    return {
        "first": first,
        "first_bytes": first_bytes,
        "update": update,
        "graph_bytes": graph_bytes,
        "panel_bytes": panel_bytes,
        "refreshes": len(widget.update_stats),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="20,200,1000")
    sizes = [int(x) for x in parser.parse_args().sizes.split(",")]
    header = (
        f"{'nodes':>6} {'first render':>13} {'svg bytes':>10} {'update/step':>12} "
        f"{'graph bytes':>12} {'panel bytes':>12} {'refreshes':>9} {'ratio':>8}"
    )
    print(header)
    with tempfile.TemporaryDirectory() as tmp:
        measure(5, Path(tmp))  # warm-up: imports and first widget construction
        for n in sizes:
            r = measure(n, Path(tmp))
            ratio = r["first"] / r["update"] if r["update"] else float("inf")
            print(
                f"{n:>6} {r['first'] * 1000:>10.1f} ms {int(r['first_bytes']):>10} "
                f"{r['update'] * 1000:>9.2f} ms {int(r['graph_bytes']):>12} "
                f"{int(r['panel_bytes']):>12} {int(r['refreshes']):>9} {ratio:>7.0f}x"
            )
            if n == 200:
                ok_ratio = ratio >= 20
                ok_bytes = r["graph_bytes"] < 5000
                print(
                    f"       target at 200 nodes: update >= 20x cheaper: "
                    f"{'yes' if ok_ratio else 'NO'}; graph update < 5 KB: "
                    f"{'yes' if ok_bytes else 'NO'}"
                )


if __name__ == "__main__":
    main()
