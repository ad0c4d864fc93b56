"""The Validator: the rule registry of one use, and the one pass that runs the rules.

A :class:`Validator` holds the engine's rules (:mod:`.rules`) plus any registered with
:meth:`Validator.register_rule`, such as the rules of attributes that packages outside the
engine read, which the layer composing those packages registers (no global registry).
Structural rules walk the graph once; the per-node and per-edge parts of the other rules
(:class:`~.core.ScanRule`) run together in a single pass over the nodes and one over the edges,
so validation is O(nodes + edges).
"""

from __future__ import annotations

from collections.abc import Iterable

from freshness_magic.engine.model import Graph
from freshness_magic.engine.validation.core import (
    ERROR,
    AttributeRule,
    AttributeScope,
    Diagnostic,
    EdgeCheck,
    LintRule,
    NodeCheck,
    ScanRule,
    Severity,
    graph_diag,
)
from freshness_magic.engine.validation.rules import default_rules
from freshness_magic.errors import ValidationError


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
