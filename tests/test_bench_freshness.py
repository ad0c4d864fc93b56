"""``benchmarks/bench_freshness.py`` patches the tracker to measure a shortcut against going
without it: the patch must still fit the code it replaces (a benchmark that stops at a
``TypeError`` hides every goal line printed after it). Measures nothing."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from freshness_magic.freshness.check import FreshnessTracker
from tests.gitrepo import git_repo

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def test_capture_without_git_s_index_hashes_every_file(tmp_path: Path) -> None:
    sys.path.insert(0, str(BENCHMARKS))  # the benchmark imports its neighbour against.py
    try:
        spec = importlib.util.spec_from_file_location(
            "bench_freshness", BENCHMARKS / "bench_freshness.py"
        )
        assert spec is not None and spec.loader is not None
        bench = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(bench)
    finally:
        sys.path.remove(str(BENCHMARKS))
    repo = git_repo(tmp_path / "repo", {f"f{i}.txt": f"{i}\n" for i in range(5)}, "init")
    with_index = FreshnessTracker(repo).capture({"n": ["*.txt"]})["n"]
    without = bench.without_index(FreshnessTracker(repo)).capture({"n": ["*.txt"]})["n"]
    assert all(record.blob for record in with_index.files.values())  # taken from the index
    assert not any(record.blob for record in without.files.values())  # every file hashed
