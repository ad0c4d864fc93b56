"""Engine persistence cost per step as a run gets long.

Runs, with the default extensions on (freshness and evidence, through ``session.open_run``, as
the notebook and the CLI run), a 5,000-node linear pipeline and a loop of 2,000 iterations. The
work node's handler writes a small file into the work tree and returns a small context update;
one node in 100 declares ``source_files`` so freshness tracks inputs. For the first and the last
100 steps of one whole run it prints the median wall time per step, the bytes written per step
(``wchar`` of ``/proc/self/io``: every write the process made, run directory and work tree
alike; the median is a typical step, the mean includes the snapshots, which are rewritten when
the journal since the last one outgrows it: amortised O(1) per step) and the fsyncs per step
(``os.fsync``/``os.fdatasync`` wrapped with a counter). Then the time ratio last : first measured
fairly: both windows in fresh processes, interleaved ``--reps`` times, so machine load hits both
alike. Each last window resumes a run of its own that a fresh process grew up to it, as a real run
grows: a copy of one prepared run measured 1.13x on tmpfs where grown runs measure 1.01x (the
copy's files have new inodes and ctimes, so freshness hashes its inputs again and the evidence is
read again, which a real run does not). The windows run on
tmpfs (``/dev/shm``, else ``--scratch``), as the old format's baseline was measured: on a disk the
first window of a brand-new run measured 1.7 ms a step, then 4.4-5.9 ms in the next four
repetitions of one session, after the harness's deletes of the earlier ones; the one fsync a
step waits for ext4's journal, whatever is in it, so that ratio measures the disk's state, not
the run. The whole run above is on the disk, in one process, ``--whole-runs`` times (one run's
ratio ranged 0.71-1.28 in one session, for this tree and the previous one alike: the disk's
state again); the run with the median ratio is printed, with every run's ratio. "goal met": the
interleaved ratio and that median whole-run ratio <= 1.2, median bytes per step last : first
<= 1.2, at most one fsync per step over the whole run.

``--baseline-src DIR`` (a source tree of an older version, e.g. ``git archive 1f796d6``) runs
the same cases against it in the same session, interleaved with the current tree, each case in a
fresh process. ``--against REV`` does the same with commit REV of this repository, checked out
into a temporary folder (``git archive``), and prints the per-step cost of this tree against it
(the median wall and CPU ms per step of the interleaved first windows, goal: at most 1.10x;
``against.py`` holds the checkout and the alternation the benchmarks share): every execution's
trace (what it read and wrote, in the journal) was measured this way against the commit before
it, then to a goal of 1.3x. Without either the measured numbers for the old format are printed
for reference.

    .venv/bin/python benchmarks/bench_engine.py [--nodes 5000] [--loop 2000] [--baseline-src DIR]
        [--against REV] [--scratch DIR] [--whole-runs 3]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import against
from against import Tree

WINDOW = 100


def linear_dot(n: int) -> str:
    names = [f"n{i:05d}" for i in range(n - 2)]
    lines = ["digraph bench {", '  graph [goal="benchmark"]', "  start [shape=Mdiamond]"]
    for i, name in enumerate(names):
        inputs = ', source_files="src/*.txt"' if i % 100 == 0 else ""
        lines.append(f'  {name} [type="sim", prompt="work {name}"{inputs}]')
    lines += ["  done [shape=Msquare]", "  start -> " + " -> ".join(names) + " -> done", "}"]
    return "\n".join(lines)


def loop_dot(n: int) -> str:
    return f"""digraph loop {{
  graph [goal="benchmark"]
  start [shape=Mdiamond]
  work [type="sim", prompt="iterate", source_files="src/*.txt"]
  check [shape=diamond]
  done [shape=Msquare]
  start -> work -> check
  check -> work [condition="context.i!={n}"]
  check -> done [condition="context.i={n}"]
}}"""


def total_steps(case: str, size: int) -> int:
    return size if case == "linear" else 2 * size + 2


def worker(case: str, size: int, root: Path, mode: str) -> dict[str, Any]:
    """One case in this process; per step (seconds, bytes written, fsyncs, CPU seconds).

    ``mode``: ``full`` (the whole run), ``first`` (a new run's first WINDOW steps), ``prepare``
    (a new run up to its last WINDOW steps), ``last`` (resume a prepared run, its last steps).
    """
    from freshness_magic.engine.handlers.builtin import default_registry
    from freshness_magic.engine.outcome import Outcome
    from freshness_magic.session import open_run, resume_run

    fsyncs = [0]
    real_fsync, real_fdatasync = os.fsync, os.fdatasync

    def counted_fsync(fd: int) -> None:
        fsyncs[0] += 1
        real_fsync(fd)

    def counted_fdatasync(fd: int) -> None:
        fsyncs[0] += 1
        real_fdatasync(fd)

    os.fsync = counted_fsync
    os.fdatasync = counted_fdatasync

    class Writer:
        """A work node: writes a small file and counts iterations in the context."""

        def execute(self, node: Any, context: Any, env: Any) -> Any:
            count = int(context.get("i", 0)) + 1
            out = env.workdir / "out" / f"{node.id}.txt"
            out.parent.mkdir(exist_ok=True)
            out.write_text(f"{node.id} {count}\n")
            return Outcome(notes=f"wrote {out.name}", context_updates={"i": count})

    registry = default_registry()
    registry.register("sim", Writer())
    limit = {"first": WINDOW, "prepare": total_steps(case, size) - WINDOW}.get(mode)
    if mode == "last":
        (run_dir,) = (root / ".freshness" / "runs").iterdir()
        run = resume_run(run_dir, registry=registry)
    else:
        (root / "src").mkdir(parents=True)
        for i in range(20):
            (root / "src" / f"f{i:02d}.txt").write_text(f"input {i}\n" * 20)
        dot = linear_dot(size) if case == "linear" else loop_dot(size)
        run = open_run(dot, workdir=root, registry=registry)
        run.start()
    steps: list[tuple[float, int, int, float]] = []
    while not run.state.finished and (limit is None or len(steps) < limit):
        wrote, synced = _wchar(), fsyncs[0]
        began, cpu = time.perf_counter(), time.process_time()
        run.step()
        steps.append(
            (
                time.perf_counter() - began,
                _wchar() - wrote,
                fsyncs[0] - synced,
                time.process_time() - cpu,
            )
        )
    return {"steps": steps, "state": run.state.value}


def _wchar() -> int:
    try:
        for line in Path("/proc/self/io").read_text().splitlines():
            if line.startswith("wchar:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def run_worker(src: Tree, case: str, size: int, root: Path, mode: str) -> dict[str, Any]:
    result: dict[str, Any] = against.run_worker(__file__, src, case, str(size), str(root), mode)
    return result


def run_case(src: Tree, case: str, size: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bench-engine-") as tmp:
        return run_worker(src, case, size, Path(tmp), "full")


def window_ratio(
    src: Tree, case: str, size: int, reps: int, scratch: Path
) -> tuple[float, float, float]:
    """Median ms per step of the first and of the last WINDOW steps, measured in fresh
    processes with the two kinds interleaved (each last window resumes a run of its own, grown
    by a fresh process up to it), so machine load affects both alike; and their ratio."""
    with tempfile.TemporaryDirectory(prefix="bench-engine-", dir=scratch) as tmp:
        base = Path(tmp)
        grown = [base / f"grown{rep}" for rep in range(reps)]
        for run in grown:
            run_worker(src, case, size, run, "prepare")
        first: list[float] = []
        last: list[float] = []
        for rep, run in enumerate(grown):
            fresh = base / f"first{rep}"
            first += [s[0] for s in run_worker(src, case, size, fresh, "first")["steps"]]
            shutil.rmtree(fresh)
            last += [s[0] for s in run_worker(src, case, size, run, "last")["steps"]]
            shutil.rmtree(run)
    a, b = statistics.median(first) * 1000, statistics.median(last) * 1000
    return a, b, b / a


def compare(trees: list[Tree], case: str, size: int, reps: int, scratch: Path) -> None:
    """The per-step cost of the first tree against the second: the first WINDOW steps of a new
    run, the two trees alternating in fresh processes on ``scratch`` (so load hits both alike),
    ``reps`` times each; median wall and CPU milliseconds per step."""
    wall: dict[str, list[float]] = {tree.label: [] for tree in trees}
    cpu: dict[str, list[float]] = {tree.label: [] for tree in trees}
    with tempfile.TemporaryDirectory(prefix="bench-engine-", dir=scratch) as tmp:
        for rep, tree in against.rounds(trees, reps):
            root = Path(tmp) / f"{tree.label}-{rep}"
            steps = run_worker(tree, case, size, root, "first")["steps"]
            wall[tree.label] += [s[0] * 1000 for s in steps]
            cpu[tree.label] += [s[3] * 1000 for s in steps]
            shutil.rmtree(root)
    mine, theirs = (tree.label for tree in trees)
    w1, w2 = statistics.median(wall[mine]), statistics.median(wall[theirs])
    c1, c2 = statistics.median(cpu[mine]), statistics.median(cpu[theirs])
    print(
        f"{case} {size}: per step {mine} : {theirs} = {w1 / w2:.2f} wall ({w1:.2f} vs {w2:.2f} "
        f"ms), {c1 / c2:.2f} CPU ({c1:.2f} vs {c2:.2f} ms); alternating, {reps} x {WINDOW} "
        f"steps each, fresh processes; goal <= {against.LIMIT:.2f}"
    )


def scratch_dir(given: Path | None) -> Path:
    """Where the interleaved windows run: ``given``, else tmpfs when there is one."""
    if given is not None:
        return given
    shm = Path("/dev/shm")
    return shm if shm.is_dir() and os.access(shm, os.W_OK) else Path(tempfile.gettempdir())


def summary(steps: list[list[float]]) -> dict[str, float]:
    first, last = steps[:WINDOW], steps[-WINDOW:]

    def med(part: list[list[float]], index: int) -> float:
        return float(statistics.median(s[index] for s in part))

    def mean(part: list[list[float]], index: int) -> float:
        return float(statistics.fmean(s[index] for s in part))

    return {
        "first_ms": med(first, 0) * 1000,
        "all_ms": med(steps, 0) * 1000,
        "last_ms": med(last, 0) * 1000,
        "first_bytes": med(first, 1),
        "last_bytes": med(last, 1),
        "first_mean_bytes": mean(first, 1),
        "last_mean_bytes": mean(last, 1),
        "all_bytes": mean(steps, 1),
        "first_fsyncs": mean(first, 2),
        "last_fsyncs": mean(last, 2),
        "all_fsyncs": mean(steps, 2),
        "first_cpu_ms": mean(first, 3) * 1000,
        "last_cpu_ms": mean(last, 3) * 1000,
    }


def report(label: str, case: str, size: int, s: dict[str, float]) -> None:
    ratio = s["ratio"]
    bytes_ratio = s["last_bytes"] / s["first_bytes"] if s["first_bytes"] else 0.0
    print(
        f"{label:<9} {case} {size}: per step first {WINDOW} {s['first_ms']:.2f} ms, last "
        f"{WINDOW} {s['last_ms']:.2f} ms, ratio {ratio:.2f}; bytes/step median "
        f"{s['first_bytes']:.0f} -> {s['last_bytes']:.0f} (x{bytes_ratio:.2f}), mean "
        f"{s['first_mean_bytes']:.0f} -> "
        f"{s['last_mean_bytes']:.0f} (whole run {s['all_bytes']:.0f}, snapshots included); "
        f"fsyncs/step {s['first_fsyncs']:.2f} -> {s['last_fsyncs']:.2f} (whole run "
        f"{s['all_fsyncs']:.2f}); CPU/step {s['first_cpu_ms']:.2f} -> {s['last_cpu_ms']:.2f} ms"
    )


def main() -> None:
    if len(sys.argv) == 7 and sys.argv[1] == "--worker":
        against.imported_from(sys.argv[2])
        result = worker(sys.argv[3], int(sys.argv[4]), Path(sys.argv[5]), sys.argv[6])
        print(json.dumps(result))
        return
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--loop", type=int, default=2000)
    parser.add_argument("--baseline-src", type=Path, default=None)
    parser.add_argument(
        "--against", default=None, metavar="REV", help="compare with this commit (git archive)"
    )
    parser.add_argument("--cases", default="linear,loop", help="comma-separated: linear, loop")
    parser.add_argument(
        "--reps", type=int, default=11, help="interleaved first/last window runs per case and tree"
    )
    parser.add_argument(
        "--scratch", type=Path, default=None, help="folder for the interleaved windows (tmpfs)"
    )
    parser.add_argument(
        "--whole-runs", type=int, default=3, help="whole runs per case and tree (median ratio)"
    )
    args = parser.parse_args()
    print(against.machine_load())
    with against.trees(args.against) as trees:
        if args.baseline_src is not None:
            against.compile_tree(args.baseline_src.resolve())
            trees.append(Tree("baseline", args.baseline_src.resolve()))
        measure(args, trees)
    print(f"at the end: {against.machine_load()}")


def measure(args: argparse.Namespace, trees: list[Tree]) -> None:
    """Every case on every tree; with two trees, the per-step cost of the first against the
    second (whole run and interleaved first window)."""
    sizes = {"linear": args.nodes, "loop": args.loop}
    scratch = scratch_dir(args.scratch)
    for case in args.cases.split(","):
        size = sizes[case]
        for src in trees:
            label = src.label
            runs = [summary(run_case(src, case, size)["steps"]) for _ in range(args.whole_runs)]
            for run in runs:
                run["ratio"] = run["last_ms"] / run["first_ms"]
            runs.sort(key=lambda run: run["ratio"])
            stats = runs[len(runs) // 2]
            report(label, case, size, stats)
            ratios = ", ".join(f"{run['ratio']:.2f}" for run in runs)
            print(f"{label:<9} {case} {size}: whole-run ratios of {len(runs)} runs: {ratios}")
            first, last, ratio = window_ratio(src, case, size, args.reps, scratch)
            print(
                f"{label:<9} {case} {size}, interleaved ({args.reps} x {WINDOW} steps each, fresh "
                f"processes, in {scratch}): first {first:.2f} ms, last {last:.2f} ms per step, "
                f"ratio {ratio:.2f}"
            )
            if label == "current":
                met = (
                    ratio <= 1.2
                    and stats["ratio"] <= 1.2
                    and stats["last_bytes"] <= 1.2 * stats["first_bytes"]
                    and stats["all_fsyncs"] <= 1.0
                )
                print(
                    f"goal met ({case}: interleaved and whole-run time ratios <= 1.2, median "
                    f"bytes/step ratio <= 1.2, <= 1 fsync/step): {'yes' if met else 'no'}"
                )
        if len(trees) == 2:
            compare(trees, case, size, args.reps, scratch)
    if len(trees) == 1:
        print(
            "baseline (the old format, 5,000-node linear run on tmpfs): 1.3 ms per step at "
            "the start, 7.4 ms at the end (5.5x); 12.8 fsyncs per step with freshness and evidence"
        )


if __name__ == "__main__":
    main()
