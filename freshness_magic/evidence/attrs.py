"""The evidence attributes of a node and a graph, read as typed values.

The engine keeps every attribute as the string written and knows nothing of these; evidence
reads them here, and :mod:`freshness_magic.evidence.lint` checks them.

- ``evidence`` (graph and node): ``record`` (the default) or ``require``; a node without its own
  inherits the graph's;
- ``commit`` (graph and node): commit the node's changes after a successful step; a node without
  its own inherits the graph's (default off);
- ``expects_no_changes`` (node): the node need not change files under ``evidence=require``.
"""

from __future__ import annotations

from freshness_magic.engine.model import Graph, Node, parse_bool

EVIDENCE_MODES: tuple[str, ...] = ("record", "require")

NON_WORK_HANDLER_TYPES: frozenset[str] = frozenset({"start", "exit", "conditional", "wait.human"})
"""Handler types that route or wait but do no work, so ``evidence=require`` asks nothing of them."""


def is_work_type(handler_type: str) -> bool:
    """Whether nodes of this handler type must show evidence of work under ``evidence=require``."""
    return handler_type not in NON_WORK_HANDLER_TYPES


def _flag(attrs: dict[str, str]) -> bool | None:
    raw = attrs.get("commit")
    return parse_bool(raw) if raw is not None else None


def evidence_mode(graph: Graph, node: Node) -> str:
    """The node's ``evidence`` mode, inheriting the graph's (default ``record``)."""
    return node.attrs.get("evidence") or graph.attrs.get("evidence") or "record"


def requires_work_evidence(graph: Graph, node: Node) -> bool:
    """A work node under ``evidence=require``: it must show what it did."""
    return is_work_type(node.handler_type) and evidence_mode(graph, node) == "require"


def commit_enabled(graph: Graph, node: Node) -> bool:
    """The node's ``commit`` flag, inheriting the graph's (default off)."""
    own = _flag(node.attrs)
    return bool(_flag(graph.attrs)) if own is None else own


def expects_no_changes(node: Node) -> bool:
    """Whether the node declared ``expects_no_changes=true`` (a value that is not a boolean
    counts as false; validation reports it)."""
    raw = node.attrs.get("expects_no_changes")
    return bool(raw is not None and parse_bool(raw))
