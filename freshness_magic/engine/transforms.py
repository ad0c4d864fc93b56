"""Graph transforms applied after parsing and before validation (spec §9.1–§9.3).

A transform returns a new graph and leaves its input unchanged; built-in transforms copy only
the nodes they change. The built-ins run first (stylesheet, then ``$goal`` expansion), then the
caller's custom transforms in the order given.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Protocol, runtime_checkable

from freshness_magic.engine.model import Graph, Node
from freshness_magic.errors import StylesheetError


@runtime_checkable
class Transform(Protocol):
    """Rewrites a pipeline graph; must not modify the graph it is given."""

    def apply(self, graph: Graph) -> Graph: ...


class StylesheetTransform:
    """Applies ``model_stylesheet`` (§8). A stylesheet that does not parse is left alone here:
    validation reports it as ``stylesheet_syntax`` with its position."""

    name = "stylesheet"

    def apply(self, graph: Graph) -> Graph:
        text = graph.model_stylesheet
        if not text.strip():
            return graph
        # Imported only for a graph with a stylesheet: loading runs at every CLI start.
        from freshness_magic.engine.stylesheet import apply_stylesheet, parse_stylesheet

        try:
            stylesheet = parse_stylesheet(text)
        except StylesheetError:
            return graph
        return apply_stylesheet(graph, stylesheet)


class GoalExpansionTransform:
    """Replaces ``$goal`` in node prompts with the graph's ``goal`` (§9.2)."""

    name = "goal_expansion"

    def apply(self, graph: Graph) -> Graph:
        goal = graph.goal
        changed: dict[str, Node] = {}
        for node_id, node in graph.nodes.items():
            prompt = node.attrs.get("prompt", "")
            if "$goal" in prompt:
                attrs = {**node.attrs, "prompt": prompt.replace("$goal", goal)}
                changed[node_id] = dataclasses.replace(node, attrs=attrs)
        if not changed:
            return graph
        nodes = {node_id: changed.get(node_id, node) for node_id, node in graph.nodes.items()}
        return dataclasses.replace(graph, nodes=nodes, edges=list(graph.edges))


def builtin_transforms() -> tuple[Transform, ...]:
    """The built-in transforms in the order they run."""
    return (StylesheetTransform(), GoalExpansionTransform())


def apply_transforms(graph: Graph, extra: Iterable[Transform] = ()) -> Graph:
    """Run the built-in transforms, then ``extra`` in order; returns the final graph."""
    for transform in (*builtin_transforms(), *extra):
        graph = transform.apply(graph)
    return graph
