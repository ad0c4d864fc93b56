"""The README's headline pipeline runs as written, also without an activated virtual environment.

Its tool command must not depend on programs that only a virtual environment puts on PATH (exit
127 otherwise), so it runs here with PATH reduced to the system folders.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def headline() -> str:
    text = (REPO / "README.md").read_text()
    match = re.search(r"%%pipeline review\n(digraph review \{.*?\n\})\n", text, re.S)
    assert match, "the README's first %%pipeline cell moved; update this test"
    return match.group(1)


def test_the_headline_pipeline_reaches_its_gate_without_the_venv_on_path(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "login.py").write_text("def login(user):\n    return user is not None\n")
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "spec.md").write_text("# Login\n")
    (tmp_path / "review.dot").write_text(headline())
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(tmp_path)}
    proc = subprocess.run(
        [sys.executable, "-m", "freshness_magic", "run", "review.dot", "--json"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 3, proc.stdout + proc.stderr
    result = json.loads(proc.stdout)
    assert result["node_outcomes"]["lint"]["status"] == "success"
    assert result["pending_gate"]["node"] == "approve"
