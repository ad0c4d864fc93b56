"""Measuring this tree against an earlier commit of the repository, in the same run.

The benchmarks' ``--against REV`` share this: the commit is checked out into a temporary folder
(``git archive``, so the work tree and its uncommitted changes are left alone), each tree's
package is compiled to bytecode (as ``pip install`` does; without it a tree whose bytecode is not
cached would be measured compiling), and the work is done in fresh processes that import the
package from one tree (its folder first on ``sys.path``), the trees taking turns in alternating
order (current, REV, REV, current, ...) so that load from the rest of the machine hits both alike.

A benchmark whose API changed between the two trees drives each tree through what that tree
offers, in its worker: the worker is this benchmark's own script, run with the tree's folder
first on ``sys.path``, which imports whichever names the tree has. :func:`imported_from` checks
that a worker measures the tree it was given (an editable install or the current folder on
``sys.path`` would otherwise silently win).
"""

from __future__ import annotations

import compileall
import contextlib
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

REPO = Path(__file__).resolve().parents[1]
LIMIT = 1.10
"""The most a benchmark's number may grow from the earlier commit (current : earlier)."""


@dataclass(frozen=True)
class Tree:
    """A source tree to measure: its label in the output and the folder holding the package."""

    label: str
    src: Path


def checkout(rev: str, folder: Path, repo: Path = REPO) -> Path:
    """Commit ``rev`` of ``repo`` (this repository) extracted into ``folder``, its bytecode
    compiled."""
    archive = subprocess.run(
        ["git", "-C", str(repo), "archive", "--format=tar", rev], capture_output=True, check=False
    )
    if archive.returncode != 0:
        message = archive.stderr.decode(errors="replace").strip()
        raise SystemExit(f"--against {rev}: git archive failed ({message}); name a commit")
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive.stdout, check=True)
    compile_tree(folder)
    return folder


def compile_tree(src: Path) -> None:
    """Compile the package of ``src`` to bytecode, as an install does."""
    package = src / "freshness_magic"
    if not compileall.compile_dir(package, quiet=1):
        raise SystemExit(f"compiling the bytecode of {package} failed")


@contextlib.contextmanager
def trees(rev: str | None, repo: Path = REPO) -> Iterator[list[Tree]]:
    """The tree of ``repo`` (this checkout), then (with ``rev``) that commit's tree, for as long
    as the block runs."""
    compile_tree(repo)
    current = Tree("current", repo)
    if rev is None:
        yield [current]
        return
    with tempfile.TemporaryDirectory(prefix="bench-against-") as folder:
        yield [current, Tree(rev[:9], checkout(rev, Path(folder), repo))]


def rounds(items: Sequence[Tree], reps: int) -> Iterator[tuple[int, Tree]]:
    """(round, tree) for ``reps`` rounds, the order reversed every other round."""
    for rep in range(reps):
        for tree in items if rep % 2 == 0 else list(reversed(items)):
            yield rep, tree


def env_for(src: Path) -> dict[str, str]:
    """The environment of a process importing the package from ``src`` (cached bytecode)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = os.pathsep.join([str(src), *filter(None, [env.get("PYTHONPATH")])])
    return env


def imported_from(src: str | os.PathLike[str]) -> None:
    """In a worker: stop unless the package was imported from ``src``."""
    try:
        import freshness_magic
    except ImportError as error:
        raise SystemExit(f"the worker found no package under {src}: {error}") from None

    where = Path(freshness_magic.__file__).resolve()
    if not where.is_relative_to(Path(src).resolve()):
        raise SystemExit(f"the worker imported {where}, not the tree under {src}")


def run_worker(script: str, tree: Tree, *args: str, cwd: Path | None = None) -> Any:
    """Run ``script`` with ``--worker SRC *args`` on ``tree`` in a fresh process; the JSON
    value its last line of output holds."""
    proc = subprocess.run(
        [sys.executable, script, "--worker", str(tree.src), *args],
        env=env_for(tree.src),
        cwd=cwd or tempfile.gettempdir(),
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        raise SystemExit(
            f"{Path(script).name} {' '.join(args)} on {tree.label} failed:\n{proc.stderr[-3000:]}"
        )
    return json.loads(proc.stdout.splitlines()[-1])


class Driver:
    """A long-lived worker on one tree, asked to do one thing at a time (one JSON line each
    way), so the trees can take turns at a fine grain without paying for a start-up each."""

    def __init__(self, script: str, tree: Tree, *args: str) -> None:
        self.tree = tree
        self.process = subprocess.Popen(
            [sys.executable, script, "--serve", str(tree.src), *args],
            env=env_for(tree.src),
            cwd=tempfile.gettempdir(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def ask(self, command: str, *args: Any) -> Any:
        """Send ``command`` with ``args``; its answer."""
        stdin, stdout = self.process.stdin, self.process.stdout
        assert stdin is not None and stdout is not None
        stdin.write(json.dumps([command, *args]) + "\n")
        stdin.flush()
        line = stdout.readline()
        if not line:
            code = self.process.wait()
            raise SystemExit(f"the worker on {self.tree.label} ended (exit {code}) at {command}")
        return json.loads(line)

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        self.process.wait(timeout=60)


def serve(handlers: dict[str, Any], stdin: IO[str] = sys.stdin, out: IO[str] = sys.stdout) -> None:
    """The worker side of :class:`Driver`: answer each command line until the input ends."""
    for line in stdin:
        command, *args = json.loads(line)
        out.write(json.dumps(handlers[command](*args)) + "\n")
        out.flush()


def verdict(
    name: str, mine: float, theirs: float, labels: Sequence[str], unit: str = "ms"
) -> float:
    """Print one number of both trees and their ratio against the limit; the ratio."""
    ratio = mine / theirs if theirs else float("inf")
    ok = "yes" if ratio <= LIMIT else "NO"
    current, earlier = labels
    print(
        f"  {name:<46} {current} {mine:9.2f} {unit}  {earlier} {theirs:9.2f} {unit}  "
        f"ratio {ratio:5.2f}  (<= {LIMIT:.2f}: {ok})"
    )
    return ratio


def cpu_seconds() -> float:
    """CPU time of this process and its reaped children: on a loaded machine a process waits for
    a core, so wall time grows with the load while CPU time mostly does not."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def cpu_clock() -> Callable[[], float]:
    """Start a CPU clock of this process and all its descendants: the returned function gives the
    CPU seconds used since, counting live helper processes too (a long-lived worker process is
    not in :func:`cpu_seconds` until it ends and is reaped). The look at ``/proc`` that finds
    them is left out of the count: it runs before the start and after the end is read."""
    live = _descendants_cpu()
    start = cpu_seconds()

    def elapsed() -> float:
        end = cpu_seconds()
        return end - start + _descendants_cpu() - live

    return elapsed


def _descendants_cpu() -> float:
    """CPU seconds of the live descendants of this process, every thread, from ``/proc`` (0
    where there is no ``/proc``)."""
    children: dict[int, list[int]] = {}
    try:
        pids = [int(name) for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return 0.0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat", "rb") as handle:
                stat = handle.read()
        except OSError:
            continue
        parent = int(stat[stat.rindex(b")") + 2 :].split()[1])
        children.setdefault(parent, []).append(pid)
    total_ns = 0
    todo = list(children.get(os.getpid(), ()))
    while todo:
        pid = todo.pop()
        todo.extend(children.get(pid, ()))
        try:
            threads = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for thread in threads:
            try:
                with open(f"/proc/{pid}/task/{thread}/schedstat", "rb") as handle:
                    total_ns += int(handle.read().split()[0])
            except (OSError, ValueError, IndexError):
                continue
    return total_ns / 1e9


def median(values: Sequence[float]) -> float:
    return float(statistics.median(values))


def machine_load() -> str:
    """The load averages (1, 5, 15 minutes) and the core count, for the record."""
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.1f} {five:.1f} {fifteen:.1f} on {os.cpu_count()} cores"
