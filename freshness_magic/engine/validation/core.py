"""Validation plumbing (spec §7.3–§7.4): diagnostics, rules, and the Validator that runs them.

Rules are objects with a ``name`` and ``apply(graph)``. A :class:`Validator` is the rule
registry of one use (no global registry): the engine's rules (:mod:`.rules`) plus any registered
with :meth:`Validator.register_rule`, such as the rules of attributes that packages outside the
engine read, which the layer composing those packages registers. Structural
rules walk the graph once; the per-node and per-edge parts of the other rules
(:class:`ScanRule`) run together in a single pass over the nodes and one over the edges, so
validation is O(nodes + edges). Each diagnostic carries the line and column of the node, edge or
attribute it is about, and a fix hint.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple, Protocol, runtime_checkable

from freshness_magic.engine.model import Edge, Graph, Node, Position
from freshness_magic.errors import ValidationError


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


def _sort_key(diagnostic: Diagnostic) -> tuple[int, int]:
    return (diagnostic.line, diagnostic.column)


class Validator:
    """A set of lint rules: the built-ins (unless ``rules`` is given) plus registered ones."""

    def __init__(
        self,
        rules: Iterable[LintRule] | None = None,
        *,
        known_types: Iterable[str] | None = None,
    ) -> None:
        if rules is None:
            from freshness_magic.engine.validation.rules import default_rules

            rules = default_rules(known_types)
        self._rules: list[LintRule] = list(rules)

    @property
    def rules(self) -> tuple[LintRule, ...]:
        return tuple(self._rules)

    def register_rule(self, rule: LintRule) -> None:
        """Append a custom rule; it runs after the ones already registered (§7.4)."""
        if not isinstance(rule, LintRule):
            raise TypeError(f"{rule!r} is not a lint rule: it needs `name` and `apply(graph)`")
        self._rules.append(rule)

    def node_attributes(self) -> frozenset[str]:
        """Every node attribute a registered rule declares (its ``node_attributes``)."""
        return self._declared("node_attributes")

    def graph_attributes(self) -> frozenset[str]:
        """Every graph attribute a registered rule declares (its ``graph_attributes``)."""
        return self._declared("graph_attributes")

    def _declared(self, field: str) -> frozenset[str]:
        known: set[str] = set()
        for rule in self._rules:
            known.update(getattr(rule, field, ()))
        return frozenset(known)

    def validate(self, graph: Graph) -> list[Diagnostic]:
        """All diagnostics, ordered by source position (stable within a position).

        Whole-graph rules run one by one; the per-node and per-edge parts of scan rules run
        together in one pass over the nodes and one over the edges. A rule that raises is
        reported once as an ERROR diagnostic under its own name instead of aborting validation.
        """
        return self._validate(graph)

    def _validate(self, graph: Graph) -> list[Diagnostic]:
        out: list[Diagnostic] = []
        failed: set[str] = set()
        node_checks: list[tuple[str, NodeCheck]] = []
        edge_checks: list[tuple[str, EdgeCheck]] = []
        for rule in self._rules:
            name = str(getattr(rule, "name", type(rule).__name__))
            try:
                if isinstance(rule, ScanRule):
                    if rule.graph_check is not None:
                        rule.graph_check(graph, out)
                    if rule.node_check is not None:
                        node_checks.append((name, rule.node_check))
                    if rule.edge_check is not None:
                        edge_checks.append((name, rule.edge_check))
                elif isinstance(rule, AttributeRule):
                    graph_scope = rule.scope is AttributeScope.GRAPH
                    known = self.graph_attributes() if graph_scope else self.node_attributes()
                    rule.check(graph, known, out)
                else:
                    out.extend(rule.apply(graph))
            except Exception as exc:  # a broken rule must not hide the other findings
                self._report_failure(graph, name, exc, failed, out)
        for node in graph.nodes.values():
            for name, node_check in node_checks:
                try:
                    node_check(graph, node, out)
                except Exception as exc:
                    self._report_failure(graph, name, exc, failed, out)
        for edge in graph.edges:
            for name, edge_check in edge_checks:
                try:
                    edge_check(graph, edge, out)
                except Exception as exc:
                    self._report_failure(graph, name, exc, failed, out)
        out.sort(key=_sort_key)
        return out

    @staticmethod
    def _report_failure(
        graph: Graph, name: str, exc: Exception, failed: set[str], out: list[Diagnostic]
    ) -> None:
        if name in failed:
            return
        failed.add(name)
        out.append(
            graph_diag(
                name,
                ERROR,
                graph,
                f"lint rule failed: {type(exc).__name__}: {exc}",
                "fix or remove the rule",
            )
        )

    def validate_or_raise(self, graph: Graph) -> list[Diagnostic]:
        """Diagnostics when there are no errors; else :class:`ValidationError` listing them
        with the warnings, in source order (a warning often names the cause of an error: a
        misspelt attribute the error misses)."""
        diagnostics = self.validate(graph)
        errors = [d for d in diagnostics if d.severity is Severity.ERROR]
        if errors:
            shown = [d for d in diagnostics if d.severity in (Severity.ERROR, Severity.WARNING)]
            lines = "\n".join("  " + d.format(graph.path) for d in shown)
            noun = "error" if len(errors) == 1 else "errors"
            warned = len(shown) - len(errors)
            also = f" and {warned} warning{'' if warned == 1 else 's'}" if warned else ""
            name = f"pipeline `{graph.name}`" if graph.name else "the pipeline"  # `digraph {`
            raise ValidationError(
                f"{name} has {len(errors)} validation {noun}{also}; fix the {noun} before "
                f"running:\n{lines}",
                list(shown),
            )
        return diagnostics


def _validator(extra_rules: Iterable[LintRule], known_types: Iterable[str] | None) -> Validator:
    validator = Validator(known_types=known_types)
    for rule in extra_rules:
        validator.register_rule(rule)
    return validator


def validate(
    graph: Graph,
    extra_rules: Iterable[LintRule] = (),
    known_types: Iterable[str] | None = None,
) -> list[Diagnostic]:
    """Run the built-in rules and then ``extra_rules`` on ``graph`` (§7.3)."""
    return _validator(extra_rules, known_types).validate(graph)


def validate_or_raise(
    graph: Graph,
    extra_rules: Iterable[LintRule] = (),
    known_types: Iterable[str] | None = None,
) -> list[Diagnostic]:
    """Like :func:`validate`, but raise :class:`ValidationError` when there is an error."""
    return _validator(extra_rules, known_types).validate_or_raise(graph)


def has_errors(diagnostics: Iterable[Diagnostic]) -> bool:
    return any(d.severity is Severity.ERROR for d in diagnostics)
