"""The CLI's and the notebook's evidence tables say the same of each record."""

from __future__ import annotations

from pathlib import Path

from freshness_magic.commands.evidence import COLUMNS, row
from freshness_magic.evidence.record import read_evidence_log
from freshness_magic.session import open_run
from freshness_magic.views.text import evidence_row

PIPELINE = """digraph p {
  start [shape=Mdiamond]
  build [shape=parallelogram, tool_command="printf built > out.txt"]
  draft [prompt="Write the notes"]
  done  [shape=Msquare]
  start -> build -> draft -> done
}
"""


def test_the_method_column_is_the_same_in_the_cli_and_the_notebook(tmp_path: Path) -> None:
    with open_run(PIPELINE, workdir=tmp_path) as run:
        assert run.run().status == "completed"
        records = read_evidence_log(run.run_dir)
    assert [r.node_id for r in records] == ["start", "build", "draft", "done"]
    method = COLUMNS.index("method")
    for record in records:
        shown = row(record)[method]
        assert shown == evidence_row(record.to_dict())["method"] == record.method
        assert shown not in ("", "-")
