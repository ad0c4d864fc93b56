"""Prompt files: ``prompt="@path"`` names a file read at run time (a light module: validation
and run extensions use it without importing the codergen handler)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from freshness_magic.engine.model import Graph, Node
from freshness_magic.engine.utf8 import decode

if TYPE_CHECKING:
    from pathlib import Path

_PROMPT_FILE = re.compile(r"@(\S+)\Z")


def prompt_file_name(node: Node) -> str | None:
    """The file named by ``prompt="@path"``, as written; None for an inline prompt."""
    match = _PROMPT_FILE.match(node.prompt.strip())
    return match.group(1) if match else None


def prompt_file_path(node: Node, graph: Graph, workdir: Path | None = None) -> Path | None:
    """Where the node's prompt file is: relative to the pipeline file's folder, else to
    ``workdir`` (None when neither is known, or the prompt is inline)."""
    name = prompt_file_name(node)
    if name is None:
        return None
    from pathlib import Path  # for prompt files only: validate starts quickly

    given = Path(name).expanduser()
    if given.is_absolute():
        return given
    if graph.path:
        return Path(graph.path).resolve().parent / given
    return None if workdir is None else Path(workdir) / given


def prompt_file_problem(node: Node, graph: Graph, workdir: Path | str) -> str | None:
    """Why the node's prompt file may not be read (it lies outside the work tree at
    ``workdir``: see :func:`freshness_magic.pathsafety.pipeline_path_problem`), or None."""
    name = prompt_file_name(node)
    if name is None:
        return None
    import os

    from freshness_magic.pathsafety import pipeline_path_problem

    base = os.path.dirname(os.path.realpath(graph.path)) if graph.path else workdir
    return pipeline_path_problem(name, base, workdir)


def read_prompt_file(path: Path) -> str:
    """The prompt file's text; OSError when it cannot be read, ValueError when it is not UTF-8
    (saying where)."""
    return decode(path.read_bytes())
