"""State files nested deeper than any we write (hostile or damaged) never give a traceback:
a deep snapshot falls back to the journal, deep log lines are skipped."""

from __future__ import annotations

import json
from pathlib import Path

from freshness_magic.session import open_run
from tests.pipelines import ECHO_HI
from tests.processes import cli_process as cli

DEEP = "[" * 200_000 + "]" * 200_000


def test_deep_snapshot_and_log_lines_are_survived(tmp_path: Path) -> None:
    run = open_run(ECHO_HI, workdir=tmp_path)
    assert run.run().status == "completed"
    run.close()
    run_dir = run.run_dir
    (run_dir / "checkpoint.json").write_text(DEEP)
    for name in ("events.jsonl", "evidence.jsonl"):
        with (run_dir / name).open("a") as log:
            log.write(DEEP + "\n")
    status = cli("status", str(run_dir), "--json", cwd=tmp_path)
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)["status"] == "completed"
    assert "Traceback" not in status.stderr and "RecursionError" not in status.stderr
    evidence = cli("evidence", str(run_dir), "--json", cwd=tmp_path)
    assert evidence.returncode == 0, evidence.stderr
    assert "Traceback" not in evidence.stderr
    resumed = cli("resume", str(run_dir), "--json", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout)["status"] == "completed"
