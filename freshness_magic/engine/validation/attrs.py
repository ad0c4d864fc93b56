"""Lint rules for attribute values: typed attributes, gate defaults, edge attributes."""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache

from freshness_magic.engine.gates import gate_question, match_choice, parse_accelerator
from freshness_magic.engine.model import Edge, Graph, Node, parse_bool, parse_duration, parse_int
from freshness_magic.engine.validation.core import (
    ERROR,
    INFO,
    WARNING,
    Out,
    edge_diag,
    graph_diag,
    node_diag,
)


@lru_cache(maxsize=1024)
def _choice_names(label: str, target: str) -> tuple[str, ...]:
    """What a default choice may name for one edge: accelerator key, target, label, text."""
    key, text = parse_accelerator(label)
    return tuple(name.strip().casefold() for name in (key, target, label, text))


def default_choice_matches(graph: Graph, node: Node, out: Out) -> None:
    key = "human.default_choice"
    wanted = node.attrs.get(key, "").strip()
    if not wanted:
        return
    if node.handler_type != "wait.human":
        out.append(
            node_diag(
                "default_choice_matches",
                WARNING,
                node,
                f"node `{node.id}` has {key} but is a {node.handler_type} node, not a human "
                "gate; it has no effect",
                f"remove {key}, or make `{node.id}` a gate with shape=hexagon",
                key,
            )
        )
        return
    folded = wanted.casefold()
    edges = graph.outgoing(node.id)
    if any(folded in _choice_names(e.label or e.target, e.target) for e in edges):
        return
    question = gate_question(graph, node)
    if match_choice(question, wanted) is not None:
        return
    listed = (
        ", ".join(
            f"{c.key} ({parse_accelerator(c.label)[1]} -> {c.target})" for c in question.choices
        )
        or "none"
    )
    out.append(
        node_diag(
            "default_choice_matches",
            WARNING,
            node,
            f"node `{node.id}`: {key} {wanted!r} matches none of the gate's choices ({listed})",
            "use a choice's key, label or target node id",
            key,
        )
    )


# fmt: off
KNOWN_EDGE_ATTRIBUTES: frozenset[str] = frozenset({
    "label", "condition", "weight", "fidelity", "thread_id", "loop_restart",
    "color", "fontcolor", "fontname", "fontsize", "style", "penwidth", "arrowhead",
    "arrowtail", "arrowsize", "dir", "constraint", "minlen", "headport", "tailport",
    "xlabel", "headlabel", "taillabel", "tooltip", "id", "class", "labelfontcolor",
    "labelfontsize", "decorate", "samehead", "sametail", "lhead", "ltail",
})
# fmt: on
"""Edge attributes of §2.7 plus common Graphviz drawing attributes."""


def edge_attr_known(graph: Graph, edge: Edge, out: Out) -> None:
    for key in edge.attrs:
        if key not in KNOWN_EDGE_ATTRIBUTES:
            out.append(
                edge_diag(
                    "edge_attr_known",
                    INFO,
                    edge,
                    f"edge {edge.source} -> {edge.target}: attribute `{key}` is not an edge "
                    "attribute the engine uses; it is kept but ignored",
                    "check the spelling (label, condition, weight, fidelity, thread_id, "
                    "loop_restart)",
                    key,
                )
            )


def _is_count(value: str) -> bool:
    parsed = parse_int(value)
    return parsed is not None and parsed >= 0


def _is_duration(value: str) -> bool:
    parsed = parse_duration(value)
    return parsed is not None and parsed > 0


_COUNT = "a whole number >= 0, e.g. 3"
_INT = "a whole number, e.g. 10"
_BOOL = "true or false"
_DURATION = "a positive duration, e.g. 900s, 250ms, 15m, 2h"
_CHECKS: dict[str, Callable[[str], bool]] = {
    _COUNT: _is_count,
    _INT: lambda value: parse_int(value) is not None,
    _BOOL: lambda value: parse_bool(value) is not None,
    _DURATION: _is_duration,
}
_NODE_TYPED = {
    "max_retries": _COUNT,
    "goal_gate": _BOOL,
    "auto_status": _BOOL,
    "allow_partial": _BOOL,
    "expects_no_changes": _BOOL,
    "commit": _BOOL,
    "timeout": _DURATION,
}
_EDGE_TYPED = {"weight": _INT, "loop_restart": _BOOL}
_GRAPH_TYPED = {
    "default_max_retries": _COUNT,
    "default_max_retry": _COUNT,
    "max_goal_gate_redirects": _COUNT,
    "commit": _BOOL,
}


@lru_cache(maxsize=4096)
def _coerces(expected: str, value: str) -> bool:
    return _CHECKS[expected](value)


def _type_message(owner: str, key: str, value: str, expected: str) -> tuple[str, str]:
    return (f"{owner}: {key}={value!r} is not {expected}", f"write {key} as {expected}")


def attr_type_graph(graph: Graph, out: Out) -> None:
    for key, expected in _GRAPH_TYPED.items():
        value = graph.attrs.get(key)
        if value is not None and not _coerces(expected, value):
            text, fix = _type_message("graph", key, value, expected)
            out.append(graph_diag("attr_type", ERROR, graph, text, fix, key))


def attr_type_node(graph: Graph, node: Node, out: Out) -> None:
    attrs = node.attrs
    for key, expected in _NODE_TYPED.items():
        value = attrs.get(key)
        if value is not None and not _coerces(expected, value):
            text, fix = _type_message(f"node `{node.id}`", key, value, expected)
            out.append(node_diag("attr_type", ERROR, node, text, fix, key))


def attr_type_edge(graph: Graph, edge: Edge, out: Out) -> None:
    attrs = edge.attrs
    for key, expected in _EDGE_TYPED.items():
        value = attrs.get(key)
        if value is not None and not _coerces(expected, value):
            owner = f"edge {edge.source} -> {edge.target}"
            text, fix = _type_message(owner, key, value, expected)
            out.append(edge_diag("attr_type", ERROR, edge, text, fix, key))
