"""Benchmark: command-line start-up (issue 15, goal 4).

Measures, as separate processes run interleaved (one of each per round, so load on the machine
hits all alike), the wall time of

- the reference: ``python -c "import json"`` with the same interpreter,
- ``freshness-magic --version``,
- ``freshness-magic validate tiny.dot`` (a four-node pipeline),
- for information, the standard-library modules ``validate`` cannot do without (``argparse``,
  ``json``, ``typing``, ``dataclasses`` with the ``inspect`` it imports, ``enum``, ``re``) in
  one ``python -c``: what is left of the 2x budget for our own modules,

and prints each median, the ratio to the reference and whether the goal (at most 2x) is met.
``freshness-magic`` is the console script next to this interpreter when there is one (what an
installed package runs), else ``python -m freshness_magic``.

The package's bytecode is compiled first (``compileall``, what ``pip install`` does), so both
sides load cached bytecode as the standard library does: with ``PYTHONDONTWRITEBYTECODE`` set
(as in some sandboxes) every run would otherwise compile our sources again, and the ratio would
measure the compiler.

    python benchmarks/bench_cli.py [--reps N]
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

import freshness_magic

GOAL = 2.0
VALIDATE_STDLIB = ("argparse", "json", "typing", "dataclasses", "enum", "re")
STDLIB_FLOOR = "python -c 'import <validate stdlib>'"
TINY = """digraph tiny {
  start [shape=Mdiamond]
  work  [prompt="do the work"]
  check [shape=parallelogram, tool_command="true"]
  done  [shape=Msquare]
  start -> work -> check -> done
}
"""


def program() -> list[str]:
    script = Path(sys.executable).with_name("freshness-magic")
    if script.is_file():
        return [str(script)]
    found = shutil.which("freshness-magic")
    return [found] if found else [sys.executable, "-m", "freshness_magic"]


def wall_time(command: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=30, help="rounds (default 30)")
    args = parser.parse_args()
    package = Path(freshness_magic.__file__).parent
    if not compileall.compile_dir(package, quiet=1):
        raise SystemExit(f"compiling the bytecode of {package} failed")
    with tempfile.TemporaryDirectory() as folder:
        tiny = Path(folder) / "tiny.dot"
        tiny.write_text(TINY)
        cases = {
            'python -c "import json"': [sys.executable, "-c", "import json"],
            "freshness-magic --version": [*program(), "--version"],
            "freshness-magic validate tiny.dot": [*program(), "validate", str(tiny)],
            STDLIB_FLOOR: [sys.executable, "-c", "import " + ", ".join(VALIDATE_STDLIB)],
        }
        for command in cases.values():  # warm the file cache; a failing command stops here
            wall_time(command)
        times: dict[str, list[float]] = {name: [] for name in cases}
        for _ in range(args.reps):
            for name, command in cases.items():
                times[name].append(wall_time(command))
    medians = {name: statistics.median(values) for name, values in times.items()}
    reference_name = next(iter(cases))
    reference = medians[reference_name]
    print(f"interleaved medians of {args.reps} rounds ({' '.join(program())})")
    met = True
    for name, value in medians.items():
        if name == reference_name:
            print(f"  {name:<36} {value * 1000:7.1f} ms  (reference)")
            continue
        ratio = value / reference
        if name == STDLIB_FLOOR:
            print(f"  {name:<36} {value * 1000:7.1f} ms  {ratio:4.2f}x (information: stdlib floor)")
            continue
        met = met and ratio <= GOAL
        print(f"  {name:<36} {value * 1000:7.1f} ms  {ratio:4.2f}x the reference")
    print(f"goal (each at most {GOAL:.0f}x the reference): goal met: {'yes' if met else 'no'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
