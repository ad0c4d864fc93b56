"""Lint rules about the paths a run can take: ``reachability``, ``exit_reachable``,
``dead_end_node``, ``endless_loop`` and ``node_id_typo``.

A run moves along edges, and on failure or an unsatisfied goal gate it jumps to a node's
``retry_target``/``fallback_retry_target``, else the graph's (§3.3, §3.4);
:func:`~freshness_magic.engine.reach.successors` counts those jumps as edges, so a node reached
only through a retry target is reachable.

Severities (decisions; §7.2 lists only ``reachability``, as an ERROR, which we report as a
WARNING, see :mod:`.rules`):

- ``exit_reachable`` is an ERROR: when no exit node can be reached from the start node, a run
  can never finish (it loops forever, or stops at a node without edges); §7.2's ``reachability``
  ERROR covers the exit node too, so this keeps the spec's severity for the one node that
  matters.
- ``dead_end_node`` (a reachable node, not an exit, with no outgoing edge) is a WARNING: §3.2
  step 6 ends such a run as completed, which a run may mean to do, but the exit is never
  reached, so goal gates are never judged.
- ``endless_loop`` is a WARNING: a reachable loop no edge leaves (``polish -> polish``) never
  ends on success; only a failure (to a retry target, or ending the run) gets out. It is not an
  ERROR because the exit is still reachable by other paths, and a failure may be the way out
  that was meant.
- ``node_id_typo`` is a WARNING: a node written only in edges whose id is near a declared
  node's id (``dnoe`` for ``done``, ``summray`` for ``summary`` in the middle of a chain) runs
  as an LLM node where the declared node was meant.

:func:`typo_of` is the one test of such a typo. The other rules ask it too, so that where a typo
explains what they found (a declared node nothing reaches, no exit reached, a dead end) their
advice is to correct the edge, not to wire the misspelt id in for good.
"""

from __future__ import annotations

from collections import deque

from freshness_magic.engine.model import Edge, Graph, Node
from freshness_magic.engine.reach import successors
from freshness_magic.engine.validation.attrs import closest
from freshness_magic.engine.validation.core import ERROR, WARNING, Diagnostic, node_at, node_diag


def reachable(graph: Graph, start: Node) -> dict[str, None]:
    """The ids of the nodes a run from ``start`` can reach, in breadth-first order."""
    seen = {start.id: None}
    queue = deque([start])
    while queue:
        for target in successors(graph, queue.popleft()):
            node = graph.nodes.get(target)
            if node is not None and target not in seen:
                seen[target] = None
                queue.append(node)
    return seen


def paths(graph: Graph) -> list[Diagnostic]:
    """``reachability``, ``exit_reachable``, ``dead_end_node`` and ``endless_loop`` from one walk
    of the graph (one rule, registered as ``reachability``; each diagnostic carries its own rule
    name)."""
    start = graph.start_node()
    if start is None:
        return []  # start_node reports that
    seen = reachable(graph, start)
    exits = graph.exit_candidates()
    typo = typos(graph)
    return [
        *_reachability(graph, start, seen, typo),
        *_exit_reachable(graph, start, exits, seen, typo),
        *_dead_end_node(graph, exits, seen, typo),
        *_endless_loop(graph, exits, seen),
    ]


def _reachability(
    graph: Graph, start: Node, seen: dict[str, None], typo: dict[str, str]
) -> list[Diagnostic]:
    if len(seen) == len(graph.nodes):
        return []
    meant_by = {meant: graph.nodes[wrong] for wrong, meant in typo.items()}
    out = []
    for node in graph.nodes.values():
        if node.id in seen:
            continue
        message = (
            f"node `{node.id}` cannot be reached from the start node `{start.id}` (by an edge "
            "or a retry_target); it will never run"
        )
        fix = f"add an edge to `{node.id}` from a reachable node, or remove it"
        wrong = meant_by.get(node.id)
        if wrong is not None:  # `perf -> summray -> release_ok`: the edges meant `summary`
            message += f"; `{wrong.id}` (line {node_at(wrong)[0]}) looks like a typo of `{node.id}`"
            fix = correct_typo(graph, wrong, node.id)
        out.append(node_diag("reachability", WARNING, node, message, fix))
    return out


def _listed(ids: list[str], limit: int = 5) -> str:
    shown = ", ".join(f"`{i}`" for i in ids[:limit])
    return shown + (f" and {len(ids) - limit} more" if len(ids) > limit else "")


def _exit_reachable(
    graph: Graph, start: Node, exits: list[Node], seen: dict[str, None], typo: dict[str, str]
) -> list[Diagnostic]:
    if not exits:
        return []  # terminal_node reports that
    if any(node.id in seen for node in exits):
        return []
    exit_id = exits[0].id
    ends = [i for i in seen if i != start.id and not graph.outgoing(i)]
    others = [i for i in seen if i != start.id]
    if ends:
        how = f"stops at {_listed(ends)} (no outgoing edge)"
    elif others:
        how = f"loops among {_listed(others)}"
    else:
        how = "has nowhere to go"
    last = (ends or others or [start.id])[-1]
    message = (
        f"no exit node can be reached from the start node `{start.id}`: a run {how} and never "
        f"reaches `{exit_id}`, so it can never finish"
    )
    fix = f"add an edge to `{exit_id}` from the last stage (e.g. `{last} -> {exit_id}`)"
    where = start
    exit_ids = {n.id for n in exits}
    wrong = next((end for end in ends if typo.get(end) in exit_ids), None)
    if wrong is not None:  # `start -> work -> dnoe`: the edge meant the exit
        where, meant = graph.nodes[wrong], typo[wrong]
        message += f"; `{wrong}` looks like a typo of `{meant}`"
        fix = correct_typo(graph, where, meant)
    return [node_diag("exit_reachable", ERROR, where, message, fix)]


def _dead_end_node(
    graph: Graph, exit_nodes: list[Node], seen: dict[str, None], typo: dict[str, str]
) -> list[Diagnostic]:
    exits = {n.id for n in exit_nodes}
    if not exits:
        return []  # terminal_node reports that; every end would be a dead end
    out = []
    exit_hint = f"`{sorted(exits)[0]}`"
    for node_id in seen:
        if node_id in exits or graph.outgoing(node_id):
            continue  # a retry target does not help: it is taken only after a failure
        node = graph.nodes[node_id]
        meant = typo.get(node_id)
        out.append(
            node_diag(
                "dead_end_node",
                WARNING,
                node,
                f"node `{node_id}` has no outgoing edge and is not an exit node: a run that "
                f"reaches it stops there without reaching {exit_hint} (goal gates are not "
                "checked)",
                correct_typo(graph, node, meant)
                if meant is not None
                else f"add an edge from `{node_id}` to the next stage or to {exit_hint}",
            )
        )
    return out


def _endless_loop(graph: Graph, exit_nodes: list[Node], seen: dict[str, None]) -> list[Diagnostic]:
    """Reachable loops from which no edge path ends (at an exit or a dead end): one diagnostic
    at each loop's first node in the run's order, listing the nodes it goes round."""
    exits = [n.id for n in exit_nodes]
    if not any(i in seen for i in exits):
        return []  # exit_reachable reports that
    ends = deque([*exits, *(i for i in graph.nodes if not graph.outgoing(i))])
    finishing = set(ends)
    while ends:
        for edge in graph.incoming(ends.popleft()):
            if edge.source not in finishing:
                finishing.add(edge.source)
                ends.append(edge.source)
    out: list[Diagnostic] = []
    reported: set[str] = set()
    for node_id in seen:
        if node_id in finishing or node_id in reported:
            continue
        after = _along_edges(graph, node_id)
        if node_id not in after:
            continue  # it leads into a loop; the loop's first node is reported
        reported.update(after)
        order = [i for i in seen if i in after]
        out.append(
            node_diag(
                "endless_loop",
                WARNING,
                graph.nodes[node_id],
                f"no edge leads out of the loop through {_listed(order)}: once a run gets to "
                f"`{node_id}` it goes round for ever while its steps succeed, and never reaches "
                f"`{exits[0]}`",
                f"give the loop a way out, e.g. `{order[-1]} -> {exits[0]} "
                '[condition="outcome=success"]`, or a condition on the edge that goes round',
            )
        )
    return out


def _along_edges(graph: Graph, start: str) -> set[str]:
    """Every node reachable from ``start`` by edges (not retry targets); ``start`` only when
    it is on a cycle."""
    found: set[str] = set()
    todo = [start]
    while todo:
        for edge in graph.outgoing(todo.pop()):
            if edge.target not in found and edge.target in graph.nodes:
                found.add(edge.target)
                todo.append(edge.target)
    return found


_DIGITS = str.maketrans("", "", "0123456789")


def _declared(graph: Graph) -> list[str]:
    return [n.id for n in graph.nodes.values() if n.explicit]


def typo_of(graph: Graph, node: Node, declared: list[str]) -> str | None:
    """The id that ``node`` looks like a typo of, or None.

    A typo is a node no statement gives attributes (it is written only in edges, anywhere in a
    chain) whose id is near the id of a node declared with attributes (``declared``). Not a
    typo: a neighbour's id (``plan -> plans``: the typo would be an edge from ``plan`` to
    itself), nor a change of number (``step2`` next to ``step1`` is a series).
    """
    if node.explicit:
        return None
    adjacent = {e.target for e in graph.outgoing(node.id)}
    adjacent.update(e.source for e in graph.incoming(node.id))
    near = closest(node.id, [i for i in declared if i not in adjacent], cutoff=0.75)
    if near is None or near.translate(_DIGITS) == node.id.translate(_DIGITS):
        return None
    return near


def typos(graph: Graph) -> dict[str, str]:
    """Every node that looks like a typo (see :func:`typo_of`): its id -> the id meant."""
    declared = _declared(graph)
    if not declared:
        return {}
    found = {}
    for node in graph.nodes.values():
        meant = typo_of(graph, node, declared)
        if meant is not None:
            found[node.id] = meant
    return found


def _typo_edges(graph: Graph, node: Node) -> list[Edge]:
    return [*graph.incoming(node.id), *graph.outgoing(node.id)]


def correct_typo(graph: Graph, node: Node, meant: str) -> str:
    """The fix of a typo: write the id meant in the edges that name ``node``."""
    edges = "edges" if len(_typo_edges(graph, node)) > 1 else "edge"
    return f"write `{meant}` instead of `{node.id}` in the {edges}"


def node_id_typo(graph: Graph) -> list[Diagnostic]:
    """A node that only edges mention (no attributes written on it), wherever it is in a chain,
    whose id is near the id of a node declared with attributes (see :func:`typo_of`)."""
    out = []
    for node_id, near in typos(graph).items():
        node = graph.nodes[node_id]
        lines = sorted({e.position.line for e in _typo_edges(graph, node) if e.position.line})
        where = f" (line {', '.join(map(str, lines))})" if lines else ""
        out.append(
            node_diag(
                "node_id_typo",
                WARNING,
                node,
                f"node `{node.id}` appears only in edges{where} and has no attributes; did you "
                f"mean `{near}`?",
                f"{correct_typo(graph, node, near)}, or declare "
                f'`{node.id} [prompt="..."]` if it is a new stage',
            )
        )
    return out
