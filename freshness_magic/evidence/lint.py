"""The evidence attributes' lint rules: ``evidence_valid``, and ``attr_type`` for ``commit`` and
``expects_no_changes``.

The layer that composes a session registers them with its Validator
(:mod:`freshness_magic.lint`; a run gets them through :meth:`EvidenceExtension.lint_rules`);
the engine knows nothing of them.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from freshness_magic.engine.model import Graph, Node
from freshness_magic.engine.validation import (
    BOOL,
    ERROR,
    Diagnostic,
    FunctionRule,
    LintRule,
    Out,
    ScanRule,
    attr_type_rule,
    graph_diag,
    node_diag,
)
from freshness_magic.evidence.attrs import EVIDENCE_MODES, commit_enabled, is_work_type

if TYPE_CHECKING:
    from pathlib import Path

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


def _commit_repo(workdir: str) -> FunctionRule:
    """``commit_repo``: ``commit=true`` needs the working directory inside a git work tree (else
    the commit fails after the node has changed files)."""

    def check(graph: Graph) -> list[Diagnostic]:
        committing = [
            n
            for n in graph.nodes.values()
            if is_work_type(n.handler_type) and commit_enabled(graph, n)
        ]
        if not committing:
            return []
        from freshness_magic.vcs.git import toplevel

        if toplevel(workdir) is not None:
            return []
        node = committing[0]
        others = f" (and {len(committing) - 1} more)" if len(committing) > 1 else ""
        where = os.path.realpath(workdir)
        message = (
            f"node `{node.id}`{others} commits its changes (commit=true), but the working "
            f"directory {where} is not in a git work tree, so the commit would fail after the "
            "node changed files"
        )
        fix = f"run `git init` in {where}, or remove commit=true"
        if "commit" in node.explicit:
            return [node_diag("commit_repo", ERROR, node, message, fix, "commit")]
        return [graph_diag("commit_repo", ERROR, graph, message, fix, "commit")]

    return FunctionRule("commit_repo", check)


def evidence_rules(workdir: str | Path | None = None) -> list[LintRule]:
    """The evidence attributes' rules, to register with a Validator; with ``workdir`` (where the
    run works), ``commit_repo`` too."""
    rules: list[LintRule] = [
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
    if workdir is not None:
        rules.append(_commit_repo(os.fspath(workdir)))
    return rules
