"""A backend chosen with ``%config`` drives the codergen nodes of notebook runs, and its streamed
response reaches the node's details."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

from IPython.core.interactiveshell import InteractiveShell

from freshness_magic.atomicio import read_jsonl

AGENT = """import sys
prompt = sys.stdin.read()
for part in ("reviewed: ", "the login fix ", "looks right"):
    print(part, end="", flush=True)
"""

PIPELINE = """digraph review {
  graph [goal="Ship the login fix"]
  start [shape=Mdiamond]
  draft [prompt="Summarise the change for $goal"]
  done  [shape=Msquare]
  start -> draft -> done
}
"""


def test_config_backend_streams_into_the_node_details(
    shell: InteractiveShell, tmp_path: Path
) -> None:
    agent = tmp_path / "agent.py"
    agent.write_text(AGENT)
    spec = f"command:{shlex.quote(sys.executable)} {shlex.quote(str(agent))}"
    shell.run_line_magic("config", f"PipelineMagics.backend = {spec!r}")
    try:
        pipeline = shell.run_cell_magic("pipeline", f"review --workdir {tmp_path}", PIPELINE)
        assert pipeline.view.backend_name == spec
        shell.run_line_magic("pipeline", "run")
        assert pipeline.view.state_name == "completed"
        details = pipeline.view.details("draft")
        assert details["response"] == "reviewed: the login fix looks right"
        assert "Ship the login fix" in details["prompt"]
        streamed = [
            e["data"]["text"]
            for e in read_jsonl(pipeline.current_run.run_dir / "events.jsonl")
            if e["type"] == "stage_output" and e["node_id"] == "draft"
        ]
        assert "".join(streamed) == "reviewed: the login fix looks right"
    finally:
        shell.run_line_magic("config", "PipelineMagics.backend = ''")
