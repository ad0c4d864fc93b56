"""Interop with the Python graph libraries users already have: pydot and graphviz.

Loading goes through :func:`graph_from_object` (also what ``load_pipeline`` and ``open_run`` do for
such objects); exporting through :func:`to_pydot` and :func:`to_graphviz` (``Graph.to_pydot()``,
``Graph.to_graphviz()``). Neither library is a dependency: each is imported here, when asked for.

What round-trips (``load_pipeline(to_pydot(g))`` and ``load_pipeline(to_graphviz(g))`` give ``g``
again): the graph name and attributes, every node in order with all its attributes and classes,
every edge in order with its attributes. Values are written as DOT strings with quotes, backslashes
and line breaks escaped, so any text survives. Not kept by ``to_pydot``: which node attributes came
from ``node [...]`` defaults (each node carries all of its attributes itself, so ``get_node``
finds every node at the top level); ``to_graphviz`` keeps even that (it is the text of
:func:`~freshness_magic.engine.dot_writer.to_dot`). Source positions are never kept.
"""

from __future__ import annotations

import importlib
import os
from typing import Any

from freshness_magic.engine.dot_writer import quote, to_dot
from freshness_magic.engine.model import NODE_ID_RE, Graph
from freshness_magic.engine.pipeline import load_pipeline, load_pipeline_file
from freshness_magic.errors import FreshnessMagicError

__all__ = ["graph_from_object", "to_graphviz", "to_pydot"]


def graph_from_object(obj: object) -> Graph:
    """A pipeline Graph from a Graph, a path, DOT text, a ``pydot.Dot`` or a ``graphviz`` graph.

    Raises :class:`~freshness_magic.errors.PipelineSourceError` for any other object,
    :class:`~freshness_magic.errors.ParseError` when the DOT does not parse and
    :class:`~freshness_magic.errors.PipelineFileError` for an unreadable path.
    """
    if isinstance(obj, Graph):
        return obj
    if isinstance(obj, os.PathLike):
        return load_pipeline_file(obj)
    return load_pipeline(obj)


def _library(name: str) -> Any:
    try:
        return importlib.import_module(name)
    except ImportError:
        raise FreshnessMagicError(
            f"exporting to {name} needs the {name} package: pip install {name}"
        ) from None


def _id(text: str) -> str:
    """``text`` as a DOT ID: bare when it is a plain identifier, else a quoted string."""
    return text if NODE_ID_RE.match(text) else quote(text)


def _attrs(attrs: dict[str, str]) -> dict[str, str]:
    return {_id(key): quote(value) for key, value in attrs.items()}


def to_pydot(graph: Graph) -> Any:
    """A ``pydot.Dot`` of ``graph`` (nodes at the top level, unless they sit in class subgraphs).

    pydot keeps attribute values as DOT text, so ``dot.get_node("a")[0].get("label")`` is the
    quoted, escaped string.
    """
    pydot = _library("pydot")
    dot = pydot.Dot(graph_name=_id(graph.name) if graph.name else "", graph_type="digraph")
    for key, value in _attrs(dict(graph.attrs)).items():
        dot.set(key, value)
    for number, node in enumerate(graph.nodes.values()):
        parent = dot
        for depth, cls in enumerate(node.subgraph_classes):
            sub = pydot.Subgraph(graph_name=f"fm_class_{number}_{depth}", label=quote(cls))
            parent.add_subgraph(sub)
            parent = sub
        parent.add_node(pydot.Node(node.id, **_attrs(dict(node.attrs))))
    for edge in graph.edges:
        dot.add_edge(pydot.Edge(edge.source, edge.target, **_attrs(dict(edge.attrs))))
    return dot


def to_graphviz(graph: Graph) -> Any:
    """A ``graphviz.Digraph`` of ``graph``: render it, or add nodes and edges to it as usual."""
    graphviz = _library("graphviz")
    lines = to_dot(graph).splitlines()[1:-1]  # the statements between "digraph name {" and "}"
    return graphviz.Digraph(name=graph.name or None, body=[f"{line}\n" for line in lines])
