"""Processes the tests start and check: the command line in a new process, and process groups
(the tests that kill tools and workers)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``python -m freshness_magic ARGS`` in a new process, this checkout first on its path, no
    standard input."""
    return _cli([], args, cwd)


def _cli(prefix: list[str], args: tuple[str, ...], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*prefix, sys.executable, "-m", "freshness_magic", *args],
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )


def cli_without_privilege(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """:func:`cli` bound by file permissions as a user is: root gives up the capabilities that
    let it read and write any file (``setpriv``, from util-linux); any other user already is."""
    prefix: list[str] = []
    if os.geteuid() == 0:
        caps = "-dac_override,-dac_read_search"
        prefix = ["setpriv", "--bounding-set", caps, "--inh-caps", caps]
    return _cli(prefix, args, cwd)


def group_alive(pgid: int) -> bool:
    """Whether any process of group ``pgid`` still exists."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True
