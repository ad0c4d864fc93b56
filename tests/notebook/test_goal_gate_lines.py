"""An unsatisfied goal gate sends the run back: the CLI's progress and the notebook's step line
say which gate and where to (a trial found the redirect silent in the magics, and the CLI named
the node that happened to route, not the gate)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from IPython.core.interactiveshell import InteractiveShell

REPO = Path(__file__).resolve().parents[2]

GATED = """digraph gg {
  start [shape=Mdiamond]
  tests [shape=parallelogram, tool_command="test -f ok.txt", goal_gate=true, retry_target=fixup]
  fixup [shape=parallelogram, tool_command="touch ok.txt"]
  notes [prompt="notes"]
  done  [shape=Msquare]
  start -> tests
  tests -> notes [condition="outcome=fail"]
  tests -> notes
  fixup -> tests
  notes -> done
}
"""

WHY = (
    "goal gate 'tests' is unsatisfied (last outcome fail), so the run goes back to retry_target "
    "of 'tests' 'fixup' (redirect 1 of 10)"
)


def test_the_cli_names_the_gate_and_where_the_run_goes(tmp_path: Path) -> None:
    (tmp_path / "gg.dot").write_text(GATED)
    proc = subprocess.run(
        [sys.executable, "-m", "freshness_magic", "run", "gg.dot"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    goal = [line for line in lines if line.startswith("  goal")]
    assert goal == [
        f"  {'goal':<7} {'tests':<24} {'':8}  unsatisfied; the run goes back to fixup "
        "(redirect 1 of 10)"
    ]
    assert lines[lines.index(goal[0]) + 1].split()[:2] == ["ok", "fixup"]


def test_the_step_line_says_why_the_run_goes_back(tmp_path: Path, shell: InteractiveShell) -> None:
    shell.run_cell_magic("pipeline", f"gg --workdir {tmp_path}", GATED)
    lines = shell.run_line_magic("pipeline", "run").text.splitlines()
    assert f"step: notes -> success; next: fixup: {WHY}" in lines
    assert "step: tests -> success; next: notes" in lines  # an ordinary step says nothing more
    assert lines[-1] == "run: 7 step(s); completed"


def test_why_of_a_failed_node_the_run_went_past_says_where_it_went(
    tmp_path: Path, shell: InteractiveShell
) -> None:
    shell.run_cell_magic("pipeline", f"gg --workdir {tmp_path}", GATED)
    shell.run_line_magic("pipeline", "run --to fixup")
    said = shell.run_line_magic("pipeline", "why tests").text.splitlines()
    assert said[0] == "tests: failed"
    assert "  then the run went on to notes: condition `outcome=fail` held" in said
    shell.run_line_magic("pipeline", "run")
    assert "went on" not in shell.run_line_magic("pipeline", "why tests").text  # succeeded since
