"""The manager loop supervising a real child pipeline file."""

from __future__ import annotations

from pathlib import Path

import pytest

from freshness_magic.engine.handlers.manager import unfinished_child
from freshness_magic.engine.pipeline import load_pipeline, load_pipeline_file
from freshness_magic.engine.run import Run
from freshness_magic.errors import ValidationError
from freshness_magic.session import open_run
from tests.pipelines import GATED_CHILD, one_tool

CHILD = """
digraph child {
  start [shape=Mdiamond]
  build [shape=parallelogram, tool_command="echo built > built.txt"]
  test  [prompt="test the build"]
  done  [shape=Msquare]
  start -> build -> test -> done
}
"""

FAILING_CHILD = one_tool("echo nope >&2; exit 5", node="build", name="child")

LOOPING_CHILD = """
digraph child {
  start [shape=Mdiamond]
  a [prompt="a"]
  b [prompt="b"]
  done [shape=Msquare]
  start -> a -> b
  b -> a [weight=1]
  b -> done
}
"""


def parent(manager_attrs: str, graph_attrs: str = "") -> str:
    return f"""
    digraph parent {{
      graph [{graph_attrs}]
      start [shape=Mdiamond]
      manage [shape=house, {manager_attrs}]
      ok [prompt="after the child"]
      failed [prompt="child failed"]
      done [shape=Msquare]
      start -> manage
      manage -> ok [condition="outcome=success"]
      manage -> failed [condition="outcome=fail"]
      ok -> done
      failed -> done
    }}
    """


def run_parent(source: str, workdir: Path, **kwargs: object) -> Run:
    run = open_run(load_pipeline(source), workdir=workdir, extensions=[], **kwargs)
    run.run()
    return run


def test_child_pipeline_runs_to_completion(tmp_path: Path) -> None:
    (tmp_path / "child.dot").write_text(CHILD)
    run = run_parent(parent('"stack.child_dotfile"="child.dot"'), tmp_path)
    assert run.completed_nodes == ["start", "manage", "ok", "done"]
    outcome = run.node_outcomes["manage"]
    assert outcome.notes.startswith("Child completed after 4 cycle(s)")
    ctx = run.context
    assert ctx["stack.child.status"] == "completed"
    assert ctx["stack.child.outcome"] == "success"
    assert ctx["stack.child.completed_nodes"] == ["start", "build", "test", "done"]
    assert (tmp_path / "built.txt").read_text() == "built\n"
    child_dir = Path(ctx["stack.child.run_dir"])
    assert child_dir.parent == run.run_dir / "nodes" / "manage" / "children"
    assert (child_dir / "checkpoint.json").exists()
    assert (child_dir / "nodes" / "test" / "prompt.md").read_text() == "test the build"


def test_child_file_from_graph_attribute_relative_to_parent_file(tmp_path: Path) -> None:
    pipelines = tmp_path / "pipelines"
    pipelines.mkdir()
    (pipelines / "child.dot").write_text(CHILD)
    (pipelines / "parent.dot").write_text(
        parent('"manager.steps_per_cycle"=10', graph_attrs='"stack.child_dotfile"="child.dot"')
    )
    workdir = tmp_path  # the pipelines folder is in the work tree, as every pipeline path
    run = Run(load_pipeline_file(pipelines / "parent.dot"), workdir=workdir)
    run.run()
    assert run.node_outcomes["manage"].notes.startswith("Child completed after 1 cycle(s)")
    assert (workdir / "built.txt").exists()
    assert not (workdir / "child.dot").exists()  # found beside the parent file


def test_failed_child_fails_the_manager(tmp_path: Path) -> None:
    (tmp_path / "child.dot").write_text(FAILING_CHILD)
    run = run_parent(parent('"stack.child_dotfile"="child.dot"'), tmp_path)
    outcome = run.node_outcomes["manage"]
    assert outcome.status.value == "fail"
    assert outcome.failure_reason.startswith("Child failed at node 'build': exit code 5")
    assert "no edge condition matched" not in outcome.failure_reason
    assert run.completed_nodes == ["start", "manage", "failed", "done"]
    assert run.context["stack.child.status"] == "failed"


def test_nested_child_failures_fold_into_one_path(tmp_path: Path) -> None:
    (tmp_path / "leaf.dot").write_text(FAILING_CHILD)
    (tmp_path / "mid.dot").write_text(
        'digraph mid { start [shape=Mdiamond]; inner [shape=house, "stack.child_dotfile"='
        '"leaf.dot"]; done [shape=Msquare]; start -> inner -> done }'
    )
    run = run_parent(parent('"stack.child_dotfile"="mid.dot"'), tmp_path)
    reason = run.node_outcomes["manage"].failure_reason
    assert reason.startswith("Child failed at node 'inner' > 'build': exit code 5")
    assert reason.count("Child failed") == 1 and "no edge condition matched" not in reason


def test_stop_condition_ends_supervision(tmp_path: Path) -> None:
    (tmp_path / "child.dot").write_text(LOOPING_CHILD)
    attrs = (
        '"stack.child_dotfile"="child.dot", '
        '"manager.stop_condition"="context.stack.child.current_node=b && outcome=success"'
    )
    run = run_parent(parent(attrs), tmp_path)
    outcome = run.node_outcomes["manage"]
    assert outcome.status.value == "success"
    assert outcome.notes.startswith("Stop condition satisfied after 3 cycle(s)")
    assert run.context["stack.child.completed_nodes"] == ["start", "a", "b"]
    assert run.context["stack.child.status"] == "paused"


def test_max_cycles_and_injected_poll_sleep(tmp_path: Path) -> None:
    (tmp_path / "child.dot").write_text(LOOPING_CHILD)
    attrs = (
        '"stack.child_dotfile"="child.dot", "manager.max_cycles"=5, "manager.poll_interval"="2s"'
    )
    slept: list[float] = []
    run = run_parent(parent(attrs), tmp_path, sleep=slept.append)
    outcome = run.node_outcomes["manage"]
    assert outcome.status.value == "fail"
    assert outcome.failure_reason == (
        "Max cycles exceeded (5): a cycle runs 1 node(s) of the child (manager.steps_per_cycle); "
        "after 5 node run(s) its next is 'a'; raise manager.max_cycles or "
        "manager.steps_per_cycle"
    )
    assert slept == [2.0, 2.0, 2.0, 2.0]
    assert run.context["stack.child.cycle"] == 5
    assert run.completed_nodes[-2:] == ["failed", "done"]


def test_missing_or_invalid_child_is_a_clear_failure(tmp_path: Path) -> None:
    run = run_parent(parent('"stack.child_dotfile"="nowhere.dot"'), tmp_path)
    reason = run.node_outcomes["manage"].failure_reason
    assert "'nowhere.dot' not found" in reason and str(tmp_path / "nowhere.dot") in reason

    (tmp_path / "broken.dot").write_text("digraph child { start -> }")
    run = run_parent(parent('"stack.child_dotfile"="broken.dot"'), tmp_path)
    assert "cannot start child pipeline" in run.node_outcomes["manage"].failure_reason

    with pytest.raises(ValidationError, match=r"manager node `manage` has no stack\.child_dotfile"):
        run_parent(parent('label="no child"'), tmp_path)  # refused before it runs

    (tmp_path / "child.dot").write_text(CHILD)
    attrs = '"stack.child_dotfile"="child.dot", "manager.stop_condition"="outcome==success"'
    run = run_parent(parent(attrs), tmp_path)
    assert "manager.stop_condition" in run.node_outcomes["manage"].failure_reason


def test_manager_actions(tmp_path: Path) -> None:
    (tmp_path / "child.dot").write_text(LOOPING_CHILD)
    base = '"stack.child_dotfile"="child.dot", "manager.max_cycles"=3, "manager.poll_interval"=1'
    slept: list[float] = []
    run = run_parent(parent(base + ', "manager.actions"="observe"'), tmp_path, sleep=slept.append)
    assert run.node_outcomes["manage"].failure_reason.startswith("Max cycles exceeded (3): ")
    assert slept == []

    with pytest.raises(ValidationError) as refused:
        run_parent(parent(base + ', "manager.actions"="observe,steer"'), tmp_path)
    said = str(refused.value)
    assert "manager node `manage` asks for manager.actions steer, which this engine" in said
    assert 'set "manager.actions"="observe"' in said


def test_interrupted_child_is_resumed_not_restarted(tmp_path: Path) -> None:
    (tmp_path / "child.dot").write_text(
        CHILD.replace("echo built", "echo built >> log.txt; echo built")
    )
    source = parent('"stack.child_dotfile"="child.dot"')
    runs = tmp_path / "runs"
    children = runs / "p1" / "nodes" / "manage" / "children"
    # A parent process that died while its manager had stepped the child through `build`.
    interrupted = Run(
        load_pipeline_file(tmp_path / "child.dot"), workdir=tmp_path, runs_dir=children
    )
    interrupted.run(to="test")
    assert (tmp_path / "log.txt").read_text() == "built\n"

    run = run_parent(source, tmp_path, runs_dir=runs, run_id="p1")
    assert run.node_outcomes["manage"].status.value == "success"
    assert run.context["stack.child.run_dir"] == str(interrupted.run_dir)
    assert run.context["stack.child.completed_nodes"] == ["start", "build", "test", "done"]
    assert (tmp_path / "log.txt").read_text() == "built\n"
    assert (interrupted.run_dir / "supervision.json").exists()

    # Nothing is left to resume: a later execution of the manager starts a fresh child.
    assert unfinished_child(children) is None


def test_a_child_pipeline_that_starts_itself_fails_at_once(tmp_path: Path) -> None:
    """A manager whose child file is its own pipeline, or files that start each other, nested
    child runs until the paths were too long for the file system (48 MB of runs)."""
    (tmp_path / "pipelines").mkdir()
    own = tmp_path / "pipelines" / "self.dot"  # named from the working directory: validation,
    own.write_text(parent('"stack.child_dotfile"="pipelines/self.dot"'))  # from its folder, passes
    run = Run(load_pipeline_file(own), workdir=tmp_path, extensions=[])
    run.run()
    reason = run.node_outcomes["manage"].failure_reason
    assert reason == (
        f"manager node 'manage': its child pipeline {own} is the pipeline it is in, which would "
        "start itself without end; name another pipeline in stack.child_dotfile"
    )
    assert not (run.run_dir / "nodes" / "manage" / "children").exists()

    for name, child in (("a", "b"), ("b", "a")):
        (tmp_path / f"{name}.dot").write_text(
            f"digraph {name} {{ start [shape=Mdiamond]; manage [shape=house, "
            f'"stack.child_dotfile"="{child}.dot"]; done [shape=Msquare]; '
            "start -> manage -> done }"
        )
    run = Run(load_pipeline_file(tmp_path / "a.dot"), workdir=tmp_path, extensions=[])
    run.run()
    reason = run.node_outcomes["manage"].failure_reason
    assert "child pipelines already nest 8 deep (at most 8)" in reason
    deepest = max(run.run_dir.rglob("checkpoint.json"), key=lambda p: len(p.parts))
    assert deepest.relative_to(run.run_dir).parts.count("children") == 8


def test_a_missing_child_names_each_place_looked_once(tmp_path: Path) -> None:
    (tmp_path / "parent.dot").write_text(parent('"stack.child_dotfile"="nowhere.dot"'))
    run = Run(load_pipeline_file(tmp_path / "parent.dot"), workdir=tmp_path, extensions=[])
    run.run()
    reason = run.node_outcomes["manage"].failure_reason
    assert reason.endswith(f"not found (looked at {tmp_path / 'nowhere.dot'})")


def test_a_child_gate_makes_the_manager_wait_and_its_answer_reaches_the_child(
    tmp_path: Path,
) -> None:
    (tmp_path / "child.dot").write_text(GATED_CHILD)
    runs = tmp_path / "runs"
    run = run_parent(parent('"stack.child_dotfile"="child.dot"'), tmp_path, runs_dir=runs)
    assert run.state.value == "waiting"
    gate = run.pending_gate
    assert gate is not None and gate.node_id == "manage" and gate.child_gate == "approve"
    assert gate.text == "Approve the sprint? (gate 'approve' of the child pipeline)"
    assert [c.key for c in gate.choices] == ["A", "R"]
    assert not (tmp_path / "verdict.txt").exists()
    run_dir = run.run_dir
    run.close()

    # Answered from a later process, by the child gate's name, as `resume --answer` does.
    again = Run.resume(run_dir, registry=None)
    step = again.answer("approve", "R")
    assert step.next_node == "manage" and not step.executed
    again.run()
    assert again.state.value == "completed"
    assert again.completed_nodes == ["start", "manage", "ok", "done"]
    assert (tmp_path / "verdict.txt").read_text() == "rejected\n"
    child_dir = Path(again.context["stack.child.run_dir"])
    assert child_dir.parent == run_dir / "nodes" / "manage" / "children"
    assert len(list(child_dir.parent.iterdir())) == 1  # the same child run went on
    assert again.context["stack.child.completed_nodes"] == [
        "start",
        "approve",
        "rejected",
        "done",
    ]
    assert "internal.child_answer.manage" not in again.context


def test_an_auto_approving_run_answers_a_child_gate_with_its_first_choice(
    tmp_path: Path,
) -> None:
    from freshness_magic.engine.interviewers import AutoApproveInterviewer

    (tmp_path / "child.dot").write_text(GATED_CHILD)
    run = run_parent(
        parent('"stack.child_dotfile"="child.dot"'),
        tmp_path,
        interviewer=AutoApproveInterviewer(),
    )
    assert run.state.value == "completed"
    assert (tmp_path / "verdict.txt").read_text() == "approved\n"
