"""Graph rendering for the notebook: one ``dot`` layout per pipeline structure, states apart.

The layout is the expensive part (running ``dot -Tsvg``), so it is computed once per pipeline
structure and cached. Node states never touch the layout: the live widget sets each node group's
``data-state`` attribute and the palette CSS (``viewstate.palette_css``) colours it, so a step
sends one character per node, not the SVG. ``snapshot.static_html`` writes the states into a copy
of the SVG for front ends without a widget runtime.

Every piece of pipeline text (ids, labels, tooltips) reaches the page only as escaped text inside
SVG/HTML elements; the SVG from ``dot`` is parsed and cleaned of scripts, event handlers and
``javascript:`` links before anyone sees it.

The layout engine is the Graphviz program ``dot`` when it is on ``PATH``; without it, Graphviz in
process from a ``pygraphviz`` wheel (which bundles it: ``pip install 'freshness_magic[layout]'``);
without either, :class:`LayoutUnavailable` says in one line how to get one.
"""

from __future__ import annotations

import shutil
import subprocess
import xml.etree.ElementTree as ET
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from xml.parsers import expat

from freshness_magic.engine.model import Edge, Graph, Node
from freshness_magic.engine.visible import CONTROL_PICTURES
from freshness_magic.errors import FreshnessMagicError
from freshness_magic.freshness.attrs import freshness_mode, inputs_checked, source_files
from freshness_magic.views.state import (
    STALE_DASH,
    STATE_STYLES,
    NodeState,
    NodeView,
    StaleKind,
    possible_states,
)
from freshness_magic.views.svgpass import (
    SVG_NS,
    XLINK_NS,
    XML_TEXT,
    Marks,
    annotate_svg,
    clean_svg,
)

__all__ = [
    "STALE_DASH",
    "STATE_STYLES",
    "SVG_NS",
    "Layout",
    "LayoutCache",
    "NodeState",
    "NodeView",
    "RenderError",
    "StaleKind",
    "build_layout",
    "edge_text",
    "layout_dot",
    "local_name",
    "node_groups",
    "run_dot",
    "sanitize_svg",
    "set_title",
    "state_table",
]

ET.register_namespace("", SVG_NS)
ET.register_namespace("xlink", XLINK_NS)


_SHAPES = frozenset(
    {
        "box", "rect", "rectangle", "square", "ellipse", "oval", "circle", "diamond",
        "Mdiamond", "Msquare", "hexagon", "octagon", "doubleoctagon", "tripleoctagon",
        "parallelogram", "house", "invhouse", "component", "note", "tab", "folder",
        "box3d", "cylinder", "plaintext", "plain", "none", "point", "trapezium",
        "invtrapezium", "triangle", "invtriangle", "pentagon", "septagon", "star",
        "doublecircle", "egg", "Mcircle", "underline",
    }
)  # fmt: skip
_RANKDIRS = frozenset({"TB", "LR", "BT", "RL"})
EDGE_LABEL_CHARS = 32
"""Edge labels longer than this are cut with an ellipsis on the graph (whole in the tooltip)."""


class RenderError(FreshnessMagicError):
    """``dot`` is missing or failed; the message says how to install it."""


class LayoutUnavailable(RenderError):
    """No layout engine at all (no ``dot`` program, no pygraphviz): show the text view instead."""


LAYOUT_INSTALL_HINT = (
    "install Graphviz (apt-get install graphviz, brew install graphviz, or conda install -c "
    "conda-forge graphviz) or pip install 'freshness_magic[layout]'"
)


@dataclass(frozen=True)
class Layout:
    """A laid-out graph: the cleaned SVG (no states) and each node's short index."""

    svg: str
    index: Mapping[str, int]
    titles: Mapping[str, str] = field(default_factory=dict)
    """The static tooltip of each node (id, label, handler type, inputs)."""
    frame: Mapping[str, str] = field(default_factory=dict)
    """The root ``width``, ``height``, ``viewBox`` and the graph group's ``transform``."""
    states: tuple[NodeState, ...] = ()
    """The states this pipeline can show (its legend)."""

    @property
    def nodes(self) -> list[str]:
        """Node ids in index order (the order of the widget's state string)."""
        return sorted(self.index, key=self.index.__getitem__)


_CONTROL_PICTURES = {
    code: picture
    for code, picture in CONTROL_PICTURES.items()
    if code < 0x20 and code not in (10, 13)
}
"""C0 control characters (invalid in the XML ``dot`` writes) shown as their Unicode pictures."""


def _dot_string(text: str) -> str:
    """``text`` as a DOT double-quoted string that graphviz shows literally.

    Line breaks become ``\\n``; every other C0 control character becomes its visible picture
    (``\\x01`` -> U+2401), since ``dot -Tsvg`` would copy it into XML where it is not allowed.
    """
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    lines = escaped.replace("\r\n", "\\n").replace("\n", "\\n").replace("\r", "\\n")
    return '"' + lines.translate(_CONTROL_PICTURES) + '"'


def edge_text(edge: Edge, limit: int = EDGE_LABEL_CHARS) -> str:
    """What an edge shows on the graph: its label and condition, cut to ``limit`` characters."""
    text = edge.label
    if edge.condition:
        text = f"{text} if {edge.condition}" if text else f"if {edge.condition}"
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _drawn_subgraphs(graph: Graph) -> dict[int, int | None]:
    """Subgraphs drawn as clusters (named ``cluster*`` or labelled) -> nearest drawn parent."""
    drawn = {
        i for i, sub in enumerate(graph.subgraphs)
        if sub.nodes and (sub.name.startswith("cluster") or sub.label)
    }  # fmt: skip
    parents: dict[int, int | None] = {}
    for i in sorted(drawn):
        parent = graph.subgraphs[i].parent
        while parent is not None and parent not in drawn:
            parent = graph.subgraphs[parent].parent
        parents[i] = parent
    return parents


def layout_dot(graph: Graph) -> str:
    """The DOT text given to ``dot``: nodes renamed ``n<i>``, clusters ``cluster_<i>``, SVG ids."""
    index = {node_id: i for i, node_id in enumerate(graph.nodes)}
    rankdir = graph.attrs.get("rankdir", "TB").upper()
    parents = _drawn_subgraphs(graph)
    depth: dict[int, int] = {}
    for i, parent in parents.items():
        depth[i] = 0 if parent is None else depth[parent] + 1
    home: dict[str, int] = {}
    for i in parents:
        for node_id in graph.subgraphs[i].nodes:
            if node_id in index and depth[i] >= depth.get(home.get(node_id, -1), -1):
                home[node_id] = i
    children: dict[int | None, list[int]] = {}
    for i, parent in parents.items():
        children.setdefault(parent, []).append(i)
    members: dict[int | None, list[str]] = {}
    for node_id in graph.nodes:
        members.setdefault(home.get(node_id), []).append(node_id)

    def node_line(node_id: str) -> str:
        node = graph.nodes[node_id]
        shape = node.shape if node.shape in _SHAPES else "box"
        return (
            f"n{index[node_id]} [id={_dot_string('fm-node-' + node_id)}, "
            f"label={_dot_string(node.label)}, shape={shape}];"
        )

    def block(owner: int | None, indent: str) -> list[str]:
        out = [indent + node_line(node_id) for node_id in members.get(owner, ())]
        for i in children.get(owner, ()):
            sub = graph.subgraphs[i]
            out.append(f"{indent}subgraph cluster_{i} {{")
            label = _dot_string(sub.label or sub.name)
            out.append(f'{indent}  graph [id="fm-cluster-{i}", label={label}, fontsize=12];')
            out.extend(block(i, indent + "  "))
            out.append(f"{indent}}}")
        return out

    title = f", label={_dot_string(graph.label)}, labelloc=t" if graph.label else ""
    lines = [
        "digraph fm {",
        f"  graph [rankdir={rankdir if rankdir in _RANKDIRS else 'TB'}, bgcolor=transparent, "
        'fontname="Helvetica", fontsize=14, style="rounded", color="#8a8a8a", '
        f"labeljust=l{title}];",
        '  node [fontname="Helvetica", fontsize=11, style=filled, fillcolor=white];',
        '  edge [fontname="Helvetica", fontsize=9];',
        *block(None, "  "),
    ]
    for edge in graph.edges:
        if edge.source not in index or edge.target not in index:
            continue
        attrs = [f"id={_dot_string(f'fm-edge-{edge.index}')}"]
        text = edge_text(edge)
        if text:
            attrs.append(f"label={_dot_string(text)}")
        lines.append(f"  n{index[edge.source]} -> n{index[edge.target]} [{', '.join(attrs)}];")
    lines.append("}")
    return "\n".join(lines) + "\n"


def run_dot(dot_text: str, timeout: float = 60.0) -> str:
    """Lay out ``dot_text`` as SVG with ``dot -Tsvg``, or in process when there is no ``dot``.

    Raises :class:`LayoutUnavailable` when neither is available and :class:`RenderError` when the
    layout fails.
    """
    executable = shutil.which("dot")
    if executable is None:
        return _layout_in_process(dot_text)
    try:
        proc = subprocess.run(
            [executable, "-Tsvg"],
            input=dot_text.encode("utf-8"),
            capture_output=True,
            timeout=timeout,
            check=False,
        )
    except FileNotFoundError:  # removed between the lookup and the start
        return _layout_in_process(dot_text)
    except subprocess.TimeoutExpired as exc:
        raise RenderError(f"`dot` did not finish laying out the graph in {timeout:.0f}s") from exc
    if proc.returncode != 0:
        tail = proc.stderr.decode("utf-8", "replace").strip()[-500:]
        raise RenderError(f"`dot` failed with exit code {proc.returncode}: {tail}")
    return proc.stdout.decode("utf-8")


def _layout_in_process(dot_text: str) -> str:
    """The SVG from the Graphviz that a pygraphviz wheel bundles (no ``dot`` program needed)."""
    try:
        import pygraphviz
    except ImportError:
        raise LayoutUnavailable(
            f"no graph layout: the Graphviz program `dot` is not installed; {LAYOUT_INSTALL_HINT}"
        ) from None
    try:
        svg = pygraphviz.AGraph(string=dot_text).draw(format="svg", prog="dot")
    except (ValueError, OSError, TypeError) as exc:
        raise RenderError(f"Graphviz (pygraphviz) could not lay out the graph: {exc}") from exc
    return bytes(svg).decode("utf-8")


def local_name(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


def sanitize_svg(svg: str) -> str:
    """``svg`` without scripts, foreign objects, ``on*`` handlers or ``javascript:`` links."""
    try:
        return clean_svg(svg)
    except expat.ExpatError as exc:
        raise RenderError(f"the SVG to clean is not well-formed XML: {exc}") from exc


def set_title(group: ET.Element, text: str) -> None:
    title = group.find(f"{{{SVG_NS}}}title")
    if title is None:
        title = ET.Element(f"{{{SVG_NS}}}title")
        group.insert(0, title)
    title.text = text.translate(XML_TEXT)


def static_title(graph: Graph, node_id: str) -> str:
    """The tooltip part that depends only on the pipeline: id, label, type, inputs."""
    node = graph.nodes[node_id]
    parts = [node_id if node.label == node_id else f"{node_id}: {node.label}"]
    parts.append(f"type: {node.handler_type}")
    if inputs := inputs_text(node):
        parts.append(inputs)
    return "\n".join(parts)


def inputs_text(node: Node) -> str:
    """``inputs: <patterns> (freshness=<mode>)`` for a node with ``source_files``, else ""; for
    one whose inputs are not checked (``ignore``, also when unset) it says so."""
    inputs = source_files(node)
    if not inputs:
        return ""
    mode = f"freshness={freshness_mode(node)}"
    if not inputs_checked(node):
        mode += ": not checked, never shown stale"
    return f"inputs: {', '.join(inputs)} ({mode})"


def build_layout(graph: Graph, titles: Mapping[str, str] | None = None) -> Layout:
    """Lay ``graph`` out with ``dot`` and return the cleaned, annotated SVG (no states).

    ``titles`` are the nodes' static tooltips when the caller has them already
    (:func:`static_title` of each node).
    """
    raw = run_dot(layout_dot(graph))
    index = {node_id: i for i, node_id in enumerate(graph.nodes)}
    if titles is None:
        titles = {node_id: static_title(graph, node_id) for node_id in graph.nodes}
    marks = Marks(
        index=index,
        titles=titles,
        edges={f"fm-edge-{e.index}": e for e in graph.edges},
        clusters={i: (sub.name, sub.label) for i, sub in enumerate(graph.subgraphs)},
        graph_name=graph.name,
        state=NodeState.PENDING.value,
    )
    try:
        svg, frame = annotate_svg(raw, marks)
    except expat.ExpatError as exc:
        raise RenderError(f"`dot` wrote SVG that is not well-formed XML: {exc}") from exc
    return Layout(svg=svg, index=index, titles=titles, frame=frame, states=possible_states(graph))


class LayoutCache:
    """Layouts keyed by graph structure, so ``dot`` runs once per distinct structure.

    One cache belongs to one extension instance (or one widget), never to the module.
    """

    def __init__(self, max_entries: int = 32) -> None:
        self._entries: OrderedDict[str, Layout] = OrderedDict()
        self._max = max_entries
        self.hits = 0
        self.misses = 0

    @classmethod
    def key(cls, graph: Graph) -> str:
        """What a layout depends on: the structure, the tooltips, conditions and clusters."""
        return cls._key(graph, [static_title(graph, n) for n in graph.nodes])

    @staticmethod
    def _key(graph: Graph, titles: list[str]) -> str:
        """One string, a line per node, edge, cluster and tooltip (each value's ``repr``, so no
        two structures meet): no container per node, neither kept with the cached layout nor
        made while the first render waits."""
        lines = [f"nodes {len(graph.nodes)}"]
        lines += [f"{n.id!r} {n.label!r} {n.shape!r}" for n in graph.nodes.values()]
        lines.append(f"edges {len(graph.edges)}")
        lines += [f"{e.source!r} {e.target!r} {e.label!r} {e.condition!r}" for e in graph.edges]
        lines.append(f"subgraphs {len(graph.subgraphs)}")
        lines += [f"{s.name!r} {s.label!r} {s.parent!r} {s.nodes!r}" for s in graph.subgraphs]
        lines.append(f"graph {graph.attrs.get('rankdir', '')!r} {graph.label!r} {graph.name!r}")
        lines += [repr(title) for title in titles]
        return "\n".join(lines)

    def get(self, graph: Graph) -> Layout:
        """The layout of ``graph``'s structure, laid out now if not seen before."""
        titles = {node_id: static_title(graph, node_id) for node_id in graph.nodes}
        key = self._key(graph, list(titles.values()))
        found = self._entries.get(key)
        if found is not None:
            self.hits += 1
            self._entries.move_to_end(key)
            states = possible_states(graph)
            # The legend follows attributes the drawing does not (retries, reuse, freshness).
            return found if found.states == states else replace(found, states=states)
        self.misses += 1
        layout = build_layout(graph, titles)
        self._entries[key] = layout
        while len(self._entries) > self._max:
            self._entries.popitem(last=False)
        return layout

    def clear(self) -> None:
        self._entries.clear()


def node_groups(svg: str) -> list[ET.Element]:
    """The node ``<g>`` elements of an SVG produced here (tests and exports)."""
    root = ET.fromstring(svg)
    return [g for g in root.iter(f"{{{SVG_NS}}}g") if g.get("data-node") is not None]


def state_table(rows: Iterable[tuple[str, str, str]]) -> str:
    """A plain-text table ``node  state  detail`` with aligned columns."""
    rows = list(rows)
    width_node = max([4, *(len(r[0]) for r in rows)])
    width_state = max([5, *(len(r[1]) for r in rows)])
    lines = [f"{'node':<{width_node}}  {'state':<{width_state}}  detail"]
    for node_id, state, detail in rows:
        lines.append(f"{node_id:<{width_node}}  {state:<{width_state}}  {detail}".rstrip())
    return "\n".join(lines)
