"""Lint rules about where a run can go: dead ends, condition values and keys, and a conditional
node's edges that test ``outcome`` (§3.2, §3.3, §10)."""

from __future__ import annotations

from typing import NamedTuple

from freshness_magic.engine.model import BUILTIN_HANDLER_TYPES, Edge, Graph, Node
from freshness_magic.engine.validation.attrs import closest
from freshness_magic.engine.validation.core import (
    WARNING,
    Diagnostic,
    Out,
    edge_at,
    edge_diag,
    node_diag,
    position_in_value,
)
from freshness_magic.errors import ConditionError

_SUCCESS_ROUTES = frozenset({"outcome=success", "outcome!=fail"})
"""Conditions after which a plain success always has somewhere to go."""


def dead_end_possible(graph: Graph, node: Node, out: Out) -> None:
    """A non-exit node whose outgoing edges are all conditional can end the run (§3.2 step 6).

    Not reported when one edge takes every plain success (``outcome=success``), the common
    success/fail pair, a pair ``key=value`` / ``key!=value`` (one of them always holds), nor for
    human gates (their edges are choices).
    """
    edges = graph.outgoing(node.id)
    if not edges or graph.is_exit(node.id) or any(not e.condition for e in edges):
        return
    if node.handler_type == "wait.human":
        return
    if any(e.condition.replace(" ", "") in _SUCCESS_ROUTES for e in edges):
        return
    from freshness_magic.engine.conditions import check_condition  # see condition_values

    if any(check_condition(e.condition) is not None for e in edges):
        return  # condition_syntax reports those; what they would route is unknown
    if _complementary_pair(edges):
        return
    tried = ", ".join(f"`{e.condition}`" for e in edges)
    out.append(
        node_diag(
            "dead_end_possible",
            WARNING,
            node,
            f"node `{node.id}`: every outgoing edge has a condition ({tried}); when none holds "
            "after a success the run ends at this node",
            f"add an unconditional fallback edge from `{node.id}`",
        )
    )


_CHOOSERS = frozenset({"wait.human", "parallel"})
"""Built-in handler types whose outcome picks among unconditional edges (a gate's choice) or
takes them all (a fan-out); of the other built-ins only codergen can name a preferred label or
next node (a backend that returns an Outcome)."""


def unconditional_choice(graph: Graph, node: Node, out: Out) -> None:
    """A built-in node (not a gate or a fan-out) with several unconditional edges takes one of
    them, always the same (highest weight, then target id: §3.3 step 4): the others never run
    from there. People write ``a -> b; a -> c`` expecting both to run.

    Custom handler types are left alone: their outcome may name a preferred label or next node.
    """
    if node.handler_type in _CHOOSERS or node.handler_type not in BUILTIN_HANDLER_TYPES:
        return
    plain = [e for e in graph.outgoing(node.id) if not e.condition]
    if len(plain) < 2:
        return
    from freshness_magic.engine.edges import best_edge

    taken = best_edge(plain)
    never = ", ".join(f"`{e.target}`" for e in plain if e is not taken)
    if node.handler_type == "codergen":  # a backend may return an Outcome that picks an edge
        how = "takes the one to"
        then = (
            "runs from here only when its backend returns an Outcome naming it "
            "(preferred_label or suggested_next_ids; a response's text never does)"
        )
    else:
        how, then = "always takes the one to", "never runs from here"
    out.append(
        node_diag(
            "unconditional_choice",
            WARNING,
            node,
            f"node `{node.id}` has {len(plain)} unconditional edges; after a success it {how} "
            f"`{taken.target}` (highest weight, then target id), so {never} {then}",
            "to run them all, fan out through a parallel node (shape=component) and join with "
            "shape=tripleoctagon; to choose, give each edge a condition",
        )
    )


def _complementary_pair(edges: list[Edge]) -> bool:
    """Whether two edges hold the one-clause conditions ``k=v`` and ``k!=v`` (``context.k`` is
    ``k``)."""
    from freshness_magic.engine.condition_syntax import Operator
    from freshness_magic.engine.conditions import parse_condition

    single = set()
    for edge in edges:
        clauses = parse_condition(edge.condition).clauses
        if len(clauses) == 1 and clauses[0].operator is not Operator.TRUTHY:
            key = clauses[0].key.removeprefix("context.")  # `context.x` falls back to `x`
            single.add((key, clauses[0].operator, clauses[0].value))
    return any(
        (key, Operator.NE, value) in single for key, op, value in single if op is Operator.EQ
    )


_OWN_KEYS = ("outcome", "preferred_label")
"""The keys a condition reads from the outcome; every other key reads the context (§10)."""


def _meant_key(key: str) -> str | None:
    """The key a near miss of ``outcome``, ``preferred_label`` or ``context.`` meant, or None.

    Any other key is legal (it reads the context), so only a near miss is reported: ``outcom``,
    ``prefered_label``, ``contxt.x`` (``context.x`` is looked up as ``x`` too, so a misspelt
    prefix reads a key no stage sets).
    """
    if key in _OWN_KEYS or key.startswith("context."):
        return None
    head, dot, rest = key.partition(".")
    if dot:
        return f"context.{rest}" if closest(head, ("context",), cutoff=0.8) else None
    return closest(key, _OWN_KEYS, cutoff=0.8)


class ConditionFinding(NamedTuple):
    """One thing ``condition_values`` warns about a condition text, wherever it is written."""

    message: str
    fix: str
    offset: int | None = None
    """Where in the text the finding points (0-based), None for the whole condition."""


def _tool_keys() -> tuple[str, ...]:
    """The context keys a tool node sets (the context module loads only for a ``tool.`` key)."""
    from freshness_magic.engine.context import TOOL_KEYS

    return TOOL_KEYS


def condition_findings(graph: Graph, raw: str) -> list[ConditionFinding]:
    """What ``validate`` warns about ``raw`` as an edge condition of ``graph``: a near miss of
    a key the engine reads (``outcom``, ``contxt.x``), ``outcome=<value>`` with an unknown
    status, a bare ``graph.`` key that meets ``"false"``/``"0"``. Nothing for a condition that
    does not parse (``condition_syntax`` reports that). The notebook's playground asks the same.
    """
    # Imported here, not at the top: validation runs at every CLI start and many pipelines have
    # no condition.
    from freshness_magic.engine.condition_syntax import Operator
    from freshness_magic.engine.conditions import bare_key_warning, falsy_looking, parse_condition
    from freshness_magic.engine.status import OUTCOME_VALUES

    try:
        condition = parse_condition(raw)
    except ConditionError:
        return []
    found: list[ConditionFinding] = []
    tested = {"outcome": "the outcome", "preferred_label": "the preferred label"}
    for clause in condition.clauses:
        meant = _meant_key(clause.key)
        if meant is not None:
            found.append(
                ConditionFinding(
                    f"key `{clause.key}` looks like a typo of `{meant}`; as written it reads the "
                    f"context key `{clause.key}` (§10), which is probably never set, instead of "
                    f"{tested.get(meant, f'`{meant}`')}",
                    f"write `{meant}` instead of `{clause.key}`",
                    raw.find(clause.key, clause.column - 1),
                )
            )
        elif (key := clause.key.removeprefix("context.")).startswith("tool.") and (
            key not in (tool_keys := _tool_keys())
        ):
            near = closest(key, tool_keys, cutoff=0.75)
            found.append(
                ConditionFinding(
                    f"`{clause.key}` is never set: a tool node sets "
                    f"{', '.join(tool_keys)} (tool.output: its stdout without the trailing "
                    "line breaks)",
                    f"write `context.{near}`" if near else "test `context.tool.output`",
                    raw.find(clause.key, clause.column - 1),
                )
            )
        elif clause.key == "outcome" and clause.operator is not Operator.TRUTHY:
            if clause.value in OUTCOME_VALUES:
                continue
            near = closest(clause.value, OUTCOME_VALUES)
            found.append(
                ConditionFinding(
                    f"`{clause.text}` can never hold: {clause.value!r} is not an outcome status",
                    f"write `outcome={near}`" if near else "use " + ", ".join(OUTCOME_VALUES),
                )
            )
        elif clause.operator is Operator.TRUTHY:
            key = clause.key.removeprefix("context.")
            if not key.startswith("graph."):
                continue
            value = graph.attrs.get(key.removeprefix("graph."))
            if value is not None and falsy_looking(value):
                found.append(
                    ConditionFinding(
                        bare_key_warning(clause.key, value), f"write `{clause.key}=true`"
                    )
                )
    return found


def condition_values(graph: Graph, edge: Edge, out: Out) -> None:
    """:func:`condition_findings` of an edge's condition, at the edge (or the key it names)."""
    raw = edge.attrs.get("condition")
    if not raw or raw.isspace():
        return
    for finding in condition_findings(graph, raw):
        line, column = edge_at(edge, "condition")
        if finding.offset is not None:
            where = position_in_value(
                graph, edge.attr_positions.get("condition"), "condition", finding.offset
            )
            line, column = where if where is not None else (line, column)
        message = f"edge {edge.source} -> {edge.target}: {finding.message}"
        out.append(
            Diagnostic(
                "condition_values", WARNING, message, None, edge.key, line, column, finding.fix
            )
        )


def conditional_outcome(graph: Graph, edge: Edge, out: Out) -> None:
    """An edge out of a conditional node (shape=diamond) that tests ``outcome`` for anything but
    success can never be taken.

    A conditional node only routes: its handler returns SUCCESS, and its edges are chosen with
    that outcome (§3.3, §4.7), not with the outcome of the node before it. So ``outcome=fail``
    there never holds, however the run got to the diamond. Not reported when the node carries
    an attribute only a run extension reads (``freshness=block`` can hold it back, ``commit``
    can fail it): such an extension may give it another outcome.
    """
    raw = edge.attrs.get("condition")
    if not raw or raw.isspace():
        return
    node = graph.nodes.get(edge.source)
    if node is None or node.handler_type != "conditional":
        return
    from freshness_magic.engine.validation.names import (
        ENGINE_NODE_ATTRIBUTES,
        GRAPHVIZ_NODE_ATTRIBUTES,
    )

    if any(
        k not in ENGINE_NODE_ATTRIBUTES and k not in GRAPHVIZ_NODE_ATTRIBUTES for k in node.attrs
    ):
        return
    from freshness_magic.engine.condition_syntax import Operator
    from freshness_magic.engine.conditions import parse_condition

    try:
        condition = parse_condition(raw)
    except ConditionError:
        return  # condition_syntax reports it
    dead = next(
        (
            c
            for c in condition.clauses
            if c.key == "outcome"
            and (
                (c.operator is Operator.EQ and c.value != "success")
                or (c.operator is Operator.NE and c.value == "success")
            )
        ),
        None,
    )
    if dead is None:
        return
    before = next((e.source for e in graph.incoming(node.id) if e.source != edge.target), None)
    start = graph.start_node()
    if before is None or (start is not None and before == start.id):
        fix = (
            f"remove the edge, or route `{node.id}` on a context key (`context.<key>=...`) "
            "that the stage before it sets"
        )
    else:
        fix = (
            f"put the condition on the edge out of the node that fails: "
            f'`{before} -> {edge.target} [condition="{raw}"]`'
        )
    out.append(
        edge_diag(
            "conditional_outcome",
            WARNING,
            edge,
            f"edge {edge.source} -> {edge.target}: `{dead.text}` can never hold: at the "
            f"conditional node `{node.id}` (shape=diamond) `outcome` is that node's own "
            f"outcome, always success, not the outcome of the node before it; a node that "
            "fails follows only edges whose condition matches its failure (§3.7)",
            fix,
            "condition",
        )
    )
