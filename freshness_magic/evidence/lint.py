"""The evidence attributes' lint rules: ``evidence_valid``, and ``attr_type`` for ``commit`` and
``expects_no_changes``.

The layer that composes a session registers them with its Validator
(:mod:`freshness_magic.lint`; a run gets them through :meth:`EvidenceExtension.lint_rules`);
the engine knows nothing of them.
"""

from __future__ import annotations

from freshness_magic.engine.model import Graph, Node
from freshness_magic.engine.validation import (
    BOOL,
    ERROR,
    LintRule,
    Out,
    ScanRule,
    attr_type_rule,
    graph_diag,
    node_diag,
)
from freshness_magic.evidence.attrs import EVIDENCE_MODES

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
    """The evidence attributes' rules, to register with a Validator."""
    return [
        ScanRule(
            "evidence_valid",
            _evidence_graph,
            _evidence_node,
            node_attributes=frozenset({"evidence"}),
            graph_attributes=frozenset({"evidence"}),
        ),
        attr_type_rule(
            graph_typed={"commit": BOOL},
            node_typed={"expects_no_changes": BOOL, "commit": BOOL},
        ),
    ]
