"""Benchmark: command-line start-up.

Measures, as separate processes run interleaved (one of each per round, so load on the machine
hits all alike), the wall time of

- the reference: ``python -c "import json"`` with the same interpreter,
- ``freshness-magic --version``,
- ``freshness-magic validate tiny.dot`` (a four-node pipeline),
- for information, ``validate`` of the quickstart pipeline (a gate, edge labels and freshness
  attributes: the lint rules those load), and the standard-library modules ``validate`` cannot
  do without (``argparse``, ``json``, ``enum``, ``re``) in one ``python -c``: what is left of the
  3x budget for our own modules and the rest of the standard library they use,

and prints each median, the ratio to the reference and whether the goal (at most 3x) is met.

Each is measured in two installs, as their users start them:

- **this environment** (the console script next to this interpreter, else ``python -m
  freshness_magic``): for a checkout this is the editable install ``make setup`` makes, whose
  import hook loads ``pathlib``, ``re`` and ``enum`` into every process at start-up, the
  reference's included;
- **a regular install**: a wheel built from this checkout and installed without dependencies
  (neither needs one) into a new virtual environment, offline, as ``pip install`` gives users.
  Skipped when the package does not come from a checkout (then the first one is that install).

The package's bytecode is compiled first (``compileall``, what ``pip install`` does), so both
sides load cached bytecode as the standard library does: with ``PYTHONDONTWRITEBYTECODE`` set
(as in some sandboxes) every run would otherwise compile our sources again, and the ratio would
measure the compiler.

``--against REV`` measures the same in both installs for this tree and for commit REV of this
repository (``against.py``): the console script of this environment with each tree first on
``sys.path``, and a regular install of each tree's wheel; all commands of both trees take turns in
every round, in alternating order. Per command it prints both medians and their ratio, of wall
time and of CPU time (the child's user and system time, which the load on the machine changes
less): start-up may grow while it stays within the goal (at most 3x the reference).

    python benchmarks/bench_cli.py [--reps N] [--against REV]
"""

from __future__ import annotations

import argparse
import compileall
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import against

import freshness_magic

GOAL = 3.0
VALIDATE_STDLIB = ("argparse", "json", "enum", "re")
PIP_WHEEL = (sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w")
REFERENCE = 'python -c "import json"'
STDLIB_FLOOR = "python -c 'import <validate stdlib>'"
QUICKSTART = "freshness-magic validate quickstart.dot"
QUICKSTART_DOT = Path(__file__).resolve().parent.parent / "examples" / "quickstart.dot"
INFORMATION = {STDLIB_FLOOR: "stdlib floor", QUICKSTART: "not in the goal"}
TINY = """digraph tiny {
  start [shape=Mdiamond]
  work  [prompt="do the work"]
  check [shape=parallelogram, tool_command="true"]
  done  [shape=Msquare]
  start -> work -> check -> done
}
"""


def program(python: Path) -> list[str]:
    script = python.with_name("freshness-magic")
    if script.is_file():
        return [str(script)]
    found = shutil.which("freshness-magic") if python == Path(sys.executable) else None
    return [found] if found else [str(python), "-m", "freshness_magic"]


def cases(python: Path, tiny: Path, quickstart: Path) -> dict[str, list[str]]:
    return {
        REFERENCE: [str(python), "-c", "import json"],
        "freshness-magic --version": [*program(python), "--version"],
        "freshness-magic validate tiny.dot": [*program(python), "validate", str(tiny)],
        QUICKSTART: [*program(python), "validate", str(quickstart)],
        STDLIB_FLOOR: [str(python), "-c", "import " + ", ".join(VALIDATE_STDLIB)],
    }


def checkout() -> Path | None:
    """The source checkout the package is imported from, if it is one."""
    root = Path(freshness_magic.__file__).resolve().parent.parent
    return root if (root / "pyproject.toml").is_file() else None


def regular_install(source: Path, folder: Path) -> Path:
    """A new virtual environment with a wheel of ``source`` installed; its Python."""
    wheels, env = folder / "wheels", folder / "env"
    subprocess.run(
        [*PIP_WHEEL, str(wheels), str(source)],
        stdout=subprocess.DEVNULL,
        check=True,
    )
    subprocess.run([sys.executable, "-m", "venv", str(env)], stdout=subprocess.DEVNULL, check=True)
    python = env / "bin" / "python"
    subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "--no-deps", "--no-index"]
        + [str(wheel) for wheel in wheels.glob("*.whl")],
        stdout=subprocess.DEVNULL,
        check=True,
    )
    subprocess.run([str(python), "-m", "compileall", "-q", str(env / "lib")], check=True)
    return python


def wall_time(command: list[str], env: dict[str, str] | None = None) -> float:
    start = time.perf_counter()
    subprocess.run(
        command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True, env=env
    )
    return time.perf_counter() - start


def timed_run(command: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU seconds (the child's user and system time) of one command."""
    cpu = against.cpu_seconds()
    wall = wall_time(command, env)
    return wall, against.cpu_seconds() - cpu


def compare(rev: str, reps: int) -> None:
    """Every command of both installs for this tree and for ``rev``, taking turns each round."""
    print(against.machine_load())
    with against.trees(rev) as trees, tempfile.TemporaryDirectory() as folder:
        tiny, quickstart = Path(folder) / "tiny.dot", Path(folder) / "quickstart.dot"
        tiny.write_text(TINY)
        quickstart.write_text(QUICKSTART_DOT.read_text())
        here = Path(sys.executable)
        plain = {k: v for k, v in against.env_for(Path(folder)).items() if k != "PYTHONPATH"}
        installs: dict[tuple[str, str], tuple[dict[str, list[str]], dict[str, str]]] = {}
        for tree in trees:
            installs["this environment, tree first on sys.path", tree.label] = (
                cases(here, tiny, quickstart),
                against.env_for(tree.src),
            )
            built = regular_install(tree.src, Path(folder) / tree.label)
            installs["a regular install (wheel, new venv)", tree.label] = (
                cases(built, tiny, quickstart),
                plain,
            )
        for each, env in installs.values():  # warm the file cache; a failing command stops here
            for command in each.values():
                wall_time(command, env)
        times: dict[tuple[str, str, str], list[float]] = {
            (kind, label, name): []
            for (kind, label), (each, _) in installs.items()
            for name in each
        }
        cpus: dict[tuple[str, str, str], list[float]] = {key: [] for key in times}
        order = list(installs)
        for rep in range(reps):
            for kind, label in order if rep % 2 == 0 else order[::-1]:
                each, env = installs[kind, label]
                for name, command in each.items():
                    wall, cpu = timed_run(command, env)
                    times[kind, label, name].append(wall * 1000)
                    cpus[kind, label, name].append(cpu * 1000)
        labels = [tree.label for tree in trees]
    print(f"interleaved medians of {reps} rounds, ms")
    met = True
    for kind in dict.fromkeys(kind for kind, _ in installs):
        print(kind)
        names = list(installs[kind, labels[0]][0])
        for name in names:
            mine, theirs = (against.median(times[kind, label, name]) for label in labels)
            against.verdict(name, mine, theirs, labels)
            mine, theirs = (against.median(cpus[kind, label, name]) for label in labels)
            against.verdict("  CPU", mine, theirs, labels)
        reference = against.median(times[kind, labels[0], REFERENCE])
        for name in names:
            if name == REFERENCE or name in INFORMATION:
                continue
            ratio = against.median(times[kind, labels[0], name]) / reference
            met = met and ratio <= GOAL
            print(f"  {labels[0]} {name}: {ratio:.2f}x the reference (goal <= {GOAL:.0f}x)")
    print(
        f"start-up within {GOAL:.0f}x the reference in both installs: goal met: "
        f"{'yes' if met else 'no'}"
    )
    print(f"at the end: {against.machine_load()}")


def report(title: str, medians: dict[str, float]) -> bool:
    """Print one install's medians and ratios; whether both commands met the goal."""
    reference = medians[REFERENCE]
    print(title)
    met = True
    for name, value in medians.items():
        if name == REFERENCE:
            print(f"  {name:<40} {value * 1000:7.1f} ms  (reference)")
            continue
        ratio = value / reference
        if name in INFORMATION:
            print(
                f"  {name:<40} {value * 1000:7.1f} ms  {ratio:4.2f}x "
                f"(information: {INFORMATION[name]})"
            )
            continue
        met = met and ratio <= GOAL
        print(f"  {name:<40} {value * 1000:7.1f} ms  {ratio:4.2f}x the reference")
    print(f"  each at most {GOAL:.0f}x the reference: {'yes' if met else 'no'}")
    return met


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=30, help="rounds (default 30)")
    parser.add_argument(
        "--against", default=None, metavar="REV", help="compare with this commit (git archive)"
    )
    args = parser.parse_args()
    if args.against is not None:
        compare(args.against, args.reps)
        return 0
    package = Path(freshness_magic.__file__).parent
    if not compileall.compile_dir(package, quiet=1):
        raise SystemExit(f"compiling the bytecode of {package} failed")
    with tempfile.TemporaryDirectory() as folder:
        tiny, quickstart = Path(folder) / "tiny.dot", Path(folder) / "quickstart.dot"
        tiny.write_text(TINY)
        quickstart.write_text(QUICKSTART_DOT.read_text())
        here = Path(sys.executable)
        installs = {f"this environment ({' '.join(program(here))})": cases(here, tiny, quickstart)}
        source = checkout()
        if source is not None:
            built = regular_install(source, Path(folder))
            installs[f"a regular install (wheel of {source.name}, new venv)"] = cases(
                built, tiny, quickstart
            )
        commands = [command for each in installs.values() for command in each.values()]
        for command in commands:  # warm the file cache; a failing command stops here
            wall_time(command)
        times: dict[tuple[str, str], list[float]] = {
            (title, name): [] for title, each in installs.items() for name in each
        }
        for _ in range(args.reps):
            for title, each in installs.items():
                for name, command in each.items():
                    times[title, name].append(wall_time(command))
    print(f"interleaved medians of {args.reps} rounds")
    met = True
    for title, each in installs.items():
        medians = {name: statistics.median(times[title, name]) for name in each}
        met = report(title, medians) and met
    print(
        f"goal (each at most {GOAL:.0f}x the reference, in every install): "
        f"goal met: {'yes' if met else 'no'}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
