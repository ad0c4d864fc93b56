"""One path rule for what a pipeline makes the product read: a prompt file (``prompt="@..."``)
or a ``source_files`` entry outside the work tree is a ``validate`` error at its line:col, and
``run`` (CLI and API, validated or not) refuses it the same way: nothing outside is read, and
nothing is copied into ``nodes/<id>/prompt.md``."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from freshness_magic.engine.pipeline import load_pipeline
from freshness_magic.engine.run import Run
from freshness_magic.engine.state import RunState
from freshness_magic.errors import UnsafePathError, ValidationError
from freshness_magic.lint import session_validator
from freshness_magic.session import open_run
from tests.processes import cli_process

SECRET = "the-secret-outside-the-tree"

PIPELINE = """digraph p {
  start [shape=Mdiamond]
  draft [prompt="%s"]
  done [shape=Msquare]
  start -> draft -> done
}
"""


@pytest.fixture
def work(tmp_path: Path) -> Path:
    """A work tree ``work/`` with a secret next to it (``outside/secret.txt``) and a link to it."""
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.txt").write_text(SECRET)
    (tmp_path / "x").write_text(SECRET)
    work = tmp_path / "work"
    work.mkdir()
    (work / "notes.md").symlink_to(tmp_path / "outside" / "secret.txt")
    return work


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return cli_process(*args, cwd=cwd, env={"NO_COLOR": "1"})


def nothing_read(root: Path) -> None:
    """No copy of the secret in the work tree, and no prompt.md at all."""
    assert not list(root.rglob("prompt.md"))
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink():
            assert SECRET not in path.read_text(errors="replace"), path


NAMES = ["@/etc/passwd", "@../x", "@../outside/secret.txt", "@notes.md", "@~/x"]


@pytest.mark.parametrize("name", NAMES)
def test_validate_and_cli_run_refuse_a_prompt_file_outside_the_work_tree(
    work: Path, name: str
) -> None:
    path = work / "p.dot"
    path.write_text(PIPELINE % name)
    checked = cli("validate", str(path), cwd=work)
    assert checked.returncode == 1, checked
    assert (
        f"{path}:3:19: error prompt_file_path: node `draft`: prompt file {name!r} is refused"
        in (checked.stdout)
    )
    reason = "symlink to outside the work tree" if name == "@notes.md" else "working directory"
    assert reason in checked.stdout
    ran = cli("run", str(path), cwd=work)
    assert ran.returncode != 0
    assert "prompt_file_path" in ran.stdout + ran.stderr
    assert "Traceback" not in ran.stderr
    nothing_read(work)


@pytest.mark.parametrize("name", ["@/etc/passwd", "@../x", "@notes.md"])
def test_the_api_refuses_it_validated_or_not_and_the_engine_when_the_node_runs(
    work: Path, name: str
) -> None:
    dot = PIPELINE % name
    with pytest.raises(ValidationError, match="prompt_file_path"):
        open_run(dot, workdir=work)
    with pytest.raises(UnsafePathError, match=r"node `draft`: prompt file .* is refused"):
        open_run(dot, workdir=work, warn=False)
    assert not (work / ".freshness").exists()  # refused before a run directory exists
    # The engine alone (no session checks): the node fails, the file is never read.
    run = Run(load_pipeline(dot), workdir=work)
    result = run.run()
    run.close()
    assert result.state is RunState.FAILED
    assert "is refused" in result.node_outcomes["draft"].failure_reason
    nothing_read(work)


def test_a_prompt_file_in_the_work_tree_is_read_also_from_a_pipeline_in_a_subfolder(
    work: Path,
) -> None:
    (work / "prompts").mkdir()
    (work / "prompts" / "plan.md").write_text("Plan it for $goal.")
    (work / "pipelines").mkdir()
    path = work / "pipelines" / "p.dot"
    path.write_text(PIPELINE % "@../prompts/plan.md")
    assert not [
        d
        for d in session_validator(workdir=work).validate(
            load_pipeline(path.read_text(), path=str(path))
        )
        if d.severity.value == "error"
    ]
    with open_run(path, workdir=work) as run:
        result = run.run()
    assert result.state is RunState.COMPLETED
    assert "Plan it for" in (run.run_dir / "nodes" / "draft" / "prompt.md").read_text()


def test_a_source_files_entry_outside_is_an_error_at_its_column_and_refused_by_a_run(
    work: Path,
) -> None:
    dot = PIPELINE.replace('prompt="%s"', 'prompt="p", source_files="a.md, ../outside/secret.txt"')
    found = [
        d
        for d in session_validator(workdir=work).validate(load_pipeline(dot, path="p.dot"))
        if d.rule == "source_files_path"
    ]
    assert [(d.severity.value, d.line, d.column) for d in found] == [("error", 3, 42)]
    assert "outside the working directory (not allowed)" in found[0].message
    with pytest.raises(ValidationError, match="source_files_path"):
        open_run(dot, workdir=work, warn=False)
    assert not (work / ".freshness").exists()
    # Folders the caller admitted make it a warning, and the run goes on.
    (work / "a.md").write_text("a\n")
    options = {"freshness_allow_outside": True}
    with pytest.warns(UserWarning, match="source_files_path"):
        run = open_run(dot, workdir=work, extension_options=options)
    with run:
        assert run.run().state is RunState.COMPLETED


MANAGER = """digraph p {
  start [shape=Mdiamond]
  boss [shape=house, %s]
  done [shape=Msquare]
  start -> boss -> done
}
"""
CHILD = """digraph c {
  start [shape=Mdiamond]
  t [shape=parallelogram, tool_command="touch ran.txt"]
  done [shape=Msquare]
  start -> t -> done
}
"""


@pytest.mark.parametrize(
    ("attrs", "key"),
    [
        ('"stack.child_dotfile"="../child.dot"', "stack.child_dotfile"),
        (
            '"stack.child_dotfile"="child.dot", "stack.child_workdir"="../elsewhere"',
            "stack.child_workdir",
        ),
    ],
)
def test_a_child_pipeline_or_child_workdir_outside_the_work_tree_is_refused(
    work: Path, attrs: str, key: str
) -> None:
    (work.parent / "child.dot").write_text(CHILD)
    (work / "child.dot").write_text(CHILD)
    (work.parent / "elsewhere").mkdir()
    dot = MANAGER % attrs
    found = [
        d
        for d in session_validator(workdir=work).validate(load_pipeline(dot, path="p.dot"))
        if d.rule == "child_path"
    ]
    assert [(d.severity.value, d.line, d.node) for d in found] == [("error", 3, "boss")]
    assert f"{key}=" in found[0].message and "outside the working directory" in found[0].message
    with pytest.raises(UnsafePathError, match="child_path"):
        open_run(dot, workdir=work, warn=False)
    run = Run(load_pipeline(dot), workdir=work)
    result = run.run()
    run.close()
    assert result.state is RunState.FAILED
    assert "is refused" in result.node_outcomes["boss"].failure_reason
    assert not list(work.parent.rglob("ran.txt"))  # the child never ran
    assert not (work.parent / "elsewhere" / ".freshness").exists()


def test_a_child_pipeline_inside_the_work_tree_runs(work: Path) -> None:
    (work / "child.dot").write_text(CHILD)
    (work / "sub").mkdir()
    dot = MANAGER % '"stack.child_dotfile"="child.dot", "stack.child_workdir"="sub"'
    with open_run(dot, workdir=work) as run:
        result = run.run()
    assert result.state is RunState.COMPLETED, result.failure_reason
    assert (work / "sub" / "ran.txt").exists()
