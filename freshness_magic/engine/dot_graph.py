"""Building the :class:`~.model.Graph` as the DOT parser reads statements.

:class:`GraphBuilder` holds the open (sub)graph scopes and turns statements into nodes, edges
and subgraphs:

- ``node [...]`` / ``edge [...]`` defaults apply to later statements of their (sub)graph only; a
  subgraph starts with a copy of its parent's defaults at the point where it opens.
- A node is created at its first mention (a node statement or an edge) with the node defaults in
  effect there. A later node statement for an existing node merges: its explicit attributes
  override, and defaults in effect at the later statement fill only keys the node does not have
  yet (so a node first seen in an edge and declared later inside a subgraph still picks up that
  subgraph's defaults, but an earlier value is never replaced by a default).
- ``Node.explicit`` is the union of keys written on the node's own statements; ``attr_positions``
  point at the key that supplied each value (a default block's key for defaulted values).
- Nodes declared, or first mentioned in an edge, inside subgraphs receive the classes derived
  from the labels of all enclosing subgraphs (outermost first, §2.10), whenever in the subgraph
  its label is set (:meth:`GraphBuilder.finish`).
"""

from __future__ import annotations

import re
from itertools import pairwise

from freshness_magic.engine.dot_attrs import Attr
from freshness_magic.engine.dot_lexer import SourceMap
from freshness_magic.engine.model import Edge, Graph, Node, Position, Subgraph

_CLASS_STRIP_RE = re.compile(r"[^a-z0-9-]+")


def subgraph_class(label: str) -> str:
    """The class a subgraph label derives (§2.10): lowercase, spaces to hyphens, [a-z0-9-] kept."""
    return _CLASS_STRIP_RE.sub("", label.lower().replace(" ", "-"))


class Scope:
    """The root graph or one subgraph: its defaults (copied from the parent) and its attributes."""

    __slots__ = (
        "attr_positions",
        "attrs",
        "edge_positions",
        "edge_values",
        "name",
        "node_positions",
        "node_values",
        "number",
        "open_offset",
        "parent",
    )

    def __init__(self, number: int, open_offset: int, parent: Scope | None, name: str = "") -> None:
        self.number = number
        self.open_offset = open_offset
        self.parent = parent
        self.name = name
        self.attrs: dict[str, str] = {}
        self.attr_positions: dict[str, Position] = {}
        if parent is None:
            self.node_values: dict[str, str] = {}
            self.node_positions: dict[str, Position] = {}
            self.edge_values: dict[str, str] = {}
            self.edge_positions: dict[str, Position] = {}
        else:
            self.node_values = dict(parent.node_values)
            self.node_positions = dict(parent.node_positions)
            self.edge_values = dict(parent.edge_values)
            self.edge_positions = dict(parent.edge_positions)


class GraphBuilder:
    """The graph being built and its open scopes; see the module docstring."""

    def __init__(self, graph: Graph, source: SourceMap) -> None:
        self.graph = graph
        self._pos = source.position
        self.scopes: list[Scope] = []
        self.subgraphs: list[Scope] = []
        self.memberships: dict[str, dict[int, None]] = {}
        self.explicit_sets: dict[frozenset[str], frozenset[str]] = {}
        """One shared frozenset per distinct ``Node.explicit`` (most nodes repeat a few shapes)."""

    @property
    def scope(self) -> Scope:
        """The innermost open (sub)graph."""
        return self.scopes[-1]

    def open_root(self, offset: int) -> None:
        """Open the digraph itself at the '{' at ``offset``: its attributes are the graph's."""
        root = Scope(0, offset, None)
        root.attrs = self.graph.attrs
        root.attr_positions = self.graph.attr_positions
        self.scopes.append(root)

    def open_subgraph(self, offset: int, name: str = "") -> None:
        scope = Scope(len(self.subgraphs) + 1, offset, self.scopes[-1], name)
        self.subgraphs.append(scope)
        self.scopes.append(scope)

    def close(self) -> bool:
        """Close the innermost scope; False when that was the digraph itself."""
        self.scopes.pop()
        return bool(self.scopes)

    def create_node(self, node_id: str, offset: int) -> Node:
        scope = self.scopes[-1]
        node = Node(
            node_id,
            dict(scope.node_values),
            self._pos(offset),
            dict(scope.node_positions),
        )
        self.graph.nodes[node_id] = node
        self._add_membership(node_id)
        return node

    def declare_node(self, node_id: str, offset: int, items: list[Attr]) -> None:
        node = self.graph.nodes.get(node_id)
        if node is None:
            node = self.create_node(node_id, offset)
        else:
            scope = self.scopes[-1]
            for key, value in scope.node_values.items():
                if key not in node.attrs:
                    node.attrs[key] = value
                    node.attr_positions[key] = scope.node_positions[key]
            self._add_membership(node_id)
        if items:
            attrs, positions = node.attrs, node.attr_positions
            for key, value, position in items:
                attrs[key] = value
                positions[key] = position
            keys = frozenset([key for key, _, _ in items])
            if node.explicit:
                keys |= node.explicit
            node.explicit = self.explicit_sets.setdefault(keys, keys)

    def add_edges(self, chain: list[tuple[str, int]], items: list[Attr]) -> None:
        """``a -> b -> c [...]``: ``chain`` holds each node id and its offset."""
        for node_id, offset in chain:
            if node_id not in self.graph.nodes:
                self.create_node(node_id, offset)
        scope = self.scopes[-1]
        pos = self._pos
        explicit_values = {key: value for key, value, _ in items}
        explicit_positions = {key: position for key, _, position in items}
        edges = self.graph.edges
        for (source, offset), (target, _) in pairwise(chain):
            attrs = dict(scope.edge_values)
            attrs.update(explicit_values)
            positions = dict(scope.edge_positions)
            positions.update(explicit_positions)
            edges.append(Edge(source, target, attrs, pos(offset), positions, len(edges)))

    def _add_membership(self, node_id: str) -> None:
        if len(self.scopes) > 1:
            member_of = self.memberships.setdefault(node_id, {})
            for scope in self.scopes[1:]:
                member_of[scope.number] = None

    def finish(self) -> Graph:
        """The graph with its subgraphs and each node's subgraph classes."""
        nodes = self.graph.nodes
        if not self.memberships:
            return self.graph
        members: dict[int, list[str]] = {}
        for node_id, numbers in self.memberships.items():
            for number in numbers:
                members.setdefault(number, []).append(node_id)
        self.graph.subgraphs = [
            Subgraph(
                name=scope.name,
                label=scope.attrs.get("label", ""),
                parent=None if scope.parent is None or scope.parent.number == 0
                else scope.parent.number - 1,
                nodes=tuple(members.get(scope.number, ())),
            )
            for scope in self.subgraphs
        ]  # fmt: skip
        classes_of = {
            scope.number: subgraph_class(scope.attrs.get("label", "")) for scope in self.subgraphs
        }
        shared: dict[tuple[str, ...], tuple[str, ...]] = {}
        for node_id, numbers in self.memberships.items():
            derived = tuple(dict.fromkeys(classes_of[n] for n in numbers if classes_of[n]))
            nodes[node_id].subgraph_classes = shared.setdefault(derived, derived)
        return self.graph
