"""Print a :class:`~freshness_magic.engine.model.Graph` back as Attractor DOT.

``parse_dot(to_dot(graph))`` yields the same graph name, graph attributes, nodes (in order, with
their attributes, ``explicit`` keys and subgraph classes) and edges (in order, with attributes);
only source positions differ. The output is also plain Graphviz DOT, so the notebook can hand it
to ``dot`` for layout.

How the model is encoded:

- every value is a double-quoted string with ``\\``, ``"``, line breaks and tabs escaped, so no
  pipeline text can break out of its attribute (or be read as an HTML-like label); dotted
  attribute names (``human.default_choice``) are quoted too, as Graphviz requires;
- a node's non-explicit attributes (those it got from ``node [...]`` defaults) are written as a
  ``node [...]`` default inside an anonymous ``{ ... }`` scope around that node alone, so they
  stay non-explicit after re-parsing;
- subgraph classes become nested unnamed subgraphs whose ``label`` is the class (a derived class
  derives to itself). Unnamed subgraphs are not clusters, so Graphviz draws nothing for them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from freshness_magic.engine.dot_attrs import KEY_RE
from freshness_magic.engine.model import NODE_ID_RE, Graph, Node
from freshness_magic.errors import FreshnessMagicError

__all__ = ["quote", "to_dot"]

_KEYWORDS = frozenset({"digraph", "graph", "subgraph", "node", "edge", "strict"})


_UNWRITABLE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
"""Control characters (tab and line break aside): DOT has no escape for them, and the parser
refuses them raw."""


def quote(value: str) -> str:
    """``value`` as a DOT double-quoted string that the parser reads back unchanged."""
    found = _UNWRITABLE.search(value)
    if found is not None:
        raise FreshnessMagicError(
            f"cannot write {value!r} as DOT: it holds control character "
            f"U+{ord(found.group()):04X}, which pipeline text may not; remove it"
        )
    return (
        '"'
        + value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t")
        + '"'
    )


def _node_id(node_id: str) -> str:
    if not NODE_ID_RE.match(node_id) or node_id.lower() in _KEYWORDS:
        raise FreshnessMagicError(
            f"cannot write node id {node_id!r} as DOT: node ids must match "
            "[A-Za-z_][A-Za-z0-9_]* and not be a DOT keyword"
        )
    return node_id


def _subgraph_id(name: str) -> str:
    """A subgraph's name as DOT: bare when it is a plain identifier, else quoted (any text is a
    legal subgraph name, ``subgraph "cluster a b"``)."""
    return name if NODE_ID_RE.match(name) and name.lower() not in _KEYWORDS else quote(name)


def _attr_list(attrs: Mapping[str, str]) -> str:
    parts = []
    for key, value in attrs.items():
        if not KEY_RE.match(key):
            raise FreshnessMagicError(
                f"cannot write attribute name {key!r} as DOT: names are identifiers, optionally "
                "dotted"
            )
        plain = NODE_ID_RE.match(key) and key.lower() not in _KEYWORDS
        parts.append(f"{key if plain else quote(key)}={quote(value)}")
    return "[" + ", ".join(parts) + "]"


def _node_statement(node: Node, clusters: Mapping[str, tuple[str, str]]) -> str:
    explicit = {k: v for k, v in node.attrs.items() if k in node.explicit}
    inherited = {k: v for k, v in node.attrs.items() if k not in node.explicit}
    statement = _node_id(node.id)
    if explicit:
        statement += " " + _attr_list(explicit)
    if inherited:
        statement = f"node {_attr_list(inherited)}; {statement}"
        if not node.subgraph_classes:
            statement = f"{{ {statement} }}"
    for cls in reversed(node.subgraph_classes):
        name, label = clusters.get(cls, ("", cls))
        head = f"subgraph {_subgraph_id(name)} " if name else "subgraph "
        statement = f"{head}{{ label={quote(label)}; {statement} }}"
    return statement


def to_dot(graph: Graph, clusters: Mapping[str, tuple[str, str]] | None = None) -> str:
    """The DOT text of ``graph``: graph attributes, every node with its attributes, every edge.

    ``clusters``: subgraph class -> (name, label) to write a node's class subgraph as that named
    subgraph (a ``cluster_*`` keeps its box when drawn); other classes stay unnamed.
    """
    name = graph.name
    if name and not (NODE_ID_RE.match(name) and name.lower() not in _KEYWORDS):
        name = quote(name)
    lines = [f"digraph {name} {{" if name else "digraph {"]
    if graph.attrs:
        lines.append(f"  graph {_attr_list(graph.attrs)}")
    lines.extend(f"  {_node_statement(node, clusters or {})}" for node in graph.nodes.values())
    for edge in graph.edges:
        text = f"  {_node_id(edge.source)} -> {_node_id(edge.target)}"
        if edge.attrs:
            text += " " + _attr_list(edge.attrs)
        lines.append(text)
    lines.append("}")
    return "\n".join(lines) + "\n"
