"""Interop with the Python graph libraries users already have: pydot, graphviz and networkx.

Loading goes through :func:`graph_from_object` (also what ``load_pipeline`` and ``open_run`` do for
such objects) and :func:`from_networkx`; exporting through :func:`to_pydot`, :func:`to_graphviz`
and :func:`to_networkx`. No library is a dependency: each is imported here, when asked for. The
model knows nothing of this module (an optional adapter on top imports the model, never the
other way round), so ``Graph`` has no export methods.

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

__all__ = ["from_networkx", "graph_from_object", "to_graphviz", "to_networkx", "to_pydot"]


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


def to_networkx(graph: Graph) -> Any:
    """A ``networkx.MultiDiGraph`` of ``graph`` as written (:func:`as_written`), for analysis.

    Graph attributes are in ``G.graph`` (with ``name``), each node's attributes on the node and
    each edge's on the edge. Values are the strings the pipeline holds. An edge's key is its
    place in the pipeline's declaration order (0, 1, ...), which networkx's own edge order does
    not keep and :func:`from_networkx` puts back.
    """
    networkx = _library("networkx")
    graph = as_written(graph)
    result = networkx.MultiDiGraph(name=graph.name, **dict(graph.attrs))
    for node in graph.nodes.values():
        result.add_node(node.id, **dict(node.attrs))
    for number, edge in enumerate(graph.edges):
        result.add_edge(edge.source, edge.target, key=number, **dict(edge.attrs))
    return result


def _dot_value(value: object, where: str) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | int | float):
        return str(value)
    raise FreshnessMagicError(
        f"cannot make a pipeline attribute of {where}: its value {value!r} is a "
        f"{type(value).__name__}; pipeline attributes are strings, numbers or booleans"
    )


def _attr_list(attrs: dict[str, object], where: str) -> str:
    pairs = [f"{_id(str(key))}={quote(_dot_value(value, f'{where} {key!r}'))}"
             for key, value in attrs.items()]  # fmt: skip
    return f" [{', '.join(pairs)}]" if pairs else ""


def _edges_in_order(nx_graph: Any) -> list[tuple[Any, Any, dict[str, object]]]:
    """The edges in declaration order when their keys give it (distinct integers, as
    :func:`to_networkx` writes them), else in networkx's order."""
    if not nx_graph.is_multigraph():
        return list(nx_graph.edges(data=True))
    keyed = list(nx_graph.edges(keys=True, data=True))
    keys = [key for _, _, key, _ in keyed]
    if all(isinstance(key, int) for key in keys) and len(set(keys)) == len(keys):
        keyed.sort(key=lambda edge: edge[2])
    return [(source, target, attrs) for source, target, _, attrs in keyed]


def from_networkx(nx_graph: Any) -> Graph:
    """A pipeline Graph from a networkx directed graph (a ``DiGraph`` or ``MultiDiGraph``), loaded
    as DOT text would be (transforms applied), so ``from_networkx(to_networkx(g))`` equals ``g``
    for a pipeline loaded from text, source positions aside.

    Node ids must be pipeline ids (``[A-Za-z_][A-Za-z0-9_]*``); attribute values strings,
    numbers or booleans. Anything else is a :class:`~freshness_magic.errors.FreshnessMagicError`
    naming the node or edge.
    """
    if not getattr(nx_graph, "is_directed", lambda: False)():
        raise FreshnessMagicError(
            "from_networkx needs a directed graph (networkx.DiGraph or MultiDiGraph): a "
            "pipeline's edges have a direction"
        )
    for node_id in nx_graph.nodes:
        if not isinstance(node_id, str) or not NODE_ID_RE.match(node_id):
            raise FreshnessMagicError(
                f"node {node_id!r} cannot be a pipeline node: ids are names matching "
                "[A-Za-z_][A-Za-z0-9_]* (rename it, e.g. with networkx.relabel_nodes)"
            )
    graph_attrs = {k: v for k, v in nx_graph.graph.items() if k != "name"}
    name = str(nx_graph.graph.get("name") or "pipeline")
    lines = [f"digraph {_id(name)} {{"]
    if graph_attrs:
        lines.append(f"  graph{_attr_list(graph_attrs, 'the graph attribute')}")
    for node_id, attrs in nx_graph.nodes(data=True):
        lines.append(f"  {node_id}{_attr_list(attrs, f'node {node_id!r}, attribute')}")
    for source, target, attrs in _edges_in_order(nx_graph):
        where = f"edge {source} -> {target}, attribute"
        lines.append(f"  {source} -> {target}{_attr_list(attrs, where)}")
    lines.append("}")
    return load_pipeline("\n".join(lines))
