"""Telling a run directory from its near misses: a file, and a folder that holds runs.

A run directory is ``WORKDIR/.freshness/runs/<run_id>``. Two near misses are common and the
engine's "no usable checkpoint" would mislead on both: a FILE given as the run directory, and a
folder that holds runs rather than being one (the working directory, its ``.freshness`` or
``.freshness/runs``). The latter could make a user start again and abandon a run that waits at a
gate, so it is said plainly, with the newest runs and their states to pick from. The CLI's
``RUN_DIR`` arguments and :func:`freshness_magic.session.resume_run` are checked here.
"""

from __future__ import annotations

from pathlib import Path

from freshness_magic.errors import CheckpointError

SHOWN_RUNS = 3
"""How many of the newest runs the error lists."""

RUN_DIR_IS = "a run directory is .freshness/runs/<run_id> under the working directory the run used"


def checked_run_dir(given: str | Path) -> Path:
    """``given`` as a path, after refusing a file and a folder that holds runs (CheckpointError,
    one line). Anything else (a run directory, a missing or damaged one) is left to the reader
    of the run, which says what is wrong with it."""
    from freshness_magic.engine.runread import has_state

    path = Path(given)
    if path.exists() and not path.is_dir():
        raise CheckpointError(f"{path} is a file, not a run directory; {RUN_DIR_IS}")
    if not path.is_dir() or has_state(path):
        return path
    found = runs_under(path)
    if found:
        raise CheckpointError(
            f"{path} holds runs, not one run: pass one of them (newest first): {listed_runs(found)}"
        )
    return path


def listed_runs(runs: list[Path]) -> str:
    """``RUN (state), RUN (state), and 2 older``: the first :data:`SHOWN_RUNS` of ``runs``."""
    shown = ", ".join(f"{run} ({run_state(run)})" for run in runs[:SHOWN_RUNS])
    return shown + (f", and {len(runs) - SHOWN_RUNS} older" if len(runs) > SHOWN_RUNS else "")


def runs_under(path: Path) -> list[Path]:
    """The run directories (with saved state) in ``path`` taken as a working directory, its
    ``.freshness`` or a runs folder, newest first (by their last saved state); [] for none."""
    from freshness_magic.engine.runread import last_written_ns

    for root in (path / ".freshness" / "runs", path / "runs", path):
        try:
            folders = [sub for sub in root.iterdir() if sub.is_dir() and not sub.is_symlink()]
        except OSError:
            continue
        stamped = [(stamp, sub) for sub in folders if (stamp := last_written_ns(sub)) is not None]
        if stamped:
            return [sub for _, sub in sorted(stamped, key=lambda item: item[0], reverse=True)]
    return []


def run_state(run_dir: Path) -> str:
    """A run's state in a few words: ``waiting at gate 'approve'``, ``failed at 'lint'``,
    ``paused before 'draft'``, ``completed``; ``unreadable`` when no checkpoint loads."""
    from freshness_magic.engine.checkpoint import load_checkpoint
    from freshness_magic.errors import FreshnessMagicError

    try:
        data, _ = load_checkpoint(run_dir)
    except (FreshnessMagicError, OSError, ValueError):
        return "unreadable"
    state = str(data.get("state") or "unknown")
    gate = data.get("pending_gate")
    if state == "waiting" and isinstance(gate, dict) and gate.get("node"):
        return f"waiting at gate '{gate['node']}'"
    if state == "failed" and data.get("failed_node"):
        return f"failed at '{data['failed_node']}'"
    if state == "paused" and data.get("next_node"):
        return f"paused before '{data['next_node']}'"
    return state
