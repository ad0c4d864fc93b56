"""A node run by a ``%%node`` cell is refused by a process without the cell (the command line).

A trial failed a ``%%node`` cell in the notebook, then pasted the ``resume --retry`` line that
``freshness-magic why`` offered: the command line ran the node's own type (a simulated model
call) and recorded a success the cell never had. The run now records which nodes are cells.
"""

from __future__ import annotations

import json
from pathlib import Path

from IPython.core.interactiveshell import InteractiveShell

from tests.processes import cli

CELL_NODE = """digraph fp {
  start [shape=Mdiamond]
  pyn   [prompt="py"]
  ask   [shape=hexagon, label="Go on?"]
  more  [prompt="more"]
  done  [shape=Msquare]
  start -> pyn -> ask
  ask -> more [label="[Y] Yes"]
  more -> done
}
"""


def status_json(run_dir: Path, cwd: Path) -> dict[str, object]:
    done = cli("status", str(run_dir), "--json", cwd=cwd)
    return dict(json.loads(done.stdout))


def test_the_command_line_refuses_a_cell_node_and_why_says_where_it_runs(
    shell: InteractiveShell, tmp_path: Path
) -> None:
    shell.run_cell_magic("pipeline", f"fp --workdir {tmp_path}", CELL_NODE)
    shell.run_cell_magic("node", "pyn", "raise ValueError('bad thing')\n")
    shell.run_line_magic("pipeline", "run")
    shell.run_line_magic("pipeline", "reset")  # the kernel lets go of the run
    (run_dir,) = (tmp_path / ".freshness" / "runs").iterdir()
    before = status_json(run_dir, tmp_path)
    assert before["status"] == "failed"

    why = cli("why", str(run_dir), "pyn", cwd=tmp_path)
    assert why.returncode == 0, why.stderr
    assert why.stdout.splitlines()[-1] == (
        "  next: it runs in a %%node cell of the notebook that runs the pipeline (there: "
        "%pipeline retry pyn, or %pipeline run); this command cannot run it, go on there"
    )
    assert "--retry pyn" not in why.stdout

    retried = cli("resume", str(run_dir), "--retry", "pyn", cwd=tmp_path)
    assert retried.returncode == 2
    assert "node 'pyn' runs in a %%node cell of the notebook" in retried.stderr
    assert "Traceback" not in retried.stderr
    assert status_json(run_dir, tmp_path) == before
    assert not (run_dir / "nodes" / "pyn" / "response.md").exists()


def test_a_cell_node_after_a_gate_answered_on_the_command_line_waits_for_the_notebook(
    shell: InteractiveShell, tmp_path: Path
) -> None:
    shell.run_cell_magic("pipeline", f"fp --workdir {tmp_path}", CELL_NODE)
    shell.run_cell_magic("node", "pyn", "print('ran')\n")
    shell.run_cell_magic("node", "more", "print('more')\n")
    shell.run_line_magic("pipeline", "run")
    shell.run_line_magic("pipeline", "reset")
    (run_dir,) = (tmp_path / ".freshness" / "runs").iterdir()

    answered = cli("resume", str(run_dir), "--answer", "ask=Y", cwd=tmp_path)
    assert answered.returncode == 2, answered.stdout + answered.stderr
    assert "node 'more' runs in a %%node cell" in answered.stderr
    after = status_json(run_dir, tmp_path)
    assert after["status"] == "paused"
    assert "more" not in after["completed_nodes"]  # type: ignore[operator]

    shell.run_line_magic("pipeline", "resume")
    assert "completed" in shell.user_ns["fp"].view.status_line()
    assert (run_dir / "nodes" / "more" / "cell_output.txt").read_text() == "more\n"
