"""The freshness attributes of a node, read as typed values.

The engine keeps every attribute as the string written (``Node.attrs``) and knows nothing of
these; freshness reads them here, and :mod:`freshness_magic.freshness.lint` checks them.

- ``source_files``: paths or globs, comma-separated, relative to the working directory;
- ``freshness``: ``ignore`` (also when unset), ``warn`` or ``block``;
- ``prompt="@file"``: the prompt file is an input too, so an edited prompt is a changed input.
"""

from __future__ import annotations

import os

from freshness_magic.engine.model import Graph, Node, split_list
from freshness_magic.engine.prompts import prompt_file_name, prompt_file_path

FRESHNESS_MODES: tuple[str, ...] = ("ignore", "warn", "block")


def source_files(node: Node) -> tuple[str, ...]:
    """The node's ``source_files`` entries, trimmed, empties dropped."""
    return split_list(node.attrs.get("source_files", ""))


def freshness_mode(node: Node) -> str:
    """The node's ``freshness`` mode; ``ignore`` when unset or empty."""
    return node.attrs.get("freshness") or "ignore"


CHECKED_MODES: tuple[str, ...] = ("warn", "block")
"""The modes under which a node's inputs are checked before it runs."""


def inputs_checked(node: Node) -> bool:
    """Whether the node's inputs are checked (``freshness`` is ``warn`` or ``block``).

    The one rule for both the engine and the views: the freshness extension checks only these
    nodes before they run, and only these are ever shown stale (or make the nodes after them
    outdated). Under ``ignore`` (also when unset) the inputs still get baselines, but a change
    to them is not the node's concern.
    """
    return freshness_mode(node) in CHECKED_MODES


def prompt_input_entry(node: Node, graph: Graph) -> str | None:
    """The prompt file as an input entry: absolute for a pipeline with a path, else relative to
    the working directory (where a pipeline without a path resolves it); None for an inline
    prompt."""
    name = prompt_file_name(node)
    if name is None:
        return None
    path = prompt_file_path(node, graph)
    return os.fspath(path) if path is not None else name


def node_inputs(node: Node, graph: Graph) -> tuple[str, ...]:
    """A node's input entries: its ``source_files`` plus its ``prompt="@file"``, if any."""
    entries = source_files(node)
    prompt_file = prompt_input_entry(node, graph)
    return (*entries, prompt_file) if prompt_file else entries


def tracked_nodes(graph: Graph) -> dict[str, tuple[str, ...]]:
    """Node id -> input entries (:func:`node_inputs`) for every node that has any."""
    return {n.id: entries for n in graph.iter_nodes() if (entries := node_inputs(n, graph))}
