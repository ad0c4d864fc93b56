"""Freshness speed: baseline capture and re-checks against xxhsum and git status.

Builds a git work tree of 20,000 files of 4 KiB (and, with ``--big``, a second tree holding one
1 GiB file) in a temporary folder and prints, as medians and as ratios against a reference
measured in the same run:

(a) baseline capture            vs  find DIR -type f -not -path '*/.git/*' -print0 |
                                    xargs -0 xxhsum -H2
(b) re-check, nothing changed   vs  git status --porcelain
(c) re-check, one file changed  vs  git status --porcelain

Targets: (a) ratio <= 1.0, (b) and (c) <= 2.0. Run: ``python benchmarks/bench_freshness.py``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable

from freshness_magic.freshness.check import FreshnessTracker

GIT_ENV = dict(
    os.environ,
    GIT_AUTHOR_NAME="bench",
    GIT_AUTHOR_EMAIL="bench@example.invalid",
    GIT_COMMITTER_NAME="bench",
    GIT_COMMITTER_EMAIL="bench@example.invalid",
)


def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def paired(
    ours: Callable[[], object],
    reference: Callable[[], object],
    repeat: int,
    setup: Callable[[], object] | None = None,
) -> tuple[float, float, float]:
    """Alternate ours and the reference so both see the same machine load.

    Returns (median of ours, median of the reference, median of the per-pair ratios).
    """
    mine, refs, ratios = [], [], []
    for _ in range(repeat):
        if setup is not None:
            setup()
        a = timed(ours)
        b = timed(reference)
        mine.append(a)
        refs.append(b)
        ratios.append(a / b if b else float("inf"))
    return statistics.median(mine), statistics.median(refs), statistics.median(ratios)


def git(root: str, *args: str) -> None:
    subprocess.run(["git", "-C", root, *args], check=True, env=GIT_ENV, stdout=subprocess.DEVNULL)


def build_small_tree(root: str, count: int, size: int) -> list[str]:
    blob = os.urandom(size * count)
    paths = []
    for i in range(count):
        rel = f"pkg{i // 500:03d}/mod{(i // 50) % 10}/f{i:05d}.dat"
        os.makedirs(os.path.join(root, os.path.dirname(rel)), exist_ok=True)
        with open(os.path.join(root, rel), "wb") as handle:
            handle.write(blob[i * size : (i + 1) * size])
        paths.append(rel)
    return paths


def init_repo(root: str) -> None:
    git(root, "init", "-q")
    git(root, "config", "gc.auto", "0")  # no background repacking during the measurements
    with open(os.path.join(root, ".gitignore"), "w") as handle:
        handle.write(".freshness/\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "tree")


def xxhsum_pipeline(root: str) -> None:
    subprocess.run(
        f"find {root} -type f -not -path '*/.git/*' -print0 2>/dev/null"
        " | xargs -0 xxhsum -H2 > /dev/null 2>&1",
        shell=True,
        check=True,
    )


def git_status(root: str) -> None:
    subprocess.run(
        ["git", "-C", root, "status", "--porcelain"], check=True, stdout=subprocess.DEVNULL
    )


def row(name: str, result: tuple[float, float, float], ref_name: str, target: float) -> None:
    ours, ref, ratio = result
    verdict = "ok" if ratio <= target else "OVER TARGET"
    print(
        f"{name:<32} {ours * 1000:9.1f} ms   {ref_name:<10} {ref * 1000:8.1f} ms"
        f"   ratio {ratio:5.2f} (target <= {target:.1f}) {verdict}"
    )


def run_case(label: str, root: str, changed: str, repeat: int) -> None:
    # Let the racy window pass, as it would between a run's start and a later check.
    time.sleep(2.2)
    entries = {"all": ["**"]}
    print(f"-- {label} (median of {repeat} interleaved pairs; ratio = median of pair ratios)")
    row(
        "(a) baseline capture",
        paired(
            lambda: FreshnessTracker(root).capture(entries), lambda: xxhsum_pipeline(root), repeat
        ),
        "xxhsum",
        1.0,
    )
    tracker = FreshnessTracker(root)
    tracker.capture(entries)
    time.sleep(2.2)
    tracker.check("all")  # the first check re-hashes entries captured inside the racy window
    row(
        "(b) re-check, nothing changed",
        paired(lambda: tracker.check("all"), lambda: git_status(root), repeat),
        "git status",
        2.0,
    )
    path = os.path.join(root, changed)
    counter = [0]

    def touch() -> None:
        counter[0] += 1
        with open(path, "r+b") as handle:
            handle.write(counter[0].to_bytes(8, "little"))

    def check_one() -> None:
        report = tracker.check("all")
        assert report.stale_files == [changed], report.stale_files

    # git status sees the same modified file; the write happens before each pair.
    row(
        "(c) re-check, one file changed",
        paired(check_one, lambda: git_status(root), repeat, setup=touch),
        "git status",
        2.0,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=20_000)
    parser.add_argument("--size", type=int, default=4096)
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--big", action="store_true", help="also run the 1 GiB file case")
    parser.add_argument("--big-size", type=int, default=1 << 30)
    args = parser.parse_args()
    base = tempfile.mkdtemp(prefix="bench_freshness_")
    try:
        small = os.path.join(base, "small")
        os.makedirs(small)
        paths = build_small_tree(small, args.files, args.size)
        init_repo(small)
        run_case(
            f"{args.files} files x {args.size} bytes", small, paths[len(paths) // 2], args.repeat
        )
        if args.big:
            big = os.path.join(base, "big")
            os.makedirs(big)
            chunk = os.urandom(1 << 20)
            with open(os.path.join(big, "big.bin"), "wb") as handle:
                for _ in range(args.big_size // len(chunk)):
                    handle.write(chunk)
            init_repo(big)
            run_case(f"one file of {args.big_size} bytes", big, "big.bin", max(3, args.repeat // 2))
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
