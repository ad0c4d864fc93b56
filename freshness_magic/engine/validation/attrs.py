"""Lint rules for attribute values: typed attributes, gate defaults, edge attributes."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from functools import lru_cache
from types import MappingProxyType

from freshness_magic.engine.model import (
    SHAPE_TO_TYPE,
    Edge,
    Graph,
    Node,
    parse_bool,
    parse_duration,
    parse_int,
)
from freshness_magic.engine.prompts import (
    prompt_file_name,
    prompt_file_path,
    prompt_file_problem,
    read_prompt_file,
)
from freshness_magic.engine.validation.core import (
    ERROR,
    INFO,
    WARNING,
    Diagnostic,
    Out,
    ScanRule,
    edge_diag,
    graph_diag,
    node_diag,
)
from freshness_magic.errors import StylesheetError


@lru_cache(maxsize=1024)
def _choice_names(label: str, target: str) -> tuple[str, ...]:
    """What a default choice may name for one edge: accelerator key, target, label, text."""
    from freshness_magic.engine.gates import parse_accelerator

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
    # Gates and the stylesheet are imported where used: validation runs at every CLI start, and
    # most pipelines need neither rule, while their modules take time to build.
    from freshness_magic.engine.gates import gate_question, match_choice, parse_accelerator

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


ENGINE_EDGE_ATTRIBUTES = ("label", "condition", "weight", "fidelity", "thread_id", "loop_restart")


def edge_attr_known(graph: Graph, edge: Edge, out: Out) -> None:
    """An unknown edge attribute is INFO, but a near miss of an engine one (``condtion=``) is a
    WARNING: the edge then behaves differently (an unconditional edge, say)."""
    for key in edge.attrs:
        if key in KNOWN_EDGE_ATTRIBUTES:
            continue
        near = closest(key, KNOWN_EDGE_ATTRIBUTES, cutoff=0.75)
        fix = "check the spelling (" + ", ".join(ENGINE_EDGE_ATTRIBUTES) + ")"
        if near is not None:
            fix = f"did you mean `{near}`? rename `{key}` to `{near}`"
        out.append(
            edge_diag(
                "edge_attr_known",
                WARNING if near in ENGINE_EDGE_ATTRIBUTES else INFO,
                edge,
                f"edge {edge.source} -> {edge.target}: attribute `{key}` is not an edge "
                "attribute the engine uses; it is kept but ignored",
                fix,
                key,
            )
        )


def _is_count(value: str) -> bool:
    parsed = parse_int(value)
    return parsed is not None and parsed >= 0


MAX_DURATION_DAYS = 365
"""Longest duration accepted: ``timeout="999999d"`` overflowed the platform's waits at run time."""


def _is_duration(value: str) -> bool:
    parsed = parse_duration(value)
    return parsed is not None and 0 < parsed <= MAX_DURATION_DAYS * 86400


# The kinds of value attr_type_rule checks; each is also how the message names what to write.
def _is_fraction(value: str) -> bool:
    try:
        return 0 < float(value) <= 1
    except ValueError:
        return False


COUNT = "a whole number >= 0, e.g. 3"
POSITIVE = "a whole number >= 1, e.g. 4"
INT = "a whole number, e.g. 10"
BOOL = "true or false"
FRACTION = "a number above 0 and at most 1, e.g. 0.5"
DURATION = f"a positive duration up to {MAX_DURATION_DAYS}d, e.g. 900s, 250ms, 15m, 2h"
_CHECKS: dict[str, Callable[[str], bool]] = {
    COUNT: _is_count,
    POSITIVE: lambda value: (parse_int(value) or 0) >= 1,
    INT: lambda value: parse_int(value) is not None,
    BOOL: lambda value: parse_bool(value) is not None,
    FRACTION: _is_fraction,
    DURATION: _is_duration,
}
_NODE_TYPED = {
    "max_retries": COUNT,
    "goal_gate": BOOL,
    "auto_status": BOOL,
    "allow_partial": BOOL,
    "timeout": DURATION,
    "human.timeout": DURATION,
    "max_parallel": POSITIVE,
    "join_k": POSITIVE,
    "join_quorum": FRACTION,
    "reuse": BOOL,
}
_EDGE_TYPED = {"weight": INT, "loop_restart": BOOL}
_GRAPH_TYPED = {
    "default_max_retries": COUNT,
    "default_max_retry": COUNT,
    "max_goal_gate_redirects": COUNT,
    "max_failure_redirects": COUNT,
    "reuse": BOOL,
}


@lru_cache(maxsize=4096)
def _coerces(expected: str, value: str) -> bool:
    return _CHECKS[expected](value)


def _type_message(owner: str, key: str, value: str, expected: str) -> tuple[str, str]:
    return (f"{owner}: {key}={value!r} is not {expected}", f"write {key} as {expected}")


def attr_type_rule(
    graph_typed: Mapping[str, str] = MappingProxyType({}),
    node_typed: Mapping[str, str] = MappingProxyType({}),
    edge_typed: Mapping[str, str] = MappingProxyType({}),
) -> ScanRule:
    """An ``attr_type`` rule: each named attribute must coerce to its kind (:data:`COUNT`,
    :data:`POSITIVE`, :data:`INT`, :data:`BOOL`, :data:`FRACTION` or :data:`DURATION`), else an
    ERROR at the attribute.

    The engine's rule covers the engine's attributes; a package that reads attributes of its own
    registers one more rule made here for them, so every typed value is checked the same way.
    """
    unknown = {v for t in (graph_typed, node_typed, edge_typed) for v in t.values()} - set(_CHECKS)
    if unknown:
        raise ValueError(
            f"attr_type_rule: unknown kind(s) {sorted(unknown)}; use COUNT, POSITIVE, INT, "
            "BOOL, FRACTION or DURATION"
        )
    graph_items = tuple(graph_typed.items())
    node_items = tuple(node_typed.items())
    edge_items = tuple(edge_typed.items())

    def graph_check(graph: Graph, out: Out) -> None:
        for key, expected in graph_items:
            value = graph.attrs.get(key)
            if value is not None and not _coerces(expected, value):
                text, fix = _type_message("graph", key, value, expected)
                out.append(graph_diag("attr_type", ERROR, graph, text, fix, key))

    def node_check(graph: Graph, node: Node, out: Out) -> None:
        attrs = node.attrs
        for key, expected in node_items:
            value = attrs.get(key)
            if value is not None and not _coerces(expected, value):
                text, fix = _type_message(f"node `{node.id}`", key, value, expected)
                out.append(node_diag("attr_type", ERROR, node, text, fix, key))

    def edge_check(graph: Graph, edge: Edge, out: Out) -> None:
        attrs = edge.attrs
        for key, expected in edge_items:
            value = attrs.get(key)
            if value is not None and not _coerces(expected, value):
                owner = f"edge {edge.source} -> {edge.target}"
                text, fix = _type_message(owner, key, value, expected)
                out.append(edge_diag("attr_type", ERROR, edge, text, fix, key))

    return ScanRule(
        "attr_type",
        graph_check if graph_items else None,
        node_check if node_items else None,
        edge_check if edge_items else None,
        node_attributes=frozenset(node_typed),
        graph_attributes=frozenset(graph_typed),
    )


def engine_attr_types() -> ScanRule:
    """The ``attr_type`` rule for the engine's own typed attributes."""
    return attr_type_rule(_GRAPH_TYPED, _NODE_TYPED, _EDGE_TYPED)


GRAPHVIZ_SHAPES = frozenset(
    [
        "box",
        "polygon",
        "ellipse",
        "oval",
        "circle",
        "point",
        "egg",
        "triangle",
        "plaintext",
        "plain",
        "diamond",
        "trapezium",
        "parallelogram",
        "house",
        "pentagon",
        "hexagon",
        "septagon",
        "octagon",
        "doublecircle",
        "doubleoctagon",
        "tripleoctagon",
        "invtriangle",
        "invtrapezium",
        "invhouse",
        "Mdiamond",
        "Msquare",
        "Mcircle",
        "rect",
        "rectangle",
        "square",
        "star",
        "none",
        "underline",
        "cylinder",
        "note",
        "tab",
        "folder",
        "box3d",
        "component",
        "promoter",
        "cds",
        "terminator",
        "utr",
        "primersite",
        "restrictionsite",
        "fivepoverhang",
        "threepoverhang",
        "noverhang",
        "assembly",
        "signature",
        "insulator",
        "ribosite",
        "rnastab",
        "proteasesite",
        "proteinstab",
        "rpromoter",
        "rarrow",
        "larrow",
        "lpromoter",
    ]
)


def near_misses(value: str, choices: Iterable[str], cutoff: float = 0.5) -> list[str]:
    """The choices nearest to ``value`` (for "did you mean" hints): the one spelt with the same
    letters in another order (``stpe`` is ``step``, not ``stop``), else every choice tied at the
    best similarity, in sorted order; empty when none is near."""
    import difflib  # only when a hint is needed: validation runs at every CLI start

    names = sorted(set(choices) - {value})
    letters = sorted(value)
    swapped = [name for name in names if sorted(name) == letters]
    if len(swapped) == 1:
        return swapped
    scored = [
        (difflib.SequenceMatcher(None, value, name).ratio(), name)
        for name in difflib.get_close_matches(value, names, n=5, cutoff=cutoff)
    ]
    best = max((score for score, _ in scored), default=0.0)
    return sorted(name for score, name in scored if score == best)


def invalid_choice(value: str, choices: Iterable[object]) -> str | None:
    """argparse's ``invalid choice`` message naming the likely choice(s), for the CLI's and the
    magics' parsers alike; None when none is near (argparse's own message then stands)."""
    names = [str(c) for c in choices]
    near = near_misses(value, names)
    if not near:
        return None
    meant, listed = " or ".join(map(repr, near)), ", ".join(map(repr, names))
    return f"invalid choice: {value!r} (did you mean {meant}? choose from {listed})"


def closest(value: str, choices: Iterable[str], cutoff: float = 0.5) -> str | None:
    """The choice nearest to ``value`` (:func:`near_misses`' first), or None."""
    found = near_misses(value, choices, cutoff)
    return found[0] if found else None


def no_node(pipeline: str, node_id: str, nodes: Iterable[str]) -> str:
    """``no node 'lnit' (did you mean 'lint'?)``, else ``no node 'x' in review; nodes: ...``:
    every message (notebook and CLI) about a node name a pipeline does not have."""
    names = list(nodes)
    near = closest(node_id, names)
    if near is not None:
        return f"no node {node_id!r} (did you mean {near!r}?)"
    return f"no node {node_id!r} in {pipeline}; nodes: {', '.join(names)}"


def parallel_policy(graph: Graph, node: Node, out: Out) -> None:
    """A parallel node's join and error policies are ones the handler knows (else it fails when
    it runs), and ``k_of_n`` asks for no more branches than it has."""
    if node.handler_type != "parallel":
        return
    from freshness_magic.engine.handlers.parallel import ERROR_POLICIES, JOIN_POLICIES

    for key, allowed in (("join_policy", JOIN_POLICIES), ("error_policy", ERROR_POLICIES)):
        value = node.attrs.get(key, "").strip()
        if value and value not in allowed:
            near = closest(value, allowed)
            hint = f"did you mean {key}={near}? " if near else ""
            out.append(
                node_diag(
                    "parallel_policy",
                    ERROR,
                    node,
                    f"node `{node.id}`: {key}={value!r} is not one the parallel handler knows, "
                    "so it would fail when it runs",
                    f"{hint}use one of {', '.join(allowed)}",
                    key,
                )
            )
    wanted = parse_int(node.attrs.get("join_k", ""))
    branches = len(graph.outgoing(node.id))
    if node.attrs.get("join_policy", "").strip() == "k_of_n" and wanted and wanted > branches:
        out.append(
            node_diag(
                "parallel_policy",
                WARNING,
                node,
                f"node `{node.id}` joins k_of_n with join_k={wanted} but fans out to {branches} "
                f"branch{'es' if branches != 1 else ''}: the join can never succeed",
                f"set join_k to at most {branches}",
                "join_k",
            )
        )


def gate_keys_distinct(graph: Graph, node: Node, out: Out) -> None:
    """The keys of a gate's choices differ: of two choices with one key, the key answers only
    the first, and the second is reached by its name alone. A label without ``[K]`` takes its
    first character as its key (``Retry`` and ``Reject`` are both R); one without a label, its
    target's."""
    if node.handler_type != "wait.human":
        return
    from freshness_magic.engine.gates import has_accelerator, parse_accelerator

    first: dict[str, str] = {}
    for edge in graph.outgoing(node.id):
        label = edge.label or edge.target
        key = parse_accelerator(label)[0]
        if key.casefold() not in first:
            first[key.casefold()] = label
            continue
        written = has_accelerator(label) and has_accelerator(first[key.casefold()])
        how = "have the same key" if written else f"both take the key {key} (a first letter)"
        out.append(
            edge_diag(
                "gate_keys_distinct",
                WARNING,
                edge,
                f"gate `{node.id}`: choices {first[key.casefold()]!r} and {label!r} {how}; "
                f"the key answers {first[key.casefold()]!r} only, and {label!r} is answered by "
                f"its name or `{edge.target}`",
                "give each choice of the gate its own key"
                + ("" if written else f' by writing it in the label: label="[K] {label}"'),
                "label",
            )
        )


def shape_known(graph: Graph, node: Node, out: Out) -> None:
    """A shape outside the §2.8 table runs as codergen: a typo there silently calls an LLM."""
    shape = node.attrs.get("shape")
    if shape is None or shape in SHAPE_TO_TYPE or node.attrs.get("type"):
        return
    near = closest(shape, SHAPE_TO_TYPE)
    hint = f"did you mean shape={near} ({SHAPE_TO_TYPE[near]})?" if near else ""
    known_shape = shape in GRAPHVIZ_SHAPES
    out.append(
        node_diag(
            "shape_known",
            INFO if known_shape else WARNING,
            node,
            f"node `{node.id}`: shape {shape!r} selects no handler (§2.8), so the node runs as "
            "codergen (an LLM call)",
            hint or "use a shape of the §2.8 table or set type=... explicitly",
            "shape",
        )
    )


def stylesheet_property(graph: Graph) -> list[Diagnostic]:
    """Stylesheets set only llm_model, llm_provider and reasoning_effort (§8.2)."""
    text = graph.model_stylesheet
    if not text.strip():
        return []
    from freshness_magic.engine.stylesheet import (
        REASONING_EFFORTS,
        STYLE_PROPERTIES,
        Declaration,
        parse_stylesheet,
    )

    try:
        sheet = parse_stylesheet(text)
    except StylesheetError:
        return []
    allowed = ", ".join(sorted(STYLE_PROPERTIES))
    out: list[Diagnostic] = []

    def warn(decl: Declaration, message: str, fix: str) -> None:
        where = f"model_stylesheet line {decl.line}, column {decl.column}: "
        out.append(
            graph_diag(
                "stylesheet_property", WARNING, graph, where + message, fix, "model_stylesheet"
            )
        )

    for rule in sheet.rules:
        first: dict[str, Declaration] = {}
        for decl in rule.declarations:
            earlier = first.setdefault(decl.property, decl)
            if earlier is not decl:
                warn(
                    decl,
                    f"`{decl.property}` is set again in the same rule (first at line "
                    f"{earlier.line}, column {earlier.column}); only the last one counts: "
                    f"{decl.value!r}",
                    f"remove the `{decl.property}` you do not mean",
                )
            if decl.property == "reasoning_effort" and decl.value not in REASONING_EFFORTS:
                efforts = ", ".join(REASONING_EFFORTS)
                warn(
                    decl,
                    f"reasoning_effort {decl.value!r} is not one of {efforts}",
                    f"use one of {efforts}",
                )
            if decl.property in STYLE_PROPERTIES:
                continue
            near = closest(decl.property, STYLE_PROPERTIES)
            warn(
                decl,
                f"property `{decl.property}` has no effect (a stylesheet sets only {allowed}, "
                "§8.2)",
                f"did you mean `{near}`? rename `{decl.property}` to `{near}`"
                if near
                else f"set `{decl.property}` on the nodes themselves",
            )
    return out


def stylesheet_selector(graph: Graph) -> list[Diagnostic]:
    """Every selector of the stylesheet matches some node: one that matches none is a typo
    (``#reveiw``) or a node id written without ``#`` (``review`` is read as a shape)."""
    text = graph.model_stylesheet
    if not text.strip():
        return []
    from freshness_magic.engine.stylesheet import SelectorKind, parse_stylesheet

    try:
        sheet = parse_stylesheet(text)
    except StylesheetError:
        return []
    nodes = list(graph.nodes.values())
    classes = {c for node in nodes for c in node.classes}
    out = []
    for rule in sheet.rules:
        for selector in rule.selectors:
            if selector.kind is SelectorKind.UNIVERSAL or any(map(selector.matches, nodes)):
                continue
            value = selector.value
            if selector.kind is SelectorKind.SHAPE and value in graph.nodes:
                hint = f"`{value}` is read as a shape; for the node write `#{value}`"
            elif selector.kind is SelectorKind.ID:
                near = closest(value, graph.nodes)
                hint = f"did you mean `#{near}`?" if near else "name a node of the pipeline"
            elif selector.kind is SelectorKind.CLASS:
                spaced = next((n for n in nodes if value in n.get("class").split()), None)
                near = closest(value, classes)
                if spaced is not None:
                    written = spaced.get("class")
                    hint = (
                        f'node `{spaced.id}` has class="{written}": classes are separated by '
                        f'commas, write class="{",".join(written.split())}"'
                    )
                elif near:
                    hint = f"did you mean `.{near}`?"
                else:
                    hint = "name a class the nodes have"
            else:
                hint = "name a shape the nodes have"
            out.append(
                graph_diag(
                    "stylesheet_selector",
                    WARNING,
                    graph,
                    f"model_stylesheet: selector `{selector}` matches no node, so its rule "
                    "sets nothing",
                    hint,
                    "model_stylesheet",
                )
            )
    return out


def reasoning_effort_known(graph: Graph, node: Node, out: Out) -> None:
    """A node's ``reasoning_effort`` is low, medium or high (§2.6); one the stylesheet set is
    reported once, by ``stylesheet_property``."""
    value = node.attrs.get("reasoning_effort")
    key = "reasoning_effort"
    if not value or (key not in node.explicit and key not in node.attr_positions):
        return
    from freshness_magic.engine.stylesheet import REASONING_EFFORTS

    if value not in REASONING_EFFORTS:
        out.append(
            node_diag(
                "reasoning_effort_known",
                WARNING,
                node,
                f"node `{node.id}`: reasoning_effort={value!r} is not one of "
                f"{', '.join(REASONING_EFFORTS)}",
                f"use one of {', '.join(REASONING_EFFORTS)}",
                "reasoning_effort",
            )
        )


def _folder_of(graph: Graph) -> str:
    import os

    return os.path.dirname(os.path.realpath(graph.path or "."))


def prompt_file_exists(graph: Graph) -> list[Diagnostic]:
    """A ``prompt="@path"`` file must exist and be UTF-8 text (checked for pipelines loaded
    from a file: one without a path reads its prompt files from the work directory at run
    time)."""
    out: list[Diagnostic] = []
    for node in graph.iter_nodes():
        name = prompt_file_name(node)
        path = prompt_file_path(node, graph)
        if name is None or path is None:
            continue
        if path.is_file():
            if prompt_file_problem(node, graph, _folder_of(graph)) is not None:
                continue  # outside the pipeline's folder: not read here (see prompt_file_path)
            try:
                read_prompt_file(path)
                continue
            except (OSError, ValueError) as exc:
                problem, fix = f"cannot be read: {exc}", "make the file readable UTF-8 text"
        else:
            problem = "is a folder" if path.is_dir() else "does not exist"
            fix = "create the file, or give its path relative to the pipeline file's folder"
        out.append(
            node_diag(
                "prompt_file_exists",
                ERROR,
                node,
                f"node `{node.id}`: prompt file {name!r} {problem} ({path})",
                fix,
                "prompt",
            )
        )
    return out


_TEMPLATE = re.compile(r"\{\{.*?\}\}|\{%.*?%\}", re.DOTALL)


def template_syntax(graph: Graph, node: Node, out: Out) -> None:
    """``{{ ... }}`` and ``{% ... %}`` (Jinja-style templates of other pipeline runners) are
    not Attractor syntax: a prompt would show them verbatim and a ``tool_command`` hands them to
    ``/bin/sh`` as written. Say what to write instead."""
    for key, fix in (
        (
            "tool_command",
            "a tool_command goes to /bin/sh as written, nothing in it is expanded: read run values"
            " from the environment ($FRESHNESS_RUN_DIR, $FRESHNESS_NODE_ID...) or from a file an"
            " earlier node wrote",
        ),
        (
            "prompt",
            "in a prompt write $goal for the graph's goal and {context_key} for a context value"
            " (an unknown {key} is left as is); there are no conditionals",
        ),
    ):
        value = node.attrs.get(key, "")
        found = _TEMPLATE.search(value)
        if found is None:
            continue
        shown = found.group(0) if len(found.group(0)) <= 40 else found.group(0)[:39] + "…"
        out.append(
            node_diag(
                "template_syntax",
                WARNING,
                node,
                f"node `{node.id}`: {key} contains template syntax {shown!r}, which is not"
                " Attractor syntax and is not expanded",
                fix,
                key,
            )
        )
