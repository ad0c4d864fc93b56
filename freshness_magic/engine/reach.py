"""Where a run can go from a node, and the walks over it (validation, retries, ``--to``).

Never for freshness marks: those come from what executions read (:mod:`.marks`).

A run moves along edges, and on failure or an unsatisfied goal gate it jumps to a node's
``retry_target``/``fallback_retry_target``, else the graph's (§3.3, §3.4): :func:`successors`
counts those jumps as edges, so every walk here agrees with the engine on what can follow what.
"""

from __future__ import annotations

import collections
from collections.abc import Iterable, Iterator, Mapping

from freshness_magic.engine.model import Graph, Node

_RETRY_KEYS = ("retry_target", "fallback_retry_target")


def successors(graph: Graph, node: Node) -> Iterator[str]:
    """Where a run can go after ``node``: edge targets, then its retry targets, then the
    graph's (ids that are not nodes included; callers skip them)."""
    for edge in graph.outgoing(node.id):
        yield edge.target
    for key in _RETRY_KEYS:
        for owner in (node.attrs, graph.attrs):
            target = owner.get(key, "").strip()
            if target:
                yield target


def successor_map(graph: Graph) -> dict[str, set[str]]:
    """:func:`successors` of every node, as node ids that exist."""
    return {
        node.id: {t for t in successors(graph, node) if t in graph.nodes}
        for node in graph.nodes.values()
    }


def reachable(succ: Mapping[str, set[str]], roots: Iterable[str]) -> set[str]:
    """Every node reachable from ``roots`` in ``succ`` (the roots only when on a cycle)."""
    seen: set[str] = set()
    todo = [t for r in roots for t in succ.get(r, ())]
    while todo:
        node = todo.pop()
        if node not in seen:
            seen.add(node)
            todo.extend(succ.get(node, ()))
    return seen


def first_fan_in(graph: Graph, start: str) -> str | None:
    """The first fan-in node reachable from ``start`` (breadth-first, edge order)."""
    seen = {start}
    queue = collections.deque([start])
    while queue:
        current = queue.popleft()
        node = graph.nodes.get(current)
        if node is not None and node.handler_type == "parallel.fan_in":
            return current
        for edge in graph.outgoing(current):
            if edge.target not in seen:
                seen.add(edge.target)
                queue.append(edge.target)
    return None


def inside_branches(graph: Graph, node_id: str) -> tuple[str, str] | None:
    """(parallel node, fan-in) when ``node_id`` runs only inside that parallel node's branches:
    the run goes from the parallel node on to the fan-in its branches converge on, so it never
    stands before ``node_id`` between steps (``--to`` cannot stop there)."""
    full = successor_map(graph)
    succ = dict(full)
    joins: dict[str, str] = {}
    for node in graph.nodes.values():
        if node.handler_type != "parallel":
            continue
        branches = [e for e in graph.outgoing(node.id) if not e.condition]
        found = {first_fan_in(graph, e.target) for e in branches}
        if len(found) != 1:
            continue  # branches that do not converge: the run may go on along one of them
        (join,) = found
        if join is None:
            continue
        joins[node.id] = join
        succ[node.id] = (full[node.id] - {e.target for e in branches}) | {join}
    start = graph.start_node()
    if start is None or node_id == start.id:
        return None
    main = reachable(succ, [start.id])
    if node_id in main:
        return None
    for parallel, join in joins.items():
        if parallel in main and node_id in reachable(full, [parallel]):
            return parallel, join
    return None


def upstream(graph: Graph, node_id: str) -> list[str]:
    """The nodes a run can pass before reaching ``node_id``, in the pipeline's order."""
    before: dict[str, set[str]] = {n: set() for n in graph.nodes}
    for source, targets in successor_map(graph).items():
        for target in targets:
            before[target].add(source)
    found = reachable(before, [node_id]) - {node_id}
    return [n for n in graph.nodes if n in found]
