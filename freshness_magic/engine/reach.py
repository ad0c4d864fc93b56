"""Where a run can go from a node, and the walks over it (validation, views, ``status``).

A run moves along edges, and on failure or an unsatisfied goal gate it jumps to a node's
``retry_target``/``fallback_retry_target``, else the graph's (§3.3, §3.4): :func:`successors`
counts those jumps as edges, so every walk here agrees with the engine on what can follow what.
"""

from __future__ import annotations

import collections
from collections.abc import Iterable, Iterator, Mapping, Sequence

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


def ran_after(
    succ: Mapping[str, set[str]], completed: Sequence[str], roots: Iterable[str]
) -> dict[str, list[str]]:
    """The nodes downstream of a root that last ran after the root's last run, each with every
    such root in the order given: their results may rest on those roots' (the nodes roots whose
    inputs changed since they ran make outdated, until each of those roots is dealt with)."""
    last = {node_id: i for i, node_id in enumerate(completed)}
    found: dict[str, list[str]] = {}
    for root in roots:
        if root not in last:
            continue
        for down in sorted(reachable(succ, [root])):
            if down != root and last.get(down, -1) > last[root]:
                found.setdefault(down, []).append(root)
    return found


def upstream(graph: Graph, node_id: str) -> list[str]:
    """The nodes a run can pass before reaching ``node_id``, in the pipeline's order."""
    before: dict[str, set[str]] = {n: set() for n in graph.nodes}
    for source, targets in successor_map(graph).items():
        for target in targets:
            before[target].add(source)
    found = reachable(before, [node_id]) - {node_id}
    return [n for n in graph.nodes if n in found]


def forward_order(graph: Graph) -> tuple[list[str], dict[str, list[str]]]:
    """The pipeline's edges with the loops cut: its nodes in an order where every node comes
    after those that lead to it, and each node's predecessors along the edges kept.

    An edge is cut when it goes back to a node the depth-first walk is still inside (from the
    start node, then from any node not reached yet, in the pipeline's order): in ``fix -> test
    -> fix`` the edge back to ``fix`` is the loop. Retry targets are jumps back, not edges, so
    they count as neither. Data flows along what is kept: a node that ran after one of its
    predecessors here (directly or further up) worked on that node's earlier results.
    """
    targets = {
        n: [e.target for e in graph.outgoing(n) if e.target in graph.nodes] for n in graph.nodes
    }
    start = graph.start_node()
    roots = ([start.id] if start is not None else []) + list(graph.nodes)
    done: list[str] = []
    state: dict[str, bool] = {}  # False while the walk is inside the node, True once left
    before: dict[str, list[str]] = {n: [] for n in graph.nodes}
    for root in roots:
        if root in state:
            continue
        state[root] = False
        stack = [(root, iter(targets[root]))]
        while stack:
            node, pending = stack[-1]
            for target in pending:
                seen = state.get(target)
                if seen is False:
                    continue  # a loop back to a node the walk is inside
                before[target].append(node)
                if seen is None:
                    state[target] = False
                    stack.append((target, iter(targets[target])))
                    break
            else:
                stack.pop()
                state[node] = True
                done.append(node)
    done.reverse()
    return done, before
