"""``freshness-magic status`` and ``%pipeline status`` read one run through one view model: node
by node they give the same state and reason, and the command line's marks are the view's."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from IPython.core.interactiveshell import InteractiveShell

from tests.notebook.conftest import REVIEW_DOT, load_review
from tests.processes import cli


def line(shell: InteractiveShell, text: str) -> Any:
    return shell.run_line_magic("pipeline", text)


def _agree(shell: InteractiveShell, pipeline: Any, workdir: Path) -> dict[str, Any]:
    """Both surfaces' node states and reasons, asserted equal; the command line's JSON."""
    table = line(shell, "status").text
    notebook = {n: {"state": v.state.value, "why": v.why} for n, v in pipeline.view.views().items()}
    for node_id, seen in notebook.items():  # the table the magic printed shows the same states
        row = next(r for r in table.splitlines() if r.split()[:1] == [node_id])
        assert row.split()[1].startswith(seen["state"]), (row, seen)
    run_dir = pipeline.view.live_run.run_dir
    found = json.loads(cli("status", str(run_dir), "--json", cwd=workdir).stdout)
    assert found["nodes"] == notebook
    return found


def test_the_command_line_and_the_magic_give_each_node_the_same_state_and_reason(
    shell: InteractiveShell, workdir: Path
) -> None:
    pipeline = load_review(shell, workdir, REVIEW_DOT)
    line(shell, "run")
    found = _agree(shell, pipeline, workdir)
    assert found["nodes"]["approve"]["state"] == "waiting"
    assert "stale_nodes" not in found and "outdated_nodes" not in found

    (workdir / "src" / "login.py").write_text("def login():\n    return False\n")
    shell.run_cell("edited = True")  # the post_execute hook re-checks, as after any cell
    found = _agree(shell, pipeline, workdir)
    states = {n: v["state"] for n, v in found["nodes"].items()}
    assert (states["lint"], states["draft"]) == ("stale", "outdated")
    assert found["stale_nodes"] == ["lint"] and found["outdated_nodes"] == ["draft"]
    text = cli("status", str(pipeline.view.live_run.run_dir), cwd=workdir).stdout.splitlines()
    rows = [row.split() for row in text if row.startswith("  ")]
    marked = {words[2]: " ".join(words[:2]) for words in rows if words[1].startswith("(")}
    assert marked == {"lint": "success (stale)", "draft": "success (outdated)"}

    line(shell, "accept")
    found = _agree(shell, pipeline, workdir)
    assert "stale_nodes" not in found and "outdated_nodes" not in found
