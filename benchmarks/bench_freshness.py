"""Freshness speed and memory against xxhsum and git status.

Builds two git work trees of 4 KiB files (20,000 and 100,000 files; on tmpfs ``/dev/shm`` when it
exists, so the disk does not decide) once, then measures, as medians of interleaved repetitions
(ours, reference, ours, reference, ...) and as the median of the per-pair ratios:

- baseline capture, one core (``git=False``: no git at all)      vs  ``xxhsum`` on one core
- baseline capture as a run takes it, in the git work tree        vs  ``xxhsum`` on one core
  when it ran on one core (no git process, no stat worker: checked), else ``xargs -P2 xxhsum``
- re-check with 0, 1 and 1,000 files changed                      vs  ``git status --porcelain``
- memory kept per tracked file after a capture (tracemalloc, one core capture)

The hash helper process (a second process hashing part of the files) was removed after this
benchmark measured it slower than no helper at 100,000 files (20k: 151 vs 188 ms, 100k: 1,272
vs 1,206 ms, same run); it would have to win at both sizes to be kept. Hashing on two threads
was measured slower than one as well (20k files: about 210 vs 150 ms): most of a 4 KiB file's
cost is its four syscalls, and the GIL changes hands around each.

The capture "as a run takes it" is in a git work tree, so it takes the blob ids of the clean
tracked files from git's index and only stats them (``freshness/gitindex.py``), and, as the
committed tree's index holds HEAD's tree, it tells git's status of the files (which the
baseline records) from the index too: no git process runs, and no stat worker either,
so it uses one core and is held to the one-core line. Both ratios are printed. Until this
session git status ran on the second core and the capture was held to ``xargs -P2 xxhsum``,
which a pure-Python snapshot cannot reach: about 5 µs per file (a ``stat`` of about 2 µs, the
index lookup and the record) plus the folder listing, while ``xxhsum`` on two cores takes half
of one core's time. The index pays off most where files are larger: 800 MB of tracked data
files are captured in 3 ms instead of 145 ms.

A re-check is a stat per file, and there two cores do help: with 10,000 files or more a stat
worker process stats half of the folders (``freshness/statworker.py``).

Both file lists for xxhsum are prepared beforehand (``git ls-files``), so the reference does only
hashing. Every goal ends in a ``goal met: yes/no`` line. Run:
``python benchmarks/bench_freshness.py`` (about 3-5 minutes on 2 cores; ``--sizes 20000`` for a
quick look).
"""

from __future__ import annotations

import argparse
import gc
import os
import resource
import shutil
import statistics
import subprocess
import tempfile
import time
import tracemalloc
from collections.abc import Callable

from freshness_magic.freshness.check import FreshnessTracker

FILE_BYTES = 4096
BEFORE_BYTES_PER_FILE = 800
"""Memory kept per tracked file by the earlier tracker, measured here (783 at 20k, 836 at 100k).
An "about 1 KB per file" estimate was the whole process's growth; this counts what the tracker
keeps (tracemalloc), so it is compared with its own earlier measurement."""
RACY_WAIT_S = 2.2
"""Longer than the racy window: a check after it trusts unchanged stat keys."""
GIT_ENV = dict(
    os.environ,
    GIT_AUTHOR_NAME="bench",
    GIT_AUTHOR_EMAIL="bench@example.invalid",
    GIT_COMMITTER_NAME="bench",
    GIT_COMMITTER_EMAIL="bench@example.invalid",
    GIT_CONFIG_GLOBAL=os.devnull,
    GIT_CONFIG_NOSYSTEM="1",
)
ENTRIES = {"all": ["**"]}
GOALS: list[tuple[str, bool]] = []


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
    """(median of ours, median of the reference, median of per-pair ratios), interleaved."""
    mine, refs, ratios = [], [], []
    for _ in range(repeat):
        if setup is not None:
            setup()
        a = timed(ours)
        if setup is not None:
            setup()
        b = timed(reference)
        mine.append(a)
        refs.append(b)
        ratios.append(a / b if b else float("inf"))
    return statistics.median(mine), statistics.median(refs), statistics.median(ratios)


def git(root: str, *args: str) -> bytes:
    return subprocess.run(
        ["git", "-C", root, *args], check=True, env=GIT_ENV, stdout=subprocess.PIPE
    ).stdout


def build_tree(root: str, count: int) -> list[str]:
    """``count`` files of random 4 KiB in folders of 50, committed to a fresh repository."""
    paths = []
    for i in range(count):
        rel = f"pkg{i // 1000:03d}/mod{(i // 50) % 20:02d}/f{i:06d}.dat"
        if i % 50 == 0:
            os.makedirs(os.path.join(root, os.path.dirname(rel)), exist_ok=True)
        with open(os.path.join(root, rel), "wb") as handle:
            handle.write(os.urandom(FILE_BYTES))
        paths.append(rel)
    git(root, "init", "-q")
    git(root, "config", "gc.auto", "0")  # no background repacking during the measurements
    with open(os.path.join(root, ".gitignore"), "w") as handle:
        handle.write(".freshness/\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "tree")
    git(root, "status", "--porcelain")  # refresh the index once, as a user's git would have
    with open(os.path.join(root, ".filelist"), "wb") as handle:
        handle.write(b"\0".join(os.path.join(root, p).encode() for p in paths))
    return paths


def xxhsum(root: str, cores: int) -> None:
    """Hash every file of the list with xxh3-128, on ``cores`` processes."""
    argv = ["xargs", "-0", "-a", os.path.join(root, ".filelist")]
    if cores > 1:
        argv += ["-P", str(cores), "-n", "2000"]
    subprocess.run(
        [*argv, "xxhsum", "-H2"], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )


def git_status(root: str) -> None:
    subprocess.run(
        ["git", "-C", root, "status", "--porcelain"], check=True, stdout=subprocess.DEVNULL
    )


def capture(root: str, *, with_git: bool) -> FreshnessTracker:
    tracker = FreshnessTracker(root, git=with_git)
    tracker.capture(ENTRIES)
    return tracker


def cores_used(root: str) -> int:
    """How many cores a capture as a run takes it kept busy: two when it started a process (git,
    whose CPU time shows in the children's usage) or handed stats to the stat worker."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    tracker = capture(root, with_git=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    children = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    worker = tracker.snapshotter.worker
    return 2 if children > 0 or (worker is not None and worker.pid is not None) else 1


def row(name: str, result: tuple[float, float, float], ref_name: str) -> float:
    ours, ref, ratio = result
    print(
        f"  {name:<40} {ours * 1000:9.1f} ms   {ref_name:<18} {ref * 1000:9.1f} ms"
        f"   ratio {ratio:5.2f}"
    )
    return ratio


def goal(text: str, met: bool) -> None:
    GOALS.append((text, met))
    print(f"  goal met: {'yes' if met else 'no'} -- {text}")


def memory_per_file(root: str, count: int) -> float:
    """Bytes a tracker keeps per file after a one-core capture (tracemalloc)."""
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    tracker = capture(root, with_git=False)
    gc.collect()
    kept = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    del tracker
    return kept / count


def bench_size(root: str, paths: list[str], repeat: int) -> None:
    count = len(paths)
    print(f"-- {count:,} files of {FILE_BYTES} bytes (medians of {repeat} interleaved pairs)")
    one = row(
        "capture, one core (no git)",
        paired(lambda: capture(root, with_git=False), lambda: xxhsum(root, 1), repeat),
        "xxhsum (1 core)",
    )
    goal(f"{count:,} files: one-core capture <= 1.0x xxhsum ({one:.2f}x)", one <= 1.0)
    cores = cores_used(root)
    as_run = row(
        "capture as a run takes it (git tree)",
        paired(lambda: capture(root, with_git=True), lambda: xxhsum(root, 1), repeat),
        "xxhsum (1 core)",
    )
    two = row(
        "capture as a run takes it (git tree)",
        paired(lambda: capture(root, with_git=True), lambda: xxhsum(root, 2), repeat),
        "xargs -P2 xxhsum",
    )
    print(f"  the capture as a run takes it used {cores} core{'s' if cores > 1 else ''}")
    if cores == 1:
        text = f"{count:,} files: capture as a run takes it, one core: <= 1.0x xxhsum"
        goal(f"{text} ({as_run:.2f}x)", as_run <= 1.0)
    else:
        text = f"{count:,} files: capture as a run takes it, two cores: <= 1.0x xargs -P2 xxhsum"
        goal(f"{text} ({two:.2f}x)", two <= 1.0)
    tracker = capture(root, with_git=True)
    time.sleep(RACY_WAIT_S)
    tracker.check("all")  # the first check re-hashes files captured inside the racy window
    step = max(1, count // 1000)
    for changed in (0, 1, 1000):
        targets = [os.path.join(root, p) for p in paths[::step][:changed]]
        counter = [0]

        def modify(targets: list[str] = targets, counter: list[int] = counter) -> None:
            counter[0] += 1
            stamp = counter[0].to_bytes(8, "little")
            for path in targets:
                with open(path, "r+b") as handle:
                    handle.write(stamp)

        def recheck(changed: int = changed) -> None:
            report = tracker.check("all")
            assert len(report.stale_files) == changed, (len(report.stale_files), changed)

        ratio = row(
            f"re-check, {changed} changed",
            paired(recheck, lambda: git_status(root), repeat, setup=modify if changed else None),
            "git status",
        )
        goal(f"{count:,} files, {changed} changed: re-check <= 2.0x git status", ratio <= 2.0)
        for path in targets:  # back to the committed content for the next case
            git(root, "checkout", "-q", "--", os.path.relpath(path, root))
        tracker.accept(["all"])
        time.sleep(RACY_WAIT_S)
        tracker.check("all")

    per_file = memory_per_file(root, count)
    half = BEFORE_BYTES_PER_FILE / 2
    print(f"  memory kept per tracked file: {per_file:.0f} bytes (before: {BEFORE_BYTES_PER_FILE})")
    text = f"{count:,} files: memory per file halved ({per_file:.0f} <= {half:.0f})"
    goal(text, per_file <= half)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="20000,100000", help="comma-separated file counts")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    if shutil.which("xxhsum") is None:
        raise SystemExit("xxhsum is not installed (apt-get install xxhash)")
    load = os.getloadavg()[0]
    print(f"load average at start: {load:.1f} on {os.cpu_count()} cores (noisy when above)")
    parent = "/dev/shm" if os.path.isdir("/dev/shm") else None
    top = tempfile.mkdtemp(prefix="bench-fresh-", dir=parent)
    try:
        trees = {}
        for size in (int(s) for s in args.sizes.split(",")):
            root = os.path.join(top, f"t{size}")
            os.makedirs(root)
            start = time.perf_counter()
            trees[size] = (root, build_tree(root, size))
            print(f"built {size:,} files in {root} ({time.perf_counter() - start:.1f} s)")
        for root, paths in trees.values():
            bench_size(root, paths, args.repeat)
    finally:
        shutil.rmtree(top, ignore_errors=True)
    print(f"-- summary (load average at the end: {os.getloadavg()[0]:.1f})")
    for text, met in GOALS:
        print(f"goal met: {'yes' if met else 'no'} -- {text}")


if __name__ == "__main__":
    main()
