"""The benchmarks' ``--against REV`` plumbing (``benchmarks/against.py``): an earlier commit is
checked out beside the current tree and each worker imports the package of the tree it was given.
Runs on a small git repository of its own holding a stand-in package; measures nothing."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
spec = importlib.util.spec_from_file_location("bench_against", BENCHMARKS / "against.py")
assert spec is not None and spec.loader is not None
against = sys.modules.setdefault("bench_against", importlib.util.module_from_spec(spec))
spec.loader.exec_module(against)

WORKER = f"""
import json, sys
sys.path.insert(0, {str(BENCHMARKS)!r})
import against
against.imported_from(sys.argv[2])
import freshness_magic
if sys.argv[1] == "--worker":
    print("noise before the answer")
    print(json.dumps([freshness_magic.VERSION, sys.argv[3:]]))
else:
    against.serve({{"version": lambda: freshness_magic.VERSION, "add": lambda a, b: a + b}})
"""


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.invalid", *args],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()


@pytest.fixture
def repo(tmp_path: Path) -> tuple[Path, str]:
    """A repository whose stand-in package says "old" at its first commit and "new" now."""
    root = tmp_path / "repo"
    (root / "freshness_magic").mkdir(parents=True)
    package = root / "freshness_magic" / "__init__.py"
    git(root, "init", "-q")
    package.write_text('VERSION = "old"\n')
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "old")
    first = git(root, "rev-parse", "HEAD")
    package.write_text('VERSION = "new"\n')
    git(root, "commit", "-q", "-am", "new")
    return root, first


def test_each_worker_measures_the_tree_it_was_given(repo: tuple[Path, str], tmp_path: Path) -> None:
    root, first = repo
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    with against.trees(first, root) as trees:
        assert [tree.label for tree in trees] == ["current", first[:9]]
        earlier = trees[1].src
        assert list((earlier / "freshness_magic" / "__pycache__").glob("__init__.*.pyc"))
        answers = [against.run_worker(str(script), tree, "a", "b") for tree in trees]
        assert answers == [["new", ["a", "b"]], ["old", ["a", "b"]]]
        drivers = [against.Driver(str(script), tree) for tree in trees]
        assert [driver.ask("version") for driver in drivers] == ["new", "old"]
        assert drivers[1].ask("add", 2, 3) == 5
        for driver in drivers:
            driver.close()
    assert not earlier.exists()


def test_a_worker_that_imported_another_tree_stops(repo: tuple[Path, str], tmp_path: Path) -> None:
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(SystemExit, match=r"imported .*, not the tree under"):
        against.run_worker(str(script), against.Tree("empty", empty))


def test_an_unknown_commit_is_named_in_the_error(repo: tuple[Path, str], tmp_path: Path) -> None:
    root, _ = repo
    with pytest.raises(SystemExit, match="--against nosuchrev: git archive failed"):
        against.checkout("nosuchrev", tmp_path, root)


def test_rounds_alternate_the_order_of_the_trees(tmp_path: Path) -> None:
    a, b = against.Tree("a", tmp_path), against.Tree("b", tmp_path)
    order = [(rep, tree.label) for rep, tree in against.rounds([a, b], 3)]
    assert order == [(0, "a"), (0, "b"), (1, "b"), (1, "a"), (2, "a"), (2, "b")]


def test_workers_load_cached_bytecode(tmp_path: Path) -> None:
    env = against.env_for(tmp_path)
    assert "PYTHONDONTWRITEBYTECODE" not in env
    assert env["PYTHONPATH"].split(os.pathsep)[0] == str(tmp_path)
