"""The engine's lint rules of the §7.2 table, plus ``default_rules``.

Orphan nodes (decision): §7.2 lists ``reachability`` as an ERROR while the §11.12 parity matrix
expects "orphan node -> warning". We follow §11.12 and report unreachable nodes as a WARNING
under the rule name ``reachability``: an unreachable node can never execute, so it cannot make a
run misbehave, and a notebook user sketching a pipeline should be able to run the wired part
before every node is connected. ``--strict`` turns it into a failure for CI.
"""

from __future__ import annotations

from collections.abc import Iterable

from freshness_magic.engine.model import (
    BUILTIN_HANDLER_TYPES,
    FIDELITY_MODES,
    MANAGER_ACTIONS,
    Edge,
    Graph,
    Node,
    split_list,
)
from freshness_magic.engine.validation import attrs, flow, names, paths
from freshness_magic.engine.validation.core import (
    ERROR,
    INFO,
    WARNING,
    Diagnostic,
    FunctionRule,
    LintRule,
    NodeCheck,
    Out,
    ScanRule,
    edge_at,
    edge_diag,
    graph_at,
    graph_diag,
    node_diag,
    position_in_value,
)
from freshness_magic.errors import StylesheetError

# -- §7.2 structural rules (whole graph) -----------------------------------------------------


def _start_node(graph: Graph) -> list[Diagnostic]:
    candidates = graph.start_candidates()
    if not candidates:
        return [
            graph_diag(
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
        node_diag(
            "start_node",
            ERROR,
            node,
            f"pipeline has {len(candidates)} start nodes ({ids}); exactly one is allowed",
            f"keep one start node and change the shape of `{node.id}`",
            "shape",
        )
        for node in candidates[1:]
    ]


def _attribute_repeated(graph: Graph) -> list[Diagnostic]:
    """An attribute written twice in one statement: the last one counts, silently (a trial's
    ``done [shape=Msquare, shape=box]`` left the pipeline without an exit and said only that)."""
    return [
        Diagnostic(
            "attribute_repeated",
            WARNING,
            f"`{again.key}` is written twice in one attribute list (first at line "
            f"{again.first.line}, column {again.first.column}); only the last one counts: "
            f"{again.key}={again.value!r}",
            line=again.again.line,
            column=again.again.column,
            fix=f"remove the `{again.key}` you do not mean",
        )
        for again in graph.repeated
    ]


def _terminal_node(graph: Graph) -> list[Diagnostic]:
    exits = graph.exit_candidates()
    if len(exits) > 1:
        names = ", ".join(f"`{n.id}`" for n in exits)
        return [
            node_diag(
                "terminal_node",
                ERROR,
                exits[1],
                f"pipeline has {len(exits)} exit nodes ({names}); §7.2 allows exactly one",
                f"keep one exit node and point the others' incoming edges at `{exits[0].id}`",
                "shape",
            )
        ]
    if exits:
        return []
    return [
        graph_diag(
            "terminal_node",
            ERROR,
            graph,
            "pipeline has no exit node",
            "add `done [shape=Msquare]` and an edge from the last stage to it",
        )
    ]


def _start_no_incoming(graph: Graph) -> list[Diagnostic]:
    start = graph.start_node()
    if start is None:
        return []
    return [
        edge_diag(
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
        edge_diag(
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
    from freshness_magic.engine.stylesheet import parse_stylesheet  # see attrs.stylesheet_property

    try:
        parse_stylesheet(text)
    except StylesheetError as exc:
        lines = text.split("\n")
        index = sum(len(line) + 1 for line in lines[: exc.line - 1]) + exc.column - 1
        key = "model_stylesheet"
        where = position_in_value(graph, graph.attr_positions.get(key), key, index)
        line, column = where if where is not None else graph_at(graph, key)
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
                edge_diag(
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
    # The condition modules are loaded by the first condition met (see validation.flow).
    from freshness_magic.engine.condition_syntax import split_fix
    from freshness_magic.engine.conditions import check_condition

    error = check_condition(raw)
    if error is None:
        return
    problem, fix = split_fix(error.message)
    where = position_in_value(
        graph, edge.attr_positions.get("condition"), "condition", error.column - 1
    )
    line, column = where if where is not None else edge_at(edge, "condition")
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
                node_diag(
                    "type_known",
                    WARNING,
                    node,
                    f"node `{node.id}`: type {declared!r} is not a known handler type, so "
                    "the node runs the default handler (codergen) instead",
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
            graph_diag(
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
            node_diag(
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
            edge_diag(
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
                graph_diag(
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
                node_diag(
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
        node_diag(
            "goal_gate_has_retry",
            WARNING,
            node,
            f"node `{node.id}` is a goal gate without retry_target or fallback_retry_target; "
            "an unsatisfied gate will fail the run",
            f"add retry_target=<node id> to `{node.id}` (or to the graph)",
            "goal_gate",
        )
    )


def _prompt_on_llm_nodes(graph: Graph) -> list[Diagnostic]:
    """LLM nodes without a prompt or label; a typo of a declared node's id is said so (the typos
    of the whole graph found once: per node, a chain of 20,000 bare ids took 18 s)."""
    bare = [
        node
        for node in graph.nodes.values()
        if node.handler_type == "codergen"
        and not (node.attrs.get("prompt", "").strip() or node.attrs.get("label", "").strip())
    ]
    typos = paths.typos(graph) if bare else {}
    out = []
    for node in bare:
        fix = f'add prompt="..." to `{node.id}`'
        meant = typos.get(node.id)
        if meant is not None:  # the edges meant a declared node: do not make the typo a stage
            fix = f"{paths.correct_typo(graph, node, meant)}, or {fix} if it is a new stage"
        out.append(
            node_diag(
                "prompt_on_llm_nodes",
                WARNING,
                node,
                f"node `{node.id}` runs the codergen (LLM) handler but has no prompt or label",
                fix,
            )
        )
    return out


def _tool_command_present(graph: Graph, node: Node, out: Out) -> None:
    if node.handler_type != "tool" or node.tool_command.strip():
        return
    fix = f'add tool_command="..." to `{node.id}`, or give it another shape'
    for key in node.attrs:
        rename = (
            names.dialect_fix(key) if names.OTHER_DIALECT_NAMES.get(key) == "tool_command" else None
        )
        if rename is None and attrs.closest(key, ("tool_command",), cutoff=0.75):
            rename = f"did you mean `tool_command`? rename `{key}` to `tool_command`"
        if rename is not None:
            fix = rename
            break
    out.append(
        node_diag(
            "tool_command_present",
            ERROR,
            node,
            f"node `{node.id}` runs the tool handler (shape=parallelogram) but has no "
            "tool_command, so it would fail when it runs",
            fix,
            "shape" if "shape" in node.attrs else None,
        )
    )


def _child_pipeline(graph: Graph, node: Node, out: Out) -> None:
    """A manager node names its child pipeline, and not the pipeline it is in, and asks only
    for actions the engine performs."""
    if node.handler_type != "stack.manager_loop":
        return
    raw = node.get("manager.actions")
    unknown = [a for a in split_list(raw) if a not in MANAGER_ACTIONS] if raw else []
    if unknown:
        message = (
            f"manager node `{node.id}` asks for manager.actions {', '.join(unknown)}, which this "
            f"engine does not perform (only {' and '.join(MANAGER_ACTIONS)}), so it would fail "
            "when it runs"
        )
        kept = ",".join(a for a in split_list(raw) if a in MANAGER_ACTIONS) or "observe,wait"
        fix = f'set "manager.actions"="{kept}"'
        out.append(node_diag("child_pipeline", ERROR, node, message, fix, "manager.actions"))
    name = (node.get("stack.child_dotfile") or graph.attrs.get("stack.child_dotfile", "")).strip()
    if not name:
        message = (
            f"manager node `{node.id}` has no stack.child_dotfile, so it would fail when it runs"
        )
        fix = f'add "stack.child_dotfile"="child.dot" to `{node.id}` or the graph'
        out.append(node_diag("child_pipeline", ERROR, node, message, fix, "shape"))
        return
    if graph.path:
        from pathlib import Path  # for manager nodes only: validate starts quickly

        own = Path(graph.path).resolve()
        if (own.parent / Path(name).expanduser()).resolve() == own:
            message = (
                f"manager node `{node.id}`'s child pipeline {name} is this pipeline: it would "
                "start itself without end"
            )
            fix = "name another pipeline in stack.child_dotfile"
            key = "stack.child_dotfile" if node.get("stack.child_dotfile") else None
            out.append(node_diag("child_pipeline", ERROR, node, message, fix, key))


def _failure_goes_to(graph: Graph, node: Node) -> str | None:
    """Where a plain failure of ``node`` leads (its first ``outcome=fail`` edge, else the first
    retry target that is a node: its own, then the graph's), said for a message; or None."""
    from freshness_magic.engine.conditions import check_condition, evaluate_condition

    for edge in graph.outgoing(node.id):
        raw = edge.condition
        if (
            raw
            and check_condition(raw) is None
            and evaluate_condition(raw, outcome="fail", context={})
        ):
            return f'`{edge.target}` by its edge condition="{raw}"'
    for owner, name in ((node, "its"), (graph, "the graph's")):
        for key in _RETRY_KEYS:
            target = owner.attrs.get(key, "")
            if target in graph.nodes:
                return f"`{target}` by {name} {key}"
    return None


def _retries_on_tool(graph: Graph, node: Node, out: Out) -> None:
    retries = node.max_retries
    if node.handler_type != "tool" or not retries or retries <= 0:
        return
    goes_to = _failure_goes_to(graph, node)
    if goes_to is None:
        fix = (
            f'to act on a failure, add an edge from `{node.id}` with condition="outcome=fail" '
            "to a node that fixes the cause, or give it a retry_target"
        )
    else:
        fix = (
            f"nothing to add: a failure of `{node.id}` already goes to {goes_to}; remove "
            f"max_retries={retries} unless an attempt that returns RETRY should run again"
        )
    out.append(
        node_diag(
            "retries_on_tool",
            INFO,
            node,
            f"node `{node.id}`: max_retries={retries} does not run a failing command again; "
            "only an attempt that returns RETRY is retried (a tool's non-zero exit is a FAIL; "
            "docs/ARCHITECTURE.md, spec deviations)",
            fix,
            "max_retries",
        )
    )


def default_rules(known_types: Iterable[str] | None = None) -> list[LintRule]:
    """The built-in rules in the order they run; ``known_types`` feeds ``type_known``."""
    known = frozenset(BUILTIN_HANDLER_TYPES if known_types is None else known_types)
    return [
        FunctionRule("start_node", _start_node),
        FunctionRule("attribute_repeated", _attribute_repeated),
        FunctionRule("terminal_node", _terminal_node),
        FunctionRule("reachability", paths.paths),  # also exit_reachable, dead_end_node
        FunctionRule("node_id_typo", paths.node_id_typo),
        ScanRule("edge_target_exists", edge_check=_edge_target_exists),
        FunctionRule("start_no_incoming", _start_no_incoming),
        FunctionRule("exit_no_outgoing", _exit_no_outgoing),
        ScanRule("condition_syntax", edge_check=_condition_syntax),
        FunctionRule("stylesheet_syntax", _stylesheet_syntax),
        ScanRule("type_known", node_check=_type_known(known)),
        ScanRule("fidelity_valid", _fidelity_graph, _fidelity_node, _fidelity_edge),
        ScanRule("retry_target_exists", _retry_target_graph, _retry_target_node),
        ScanRule("goal_gate_has_retry", node_check=_goal_gate_has_retry),
        FunctionRule("prompt_on_llm_nodes", _prompt_on_llm_nodes),
        ScanRule("tool_command_present", node_check=_tool_command_present),
        ScanRule("child_pipeline", node_check=_child_pipeline),
        ScanRule("retries_on_tool", node_check=_retries_on_tool),
        FunctionRule("prompt_file_exists", attrs.prompt_file_exists),
        ScanRule("default_choice_matches", node_check=attrs.default_choice_matches),
        ScanRule("shape_known", node_check=attrs.shape_known),
        ScanRule("parallel_policy", node_check=attrs.parallel_policy),
        ScanRule("gate_keys_distinct", node_check=attrs.gate_keys_distinct),
        FunctionRule("stylesheet_property", attrs.stylesheet_property),
        FunctionRule("stylesheet_selector", attrs.stylesheet_selector),
        ScanRule("reasoning_effort_known", node_check=attrs.reasoning_effort_known),
        ScanRule("template_syntax", node_check=attrs.template_syntax),
        ScanRule("dead_end_possible", node_check=flow.dead_end_possible),
        ScanRule("unconditional_choice", node_check=flow.unconditional_choice),
        ScanRule("condition_values", edge_check=flow.condition_values),
        ScanRule("conditional_outcome", edge_check=flow.conditional_outcome),
        ScanRule("edge_attr_known", edge_check=attrs.edge_attr_known),
        names.node_attr_known(),
        names.graph_attr_known(),
        attrs.engine_attr_types(),
    ]
