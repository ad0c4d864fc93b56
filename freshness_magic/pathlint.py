"""The lint rules of the one path rule (:func:`~freshness_magic.pathsafety.pipeline_path_problem`)
for paths a pipeline names, judged against the working directory (so registered only when it is
known: ``freshness-magic validate`` passes the current folder, a run its own):

- ``prompt_file_path``: a ``prompt="@path"`` file outside the work tree;
- ``child_path``: a manager's ``stack.child_dotfile`` or ``stack.child_workdir`` outside it.

Both are ERRORs at the attribute's line:col; the run refuses the same paths as it runs
(``source_files`` entries: ``source_files_path`` in :mod:`freshness_magic.freshness.lint`).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from freshness_magic.engine.model import Graph, Node
from freshness_magic.engine.prompts import prompt_file_problem
from freshness_magic.engine.validation import ERROR, LintRule, Out, ScanRule, node_diag
from freshness_magic.engine.validation.core import Diagnostic, node_at, position_in_value

if TYPE_CHECKING:
    from pathlib import Path


def _prompt_file_path(workdir: str) -> ScanRule:
    def check(graph: Graph, node: Node, out: Out) -> None:
        problem = prompt_file_problem(node, graph, workdir)
        if problem is None:
            return
        where = position_in_value(graph, node.attr_positions.get("prompt"), "prompt", 1)
        line, column = where if where is not None else node_at(node, "prompt")
        out.append(
            Diagnostic(
                "prompt_file_path",
                ERROR,
                f"node `{node.id}`: prompt file {node.prompt.strip()!r} is refused: {problem}",
                node.id,
                None,
                line,
                column,
                "put the prompt file in the working directory and name it relative to the "
                "pipeline file's folder",
            )
        )

    return ScanRule("prompt_file_path", node_check=check)


def _child_path(workdir: str) -> ScanRule:
    def check(graph: Graph, node: Node, out: Out) -> None:
        if node.handler_type != "stack.manager_loop":
            return
        from freshness_magic.engine.handlers.manager import CHILD_PATHS, child_path_problem

        problem = child_path_problem(node, graph, workdir)
        if problem:
            key = next((k for k in CHILD_PATHS if node.get(k) and k in problem), None)
            out.append(
                node_diag(
                    "child_path",
                    ERROR,
                    node,
                    problem.replace(f"manager node {node.id!r}", f"manager node `{node.id}`"),
                    "keep the child pipeline and its working directory in the working directory",
                    key,
                )
            )

    return ScanRule("child_path", node_check=check)


def path_rules(workdir: str | Path) -> list[LintRule]:
    """The rules of pipeline paths in ``workdir``, to register with a Validator."""
    real = os.path.realpath(workdir)
    return [_prompt_file_path(real), _child_path(real)]
