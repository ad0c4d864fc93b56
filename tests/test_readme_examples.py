"""The command-line lines the README shows work as written, on the example pipeline."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.processes import cli

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "examples" / "quickstart.dot"


def test_example_validates_strictly(tmp_path: Path) -> None:
    """In a project that has the files the example reads (`source_files_exist` checks the
    working directory)."""
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "spec.md").write_text("# Login\n")
    result = cli("validate", str(EXAMPLE), "--strict", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


def test_example_runs_to_the_gate_then_resumes_with_an_answer(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()  # as the README's example makes it
    (tmp_path / "docs" / "spec.md").write_text("# Spec\n")
    paused = cli("run", str(EXAMPLE), "--workdir", str(tmp_path), "--json", cwd=tmp_path)
    assert paused.returncode == 3, paused.stderr
    assert "warning" not in paused.stderr, paused.stderr
    state = json.loads(paused.stdout)
    assert state["status"] == "waiting"
    assert state["pending_gate"]["node"] == "approve"
    assert [c["key"] for c in state["pending_gate"]["choices"]] == ["Y", "N"]

    done = cli("resume", state["run_dir"], "--answer", "approve=Y", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    final = json.loads(done.stdout)
    assert final["status"] == "completed"
    assert final["completed_nodes"] == ["start", "lint", "draft", "approve", "done"]

    evidence = cli("evidence", state["run_dir"], "--json", cwd=tmp_path)
    assert evidence.returncode == 0, evidence.stderr
    assert [r["nodeId"] for r in json.loads(evidence.stdout)][-1] == "done"


def test_the_example_and_docs_point_only_at_files_that_exist() -> None:
    """No reference to a design document the repository does not ship."""
    sources = sorted((REPO / "freshness_magic").rglob("*.py"))
    for path in [EXAMPLE, *sorted((REPO / "docs").glob("*.md")), REPO / "README.md", *sources]:
        assert "DESIGN" not in path.read_text(), path


def test_the_python_example_runs_as_written(tmp_path: Path) -> None:
    """The README's script, with its /tmp/demo project made in a temporary folder."""
    text = (REPO / "README.md").read_text()
    script = text.split("```python\n", 1)[1].split("```", 1)[0]
    assert 'workdir="/tmp/demo"' in script
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "spec.md").write_text("# Spec\n")
    script = script.replace('"/tmp/demo"', repr(str(tmp_path)))
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "step: approve -> waiting" in lines
    assert lines[-1] == "pipeline review: completed · 5/5 nodes run"
