"""``commit_repo``: commit=true is refused before the run when the working directory is not in a
git work tree (it used to pass and fail only after the node had changed files)."""

from __future__ import annotations

from pathlib import Path

from freshness_magic.engine.pipeline import load_pipeline
from freshness_magic.engine.validation import Severity
from freshness_magic.lint import session_validator

COMMITTING = (
    "digraph x {{ {graph}start [shape=Mdiamond]; "
    'a [shape=parallelogram, tool_command="touch f"{node}]; done [shape=Msquare]; '
    "start -> a -> done }}"
)


def found(text: str, workdir: Path) -> list[str]:
    diagnostics = session_validator(workdir=workdir).validate(load_pipeline(text))
    return [
        f"{d.severity.value} {d.node} {d.line}:{d.column} {d.message}"
        for d in diagnostics
        if d.rule == "commit_repo"
    ]


def test_commit_outside_a_git_work_tree_is_an_error_where_it_is_set(
    plain_dir: Path, repo: Path
) -> None:
    on_node = COMMITTING.format(graph="", node=", commit=true")
    assert found(on_node, plain_dir) == [
        f"{Severity.ERROR.value} a 1:85 node `a` commits its changes (commit=true), but the "
        f"working directory {plain_dir} is not in a git work tree, so the commit would fail "
        "after the node changed files"
    ]
    on_graph = COMMITTING.format(graph="graph [commit=true]; ", node="")
    assert [line.split(" ", 3)[1:3] for line in found(on_graph, plain_dir)] == [["None", "1:20"]]
    assert found(on_node, repo) == []
    (repo / "sub").mkdir()
    assert found(on_node, repo / "sub") == []  # anywhere inside the work tree
    assert found(COMMITTING.format(graph="", node=""), plain_dir) == []
