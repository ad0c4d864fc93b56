"""Attribute names: the node attributes the engine reads, and ``node_attr_known``.

An attribute nobody reads is kept but ignored, so a misspelt one (``tool_comand=``,
``shpae=``) silently changes what a node does. ``node_attr_known`` reports every node
attribute that no registered rule declares: the engine's are declared here
(:data:`ENGINE_NODE_ATTRIBUTES`), and each package that reads attributes of its own declares
them on its rules (``node_attributes``; :func:`~.attrs.attr_type_rule` declares its typed ones),
so the :class:`~.validator.Validator` that holds the rules is the one place that knows them all.

Severity (decision): a name close to an attribute the engine or an extension reads is a WARNING
(the intended attribute is missing, so the node behaves differently: ``validate --strict``
fails); any other unknown name is INFO, as an unknown edge attribute is (a custom attribute for
a custom handler, or a GraphViz one we do not list). GraphViz's own drawing attributes are
accepted quietly, and a near miss of one (``colour``) is INFO: drawing does not change a run.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from freshness_magic.engine.model import Graph, Position
from freshness_magic.engine.validation.attrs import closest
from freshness_magic.engine.validation.core import (
    INFO,
    WARNING,
    AttributeRule,
    AttributeScope,
    Diagnostic,
    Out,
    Severity,
    graph_diag,
    node_at,
)

# fmt: off
GRAPHVIZ_NODE_ATTRIBUTES: frozenset[str] = frozenset({
    "color", "fillcolor", "fontcolor", "fontname", "fontsize", "style", "width", "height",
    "fixedsize", "penwidth", "peripheries", "tooltip", "URL", "href", "target", "xlabel",
    "id", "margin", "group", "sides", "skew", "distortion", "orientation", "regular", "image",
    "imagescale", "imagepos", "labelloc", "labeljust", "nojustify", "pos", "pin", "sortv", "z",
    "gradientangle", "layer", "comment", "ordering", "area", "colorscheme", "showboxes",
    "samplepoints", "root", "rects", "vertices", "xlp",
})
"""GraphViz drawing attributes of nodes: accepted quietly, they change only the picture."""

ENGINE_NODE_ATTRIBUTES: frozenset[str] = frozenset({
    # §2.6
    "label", "shape", "type", "prompt", "max_retries", "goal_gate", "retry_target",
    "fallback_retry_target", "fidelity", "thread_id", "class", "timeout", "llm_model",
    "llm_provider", "reasoning_effort", "auto_status", "allow_partial",
    # the handlers' own (§4): tool, human gate, parallel, manager loop
    "tool_command", "human.default_choice", "human.timeout", "join_policy", "error_policy",
    "max_parallel", "join_k", "join_quorum", "stack.child_dotfile", "stack.child_workdir",
    "manager.max_cycles", "manager.steps_per_cycle", "manager.poll_interval",
    "manager.stop_condition", "manager.actions",
    # reuse of an earlier execution (engine/reuse.py)
    "reuse",
})
# fmt: on
"""The node attributes the engine and its built-in handlers read."""

# fmt: off
GRAPHVIZ_GRAPH_ATTRIBUTES: frozenset[str] = frozenset({
    "_background", "bb", "bgcolor", "center", "charset", "class", "clusterrank", "color",
    "colorscheme", "comment", "compound", "concentrate", "dpi", "esep", "fillcolor",
    "fontcolor", "fontname", "fontnames", "fontpath", "fontsize", "forcelabels",
    "gradientangle", "href", "id", "imagepath", "inputscale", "label", "label_scheme",
    "labeljust", "labelloc", "landscape", "layers", "layerlistsep", "layerselect", "layersep",
    "layout", "levels", "levelsgap", "lheight", "linelength", "lp", "lwidth", "margin",
    "maxiter", "mclimit", "mindist", "mode", "model", "newrank", "nodesep", "nojustify",
    "normalize", "notranslate", "nslimit", "nslimit1", "oneblock", "ordering", "orientation",
    "outputorder", "overlap", "overlap_scaling", "overlap_shrink", "pack", "packmode", "pad",
    "page", "pagedir", "pencolor", "penwidth", "peripheries", "quadtree", "quantum", "rank",
    "rankdir", "ranksep", "ratio", "remincross", "repulsiveforce", "resolution", "root",
    "rotate", "rotation", "scale", "searchsize", "sep", "showboxes", "size", "smoothing",
    "sortv", "splines", "start", "style", "stylesheet", "target", "TBbalance", "tooltip",
    "truecolor", "URL", "viewport", "voro_margin", "xdotversion",
})
"""GraphViz's graph and cluster attributes: accepted quietly, they change only the picture."""

ENGINE_GRAPH_ATTRIBUTES: frozenset[str] = frozenset({
    # §2.5
    "goal", "label", "model_stylesheet", "default_max_retry", "retry_target",
    "fallback_retry_target", "default_fidelity", "thread_id",
    # the manager loop's settings, which a graph may give for all its manager nodes (§4.11)
    "stack.child_dotfile", "stack.child_workdir", "manager.max_cycles",
    "manager.steps_per_cycle", "manager.poll_interval", "manager.stop_condition",
    "manager.actions",
    # reuse of earlier executions for the whole run (engine/reuse.py)
    "reuse",
})
# fmt: on
"""The graph attributes the engine reads (its typed ones are declared by ``attr_type``)."""


def _check(graph: Graph, known: frozenset[str], out: Out) -> None:
    reported: set[tuple[str, Position | None]] = set()
    for node in graph.iter_nodes():
        for key in node.attrs:
            if key in known:
                continue
            explicit = key in node.explicit
            position = None if explicit else node.attr_positions.get(key)
            if not explicit:
                # From a `node [...]` default block: one diagnostic per written key, not per node.
                if (key, position) in reported:
                    continue
                reported.add((key, position))
            out.append(_diagnostic(node.id, key, known, node_at(node, key), explicit))


OTHER_DIALECT_NAMES: Mapping[str, str] = MappingProxyType(
    {
        "script": "tool_command",
        "command": "tool_command",
        "cmd": "tool_command",
        "model": "llm_model",
        "provider": "llm_provider",
    }
)
"""Node attributes other pipeline tools spell differently -> the name this engine reads."""


RETRY_PRESET_NAMES = frozenset({"retry_policy", "retry_preset"})
"""Attributes other tools use for §3.6's retry presets, which the spec gives no attribute."""


def dialect_fix(key: str) -> str | None:
    """What to write instead of another tool's name of an attribute (``script``), else None."""
    if key in RETRY_PRESET_NAMES:
        return (
            "set max_retries instead (the number of attempts after the first: the spec's "
            "`standard` preset is max_retries=4); a retry preset is no attribute here"
        )
    ours = OTHER_DIALECT_NAMES.get(key)
    return None if ours is None else f"rename `{key}` to `{ours}` (the Attractor name for it)"


ALIASES: Mapping[str, str] = MappingProxyType({"default_max_retry": "default_max_retries"})
"""Names the engine also reads for another's sake: a near miss is pointed at the main name."""


def _severity_and_fix(
    key: str, known: frozenset[str], drawing: frozenset[str]
) -> tuple[Severity, str]:
    """How bad an unknown attribute is and what to do (see the module docstring)."""
    if (rename := dialect_fix(key)) is not None:
        return WARNING, rename
    near = closest(key, known, cutoff=0.75)
    near = ALIASES.get(near, near) if near is not None else None
    if near is None:
        return INFO, f"check the spelling, or remove `{key}` if nothing reads it"
    return (
        INFO if near in drawing else WARNING,
        f"did you mean `{near}`? rename `{key}` to `{near}`",
    )


def _diagnostic(
    node_id: str, key: str, known: frozenset[str], at: tuple[int, int], explicit: bool
) -> Diagnostic:
    where = f"node `{node_id}`" if explicit else f"node `{node_id}` (from a node [...] default)"
    severity, fix = _severity_and_fix(key, known, GRAPHVIZ_NODE_ATTRIBUTES)
    message = (
        f"{where}: attribute `{key}` is not a node attribute the engine or a registered "
        "extension reads; it is kept but ignored"
    )
    line, column = at
    return Diagnostic("node_attr_known", severity, message, node_id, None, line, column, fix)


def node_attr_known() -> AttributeRule:
    """The ``node_attr_known`` rule, declaring the engine's and GraphViz's node attributes."""
    return AttributeRule(
        "node_attr_known", _check, ENGINE_NODE_ATTRIBUTES | GRAPHVIZ_NODE_ATTRIBUTES
    )


def _check_graph(graph: Graph, known: frozenset[str], out: Out) -> None:
    for key in graph.attrs:
        if key in known or f"graph.{key}" in graph.source:
            continue  # read by a rule's package, or by a condition or prompt from the context
        severity, fix = _severity_and_fix(key, known, GRAPHVIZ_GRAPH_ATTRIBUTES)
        message = (
            f"graph attribute `{key}` is not one the engine or a registered extension reads; it "
            f"is kept (in the run's context as graph.{key}) but changes nothing"
        )
        out.append(graph_diag("graph_attr_known", severity, graph, message, fix, key))


def graph_attr_known() -> AttributeRule:
    """The ``graph_attr_known`` rule, declaring the engine's and GraphViz's graph attributes."""
    return AttributeRule(
        "graph_attr_known",
        _check_graph,
        graph_attributes=ENGINE_GRAPH_ATTRIBUTES | GRAPHVIZ_GRAPH_ATTRIBUTES,
        scope=AttributeScope.GRAPH,
    )
