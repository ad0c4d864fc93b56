"""The rules of the attributes that choose a backend: ``llm_endpoint`` (an ERROR: a pipeline's
``llm_provider``/``llm_model`` never carries a URL, host, port or key; see :mod:`.choice`) and
``llm_provider_known`` (a provider a model backend can switch to).

A node's ``llm_provider`` (its own, or the one ``model_stylesheet`` gives it) makes a model
backend hand the node to that provider's backend; a name that is none fails the node only when
it runs, and only with a model backend. Registered by the session validator, so ``validate`` and
loading a pipeline say it first. A warning: with the simulated default it has no effect.
"""

from __future__ import annotations

from typing import Any

from freshness_magic.backends.choice import PIPELINE_CHOICES, WHERE_ENDPOINTS_GO, choice_problem
from freshness_magic.engine.model import Graph, Node
from freshness_magic.engine.validation import (
    ERROR,
    WARNING,
    Diagnostic,
    LintRule,
    Out,
    ScanRule,
    graph_diag,
    node_diag,
)

RULE = "llm_provider_known"
ENDPOINT_RULE = "llm_endpoint"
CODERGEN = "codergen"
"""The handler type whose nodes a model backend runs."""
OTHER_PROVIDERS = frozenset({"gemini", "google", "mistral", "ollama", "groq", "xai", "deepseek"})
"""Provider names pipelines use (spec §8 names gemini) that have no backend of their own here."""


def _unknown(value: str) -> tuple[bool, str]:
    """Whether ``value`` names no model backend, and the fix to offer (imports only when a
    pipeline sets a provider: ``validate`` starts without them)."""
    from freshness_magic.backends.spec import MODEL_KINDS

    name = value.strip().lower()
    if name in MODEL_KINDS:
        return False, ""
    from freshness_magic.backends.registry import ENTRY_POINT_GROUP, available_names
    from freshness_magic.engine.validation.attrs import closest

    registered = available_names()
    if name in registered:
        return False, ""
    use = (
        f"use one of {', '.join(MODEL_KINDS)}, or a backend registered in the "
        f"{ENTRY_POINT_GROUP!r} entry-point group"
    )
    if name in OTHER_PROVIDERS:  # a real provider, not a typo of one
        return True, (
            f"this package has no {name} backend: reach it through an OpenAI-compatible "
            f"endpoint (llm_provider=openai, backend openai:MODEL@URL), or {use}"
        )
    near = closest(name, [*MODEL_KINDS, *registered])
    meant = f"did you mean {near!r}? " if near is not None else ""
    return True, meant + use


def _given(node: Node) -> bool:
    """Whether the node itself sets ``llm_provider`` (else the stylesheet gave it)."""
    return "llm_provider" in node.explicit or "llm_provider" in node.attr_positions


def _node(graph: Graph, node: Node, out: Out) -> None:
    value = node.attrs.get("llm_provider", "")
    if not value.strip() or node.handler_type != CODERGEN or not _given(node):
        return
    if choice_problem("llm_provider", value) is not None:
        return  # llm_endpoint reports it
    unknown, fix = _unknown(value)
    if unknown:
        out.append(
            node_diag(
                RULE,
                WARNING,
                node,
                f"node `{node.id}`: llm_provider={value!r} is not a model backend; a model "
                "backend fails the node when it runs",
                fix,
                "llm_provider",
            )
        )


def _stylesheet(graph: Graph, out: Out) -> None:
    """Providers the stylesheet gave: once per value, naming the nodes."""
    given: dict[str, list[str]] = {}
    for node in graph.nodes.values():
        value = node.attrs.get("llm_provider", "")
        if choice_problem("llm_provider", value) is not None:
            continue  # llm_endpoint reports it
        if value.strip() and node.handler_type == CODERGEN and not _given(node):
            given.setdefault(value, []).append(node.id)
    for value, nodes in given.items():
        unknown, fix = _unknown(value)
        if unknown:
            shown = ", ".join(f"`{n}`" for n in nodes[:5]) + (" ..." if len(nodes) > 5 else "")
            out.append(
                graph_diag(
                    RULE,
                    WARNING,
                    graph,
                    f"model_stylesheet{_written_at(graph, value)}: llm_provider {value!r} (for "
                    f"{shown}) is not a model backend; a model backend fails those nodes when "
                    "they run",
                    fix,
                    "model_stylesheet",
                )
            )


def _written_at(graph: Graph, value: str) -> str:
    """`` line L, column C``: where the stylesheet declares ``llm_provider: value`` ("" when
    it cannot be told)."""
    from freshness_magic.engine.stylesheet import parse_stylesheet
    from freshness_magic.errors import StylesheetError

    try:
        rules = parse_stylesheet(graph.model_stylesheet).rules
    except StylesheetError:
        return ""
    for rule in rules:
        for decl in rule.declarations:
            if decl.property == "llm_provider" and decl.value == value:
                return f" line {decl.line}, column {decl.column}"
    return ""


def _from_stylesheet(graph: Graph, node: Node, attribute: str) -> bool:
    """Whether the node's ``attribute`` came from ``model_stylesheet`` (reported there)."""
    if attribute in node.explicit or attribute in node.attr_positions:
        return False
    return any(decl.value == node.attrs.get(attribute) for decl in _declarations(graph, attribute))


def _declarations(graph: Graph, attribute: str) -> list[Any]:
    if not graph.model_stylesheet.strip():
        return []  # the stylesheet module is not loaded for a pipeline without one
    from freshness_magic.engine.stylesheet import parse_stylesheet
    from freshness_magic.errors import StylesheetError

    try:
        rules = parse_stylesheet(graph.model_stylesheet).rules
    except StylesheetError:
        return []
    return [d for rule in rules for d in rule.declarations if d.property == attribute]


def _endpoint_node(graph: Graph, node: Node, out: Out) -> None:
    from freshness_magic.backends.choice import shown

    for attribute in PIPELINE_CHOICES:
        value = node.attrs.get(attribute, "")
        problem = choice_problem(attribute, value)
        if problem is None or _from_stylesheet(graph, node, attribute):
            continue
        out.append(
            node_diag(
                ENDPOINT_RULE,
                ERROR,
                node,
                f"node `{node.id}`: {attribute}={shown(value)} {problem}; a pipeline may not "
                "choose where model calls go nor with which key (it would receive the user's "
                "key)",
                WHERE_ENDPOINTS_GO,
                attribute,
            )
        )


def _endpoint_stylesheet(graph: Graph, out: Out) -> None:
    """Each stylesheet declaration that carries an endpoint, at its line and column in the
    file, naming the nodes it applies to."""
    from freshness_magic.backends.choice import shown
    from freshness_magic.engine.validation.core import graph_at, position_in_value

    for attribute in PIPELINE_CHOICES:
        for decl in _declarations(graph, attribute):
            problem = choice_problem(attribute, decl.value)
            if problem is None:
                continue
            nodes = [
                n.id
                for n in graph.nodes.values()
                if n.attrs.get(attribute) == decl.value and n.handler_type == CODERGEN
            ]
            applies = ", ".join(f"`{n}`" for n in nodes[:5]) + (" ..." if len(nodes) > 5 else "")
            text = graph.model_stylesheet
            index = sum(len(line) + 1 for line in text.split("\n")[: decl.line - 1])
            where = position_in_value(
                graph,
                graph.attr_positions.get("model_stylesheet"),
                "model_stylesheet",
                index + decl.column - 1,
            ) or graph_at(graph, "model_stylesheet")
            out.append(
                Diagnostic(
                    ENDPOINT_RULE,
                    ERROR,
                    f"model_stylesheet: {attribute}: {shown(decl.value)} {problem} (for "
                    f"{applies or 'no node'}); a pipeline may not choose where model calls go "
                    "nor with which key (it would receive the user's key)",
                    nodes[0] if nodes else None,
                    None,
                    where[0],
                    where[1],
                    WHERE_ENDPOINTS_GO,
                )
            )


def backend_rules() -> list[LintRule]:
    """The rules of the attributes that choose a backend, to register with a Validator."""
    return [
        ScanRule(ENDPOINT_RULE, _endpoint_stylesheet, _endpoint_node),
        ScanRule(RULE, _stylesheet, _node),
    ]
