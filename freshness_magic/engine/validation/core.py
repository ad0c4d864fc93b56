"""Validation plumbing (spec §7.3–§7.4): diagnostics and the kinds of rule.

Rules are objects with a ``name`` and ``apply(graph)``; :class:`ScanRule` splits a rule into
per-node and per-edge parts that :class:`~.validator.Validator` runs in one pass. Each diagnostic
carries the line and column of the node, edge or attribute it is about, and a fix hint. The
rules (:mod:`.rules` and the modules it gathers) import this module; the validator imports both.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple, Protocol, runtime_checkable

from freshness_magic.engine.model import Edge, Graph, Node, Position


class Severity(enum.Enum):
    """ERROR stops a run; WARNING runs but may surprise; INFO is a note."""

    ERROR = "error"
    WARNING = "warning"
    INFO = "info"

    def __str__(self) -> str:
        return self.value


class Diagnostic(NamedTuple):
    """One finding. ``line``/``column`` are 1-based; 0 means the position is unknown.

    A named tuple (immutable, like the rule records below) for start-up time: see
    ``engine.model.Position``.
    """

    rule: str
    severity: Severity
    message: str
    node: str | None = None
    edge: tuple[str, str] | None = None
    line: int = 0
    column: int = 0
    fix: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "rule": self.rule,
            "severity": self.severity.value,
            "message": self.message,
            "node": self.node,
            "edge": list(self.edge) if self.edge is not None else None,
            "line": self.line,
            "column": self.column,
            "fix": self.fix,
        }

    def format(self, path: str | None = None) -> str:
        """``path:line:col: severity rule: message (fix: ...)``."""
        text = (
            f"{path or '<string>'}:{self.line}:{self.column}: "
            f"{self.severity.value} {self.rule}: {self.message}"
        )
        return f"{text} (fix: {self.fix})" if self.fix else text


@runtime_checkable
class LintRule(Protocol):
    """A validation rule: a stable ``name`` and ``apply(graph) -> list[Diagnostic]``."""

    @property
    def name(self) -> str: ...

    def apply(self, graph: Graph) -> list[Diagnostic]: ...


# -- positions -----------------------------------------------------------------------------


def _at(position: Position | None) -> tuple[int, int]:
    return (position.line, position.column) if position is not None else (0, 0)


def node_at(node: Node, key: str | None = None) -> tuple[int, int]:
    if key is not None and key in node.attr_positions:
        return _at(node.attr_positions[key])
    return _at(node.position)


def edge_at(edge: Edge, key: str | None = None) -> tuple[int, int]:
    if key is not None and key in edge.attr_positions:
        return _at(edge.attr_positions[key])
    return _at(edge.position)


_HEADER = r"\bdigraph\b"  # compiled on first use, as model._DURATION


def graph_at(graph: Graph, key: str | None = None) -> tuple[int, int]:
    """A graph attribute's position, else the ``digraph`` keyword's, else unknown."""
    if key is not None and key in graph.attr_positions:
        return _at(graph.attr_positions[key])
    match = re.search(_HEADER, graph.source)
    if match is None:
        return (1, 1) if graph.source else (0, 0)
    line = graph.source.count("\n", 0, match.start()) + 1
    return line, match.start() - (graph.source.rfind("\n", 0, match.start()) + 1) + 1


_ONE_CHAR_ESCAPES = frozenset('"\\nt')


def position_in_value(
    graph: Graph, position: Position | None, key: str, index: int
) -> tuple[int, int] | None:
    """Source line/column of character ``index`` of attribute ``key``'s unescaped value.

    ``position`` may point at the key or at the value. None when the source does not match
    (for example a graph built in code), so callers fall back to the attribute's position.
    """
    source = graph.source
    if position is None or not source or position.line <= 0:
        return None
    offset = 0
    for _ in range(position.line - 1):
        offset = source.find("\n", offset) + 1
        if offset == 0:
            return None
    offset += position.column - 1
    for written in (key, f'"{key}"'):
        if source.startswith(written, offset):
            offset += len(written)
            break
    else:
        written = ""
    if written:
        while offset < len(source) and source[offset] in " \t\r\n":
            offset += 1
        if not source.startswith("=", offset):
            return None
        offset += 1
        while offset < len(source) and source[offset] in " \t\r\n":
            offset += 1
    if source.startswith('"', offset):
        pos, seen = offset + 1, 0
        while pos < len(source) and source[pos] != '"' and seen < index:
            if source[pos] == "\\":
                following = source[pos + 1 : pos + 3]
                if following.startswith(("\n", "\r\n")):
                    pos += 1 + (2 if following == "\r\n" else 1)
                    continue
                if following[:1] in _ONE_CHAR_ESCAPES:
                    pos += 1
            pos += 1
            seen += 1
        if seen < index:
            return None
        offset = pos
    else:
        offset += index
    line = source.count("\n", 0, offset) + 1
    return line, offset - (source.rfind("\n", 0, offset) + 1) + 1


# -- rule plumbing ---------------------------------------------------------------------------

Out = list[Diagnostic]
NodeCheck = Callable[[Graph, Node, Out], None]
EdgeCheck = Callable[[Graph, Edge, Out], None]


class FunctionRule(NamedTuple):
    """A lint rule made of a name and a function of the whole graph."""

    name: str
    check: Callable[[Graph], list[Diagnostic]]
    node_attributes: frozenset[str] = frozenset()
    """Node attributes the rule's package reads (see :meth:`Validator.node_attributes`)."""
    graph_attributes: frozenset[str] = frozenset()
    """Graph attributes the rule's package reads (see :meth:`Validator.graph_attributes`)."""

    def apply(self, graph: Graph) -> list[Diagnostic]:
        return self.check(graph)


class ScanRule(NamedTuple):
    """A rule with a graph part and per-node and per-edge parts.

    :class:`Validator` runs the per-node parts of all scan rules in one pass over the nodes
    (and likewise for edges), so each node is visited once however many rules look at it.
    """

    name: str
    graph_check: Callable[[Graph, Out], None] | None = None
    node_check: NodeCheck | None = None
    edge_check: EdgeCheck | None = None
    node_attributes: frozenset[str] = frozenset()
    """Node attributes the rule's package reads (see :meth:`Validator.node_attributes`)."""
    graph_attributes: frozenset[str] = frozenset()
    """Graph attributes the rule's package reads (see :meth:`Validator.graph_attributes`)."""

    def apply(self, graph: Graph) -> list[Diagnostic]:
        out: list[Diagnostic] = []
        if self.graph_check is not None:
            self.graph_check(graph, out)
        if self.node_check is not None:
            for node in graph.nodes.values():
                self.node_check(graph, node, out)
        if self.edge_check is not None:
            for edge in graph.edges:
                self.edge_check(graph, edge, out)
        return out


class AttributeScope(enum.Enum):
    """Which attributes an :class:`AttributeRule` is about."""

    NODE = "node"
    GRAPH = "graph"


class AttributeRule(NamedTuple):
    """A rule about attribute names: ``check(graph, known, out)`` gets every attribute of its
    ``scope`` (node or graph) that the rules of its validator declare (their
    ``node_attributes`` or ``graph_attributes``), its own included.

    So the list of known attributes is kept by the rules of the packages that read them, and an
    attribute a package adds is known wherever that package's rules are registered. Applied on
    its own (outside a :class:`Validator`) it knows only its own declared attributes.
    """

    name: str
    check: Callable[[Graph, frozenset[str], Out], None]
    node_attributes: frozenset[str] = frozenset()
    graph_attributes: frozenset[str] = frozenset()
    scope: AttributeScope = AttributeScope.NODE

    def apply(self, graph: Graph) -> list[Diagnostic]:
        out: list[Diagnostic] = []
        own = self.node_attributes if self.scope is AttributeScope.NODE else self.graph_attributes
        self.check(graph, own, out)
        return out


def node_diag(
    rule: str, severity: Severity, node: Node, message: str, fix: str, key: str | None = None
) -> Diagnostic:
    line, column = node_at(node, key)
    return Diagnostic(rule, severity, message, node.id, None, line, column, fix)


def edge_diag(
    rule: str, severity: Severity, edge: Edge, message: str, fix: str, key: str | None = None
) -> Diagnostic:
    line, column = edge_at(edge, key)
    return Diagnostic(rule, severity, message, None, edge.key, line, column, fix)


def graph_diag(
    rule: str, severity: Severity, graph: Graph, message: str, fix: str, key: str | None = None
) -> Diagnostic:
    line, column = graph_at(graph, key)
    return Diagnostic(rule, severity, message, None, None, line, column, fix)


ERROR, WARNING, INFO = Severity.ERROR, Severity.WARNING, Severity.INFO


def has_errors(diagnostics: Iterable[Diagnostic]) -> bool:
    return any(d.severity is Severity.ERROR for d in diagnostics)
