"""Interop with the Python graph libraries users already have: pydot and graphviz.

Loading goes through :func:`graph_from_object` (also what ``load_pipeline`` and ``open_run`` do for
such objects); exporting through :func:`to_pydot` and :func:`to_graphviz`. Neither library is a
dependency: each is imported here, when asked for. The model knows nothing of this module (an
optional adapter on top imports the model, never the other way round), so ``Graph`` has no
export methods.

What round-trips (``load_pipeline(to_pydot(g))`` and ``load_pipeline(to_graphviz(g))`` give ``g``
again): the graph name and attributes, every node in order with all its attributes and classes,
every edge in order with its attributes. A pipeline loaded from text is exported as written
(:func:`as_written`: the stylesheet and ``$goal`` not yet applied, named subgraphs with their
labels), so an edited export means what the edited source would. Values are written as DOT
strings with quotes, backslashes and line breaks escaped, so any text survives. Not kept by
``to_pydot``: which node attributes came from ``node [...]`` defaults (each node carries all of
its attributes itself, so ``get_node`` finds every node at the top level); ``to_graphviz`` keeps
even that (it is the text of
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


def as_written(graph: Graph) -> Graph:
    """``graph`` before the built-in transforms of its load: the stylesheet's values are not
    copied onto the nodes and ``$goal`` stays in the prompts, so an export that is edited (its
    stylesheet, its goal) and loaded again derives them anew. The graph itself when its source
    does not load to it (built or changed in code, or loaded with other transforms)."""
    if not graph.source:
        return graph
    from freshness_magic.engine.dot_parser import parse_dot
    from freshness_magic.engine.transforms import apply_transforms

    try:
        written = parse_dot(graph.source, path=graph.path)
        loaded = apply_transforms(parse_dot(graph.source, path=graph.path))
    except FreshnessMagicError:
        return graph
    return written if loaded == graph else graph


def clusters(graph: Graph) -> dict[str, tuple[str, str]]:
    """Subgraph class -> (name, label) of the first named subgraph whose label derives it, so an
    export keeps ``subgraph cluster_x [label="Group A"]`` (its box when drawn) and not only the
    class the label derives."""
    from freshness_magic.engine.dot_graph import subgraph_class

    found: dict[str, tuple[str, str]] = {}
    for sub in graph.subgraphs:
        if sub.name and sub.label:
            found.setdefault(subgraph_class(sub.label), (sub.name, sub.label))
    return found


def to_pydot(graph: Graph) -> Any:
    """A ``pydot.Dot`` of ``graph`` as written (:func:`as_written`): nodes at the top level,
    unless they sit in subgraphs (which keep their names and labels).

    pydot keeps attribute values as DOT text, so ``dot.get_node("a")[0].get("label")`` is the
    quoted, escaped string.
    """
    pydot = _library("pydot")
    graph = as_written(graph)
    named = clusters(graph)
    dot = pydot.Dot(graph_name=_id(graph.name) if graph.name else "", graph_type="digraph")
    for key, value in _attrs(dict(graph.attrs)).items():
        dot.set(key, value)
    for number, node in enumerate(graph.nodes.values()):
        parent = dot
        for depth, cls in enumerate(node.subgraph_classes):
            name, label = named.get(cls, (f"fm_class_{number}_{depth}", cls))
            sub = pydot.Subgraph(graph_name=name, label=quote(label))  # pydot quotes names
            parent.add_subgraph(sub)
            parent = sub
        parent.add_node(pydot.Node(node.id, **_attrs(dict(node.attrs))))
    for edge in graph.edges:
        dot.add_edge(pydot.Edge(edge.source, edge.target, **_attrs(dict(edge.attrs))))
    return dot


def to_graphviz(graph: Graph) -> Any:
    """A ``graphviz.Digraph`` of ``graph`` as written (:func:`as_written`): render it, or add
    nodes and edges to it as usual."""
    graphviz = _library("graphviz")
    graph = as_written(graph)
    text = to_dot(graph, clusters=clusters(graph))
    lines = text.splitlines()[1:-1]  # the statements between "digraph name {" and "}"
    return graphviz.Digraph(name=graph.name or None, body=[f"{line}\n" for line in lines])
