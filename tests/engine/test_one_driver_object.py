"""Two objects of one process on one run directory: the one that opened it last drives it.

The driver lock is shared within a process, so a notebook's pipeline object that a ``del`` had
only hidden answered a gate a second time on a run a newer load had already finished: the
journal got records of both, out of order, and the run's readers disagreed. An older object is
now refused before it acts, and the run on disk stays as the newer one left it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from freshness_magic.engine import RunState
from freshness_magic.errors import RunError
from freshness_magic.session import open_run, resume_run
from tests.pipelines import gate_to_tools

GATE = gate_to_tools(
    "Go?",
    {"[Y] Yes": ("yes", "echo yes >> said.txt"), "[N] No": ("no", "echo no >> said.txt")},
)


def state_files(run_dir: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(run_dir.iterdir()) if p.is_file()}


def test_an_older_object_is_refused_once_a_newer_one_opened_the_run(tmp_path: Path) -> None:
    older = open_run(GATE, workdir=tmp_path)
    assert older.run().state is RunState.WAITING
    newer = resume_run(older.run_dir)
    newer.answer("ask", "Y")
    assert newer.run().state is RunState.COMPLETED
    left = state_files(Path(older.run_dir))

    for act in (lambda: older.answer("ask", "N"), older.step, older.run, older.retry):
        with pytest.raises(RunError, match="opened again in this process"):
            act()
    assert state_files(Path(older.run_dir)) == left
    assert (tmp_path / "said.txt").read_text() == "yes\n"
    newer.close()
    older.close()


def test_the_newest_object_drives_even_while_an_older_one_lives(tmp_path: Path) -> None:
    first = open_run(GATE, workdir=tmp_path)
    first.run()
    second = resume_run(first.run_dir)
    third = resume_run(first.run_dir)
    with pytest.raises(RunError, match="a newer load or resume of it drives it now"):
        second.answer("ask", "N")
    assert third.answer("ask", "N").state is RunState.PAUSED  # answered; the run goes on next
    for run in (first, second, third):
        run.close()


def test_a_closed_run_is_refused_and_a_newer_driver_keeps_the_journal_whole(
    tmp_path: Path,
) -> None:
    """A script trial: `close()` let go of the lock, yet the object still stepped (and, with
    another process driving, both wrote the same event numbers)."""
    with open_run(GATE, workdir=tmp_path) as first:
        first.run()
    newer = resume_run(first.run_dir)
    left = state_files(Path(first.run_dir))
    for act in (lambda: first.answer("ask", "N"), first.step, first.run, first.retry):
        with pytest.raises(RunError, match=r"was closed .*resume it \(resume_run\("):
            act()
    assert state_files(Path(first.run_dir)) == left
    assert not (tmp_path / "said.txt").exists()
    newer.answer("ask", "Y")
    assert newer.run().state is RunState.COMPLETED
    newer.close()
    with pytest.raises(RunError, match="was closed"):
        newer.step()
