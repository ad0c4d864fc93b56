"""The typed pipeline model: Graph, Node and Edge (spec §2.5–§2.8).

Attribute values are kept exactly as written (after unescaping) in ``attrs``; typed views are
properties that coerce on read and fall back to the spec default when a value does not coerce
(the validator reports such values with their position). Keeping one store means transforms such
as the stylesheet only ever write strings, and nothing can get out of step.

Only the engine's attributes have properties here. Attributes that run extensions read keep to
the same store and get their typed readers in the package that reads them (``parse_bool`` and
``split_list`` are for that), so the model stays the engine's.

``Graph``, ``Node`` and ``Edge`` are slotted dataclasses: keyword or positional construction,
``==`` over their fields, a ``repr``, and :func:`dataclasses.replace` for a changed copy (what a
transform returns). They are mutable (the parser builds them up), so they are not hashable.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import NamedTuple

from freshness_magic.ids import MAX_NODE_ID as MAX_NODE_ID
from freshness_magic.ids import NODE_ID_RE as NODE_ID_RE

SHAPE_TO_TYPE: Mapping[str, str] = {
    "Mdiamond": "start",
    "Msquare": "exit",
    "box": "codergen",
    "hexagon": "wait.human",
    "diamond": "conditional",
    "component": "parallel",
    "tripleoctagon": "parallel.fan_in",
    "parallelogram": "tool",
    "house": "stack.manager_loop",
}
"""§2.8: the handler type a shape selects when the node has no explicit ``type``."""

BUILTIN_HANDLER_TYPES: frozenset[str] = frozenset(SHAPE_TO_TYPE.values())

FIDELITY_MODES: tuple[str, ...] = (
    "full",
    "truncate",
    "compact",
    "summary:low",
    "summary:medium",
    "summary:high",
)

MANAGER_ACTIONS = ("observe", "wait")
"""The ``manager.actions`` this engine performs; §4.11's ``steer`` (write instructions into the
child's running stage) is not one of them."""

_DURATION = r"\s*(-?\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*\Z"
"""Compiled on first use (``re`` caches it), not at import: not every command needs it."""
_DURATION_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, None: 1.0}


def parse_bool(value: str) -> bool | None:
    """``true``/``false`` (any case, also ``yes``/``no``/``1``/``0``); None when neither."""
    lowered = value.strip().lower()
    if lowered in ("true", "yes", "1", "on"):
        return True
    if lowered in ("false", "no", "0", "off", ""):
        return False
    return None


def parse_int(value: str) -> int | None:
    """A decimal integer with optional sign; None when the text is not one."""
    try:
        return int(value.strip(), 10)
    except ValueError:
        return None


def parse_duration(value: str) -> float | None:
    """Seconds from ``900s``, ``250ms``, ``15m``, ``2h``, ``1d`` or a bare number of seconds."""
    match = re.match(_DURATION, value)
    if not match:
        return None
    return float(match.group(1)) * _DURATION_UNITS[match.group(2)]


def split_list(value: str) -> tuple[str, ...]:
    """Comma-separated items, trimmed, empties dropped (``class``, ``manager.actions``)."""
    return tuple(item.strip() for item in value.split(",") if item.strip())


class Position(NamedTuple):
    """1-based line and column in the DOT source (value records that never change are named
    tuples)."""

    line: int
    column: int


NOWHERE = Position(0, 0)
"""The position of what was not written in a file (a node made by code)."""


@dataclass(slots=True)
class Node:
    """A stage. ``attrs`` holds every attribute after defaults and stylesheet, as strings.

    ``explicit`` is the keys written on the node statement itself (not from defaults or the
    stylesheet); ``subgraph_classes`` the classes derived from enclosing subgraph labels (§2.10).
    """

    id: str
    attrs: dict[str, str] = field(default_factory=dict)
    position: Position = NOWHERE
    attr_positions: dict[str, Position] = field(default_factory=dict)
    explicit: frozenset[str] = frozenset()
    subgraph_classes: tuple[str, ...] = ()

    def get(self, key: str, default: str = "") -> str:
        return self.attrs.get(key, default)

    def _bool(self, key: str, default: bool = False) -> bool:
        raw = self.attrs.get(key)
        parsed = parse_bool(raw) if raw is not None else None
        return default if parsed is None else parsed

    def _int(self, key: str) -> int | None:
        raw = self.attrs.get(key)
        return parse_int(raw) if raw is not None else None

    @property
    def label(self) -> str:
        return self.attrs.get("label") or self.id

    @property
    def shape(self) -> str:
        return self.attrs.get("shape") or "box"

    @property
    def type(self) -> str:
        return self.attrs.get("type", "")

    @property
    def handler_type(self) -> str:
        """Explicit ``type`` wins, then the shape table, then ``codergen`` (§4.2)."""
        return self.type or SHAPE_TO_TYPE.get(self.shape, "codergen")

    @property
    def prompt(self) -> str:
        return self.attrs.get("prompt", "")

    @property
    def max_retries(self) -> int | None:
        return self._int("max_retries")

    @property
    def goal_gate(self) -> bool:
        return self._bool("goal_gate")

    @property
    def retry_target(self) -> str:
        return self.attrs.get("retry_target", "")

    @property
    def fallback_retry_target(self) -> str:
        return self.attrs.get("fallback_retry_target", "")

    @property
    def classes(self) -> tuple[str, ...]:
        """Explicit ``class`` entries followed by subgraph-derived ones, without repeats."""
        seen: dict[str, None] = dict.fromkeys(split_list(self.attrs.get("class", "")))
        seen.update(dict.fromkeys(self.subgraph_classes))
        return tuple(seen)

    @property
    def timeout(self) -> float | None:
        """Seconds, or None when unset or not a duration."""
        raw = self.attrs.get("timeout")
        return parse_duration(raw) if raw else None

    @property
    def llm_model(self) -> str:
        return self.attrs.get("llm_model", "")

    @property
    def llm_provider(self) -> str:
        return self.attrs.get("llm_provider", "")

    @property
    def reasoning_effort(self) -> str:
        return self.attrs.get("reasoning_effort") or "high"

    @property
    def auto_status(self) -> bool:
        return self._bool("auto_status")

    @property
    def allow_partial(self) -> bool:
        return self._bool("allow_partial")

    @property
    def tool_command(self) -> str:
        return self.attrs.get("tool_command", "")


@dataclass(slots=True)
class Edge:
    """A transition ``source -> target``; ``index`` is its declaration order in the file."""

    source: str
    target: str
    attrs: dict[str, str] = field(default_factory=dict)
    position: Position = NOWHERE
    attr_positions: dict[str, Position] = field(default_factory=dict)
    index: int = 0

    @property
    def label(self) -> str:
        return self.attrs.get("label", "")

    @property
    def condition(self) -> str:
        return self.attrs.get("condition", "").strip()

    @property
    def weight(self) -> int:
        raw = self.attrs.get("weight")
        parsed = parse_int(raw) if raw is not None else None
        return parsed or 0

    @property
    def loop_restart(self) -> bool:
        raw = self.attrs.get("loop_restart")
        return bool(raw is not None and parse_bool(raw))

    @property
    def key(self) -> tuple[str, str]:
        return (self.source, self.target)


class Subgraph(NamedTuple):
    """A subgraph as written: its name, label, enclosing subgraph and the nodes in it.

    Kept for views (the notebook draws subgraphs as labelled clusters); the engine's semantics
    use only the classes derived from labels (``Node.subgraph_classes``).
    """

    name: str
    label: str
    parent: int | None
    """Index of the enclosing subgraph in ``Graph.subgraphs`` (None at the top level)."""
    nodes: tuple[str, ...]
    """Nodes declared or mentioned inside it, nested subgraphs included, in order of appearance."""


class RepeatedAttr(NamedTuple):
    """An attribute written again in the same attribute list: where, and the value that counts."""

    key: str
    first: Position
    again: Position
    value: str


@dataclass(slots=True, repr=False)
class Graph:
    """A parsed pipeline: graph attributes, nodes in order of first appearance, edges in order.

    ``subgraphs`` lists every subgraph in order of opening (views only; see :class:`Subgraph`);
    ``repeated`` the attributes written twice in one statement's attribute list (the last one
    counts). A copy made with :func:`dataclasses.replace` shares what is not changed: pass
    ``edges=list(graph.edges)`` to add edges to the copy alone.
    """

    name: str
    attrs: dict[str, str] = field(default_factory=dict)
    nodes: dict[str, Node] = field(default_factory=dict)
    edges: list[Edge] = field(default_factory=list)
    attr_positions: dict[str, Position] = field(default_factory=dict)
    path: str | None = None
    source: str = ""
    subgraphs: list[Subgraph] = field(default_factory=list)
    repeated: list[RepeatedAttr] = field(default_factory=list)
    _index: tuple[int, dict[str, list[Edge]], dict[str, list[Edge]]] | None = field(
        default=None, init=False, compare=False
    )
    """Outgoing and incoming edges by node, for the number of edges they were built from."""

    def __repr__(self) -> str:
        """One short line: the source and every node's attributes would fill a screen (``parse``
        prints the whole model)."""
        where = f", path={self.path!r}" if self.path else ""
        nodes, edges = len(self.nodes), len(self.edges)
        counted = f"{nodes} node{'s' * (nodes != 1)}, {edges} edge{'s' * (edges != 1)}"
        return f"<Graph {self.name!r}: {counted}{where}>"

    def _adjacency(self) -> tuple[dict[str, list[Edge]], dict[str, list[Edge]]]:
        """Outgoing and incoming edge lists, rebuilt when edges were added or removed."""
        if self._index is None or self._index[0] != len(self.edges):
            out: dict[str, list[Edge]] = {}
            inc: dict[str, list[Edge]] = {}
            for edge in self.edges:
                out.setdefault(edge.source, []).append(edge)
                inc.setdefault(edge.target, []).append(edge)
            self._index = (len(self.edges), out, inc)
        return self._index[1], self._index[2]

    def source_line(self, line: int) -> str:
        """The text of a 1-based line of the DOT source ('' when out of range).

        Lines end at ``\n`` only, as the lexer counts them (``splitlines`` would also break at
        form feeds and Unicode separators inside prompts and disagree with reported lines).
        """
        lines = self.source.split("\n")
        return lines[line - 1].rstrip("\r") if 0 < line <= len(lines) else ""

    def outgoing(self, node_id: str) -> list[Edge]:
        """Edges leaving ``node_id`` in declaration order."""
        return list(self._adjacency()[0].get(node_id, ()))

    def incoming(self, node_id: str) -> list[Edge]:
        """Edges entering ``node_id`` in declaration order."""
        return list(self._adjacency()[1].get(node_id, ()))

    def iter_nodes(self) -> Iterator[Node]:
        return iter(self.nodes.values())

    def start_candidates(self) -> list[Node]:
        """Nodes with shape Mdiamond; if none, a node with id ``start`` or ``Start``."""
        shaped = [n for n in self.nodes.values() if n.shape == "Mdiamond"]
        if shaped:
            return shaped
        return [self.nodes[i] for i in ("start", "Start") if i in self.nodes]

    def exit_candidates(self) -> list[Node]:
        """Nodes with shape Msquare; if none, a node with id ``exit``, ``end`` (any case)."""
        shaped = [n for n in self.nodes.values() if n.shape == "Msquare"]
        if shaped:
            return shaped
        return [n for n in self.nodes.values() if n.id.lower() in ("exit", "end")]

    def start_node(self) -> Node | None:
        candidates = self.start_candidates()
        return candidates[0] if len(candidates) == 1 else None

    def is_exit(self, node_id: str) -> bool:
        """Whether ``node_id`` is one of :meth:`exit_candidates`, without listing them: a lint
        rule asks this of every node, and listing made that quadratic (7 s at 5,000 nodes)."""
        node = self.nodes.get(node_id)
        if node is None:
            return False
        if node.shape == "Msquare":
            return True
        if node_id.lower() not in ("exit", "end"):
            return False
        return not any(n.shape == "Msquare" for n in self.nodes.values())

    @property
    def goal(self) -> str:
        return self.attrs.get("goal", "")

    @property
    def label(self) -> str:
        return self.attrs.get("label", "")

    @property
    def model_stylesheet(self) -> str:
        return self.attrs.get("model_stylesheet", "")

    @property
    def default_max_retries(self) -> int:
        """``default_max_retries`` (alias ``default_max_retry``); 0 when unset."""
        for key in ("default_max_retries", "default_max_retry"):
            raw = self.attrs.get(key)
            if raw is not None:
                parsed = parse_int(raw)
                if parsed is not None:
                    return max(parsed, 0)
        return 0

    @property
    def retry_target(self) -> str:
        return self.attrs.get("retry_target", "")

    @property
    def fallback_retry_target(self) -> str:
        return self.attrs.get("fallback_retry_target", "")

    @property
    def default_fidelity(self) -> str:
        return self.attrs.get("default_fidelity", "")

    @property
    def max_goal_gate_redirects(self) -> int:
        return self._count("max_goal_gate_redirects", 10)

    @property
    def max_failure_redirects(self) -> int:
        """How many times in a row one node's failure may be routed to its retry target."""
        return self._count("max_failure_redirects", 10)

    def _count(self, key: str, default: int) -> int:
        raw = self.attrs.get(key)
        parsed = parse_int(raw) if raw is not None else None
        return default if parsed is None else max(parsed, 0)
