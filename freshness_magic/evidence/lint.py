"""The evidence attribute's lint rule (``evidence_valid``).

It reaches validation through :meth:`EvidenceExtension.lint_rules`; the engine knows nothing of it.
"""

from __future__ import annotations

from freshness_magic.engine.model import EVIDENCE_MODES, Graph, Node
from freshness_magic.engine.validation import ERROR, LintRule, Out, ScanRule, graph_diag, node_diag

_EVIDENCE_FIX = 'write evidence="record" or evidence="require"'


def _evidence_graph(graph: Graph, out: Out) -> None:
    value = graph.attrs.get("evidence")
    if value is not None and value not in EVIDENCE_MODES:
        out.append(
            graph_diag(
                "evidence_valid",
                ERROR,
                graph,
                f"graph evidence={value!r} is not one of " + "|".join(EVIDENCE_MODES),
                _EVIDENCE_FIX,
                "evidence",
            )
        )


def _evidence_node(graph: Graph, node: Node, out: Out) -> None:
    value = node.attrs.get("evidence")
    if value is not None and value not in EVIDENCE_MODES:
        out.append(
            node_diag(
                "evidence_valid",
                ERROR,
                node,
                f"node `{node.id}`: evidence={value!r} is not one of " + "|".join(EVIDENCE_MODES),
                _EVIDENCE_FIX,
                "evidence",
            )
        )


def evidence_rules() -> list[LintRule]:
    """The evidence attribute's rules, to register with a Validator."""
    return [ScanRule("evidence_valid", _evidence_graph, _evidence_node)]
