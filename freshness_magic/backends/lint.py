"""Lint rule ``prompt_file_exists``: a ``prompt="@path"`` file must exist (error at the
attribute's line:col). Checked for pipelines loaded from a file; a pipeline without a path reads
its prompt files from the work directory at run time, which validation does not know."""

from __future__ import annotations

from freshness_magic.engine.handlers.codergen import prompt_file_name, prompt_file_path
from freshness_magic.engine.model import Graph
from freshness_magic.engine.validation import Diagnostic, Severity

RULE = "prompt_file_exists"


def prompt_file_diagnostics(graph: Graph) -> list[Diagnostic]:
    """An error for every node whose prompt file is missing or not a file."""
    out: list[Diagnostic] = []
    for node in graph.iter_nodes():
        name = prompt_file_name(node)
        path = prompt_file_path(node, graph)
        if name is None or path is None or path.is_file():
            continue
        position = node.attr_positions.get("prompt", node.position)
        problem = "is a folder" if path.is_dir() else "does not exist"
        out.append(
            Diagnostic(
                RULE,
                Severity.ERROR,
                f"node `{node.id}`: prompt file {name!r} {problem} ({path})",
                node.id,
                None,
                position.line,
                position.column,
                "create the file, or give its path relative to the pipeline file's folder",
            )
        )
    return out
