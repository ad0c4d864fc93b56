"""The ``RUN_DIR`` argument of ``status``, ``resume``, ``why``, ``check`` and ``evidence``.

A file or a folder that holds runs is refused as :mod:`freshness_magic.rundirs` says. ``status``
and ``check`` take RUN_DIR as optional: without it they read the newest run under the current
folder, as ``git status`` reads the repository it stands in, and say which run that is when
there are others.
"""

from __future__ import annotations

import sys
from pathlib import Path

from freshness_magic.errors import CheckpointError
from freshness_magic.rundirs import checked_run_dir, listed_runs, runs_under

RUN_DIR_HELP = (
    "the run directory (.freshness/runs/ID); default: the newest run under the current folder"
)


def run_dir_or_newest(given: str | None, command: str) -> Path:
    """The run directory ``given`` (checked as :func:`checked_run_dir` does), else the newest
    run under the current folder; when there are others, a note on stderr says which run
    ``command`` reads and names them."""
    from freshness_magic.commands import invoked_as

    if given is not None:
        return checked_run_dir(given)
    found = runs_under(Path("."))
    if not found:
        raise CheckpointError(
            f"no runs under {Path.cwd()} (none in .freshness/runs); pass RUN_DIR, or start "
            f"one: {invoked_as()} run PIPELINE.dot"
        )
    if len(found) > 1:
        print(
            f"{invoked_as()} {command}: reading {found[0]}, the newest of {len(found)} runs "
            f"here (others: {listed_runs(found[1:])})",
            file=sys.stderr,
        )
    return found[0]
