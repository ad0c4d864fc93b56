"""The package imports and runs a pipeline where ``fcntl`` is missing (systems without POSIX locks).

The check runs in a child interpreter whose ``sys.modules["fcntl"]`` is ``None``, so every
``import fcntl`` there raises ImportError, as on a system that lacks the module. The snapshot
helper process (which needs ``fcntl``) is made eligible for even one file: it must be left out,
not crash the run. The hub, which is POSIX-only, must say so in one line.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

PIPELINE = """digraph nofcntl {
  graph [evidence="record"]
  start [shape=Mdiamond]
  build [shape=parallelogram, tool_command="echo built > out.txt",
         source_files="src/*.txt", freshness="warn"]
  check [shape=parallelogram, tool_command="test -f out.txt"]
  done  [shape=Msquare]
  start -> build -> check -> done
}
"""

CHILD = textwrap.dedent(
    """
    import json, sys
    sys.modules["fcntl"] = None  # from here on, `import fcntl` fails as where it does not exist

    from freshness_magic.cli import main as cli_main
    from freshness_magic.errors import HubError
    from freshness_magic.hub import daemon
    from freshness_magic.session import open_run, resume_run

    run = open_run("pipeline.dot", workdir=".")
    result = run.run()
    run_dir = str(result.run_dir)
    again = resume_run(run_dir).result()
    try:
        daemon.start(".", timeout=5)
        hub = "started"
    except HubError as exc:
        hub = str(exc)
    status_code = cli_main(["status", run_dir])
    print(json.dumps({
        "status": result.status,
        "completed": list(result.completed_nodes),
        "resumed_status": again.status,
        "hub": hub,
        "status_code": status_code,
        "fcntl_loaded": sys.modules.get("fcntl") is not None,
    }))
    """
)


def test_a_pipeline_runs_through_the_public_api_without_fcntl(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    for i in range(3):
        (tmp_path / "src" / f"in{i}.txt").write_text(f"input {i}\n")
    (tmp_path / "pipeline.dot").write_text(PIPELINE)
    proc = subprocess.run(
        [sys.executable, "-c", CHILD],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    facts = json.loads(proc.stdout.strip().splitlines()[-1])
    assert facts["status"] == "completed"
    assert facts["completed"] == ["start", "build", "check", "done"]
    assert facts["resumed_status"] == "completed"
    assert facts["status_code"] == 0
    assert "fcntl" in facts["hub"] and "POSIX" in facts["hub"]
    assert facts["fcntl_loaded"] is False
    assert (tmp_path / "out.txt").read_text() == "built\n"
    assert (tmp_path / ".orchestrator" / "evidence" / "build.json").is_file()
