"""Pipeline validation (spec §7): lint rules that turn a Graph into diagnostics.

Every rule of the §7.2 table is here with its severity, plus the project's own rules
(``freshness_valid``, ``freshness_sources``, ``source_files_path``, ``default_choice_matches``,
``edge_attr_known``, ``attr_type``, ``evidence_valid``). Each diagnostic carries the line and
column of the node, edge or attribute it is about, and a fix hint.

Orphan nodes (decision): §7.2 lists ``reachability`` as an ERROR while the §11.12 parity matrix
expects "orphan node -> warning". We follow §11.12 and report unreachable nodes as a WARNING
under the rule name ``reachability``: an unreachable node can never execute, so it cannot make a
run misbehave, and a notebook user sketching a pipeline should be able to run the wired part
before every node is connected. ``--strict`` turns it into a failure for CI.

Rules are objects with a ``name`` and ``apply(graph)``. A :class:`Validator` holds the rules
for one use (no global registry); :func:`validate` builds the default one per call. Structural
rules walk the graph once (edge lookups use the Graph's index); the per-node and per-edge parts
of the other rules (:class:`ScanRule`) run together in a single pass over the nodes and one
over the edges, so validation is O(nodes + edges) and touches each node once.

Extra keys beyond §7.2: ``attr_type`` (ERROR) checks that typed attributes coerce
(``max_retries``, booleans, ``timeout``, ``weight``, graph retry counts); ``human.default_choice``
is matched exactly like the gate handler matches answers (key, target id, label, label text).
"""

from __future__ import annotations

import enum
import re
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Protocol, runtime_checkable

from freshness_magic.engine.conditions import check_condition, split_fix
from freshness_magic.engine.handlers.human import gate_question, match_choice, parse_accelerator
from freshness_magic.engine.model import (
    BUILTIN_HANDLER_TYPES,
    EVIDENCE_MODES,
    FIDELITY_MODES,
    FRESHNESS_MODES,
    Edge,
    Graph,
    Node,
    Position,
    parse_bool,
    parse_duration,
    parse_int,
)
from freshness_magic.engine.stylesheet import parse_stylesheet
from freshness_magic.errors import StylesheetError, ValidationError
from freshness_magic.gcpause import cyclic_gc_paused


class Severity(enum.Enum):
    """ERROR stops a run; WARNING runs but may surprise; INFO is a note."""

    ERROR = "error"
    WARNING = "warning"
    INFO = "info"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True, slots=True)
class Diagnostic:
    """One finding. ``line``/``column`` are 1-based; 0 means the position is unknown."""

    rule: str
    severity: Severity
    message: str
    node: str | None = None
    edge: tuple[str, str] | None = None
    line: int = 0
    column: int = 0
    fix: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "rule": self.rule,
            "severity": self.severity.value,
            "message": self.message,
            "node": self.node,
            "edge": list(self.edge) if self.edge is not None else None,
            "line": self.line,
            "column": self.column,
            "fix": self.fix,
        }

    def format(self, path: str | None = None) -> str:
        """``path:line:col: severity rule: message (fix: ...)``."""
        text = (
            f"{path or '<string>'}:{self.line}:{self.column}: "
            f"{self.severity.value} {self.rule}: {self.message}"
        )
        return f"{text} (fix: {self.fix})" if self.fix else text


@runtime_checkable
class LintRule(Protocol):
    """A validation rule: a stable ``name`` and ``apply(graph) -> list[Diagnostic]``."""

    @property
    def name(self) -> str: ...

    def apply(self, graph: Graph) -> list[Diagnostic]: ...


# -- positions -----------------------------------------------------------------------------


def _at(position: Position | None) -> tuple[int, int]:
    return (position.line, position.column) if position is not None else (0, 0)


def _node_at(node: Node, key: str | None = None) -> tuple[int, int]:
    if key is not None and key in node.attr_positions:
        return _at(node.attr_positions[key])
    return _at(node.position)


def _edge_at(edge: Edge, key: str | None = None) -> tuple[int, int]:
    if key is not None and key in edge.attr_positions:
        return _at(edge.attr_positions[key])
    return _at(edge.position)


_HEADER_RE = re.compile(r"\bdigraph\b")


def _graph_at(graph: Graph, key: str | None = None) -> tuple[int, int]:
    """A graph attribute's position, else the ``digraph`` keyword's, else unknown."""
    if key is not None and key in graph.attr_positions:
        return _at(graph.attr_positions[key])
    match = _HEADER_RE.search(graph.source)
    if match is None:
        return (1, 1) if graph.source else (0, 0)
    line = graph.source.count("\n", 0, match.start()) + 1
    return line, match.start() - (graph.source.rfind("\n", 0, match.start()) + 1) + 1


_ONE_CHAR_ESCAPES = frozenset('"\\nt')


def _position_in_value(
    graph: Graph, position: Position | None, key: str, index: int
) -> tuple[int, int] | None:
    """Source line/column of character ``index`` of attribute ``key``'s unescaped value.

    ``position`` may point at the key or at the value. None when the source does not match
    (for example a graph built in code), so callers fall back to the attribute's position.
    """
    source = graph.source
    if position is None or not source or position.line <= 0:
        return None
    offset = 0
    for _ in range(position.line - 1):
        offset = source.find("\n", offset) + 1
        if offset == 0:
            return None
    offset += position.column - 1
    for written in (key, f'"{key}"'):
        if source.startswith(written, offset):
            offset += len(written)
            break
    else:
        written = ""
    if written:
        while offset < len(source) and source[offset] in " \t\r\n":
            offset += 1
        if not source.startswith("=", offset):
            return None
        offset += 1
        while offset < len(source) and source[offset] in " \t\r\n":
            offset += 1
    if source.startswith('"', offset):
        pos, seen = offset + 1, 0
        while pos < len(source) and source[pos] != '"' and seen < index:
            if source[pos] == "\\":
                following = source[pos + 1 : pos + 3]
                if following.startswith(("\n", "\r\n")):
                    pos += 1 + (2 if following == "\r\n" else 1)
                    continue
                if following[:1] in _ONE_CHAR_ESCAPES:
                    pos += 1
            pos += 1
            seen += 1
        if seen < index:
            return None
        offset = pos
    else:
        offset += index
    line = source.count("\n", 0, offset) + 1
    return line, offset - (source.rfind("\n", 0, offset) + 1) + 1


# -- rule plumbing ---------------------------------------------------------------------------

Out = list[Diagnostic]
NodeCheck = Callable[[Graph, Node, Out], None]
EdgeCheck = Callable[[Graph, Edge, Out], None]


@dataclass(frozen=True)
class FunctionRule:
    """A lint rule made of a name and a function of the whole graph."""

    name: str
    check: Callable[[Graph], list[Diagnostic]]

    def apply(self, graph: Graph) -> list[Diagnostic]:
        return self.check(graph)


@dataclass(frozen=True)
class ScanRule:
    """A rule with a graph part and per-node and per-edge parts.

    :class:`Validator` runs the per-node parts of all scan rules in one pass over the nodes
    (and likewise for edges), so each node is visited once however many rules look at it.
    """

    name: str
    graph_check: Callable[[Graph, Out], None] | None = None
    node_check: NodeCheck | None = None
    edge_check: EdgeCheck | None = None

    def apply(self, graph: Graph) -> list[Diagnostic]:
        out: list[Diagnostic] = []
        if self.graph_check is not None:
            self.graph_check(graph, out)
        if self.node_check is not None:
            for node in graph.nodes.values():
                self.node_check(graph, node, out)
        if self.edge_check is not None:
            for edge in graph.edges:
                self.edge_check(graph, edge, out)
        return out


def _node_diag(
    rule: str, severity: Severity, node: Node, message: str, fix: str, key: str | None = None
) -> Diagnostic:
    line, column = _node_at(node, key)
    return Diagnostic(rule, severity, message, node.id, None, line, column, fix)


def _edge_diag(
    rule: str, severity: Severity, edge: Edge, message: str, fix: str, key: str | None = None
) -> Diagnostic:
    line, column = _edge_at(edge, key)
    return Diagnostic(rule, severity, message, None, edge.key, line, column, fix)


def _graph_diag(
    rule: str, severity: Severity, graph: Graph, message: str, fix: str, key: str | None = None
) -> Diagnostic:
    line, column = _graph_at(graph, key)
    return Diagnostic(rule, severity, message, None, None, line, column, fix)


ERROR, WARNING, INFO = Severity.ERROR, Severity.WARNING, Severity.INFO


# -- §7.2 structural rules (whole graph) -----------------------------------------------------


def _start_node(graph: Graph) -> list[Diagnostic]:
    candidates = graph.start_candidates()
    if not candidates:
        return [
            _graph_diag(
                "start_node",
                ERROR,
                graph,
                "pipeline has no start node",
                "add `start [shape=Mdiamond]` and an edge from it to the first stage",
            )
        ]
    if len(candidates) == 1:
        return []
    ids = ", ".join(n.id for n in candidates)
    return [
        _node_diag(
            "start_node",
            ERROR,
            node,
            f"pipeline has {len(candidates)} start nodes ({ids}); exactly one is allowed",
            f"keep one start node and change the shape of `{node.id}`",
            "shape",
        )
        for node in candidates[1:]
    ]


def _terminal_node(graph: Graph) -> list[Diagnostic]:
    if graph.exit_candidates():
        return []
    return [
        _graph_diag(
            "terminal_node",
            ERROR,
            graph,
            "pipeline has no exit node",
            "add `done [shape=Msquare]` and an edge from the last stage to it",
        )
    ]


def _reachability(graph: Graph) -> list[Diagnostic]:
    start = graph.start_node()
    if start is None:
        return []
    seen = {start.id}
    queue = deque([start.id])
    while queue:
        for edge in graph.outgoing(queue.popleft()):
            target = edge.target
            if target not in seen and target in graph.nodes:
                seen.add(target)
                queue.append(target)
    if len(seen) == len(graph.nodes):
        return []
    return [
        _node_diag(
            "reachability",
            WARNING,
            node,
            f"node `{node.id}` cannot be reached from the start node `{start.id}`; "
            "it will never run",
            f"add an edge to `{node.id}` from a reachable node, or remove it",
        )
        for node in graph.nodes.values()
        if node.id not in seen
    ]


def _start_no_incoming(graph: Graph) -> list[Diagnostic]:
    start = graph.start_node()
    if start is None:
        return []
    return [
        _edge_diag(
            "start_no_incoming",
            ERROR,
            edge,
            f"edge {edge.source} -> {edge.target} enters the start node `{start.id}`",
            "route the edge to the first stage after start instead",
        )
        for edge in graph.incoming(start.id)
    ]


def _exit_no_outgoing(graph: Graph) -> list[Diagnostic]:
    return [
        _edge_diag(
            "exit_no_outgoing",
            ERROR,
            edge,
            f"edge {edge.source} -> {edge.target} leaves the exit node `{node.id}`",
            "remove the edge; a run ends at the exit node",
        )
        for node in graph.exit_candidates()
        for edge in graph.outgoing(node.id)
    ]


def _stylesheet_syntax(graph: Graph) -> list[Diagnostic]:
    text = graph.model_stylesheet
    if not text.strip():
        return []
    try:
        parse_stylesheet(text)
    except StylesheetError as exc:
        lines = text.split("\n")
        index = sum(len(line) + 1 for line in lines[: exc.line - 1]) + exc.column - 1
        key = "model_stylesheet"
        where = _position_in_value(graph, graph.attr_positions.get(key), key, index)
        line, column = where if where is not None else _graph_at(graph, key)
        return [
            Diagnostic(
                "stylesheet_syntax",
                ERROR,
                f"model_stylesheet line {exc.line}, column {exc.column}: {exc.message}",
                None,
                None,
                line,
                column,
                "write rules as `selector { property: value; }` with selectors `*`, "
                "a shape, `.class` or `#node_id`",
            )
        ]
    return []


# -- §7.2 per-node and per-edge rules ---------------------------------------------------------


def _edge_target_exists(graph: Graph, edge: Edge, out: Out) -> None:
    for end, node_id in (("source", edge.source), ("target", edge.target)):
        if node_id not in graph.nodes:
            out.append(
                _edge_diag(
                    "edge_target_exists",
                    ERROR,
                    edge,
                    f"edge {edge.source} -> {edge.target}: {end} `{node_id}` is not a node",
                    f"declare `{node_id}` or fix the id in the edge",
                )
            )


def _condition_syntax(graph: Graph, edge: Edge, out: Out) -> None:
    raw = edge.attrs.get("condition")
    if not raw or raw.isspace():
        return
    error = check_condition(raw)
    if error is None:
        return
    problem, fix = split_fix(error.message)
    where = _position_in_value(
        graph, edge.attr_positions.get("condition"), "condition", error.column - 1
    )
    line, column = where if where is not None else _edge_at(edge, "condition")
    out.append(
        Diagnostic(
            "condition_syntax",
            ERROR,
            f"edge {edge.source} -> {edge.target}: condition {raw!r}, column "
            f"{error.column}: {problem}",
            None,
            edge.key,
            line,
            column,
            fix or "write clauses `key=value`, `key!=value` or `key` joined by `&&`",
        )
    )


def _type_known(known: frozenset[str]) -> NodeCheck:
    listed = ", ".join(sorted(known))

    def check(graph: Graph, node: Node, out: Out) -> None:
        declared = node.attrs.get("type")
        if declared and declared not in known:
            out.append(
                _node_diag(
                    "type_known",
                    WARNING,
                    node,
                    f"node `{node.id}`: type {declared!r} is not a known handler type",
                    f"use one of {listed}, or register a handler for {declared!r}",
                    "type",
                )
            )

    return check


_FIDELITY_FIX = "use one of " + ", ".join(FIDELITY_MODES)


def _fidelity_graph(graph: Graph, out: Out) -> None:
    value = graph.default_fidelity
    if value and value not in FIDELITY_MODES:
        out.append(
            _graph_diag(
                "fidelity_valid",
                WARNING,
                graph,
                f"graph default_fidelity {value!r} is not a fidelity mode",
                _FIDELITY_FIX,
                "default_fidelity",
            )
        )


def _fidelity_node(graph: Graph, node: Node, out: Out) -> None:
    value = node.attrs.get("fidelity")
    if value and value not in FIDELITY_MODES:
        out.append(
            _node_diag(
                "fidelity_valid",
                WARNING,
                node,
                f"node `{node.id}`: fidelity {value!r} is not a fidelity mode",
                _FIDELITY_FIX,
                "fidelity",
            )
        )


def _fidelity_edge(graph: Graph, edge: Edge, out: Out) -> None:
    value = edge.attrs.get("fidelity")
    if value and value not in FIDELITY_MODES:
        out.append(
            _edge_diag(
                "fidelity_valid",
                WARNING,
                edge,
                f"edge {edge.source} -> {edge.target}: fidelity {value!r} is not a fidelity mode",
                _FIDELITY_FIX,
                "fidelity",
            )
        )


_RETRY_KEYS = ("retry_target", "fallback_retry_target")


def _retry_target_graph(graph: Graph, out: Out) -> None:
    for key in _RETRY_KEYS:
        target = graph.attrs.get(key, "")
        if target and target not in graph.nodes:
            out.append(
                _graph_diag(
                    "retry_target_exists",
                    WARNING,
                    graph,
                    f"graph {key} `{target}` is not a node",
                    f"set {key} to an existing node id",
                    key,
                )
            )


def _retry_target_node(graph: Graph, node: Node, out: Out) -> None:
    for key in _RETRY_KEYS:
        target = node.attrs.get(key)
        if target and target not in graph.nodes:
            out.append(
                _node_diag(
                    "retry_target_exists",
                    WARNING,
                    node,
                    f"node `{node.id}`: {key} `{target}` is not a node",
                    f"set {key} to an existing node id",
                    key,
                )
            )


def _goal_gate_has_retry(graph: Graph, node: Node, out: Out) -> None:
    attrs = node.attrs
    if "goal_gate" not in attrs or not node.goal_gate:
        return
    if attrs.get("retry_target") or attrs.get("fallback_retry_target"):
        return
    if graph.retry_target or graph.fallback_retry_target:
        return
    out.append(
        _node_diag(
            "goal_gate_has_retry",
            WARNING,
            node,
            f"node `{node.id}` is a goal gate without retry_target or fallback_retry_target; "
            "an unsatisfied gate will fail the run",
            f"add retry_target=<node id> to `{node.id}` (or to the graph)",
            "goal_gate",
        )
    )


def _prompt_on_llm_nodes(graph: Graph, node: Node, out: Out) -> None:
    attrs = node.attrs
    if attrs.get("prompt", "").strip() or attrs.get("label", "").strip():
        return
    if node.handler_type == "codergen":
        out.append(
            _node_diag(
                "prompt_on_llm_nodes",
                WARNING,
                node,
                f"node `{node.id}` runs the codergen (LLM) handler but has no prompt or label",
                f'add prompt="..." to `{node.id}`',
            )
        )


# -- project rules ---------------------------------------------------------------------------


def _freshness_valid(graph: Graph, node: Node, out: Out) -> None:
    value = node.attrs.get("freshness")
    if value is not None and value not in FRESHNESS_MODES:
        out.append(
            _node_diag(
                "freshness_valid",
                ERROR,
                node,
                f"node `{node.id}`: freshness {value!r} is not one of " + "|".join(FRESHNESS_MODES),
                'write freshness="ignore", "warn" or "block"',
                "freshness",
            )
        )


def _freshness_sources(graph: Graph, node: Node, out: Out) -> None:
    mode = node.attrs.get("freshness")
    if mode not in ("warn", "block"):
        return
    if node.attrs.get("source_files", "").replace(",", "").strip():
        return
    out.append(
        _node_diag(
            "freshness_sources",
            WARNING,
            node,
            f"node `{node.id}` has freshness={mode!r} but no source_files, so there is nothing "
            "to check",
            f'add source_files="path/or/*.glob" to `{node.id}`, or remove freshness',
            "freshness",
        )
    )


_MAYBE_OUTSIDE_RE = re.compile(r"\.\.|(?:^|,)\s*[/\\~]|:")
"""A cheap pre-filter: only entries that may be absolute or use ``..`` are examined."""


def _source_files_path(graph: Graph, node: Node, out: Out) -> None:
    raw = node.attrs.get("source_files")
    if not raw or not _MAYBE_OUTSIDE_RE.search(raw):
        return
    for entry in node.source_files:
        normal = entry.replace("\\", "/")
        if normal.startswith(("/", "~")) or re.match(r"[A-Za-z]:/", normal):
            problem = "is absolute"
        elif ".." in normal.split("/"):
            problem = "climbs out of the working directory with `..`"
        else:
            continue
        out.append(
            _node_diag(
                "source_files_path",
                WARNING,
                node,
                f"node `{node.id}`: source_files entry {entry!r} {problem}; files outside "
                "the working directory are reported as unknown",
                "use a path relative to the working directory",
                "source_files",
            )
        )


@lru_cache(maxsize=1024)
def _choice_names(label: str, target: str) -> tuple[str, ...]:
    """What a default choice may name for one edge: accelerator key, target, label, text."""
    key, text = parse_accelerator(label)
    return tuple(name.strip().casefold() for name in (key, target, label, text))


def _default_choice_matches(graph: Graph, node: Node, out: Out) -> None:
    key = "human.default_choice"
    wanted = node.attrs.get(key, "").strip()
    if not wanted:
        return
    if node.handler_type != "wait.human":
        out.append(
            _node_diag(
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
        _node_diag(
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


def _edge_attr_known(graph: Graph, edge: Edge, out: Out) -> None:
    for key in edge.attrs:
        if key not in KNOWN_EDGE_ATTRIBUTES:
            out.append(
                _edge_diag(
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


def _attr_type_graph(graph: Graph, out: Out) -> None:
    for key, expected in _GRAPH_TYPED.items():
        value = graph.attrs.get(key)
        if value is not None and not _coerces(expected, value):
            text, fix = _type_message("graph", key, value, expected)
            out.append(_graph_diag("attr_type", ERROR, graph, text, fix, key))


def _attr_type_node(graph: Graph, node: Node, out: Out) -> None:
    attrs = node.attrs
    for key, expected in _NODE_TYPED.items():
        value = attrs.get(key)
        if value is not None and not _coerces(expected, value):
            text, fix = _type_message(f"node `{node.id}`", key, value, expected)
            out.append(_node_diag("attr_type", ERROR, node, text, fix, key))


def _attr_type_edge(graph: Graph, edge: Edge, out: Out) -> None:
    attrs = edge.attrs
    for key, expected in _EDGE_TYPED.items():
        value = attrs.get(key)
        if value is not None and not _coerces(expected, value):
            owner = f"edge {edge.source} -> {edge.target}"
            text, fix = _type_message(owner, key, value, expected)
            out.append(_edge_diag("attr_type", ERROR, edge, text, fix, key))


_EVIDENCE_FIX = 'write evidence="record" or evidence="require"'


def _evidence_graph(graph: Graph, out: Out) -> None:
    value = graph.attrs.get("evidence")
    if value is not None and value not in EVIDENCE_MODES:
        out.append(
            _graph_diag(
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
            _node_diag(
                "evidence_valid",
                ERROR,
                node,
                f"node `{node.id}`: evidence={value!r} is not one of " + "|".join(EVIDENCE_MODES),
                _EVIDENCE_FIX,
                "evidence",
            )
        )


def default_rules(known_types: Iterable[str] | None = None) -> list[LintRule]:
    """The built-in rules in the order they run; ``known_types`` feeds ``type_known``."""
    from freshness_magic.backends.lint import prompt_file_diagnostics

    known = frozenset(BUILTIN_HANDLER_TYPES if known_types is None else known_types)
    return [
        FunctionRule("start_node", _start_node),
        FunctionRule("terminal_node", _terminal_node),
        FunctionRule("reachability", _reachability),
        ScanRule("edge_target_exists", edge_check=_edge_target_exists),
        FunctionRule("start_no_incoming", _start_no_incoming),
        FunctionRule("exit_no_outgoing", _exit_no_outgoing),
        ScanRule("condition_syntax", edge_check=_condition_syntax),
        FunctionRule("stylesheet_syntax", _stylesheet_syntax),
        ScanRule("type_known", node_check=_type_known(known)),
        ScanRule("fidelity_valid", _fidelity_graph, _fidelity_node, _fidelity_edge),
        ScanRule("retry_target_exists", _retry_target_graph, _retry_target_node),
        ScanRule("goal_gate_has_retry", node_check=_goal_gate_has_retry),
        ScanRule("prompt_on_llm_nodes", node_check=_prompt_on_llm_nodes),
        FunctionRule("prompt_file_exists", prompt_file_diagnostics),
        ScanRule("freshness_valid", node_check=_freshness_valid),
        ScanRule("freshness_sources", node_check=_freshness_sources),
        ScanRule("source_files_path", node_check=_source_files_path),
        ScanRule("default_choice_matches", node_check=_default_choice_matches),
        ScanRule("edge_attr_known", edge_check=_edge_attr_known),
        ScanRule("attr_type", _attr_type_graph, _attr_type_node, _attr_type_edge),
        ScanRule("evidence_valid", _evidence_graph, _evidence_node),
    ]


def _sort_key(diagnostic: Diagnostic) -> tuple[int, int]:
    return (diagnostic.line, diagnostic.column)


class Validator:
    """A set of lint rules: the built-ins (unless ``rules`` is given) plus registered ones."""

    def __init__(
        self,
        rules: Iterable[LintRule] | None = None,
        *,
        known_types: Iterable[str] | None = None,
    ) -> None:
        self._rules: list[LintRule] = (
            list(rules) if rules is not None else default_rules(known_types)
        )

    @property
    def rules(self) -> tuple[LintRule, ...]:
        return tuple(self._rules)

    def register_rule(self, rule: LintRule) -> None:
        """Append a custom rule; it runs after the ones already registered (§7.4)."""
        if not isinstance(rule, LintRule):
            raise TypeError(f"{rule!r} is not a lint rule: it needs `name` and `apply(graph)`")
        self._rules.append(rule)

    def validate(self, graph: Graph) -> list[Diagnostic]:
        """All diagnostics, ordered by source position (stable within a position).

        Whole-graph rules run one by one; the per-node and per-edge parts of scan rules run
        together in one pass over the nodes and one over the edges. A rule that raises is
        reported once as an ERROR diagnostic under its own name instead of aborting validation.
        """
        with cyclic_gc_paused():
            return self._validate(graph)

    def _validate(self, graph: Graph) -> list[Diagnostic]:
        out: list[Diagnostic] = []
        failed: set[str] = set()
        node_checks: list[tuple[str, NodeCheck]] = []
        edge_checks: list[tuple[str, EdgeCheck]] = []
        for rule in self._rules:
            name = str(getattr(rule, "name", type(rule).__name__))
            try:
                if isinstance(rule, ScanRule):
                    if rule.graph_check is not None:
                        rule.graph_check(graph, out)
                    if rule.node_check is not None:
                        node_checks.append((name, rule.node_check))
                    if rule.edge_check is not None:
                        edge_checks.append((name, rule.edge_check))
                else:
                    out.extend(rule.apply(graph))
            except Exception as exc:  # a broken rule must not hide the other findings
                self._report_failure(graph, name, exc, failed, out)
        for node in graph.nodes.values():
            for name, node_check in node_checks:
                try:
                    node_check(graph, node, out)
                except Exception as exc:
                    self._report_failure(graph, name, exc, failed, out)
        for edge in graph.edges:
            for name, edge_check in edge_checks:
                try:
                    edge_check(graph, edge, out)
                except Exception as exc:
                    self._report_failure(graph, name, exc, failed, out)
        out.sort(key=_sort_key)
        return out

    @staticmethod
    def _report_failure(
        graph: Graph, name: str, exc: Exception, failed: set[str], out: list[Diagnostic]
    ) -> None:
        if name in failed:
            return
        failed.add(name)
        out.append(
            _graph_diag(
                name,
                ERROR,
                graph,
                f"lint rule failed: {type(exc).__name__}: {exc}",
                "fix or remove the rule",
            )
        )

    def validate_or_raise(self, graph: Graph) -> list[Diagnostic]:
        """Diagnostics when there are no errors; else :class:`ValidationError` listing them."""
        diagnostics = self.validate(graph)
        errors = [d for d in diagnostics if d.severity is Severity.ERROR]
        if errors:
            lines = "\n".join("  " + d.format(graph.path) for d in errors)
            noun = "error" if len(errors) == 1 else "errors"
            raise ValidationError(
                f"pipeline `{graph.name}` has {len(errors)} validation {noun}; fix them "
                f"before running:\n{lines}",
                list(errors),
            )
        return diagnostics


def validate(
    graph: Graph,
    extra_rules: Iterable[LintRule] = (),
    known_types: Iterable[str] | None = None,
) -> list[Diagnostic]:
    """Run the built-in rules and then ``extra_rules`` on ``graph`` (§7.3)."""
    validator = Validator(known_types=known_types)
    for rule in extra_rules:
        validator.register_rule(rule)
    return validator.validate(graph)


def validate_or_raise(
    graph: Graph,
    extra_rules: Iterable[LintRule] = (),
    known_types: Iterable[str] | None = None,
) -> list[Diagnostic]:
    """Like :func:`validate`, but raise :class:`ValidationError` when there is an error."""
    validator = Validator(known_types=known_types)
    for rule in extra_rules:
        validator.register_rule(rule)
    return validator.validate_or_raise(graph)


def has_errors(diagnostics: Iterable[Diagnostic]) -> bool:
    return any(d.severity is Severity.ERROR for d in diagnostics)
