"""Edit the pipeline, keep the run: unchanged nodes keep their results, an edited node's result
is kept but marked, removed nodes drop out, added ones are pending, a waiting gate keeps waiting;
an edit that is refused leaves the run directory byte for byte as it was."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from freshness_magic.engine.checkpoint import load_checkpoint
from freshness_magic.errors import RunError, ValidationError
from freshness_magic.session import carry_over, open_run, resume_run
from tests.processes import cli_process

PIPELINE = """digraph review {
  graph [goal="Ship it"]
  start  [shape=Mdiamond]
  plan   [prompt="Plan the change"]
  draft  [prompt="Draft from {last_response}"]
  gate   [shape=hexagon, label="Ship it?"]
  polish [prompt="Polish"]
  done   [shape=Msquare]
  start -> plan -> draft -> gate
  gate -> polish [label="[Y] Yes"]
  gate -> draft  [label="[N] No, redo"]
  polish -> done
}
"""


def waiting_run(tmp_path: Path) -> Path:
    (tmp_path / "review.dot").write_text(PIPELINE)
    run = open_run(tmp_path / "review.dot", workdir=tmp_path, warn=False)
    with run:
        assert run.run().state.value == "waiting"
    return run.run_dir


def tree(folder: Path) -> dict[str, bytes]:
    """Every file of ``folder`` with its bytes (and the lock's), to compare before and after."""
    return {
        p.relative_to(folder).as_posix(): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def test_an_edited_prompt_keeps_the_run_and_the_waiting_gate(tmp_path: Path) -> None:
    run_dir = waiting_run(tmp_path)
    edited = PIPELINE.replace('"Plan the change"', '"Plan the change carefully"')
    run, plan = carry_over(run_dir, edited)
    with run:
        assert dict(plan.edited) == {"plan": ("prompt",)}
        assert plan.added == () and plan.removed == ()
        assert run.state.value == "waiting" and run.pending_gate is not None
        assert run.pending_gate.node_id == "gate"
        assert set(run.node_outcomes) == {"start", "plan", "draft"}  # results kept
        assert run.graph.nodes["plan"].prompt == "Plan the change carefully"
        run.answer("gate", "Y")
        assert run.run().state.value == "completed"
    # A new process resumes the edited run from its own files.
    again = resume_run(run_dir)
    with again:
        assert again.graph.nodes["plan"].prompt == "Plan the change carefully"
        assert again.state.value == "completed"
    data, _ = load_checkpoint(run_dir)
    assert data["pipeline"]["source_file"].startswith("pipeline-")
    assert (run_dir / "pipeline.dot").read_text() == edited
    events = (run_dir / "events.jsonl").read_text()
    assert '"type": "pipeline_edited"' in events or '"type":"pipeline_edited"' in events


def test_a_node_added_and_a_node_removed(tmp_path: Path) -> None:
    run_dir = waiting_run(tmp_path)
    edited = (
        PIPELINE.replace('  polish [prompt="Polish"]\n', '  review [prompt="Review"]\n')
        .replace("gate -> polish [", "gate -> review [")
        .replace("polish -> done", "review -> done")
    )
    run, plan = carry_over(run_dir, edited)
    with run:
        assert plan.added == ("review",) and plan.removed == ("polish",)
        assert [c.target for c in run.pending_gate.choices] == ["review", "draft"]
        run.answer("gate", "Y")
        result = run.run()
        assert result.state.value == "completed"
        assert run.completed_nodes[-2:] == ["review", "done"]


def test_a_removed_next_node_goes_on_from_the_last_node_still_there(tmp_path: Path) -> None:
    (tmp_path / "review.dot").write_text(PIPELINE)
    run = open_run(tmp_path / "review.dot", workdir=tmp_path, warn=False)
    with run:
        assert run.run(to="draft").state.value == "paused"
    edited = (
        PIPELINE.replace('  draft  [prompt="Draft from {last_response}"]\n', "")
        .replace("start -> plan -> draft -> gate", "start -> plan -> gate")
        .replace("gate -> draft  [label", "gate -> plan  [label")
    )
    carried, plan = carry_over(run.run_dir, edited)
    with carried:
        assert plan.removed == ("draft",) and carried.next_node == "gate"
        assert "'draft' is not in the edited pipeline" in plan.moved


@pytest.mark.parametrize(
    "edited, error",
    [
        (PIPELINE.replace("polish -> done", "polish -> nowhere_node"), ValidationError),
        (PIPELINE.replace("digraph review", "digraph other"), RunError),
    ],
)
def test_a_refused_edit_changes_nothing(tmp_path: Path, edited: str, error: type) -> None:
    run_dir = waiting_run(tmp_path)
    before = tree(run_dir)
    with pytest.raises(error):
        carry_over(run_dir, edited)
    assert tree(run_dir) == before
    run = resume_run(run_dir)
    with run:
        assert run.graph.nodes["plan"].prompt == "Plan the change"


def test_a_gate_removed_with_no_way_on_is_refused_and_changes_nothing(tmp_path: Path) -> None:
    run_dir = waiting_run(tmp_path)
    before = tree(run_dir)
    edited = """digraph review {
  graph [goal="Ship it"]
  start  [shape=Mdiamond]
  plan   [prompt="Plan the change"]
  draft  [prompt="Draft from {last_response}"]
  polish [prompt="Polish"]
  done   [shape=Msquare]
  start -> plan -> draft
  draft -> polish [condition="outcome=fail"]
  polish -> done
}
"""
    with pytest.raises(RunError, match="'gate' is not in the edited pipeline"):
        carry_over(run_dir, edited)
    assert tree(run_dir) == before


def test_cli_resume_with_an_edited_pipeline_keeps_the_run(tmp_path: Path) -> None:
    run_dir = waiting_run(tmp_path)
    (tmp_path / "edited.dot").write_text(PIPELINE.replace('"Polish"', '"Polish twice"'))
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "freshness_magic",
            "resume",
            str(run_dir),
            "--pipeline",
            "edited.dot",
            "--answer",
            "gate=Y",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "edit    edited: polish (its definition changed: prompt)" in proc.stdout
    run = resume_run(run_dir)
    with run:
        assert run.state.value == "completed"
        assert run.completed_nodes.count("plan") == 1  # kept, not run again


def test_an_edited_prompt_marks_that_node_stale_and_its_readers_outdated(tmp_path: Path) -> None:
    """``draft`` read ``plan``'s response: editing ``plan``'s prompt marks ``plan`` stale
    ("its definition changed: prompt") and ``draft`` outdated, nothing else; in the view model
    of the live run, the command line's ``why`` and ``status --json`` alike."""
    from freshness_magic.views.model import RunSnapshot, ViewModel
    from freshness_magic.views.state import NodeState

    run_dir = waiting_run(tmp_path)
    edited = PIPELINE.replace('"Plan the change"', '"Plan the change carefully"')
    run, _ = carry_over(run_dir, edited)
    with run:
        model = ViewModel(run.graph)  # as a kernel follows the run: its events, then a step
        model.replay(run.events.kinds.read(run.run_dir / "events.jsonl"), at_rest=True)
        model.publish(RunSnapshot.of(run), {}, frozenset())
        views = model.views()
        marked = {
            n: v.state for n, v in views.items() if v.state in (NodeState.STALE, NodeState.OUTDATED)
        }
        assert marked == {"plan": NodeState.STALE, "draft": NodeState.OUTDATED}
        assert views["plan"].why == "its definition changed: prompt"
        assert "`draft` read `last_response` of `plan`" in views["draft"].why

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return cli_process(*args, cwd=tmp_path)

    why = cli("why", str(run_dir), "plan")
    assert why.stdout.startswith("plan: stale"), why.stdout + why.stderr
    assert "its definition changed: prompt" in why.stdout
    import json

    data = json.loads(cli("status", str(run_dir), "--json").stdout)
    states = {
        n: s["state"] for n, s in data["nodes"].items() if s["state"] in ("stale", "outdated")
    }
    assert states == {"plan": "stale", "draft": "outdated"}
