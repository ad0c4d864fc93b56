"""A link (or any invalid file) at a node's evidence path is the node's invalid file: the
engine's record of the step is still in ``evidence.jsonl``, and nothing is read through it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from freshness_magic.engine import RunState
from freshness_magic.evidence.record import read_evidence_log
from freshness_magic.session import open_run

LINKS = """digraph p {
  start [shape=Mdiamond]
  link  [shape=parallelogram%s,
         tool_command="cd .orchestrator/evidence && ln -sf TARGET link.json"]
  done  [shape=Msquare]
  start -> link -> done
}"""


@pytest.mark.parametrize("require", [False, True])
def test_a_link_the_node_makes_at_its_evidence_path_costs_no_record(
    tmp_path: Path, require: bool
) -> None:
    secret = tmp_path.parent / f"{tmp_path.name}-outside.json"
    secret.write_text('{"version": 1, "nodeId": "link", "timestamp": "x", "summary": "secret"}')
    mode = ', evidence="require"' if require else ""
    run = open_run(LINKS.replace("%s", mode).replace("TARGET", str(secret)), workdir=tmp_path)
    result = run.run()
    run.close()
    [record] = read_evidence_log(run.run_dir, "link")
    link = tmp_path / ".orchestrator" / "evidence" / "link.json"
    assert os.readlink(link) == str(secret)  # the node's file stays as it wrote it
    assert record.summary != "secret" and "secret" not in str(record.engine)
    [problem] = record.engine["evidence_problems"]
    assert problem.startswith(f"{link}: not read: ") and "symbolic link" in problem
    assert [r.node_id for r in read_evidence_log(run.run_dir)] == run.completed_nodes
    if require:  # the link is no evidence of work: the node fails, with its record
        assert result.state is RunState.FAILED
        assert record.engine["status"] == "fail"
    else:
        assert result.state is RunState.COMPLETED
        assert record.engine["status"] == "success"
