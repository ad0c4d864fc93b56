"""Bad input on the command line ends with one line on stderr and exit 2, never a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.processes import cli, one_line_error, waiting_run
from tests.test_cli_run import write

TINY = "digraph g { start [shape=Mdiamond]; done [shape=Msquare]; start -> done }\n"
GATE = """digraph review {
  start   [shape=Mdiamond]
  approve [shape=hexagon, label="Ship it?"]
  fix     [prompt="fix it"]
  done    [shape=Msquare]
  start -> approve
  approve -> done [label="[Y] Yes"]
  approve -> fix  [label="[N] No"]
  fix -> approve
}
"""


@pytest.mark.parametrize(
    ("option", "value", "needle"),
    [
        ("--workdir", "FILE", "--workdir FILE: is not a folder"),
        ("--runs-dir", "FILE", "--runs-dir FILE: is not a folder"),
        ("--runs-dir", "/proc/1", "--runs-dir /proc/1: cannot create folders there"),
        ("--workdir", "FILE/sub", "--workdir FILE/sub: no such folder"),
        ("--workdir", "nosuch", "--workdir nosuch: no such folder; give an existing folder"),
    ],
)
def test_unusable_folders_are_one_line_errors(
    tmp_path: Path, option: str, value: str, needle: str
) -> None:
    write(tmp_path, "p.dot", TINY)
    write(tmp_path, "FILE", "not a folder\n")
    before = sorted(tmp_path.rglob("*"))
    one_line_error(cli("run", "p.dot", option, value, cwd=tmp_path), needle)
    assert sorted(tmp_path.rglob("*")) == before  # nothing created


def test_parse_of_an_endless_device_is_refused(tmp_path: Path) -> None:
    one_line_error(cli("parse", "/dev/zero", cwd=tmp_path), "/dev/zero: larger than 16777216")


def test_a_linked_state_folder_is_a_one_line_error(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    work = tmp_path / "work"
    work.mkdir()
    (work / ".freshness").symlink_to(outside)
    write(work, "p.dot", TINY)
    one_line_error(cli("run", "p.dot", cwd=work), ".freshness is a symbolic link")
    assert list(outside.iterdir()) == []


def test_resume_with_an_answer_for_a_gate_that_is_not_waiting_is_an_error(
    tmp_path: Path,
) -> None:
    run_dir = str(waiting_run(tmp_path, GATE, "r.dot"))
    assert cli("resume", run_dir, "--answer", "approve=Y", cwd=tmp_path).returncode == 0
    again = cli("resume", run_dir, "--answer", "approve=N", cwd=tmp_path)
    assert again.returncode == 2
    assert "--answer approve=N not used: that gate was not waiting" in again.stderr
    assert "Traceback" not in again.stderr
