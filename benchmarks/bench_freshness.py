"""Freshness speed and memory against xxhsum and git status.

Builds two git work trees of 4 KiB files (20,000 and 100,000 files; on tmpfs ``/dev/shm`` when it
exists, so the disk does not decide) once, then measures, as medians of interleaved repetitions
(ours, reference, ours, reference, ...) and as the median of the per-pair ratios:

- baseline capture, one core (``git=False``: no git at all)      vs  ``xxhsum`` on one core
- baseline capture as a run takes it, in the git work tree        vs  ``xxhsum`` on one core
  when it ran on one core (no git status beside it: checked), else ``xargs -P2 xxhsum``
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
baseline records) from the index too: only a short ``git rev-parse`` (HEAD's tree) runs,
before the files are looked at, so it uses one core and is held to the one-core line. Both
ratios are printed. The index pays off most where files are larger: 800 MB of tracked data
files are captured in 3 ms instead of 145 ms; "shortcuts on vs off" measures it against
hashing every file, back to back.

A re-check of these trees (one node tracking every file, so many files and the whole index) takes
the word of git's tree diff of the whole tree for the tracked files while a snapshot claims git's
index as it is now, and is a stat per file in this process otherwise (``check.VOUCHED_CHECK_FILES``,
``freshness/gitvouch.py``); the re-check after a checkout and an accept uses the accepted
baseline's claim. A stat worker process that took half of the stats was removed after this
benchmark measured it at 0.98x of none with both cores busy; docs/ARCHITECTURE.md says why.

``freshness-magic check RUN_DIR`` is measured as users call it (a subprocess, bytecode cached as
after an install), with 1,000 of the files changed, against ``git status``; the CLI's start-up
(``freshness-magic --version``) is measured in the same run and subtracted. The run starts once
the freshly built tree has settled (git's index written more than the racy window before), as a
repository is when someone runs a pipeline and then edits files: a check right after git wrote
its index cannot take git's word for any file and looks at every one (at 20,000 files about
40 ms more).

``--against REV`` measures the captures, the re-checks, the memory per file and the CLI's check
on this tree and on commit REV of this repository (``against.py``) in the same run: each tree has
its own copy of every work tree (both ``.freshness`` folders kept apart) and a long-lived worker
process importing its package; the two take turns at every repetition, in alternating order, and
their medians are printed side by side with the ratio (goal: at most 1.10x), of wall and of CPU
time (the process's and its children's, live ones included, such as a stat worker process an
older tree kept: on a loaded machine wall time follows the load).

Both file lists for xxhsum are prepared beforehand (``git ls-files``), so the reference does only
hashing. Every goal ends in a ``goal met: yes/no`` line. Run:
``python benchmarks/bench_freshness.py`` (about 3-5 minutes on 2 cores; ``--sizes 20000`` for a
quick look).

    python benchmarks/bench_freshness.py [--sizes 20000,100000] [--repeat 5]
        [--only all|shortcuts|cli] [--against REV]
"""

from __future__ import annotations

import argparse
import gc
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import against

from freshness_magic.freshness.check import FreshnessTracker
from freshness_magic.freshness.hashing import RACY_WINDOW_NS

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
    """How many cores a capture as a run takes it kept busy: two when git worked beside it (a
    ``git status``, whose CPU time shows in the children's usage, more than a tenth of the
    capture's time; the ``git rev-parse`` naming HEAD's tree takes a few ms before it)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    took = timed(lambda: capture(root, with_git=True))
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    children = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return 2 if children > took / 10 else 1


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


def without_index(tracker: FreshnessTracker) -> FreshnessTracker:
    """``tracker`` with git's index left unread (every file of a first capture is hashed)."""
    tracker.snapshotter._git_index = lambda keys, claim_before_ns: None  # type: ignore[method-assign]
    return tracker


def bench_shortcuts(root: str, paths: list[str], repeat: int) -> None:
    """The shortcut on against off, back to back: git's index read by hand at a first capture
    against hashing every file (with ``git status`` on the other core)."""
    count = len(paths)
    print(f"-- {count:,} files: shortcuts on vs off (medians of {repeat} interleaved pairs)")
    row(
        "capture (git tree), index read by hand",
        paired(
            lambda: capture(root, with_git=True),
            lambda: without_index(FreshnessTracker(root)).capture(ENTRIES),
            repeat,
        ),
        "files hashed",
    )


def bench_cli_check(root: str, paths: list[str], repeat: int) -> None:
    """``freshness-magic check RUN_DIR`` as users call it, 1,000 files changed, against ``git
    status``; the CLI's start-up (``freshness-magic --version``) is measured in the same run
    and subtracted."""
    count = len(paths)
    with open(os.path.join(root, "p.dot"), "w") as handle:
        handle.write(
            "digraph p { start [shape=Mdiamond]; done [shape=Msquare];\n"
            '  work [prompt="x", source_files="**", freshness="warn"];\n'
            "  start -> work -> done }\n"
        )
    cli = [sys.executable, "-m", "freshness_magic"]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    settle(root)
    subprocess.run([*cli, "run", "p.dot"], cwd=root, env=env, check=True, stdout=subprocess.DEVNULL)
    run_dir = os.path.join(
        root, ".freshness", "runs", os.listdir(os.path.join(root, ".freshness", "runs"))[0]
    )
    step = max(1, count // 1000)
    targets = [os.path.join(root, p) for p in paths[::step][:1000]]
    for path in targets:
        with open(path, "r+b") as handle:
            handle.write(b"changed!")

    def check() -> None:
        done = subprocess.run(
            [*cli, "check", run_dir], cwd=root, env=env, stdout=subprocess.DEVNULL
        )
        assert done.returncode == 1, done.returncode  # something stale

    def version() -> None:
        subprocess.run([*cli, "--version"], env=env, check=True, stdout=subprocess.DEVNULL)

    check()  # writes the bytecode of the modules a check imports, as an install would have
    checks, starts, gits, ratios = [], [], [], []
    for _ in range(repeat):
        a, s, g = timed(check), timed(version), timed(lambda: git_status(root))
        checks.append(a)
        starts.append(s)
        gits.append(g)
        ratios.append((a - s) / g)
    check_ms, start_ms, git_ms = (statistics.median(v) * 1000 for v in (checks, starts, gits))
    ratio = statistics.median(ratios)
    print(f"-- {count:,} files, {len(targets):,} changed: freshness-magic check RUN_DIR")
    print(
        f"  check {check_ms:.0f} ms, start-up (--version) {start_ms:.0f} ms, net "
        f"{check_ms - start_ms:.0f} ms; git status {git_ms:.0f} ms; ratio net/git {ratio:.2f}"
    )
    goal(
        f"{count:,} files, 1,000 changed: CLI check net of start-up <= 2.0x git status "
        f"({ratio:.2f}x)",
        ratio <= 2.0,
    )
    for path in targets:
        git(root, "checkout", "-q", "--", os.path.relpath(path, root))
    shutil.rmtree(os.path.join(root, ".freshness"), ignore_errors=True)


def settle(root: str) -> None:
    """Wait until git's index in ``root`` was written more than the racy window ago (a check
    trusts neither an index nor a folder changed within it)."""
    written = os.stat(os.path.join(root, ".git", "index")).st_mtime
    time.sleep(max(0.0, written + RACY_WINDOW_NS / 1e9 + 0.2 - time.time()))


def copy_tree(root: str, copy: str) -> str:
    """A copy of the git work tree ``root`` whose index is refreshed, as a user's would be."""
    subprocess.run(["cp", "-a", root, copy], check=True)
    git(copy, "status", "--porcelain")
    return copy


def serve_tree() -> None:
    """The worker of ``--against``: captures and checks on the package it imported, timed here
    (so the time is the tracker's own, not the worker protocol's)."""
    trackers: dict[str, FreshnessTracker] = {}

    def capture_time(root: str, with_git: bool) -> tuple[float, float]:
        clock = against.cpu_clock()  # before the wall clock: its look at /proc is not timed
        start = time.perf_counter()
        capture(root, with_git=with_git)
        took = time.perf_counter() - start
        return took, clock()

    def track(root: str) -> None:
        trackers[root] = capture(root, with_git=True)

    def check_time(root: str, expected: int) -> tuple[float, float]:
        clock = against.cpu_clock()
        start = time.perf_counter()
        report = trackers[root].check("all")
        took = time.perf_counter() - start
        cpu = clock()
        if len(report.stale_files) != expected:
            raise SystemExit(f"{root}: {len(report.stale_files)} stale files, not {expected}")
        return took, cpu

    def accept(root: str) -> None:
        trackers[root].accept(["all"])

    against.serve(
        {
            "capture": capture_time,
            "track": track,
            "check": check_time,
            "accept": accept,
            "memory": memory_per_file,
        }
    )


def compare_size(
    drivers: dict[str, against.Driver], copies: dict[str, str], paths: list[str], repeat: int
) -> None:
    """Captures, re-checks and memory per file of every tree in its own copy, taking turns."""
    count, labels = len(paths), list(drivers)
    trees = [driver.tree for driver in drivers.values()]
    print(f"-- {count:,} files (medians of {repeat} rounds, the trees alternating)")

    def both(
        name: str, ask: Callable[[str], tuple[float, float]], setup: Callable[[str], object]
    ) -> None:
        walls: dict[str, list[float]] = {label: [] for label in labels}
        cpus: dict[str, list[float]] = {label: [] for label in labels}
        for _, tree in against.rounds(trees, repeat):
            setup(tree.label)
            wall, cpu = ask(tree.label)
            walls[tree.label].append(wall * 1000)
            cpus[tree.label].append(cpu * 1000)
        against.verdict(name, *(against.median(walls[label]) for label in labels), labels)
        against.verdict("  CPU", *(against.median(cpus[label]) for label in labels), labels)

    def nothing(label: str) -> None:
        pass

    for with_git, name in ((False, "capture, one core (no git)"), (True, "capture as a run")):
        both(
            name,
            lambda label, with_git=with_git: drivers[label].ask("capture", copies[label], with_git),
            nothing,
        )
    for label in labels:
        drivers[label].ask("track", copies[label])
    time.sleep(RACY_WAIT_S)
    for label in labels:
        drivers[label].ask("check", copies[label], 0)  # re-hashes what the racy window held
    step = max(1, count // 1000)
    counter = [0]
    for changed in (0, 1, 1000):
        chosen = paths[::step][:changed]

        def modify(label: str, chosen: list[str] = chosen) -> None:
            counter[0] += 1
            stamp = counter[0].to_bytes(8, "little")
            for path in chosen:
                with open(os.path.join(copies[label], path), "r+b") as handle:
                    handle.write(stamp)

        both(
            f"re-check, {changed} changed",
            lambda label, changed=changed: drivers[label].ask("check", copies[label], changed),
            modify if changed else nothing,
        )
        for label in labels:
            for path in chosen:  # back to the committed content for the next case
                git(copies[label], "checkout", "-q", "--", path)
            drivers[label].ask("accept", copies[label])
        time.sleep(RACY_WAIT_S)
        for label in labels:
            drivers[label].ask("check", copies[label], 0)
    memory = [drivers[label].ask("memory", copies[label], count) for label in labels]
    against.verdict("memory kept per tracked file", *memory, labels, unit="B")


def compare_cli(
    trees: list[against.Tree], copies: dict[str, str], paths: list[str], repeat: int
) -> None:
    """``freshness-magic check RUN_DIR`` with 1,000 files changed, as users call it, each tree
    on a run it made in its own copy, taking turns; its start-up measured and subtracted."""
    count, labels = len(paths), [tree.label for tree in trees]
    step = max(1, count // 1000)
    runs: dict[str, str] = {}
    for tree in trees:
        settle(copies[tree.label])
    for tree in trees:
        root = copies[tree.label]
        runs[tree.label] = start_run(root, against.env_for(tree.src))
        for path in paths[::step][:1000]:
            with open(os.path.join(root, path), "r+b") as handle:
                handle.write(b"changed!")
    cli = [sys.executable, "-m", "freshness_magic"]

    def check(tree: against.Tree) -> tuple[float, float]:
        root = copies[tree.label]
        env = against.env_for(tree.src)
        start, cpu = time.perf_counter(), against.cpu_seconds()
        done = subprocess.run(
            [*cli, "check", runs[tree.label]], cwd=root, env=env, stdout=subprocess.DEVNULL
        )
        took, cpu = time.perf_counter() - start, against.cpu_seconds() - cpu
        if done.returncode != 1:  # something stale
            raise SystemExit(f"check on {tree.label} exited {done.returncode}, not 1 (stale)")
        return took, cpu

    def version(tree: against.Tree) -> tuple[float, float]:
        env = against.env_for(tree.src)
        start, cpu = time.perf_counter(), against.cpu_seconds()
        subprocess.run(
            [*cli, "--version"],
            cwd=tempfile.gettempdir(),
            env=env,
            check=True,
            stdout=subprocess.DEVNULL,
        )
        return time.perf_counter() - start, against.cpu_seconds() - cpu

    for tree in trees:
        check(tree)  # warm the file cache
    checks: dict[str, list[float]] = {label: [] for label in labels}
    nets: dict[str, list[float]] = {label: [] for label in labels}
    cpus: dict[str, list[float]] = {label: [] for label in labels}
    net_cpus: dict[str, list[float]] = {label: [] for label in labels}
    gits: list[float] = []
    for rep, tree in against.rounds(trees, repeat):
        (took, cpu), (start, start_cpu) = check(tree), version(tree)
        checks[tree.label].append(took * 1000)
        nets[tree.label].append((took - start) * 1000)
        cpus[tree.label].append(cpu * 1000)
        net_cpus[tree.label].append((cpu - start_cpu) * 1000)
        if tree is trees[-1 if rep % 2 == 0 else 0]:
            gits.append(timed(lambda: git_status(copies[labels[0]])) * 1000)
    print(f"-- {count:,} files, 1,000 changed: freshness-magic check RUN_DIR (medians of {repeat})")
    against.verdict("check (with start-up)", *(against.median(checks[x]) for x in labels), labels)
    against.verdict("check net of start-up", *(against.median(nets[x]) for x in labels), labels)
    against.verdict("check, CPU", *(against.median(cpus[x]) for x in labels), labels)
    against.verdict(
        "check net of start-up, CPU", *(against.median(net_cpus[x]) for x in labels), labels
    )
    git_ms = against.median(gits)
    mine = against.median(nets[labels[0]])
    print(f"  git status {git_ms:.0f} ms; current net / git status {mine / git_ms:.2f} (goal <= 2)")


def start_run(root: str, env: dict[str, str]) -> str:
    """Run the one-node pipeline tracking every file in ``root``; its run folder."""
    with open(os.path.join(root, "p.dot"), "w") as handle:
        handle.write(
            "digraph p { start [shape=Mdiamond]; done [shape=Msquare];\n"
            '  work [prompt="x", source_files="**", freshness="warn"];\n'
            "  start -> work -> done }\n"
        )
    runs = Path(root, ".freshness", "runs")
    before = set(runs.iterdir()) if runs.is_dir() else set()
    subprocess.run(
        [sys.executable, "-m", "freshness_magic", "run", "p.dot"],
        cwd=root,
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    (made,) = set(runs.iterdir()) - before
    return str(made)


def compare(rev: str, sizes: list[int], repeat: int, only: str) -> None:
    """Every size on this tree and on ``rev``, each in its own copy of the work tree."""
    print(f"{against.machine_load()}")
    parent = "/dev/shm" if os.path.isdir("/dev/shm") else None
    top = tempfile.mkdtemp(prefix="bench-fresh-", dir=parent)
    try:
        with against.trees(rev) as trees:
            drivers = {tree.label: against.Driver(__file__, tree) for tree in trees}
            try:
                for size in sizes:
                    root = os.path.join(top, f"t{size}")
                    os.makedirs(root)
                    paths = build_tree(root, size)
                    copies = {x: copy_tree(root, f"{root}-{x}") for x in drivers}
                    shutil.rmtree(root)
                    if only in ("all", "cli"):
                        compare_cli(trees, copies, paths, repeat)
                        for copy in copies.values():  # the run's changes and folder undone
                            git(copy, "checkout", "-q", "--", ".")
                            shutil.rmtree(os.path.join(copy, ".freshness"))
                            git_status(copy)
                    if only == "all":
                        compare_size(drivers, copies, paths, repeat)
                    for copy in copies.values():
                        shutil.rmtree(copy)
            finally:
                for driver in drivers.values():
                    driver.close()
    finally:
        shutil.rmtree(top, ignore_errors=True)
    print(f"at the end: {against.machine_load()}")


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "--serve":
        against.imported_from(sys.argv[2])
        serve_tree()
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="20000,100000", help="comma-separated file counts")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument(
        "--only", choices=("all", "shortcuts", "cli"), default="all", help="which part to run"
    )
    parser.add_argument(
        "--against", default=None, metavar="REV", help="compare with this commit (git archive)"
    )
    args = parser.parse_args()
    if args.against is not None:
        if args.only == "shortcuts":
            raise SystemExit("--against compares the captures, re-checks and CLI check, not this")
        compare(args.against, [int(s) for s in args.sizes.split(",")], args.repeat, args.only)
        return
    if args.only == "all" and shutil.which("xxhsum") is None:
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
            if args.only in ("all", "cli"):
                bench_cli_check(root, paths, args.repeat)
            if args.only in ("all", "shortcuts"):
                bench_shortcuts(root, paths, args.repeat)
            if args.only == "all":
                bench_size(root, paths, args.repeat)
    finally:
        shutil.rmtree(top, ignore_errors=True)
    print(f"-- summary (load average at the end: {os.getloadavg()[0]:.1f})")
    for text, met in GOALS:
        print(f"goal met: {'yes' if met else 'no'} -- {text}")


if __name__ == "__main__":
    main()
