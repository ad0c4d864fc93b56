"""Graph rendering for the notebook: one ``dot`` layout per pipeline structure, states as CSS.

The layout is the expensive part (running ``dot -Tsvg``), so it is computed once per
``Graph.structure_key()`` and cached. Node states never touch the layout: they are expressed as a
small CSS block scoped to one widget instance that maps each node's short class (``fm-n<i>``) to
a state colour. A step therefore sends a few hundred bytes, not the SVG.

Every piece of pipeline text (ids, labels, tooltips) reaches the page only as escaped text inside
SVG/HTML elements; the SVG from ``dot`` is parsed and cleaned of scripts, event handlers and
``javascript:`` links before anyone sees it.

The layout engine is the Graphviz program ``dot`` when it is on ``PATH``; without it, Graphviz in
process from a ``pygraphviz`` wheel (which bundles it: ``pip install 'freshness_magic[layout]'``);
without either, :class:`LayoutUnavailable` says in one line how to get one.
"""

from __future__ import annotations

import html
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from freshness_magic.engine.model import Graph
from freshness_magic.errors import FreshnessMagicError

SVG_NS = "http://www.w3.org/2000/svg"
XLINK_NS = "http://www.w3.org/1999/xlink"
ET.register_namespace("", SVG_NS)
ET.register_namespace("xlink", XLINK_NS)


class NodeState(StrEnum):
    """What the user sees for a node (DESIGN.md §7)."""

    PENDING = "pending"
    NEXT = "next"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    PARTIAL = "partial"
    FAILED = "failed"
    RETRYING = "retrying"
    WAITING = "waiting"
    BLOCKED = "blocked"
    SKIPPED = "skipped"
    INTERRUPTED = "interrupted"
    STALE = "stale"
    OUTDATED = "outdated"


class StaleKind(StrEnum):
    """Since when a stale node's inputs differ: the run-start baseline, or its own completion."""

    NONE = ""
    BASELINE = "baseline"
    RUN = "run"


@dataclass(frozen=True)
class StateStyle:
    """Fixed colours of one state; ``dash`` is an SVG stroke-dasharray ('' = solid)."""

    fill: str
    stroke: str
    width: float = 1.5
    dash: str = ""
    description: str = ""


STATE_STYLES: Mapping[NodeState, StateStyle] = {
    NodeState.PENDING: StateStyle("#ffffff", "#9e9e9e", 1.0, "", "not run yet"),
    NodeState.NEXT: StateStyle("#e3f2fd", "#1565c0", 2.0, "6,3", "next to run"),
    NodeState.RUNNING: StateStyle("#bbdefb", "#0d47a1", 3.0, "", "running"),
    NodeState.SUCCEEDED: StateStyle("#c8e6c9", "#2e7d32", 1.5, "", "succeeded"),
    NodeState.PARTIAL: StateStyle("#fff59d", "#9e9d24", 1.5, "", "partial success"),
    NodeState.FAILED: StateStyle("#ffcdd2", "#b71c1c", 2.5, "", "failed"),
    NodeState.RETRYING: StateStyle("#ffe0b2", "#e65100", 2.0, "", "retrying"),
    NodeState.WAITING: StateStyle("#e1bee7", "#6a1b9a", 3.0, "", "waiting for a human"),
    NodeState.BLOCKED: StateStyle("#d7ccc8", "#3e2723", 2.5, "", "blocked by stale input"),
    NodeState.SKIPPED: StateStyle("#eeeeee", "#757575", 1.0, "2,2", "skipped"),
    NodeState.INTERRUPTED: StateStyle("#f8bbd0", "#880e4f", 2.5, "", "interrupted"),
    NodeState.STALE: StateStyle("#ffecb3", "#ff6f00", 2.5, "", "inputs changed"),
    NodeState.OUTDATED: StateStyle("#fff8e1", "#ff8f00", 1.5, "4,2", "upstream inputs changed"),
}
STALE_DASH: Mapping[StaleKind, str] = {StaleKind.BASELINE: "8,4", StaleKind.RUN: "2,3"}
"""Stale since baseline is dashed, stale since the node ran is dotted."""

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
_UNSAFE_ELEMENTS = frozenset({"script", "foreignObject", "iframe", "object", "embed", "use"})
_SHAPE_PARTS = ":is(polygon,ellipse,path)"


class RenderError(FreshnessMagicError):
    """``dot`` is missing or failed; the message says how to install it."""


class LayoutUnavailable(RenderError):
    """No layout engine at all (no ``dot`` program, no pygraphviz): show the text view instead."""


LAYOUT_INSTALL_HINT = (
    "install Graphviz (apt-get install graphviz, brew install graphviz, or conda install -c "
    "conda-forge graphviz) or pip install 'freshness_magic[layout]'"
)


@dataclass(frozen=True)
class NodeView:
    """A node's visible state and the tooltip text that explains it."""

    state: NodeState = NodeState.PENDING
    stale: StaleKind = StaleKind.NONE
    why: str = ""
    title: str = ""
    details: Mapping[str, Any] = field(default_factory=dict)
    """Cheap facts for the view: ``started_at`` (wall-clock seconds of a running node),
    ``attempt`` (retry count), ``upstream`` (the changed node behind ``outdated``)."""

    def __post_init__(self) -> None:
        if self.state is NodeState.RUNNING and self.stale is not StaleKind.NONE:
            object.__setattr__(self, "stale", StaleKind.NONE)


@dataclass(frozen=True)
class Layout:
    """A laid-out graph: the cleaned SVG (no states) and each node's short index."""

    svg: str
    index: Mapping[str, int]
    titles: Mapping[str, str] = field(default_factory=dict)
    """The static tooltip of each node (id, label, handler type, inputs)."""
    boxes: Mapping[str, tuple[float, float, float, float]] = field(default_factory=dict)
    """Each node's bounding box ``(x, y, width, height)`` in the graph group's coordinates."""
    frame: Mapping[str, str] = field(default_factory=dict)
    """The root ``width``, ``height``, ``viewBox`` and the graph group's ``transform``."""


_CONTROL_PICTURES = {code: chr(0x2400 + code) for code in range(0x20) if chr(code) not in "\n\r"}
"""C0 control characters (invalid in the XML ``dot`` writes) shown as their Unicode pictures."""
_XML_TEXT = {code: picture for code, picture in _CONTROL_PICTURES.items() if chr(code) != "\t"}
"""The same for text put into the SVG directly (tooltips keep tabs and line breaks)."""


def _dot_string(text: str) -> str:
    """``text`` as a DOT double-quoted string that graphviz shows literally.

    Line breaks become ``\\n``; every other C0 control character becomes its visible picture
    (``\\x01`` -> U+2401), since ``dot -Tsvg`` would copy it into XML where it is not allowed.
    """
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    lines = escaped.replace("\r\n", "\\n").replace("\n", "\\n").replace("\r", "\\n")
    return '"' + lines.translate(_CONTROL_PICTURES) + '"'


def layout_dot(graph: Graph) -> str:
    """The DOT text given to ``dot``: nodes renamed ``n<i>``, SVG ids and classes attached."""
    index = {node_id: i for i, node_id in enumerate(graph.nodes)}
    rankdir = graph.attrs.get("rankdir", "TB").upper()
    lines = [
        "digraph fm {",
        f"  graph [rankdir={rankdir if rankdir in _RANKDIRS else 'TB'}, bgcolor=transparent];",
        '  node [fontname="Helvetica", fontsize=11, style=filled, fillcolor=white];',
        '  edge [fontname="Helvetica", fontsize=9];',
    ]
    for node_id, node in graph.nodes.items():
        shape = node.shape if node.shape in _SHAPES else "box"
        lines.append(
            f"  n{index[node_id]} [id={_dot_string('fm-node-' + node_id)}, "
            f"label={_dot_string(node.label)}, shape={shape}];"
        )
    for edge in graph.edges:
        if edge.source not in index or edge.target not in index:
            continue
        attrs = [f"id={_dot_string(f'fm-edge-{edge.index}')}"]
        if edge.label:
            attrs.append(f"label={_dot_string(edge.label)}")
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


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


def _sanitize(element: ET.Element) -> None:
    """Drop executable parts anywhere below ``element`` (defence in depth; dot emits none)."""
    for parent in element.iter():
        for child in list(parent):
            if _local(child.tag) in _UNSAFE_ELEMENTS:
                parent.remove(child)
        for key in list(parent.attrib):
            name = _local(key).lower()
            value = parent.attrib[key].strip().lower()
            if name.startswith("on") or (name == "href" and value.startswith("javascript:")):
                del parent.attrib[key]


def sanitize_svg(svg: str) -> str:
    """``svg`` without scripts, foreign objects, ``on*`` handlers or ``javascript:`` links."""
    root = ET.fromstring(svg)
    _sanitize(root)
    return ET.tostring(root, encoding="unicode")


def _set_title(group: ET.Element, text: str) -> None:
    title = group.find(f"{{{SVG_NS}}}title")
    if title is None:
        title = ET.Element(f"{{{SVG_NS}}}title")
        group.insert(0, title)
    title.text = text.translate(_XML_TEXT)


def static_title(graph: Graph, node_id: str) -> str:
    """The tooltip part that depends only on the pipeline: id, label, type, inputs."""
    node = graph.nodes[node_id]
    parts = [node_id if node.label == node_id else f"{node_id}: {node.label}"]
    parts.append(f"type: {node.handler_type}")
    if node.source_files:
        parts.append(f"inputs: {', '.join(node.source_files)} (freshness={node.freshness})")
    return "\n".join(parts)


def build_layout(graph: Graph) -> Layout:
    """Lay ``graph`` out with ``dot`` and return the cleaned, annotated SVG (no states)."""
    raw = run_dot(layout_dot(graph))
    root = ET.fromstring(raw)
    _sanitize(root)
    index = {node_id: i for i, node_id in enumerate(graph.nodes)}
    titles = {node_id: static_title(graph, node_id) for node_id in graph.nodes}
    edges = {f"fm-edge-{e.index}": e for e in graph.edges}
    for group in root.iter(f"{{{SVG_NS}}}g"):
        gid = group.get("id", "")
        classes = group.get("class", "").split()
        if "node" in classes and gid.startswith("fm-node-"):
            node_id = gid[len("fm-node-") :]
            if node_id not in index:
                continue
            group.set("class", f"node fm-node fm-n{index[node_id]}")
            group.set("data-node", node_id)
            _set_title(group, titles[node_id])
        elif "edge" in classes and gid in edges:
            edge = edges[gid]
            group.set("class", "edge fm-edge")
            group.set("data-source", edge.source)
            group.set("data-target", edge.target)
            arrow = f"{edge.source} → {edge.target}"
            cond = f" if {edge.condition}" if edge.condition else ""
            _set_title(group, arrow + (f" [{edge.label}]" if edge.label else "") + cond)
        elif "graph" in classes:
            _set_title(group, graph.name)
    root.set("class", "fm-graph-svg")
    root.set("role", "img")
    root.set("aria-label", f"pipeline {graph.name}")
    svg = ET.tostring(root, encoding="unicode")
    boxes = {}
    for group in root.iter(f"{{{SVG_NS}}}g"):
        owner = group.get("data-node")
        box = _bbox(group) if owner is not None else None
        if owner is not None and box is not None:
            boxes[owner] = box
    graph_group = root.find(f"{{{SVG_NS}}}g")
    frame = {key: root.get(key) or "" for key in ("width", "height", "viewBox")}
    frame["transform"] = (graph_group.get("transform") or "") if graph_group is not None else ""
    return Layout(svg=svg, index=index, titles=titles, boxes=boxes, frame=frame)


def _bbox(group: ET.Element) -> tuple[float, float, float, float] | None:
    """The bounding box of a node group's shapes (polygon points, ellipses)."""
    xs: list[float] = []
    ys: list[float] = []
    for part in group:
        tag = _local(part.tag)
        if tag in ("polygon", "polyline"):
            for pair in part.get("points", "").split():
                x, _, y = pair.partition(",")
                try:
                    xs.append(float(x))
                    ys.append(float(y))
                except ValueError:
                    continue
        elif tag == "ellipse":
            try:
                cx, cy = float(part.get("cx", "0")), float(part.get("cy", "0"))
                rx, ry = float(part.get("rx", "0")), float(part.get("ry", "0"))
            except ValueError:
                continue
            xs += [cx - rx, cx + rx]
            ys += [cy - ry, cy + ry]
    if not xs or not ys:
        return None
    return (min(xs), min(ys), max(xs) - min(xs), max(ys) - min(ys))


class LayoutCache:
    """Layouts keyed by graph structure, so ``dot`` runs once per distinct structure.

    One cache belongs to one extension instance (or one widget), never to the module.
    """

    def __init__(self, max_entries: int = 32) -> None:
        self._entries: OrderedDict[tuple[object, ...], Layout] = OrderedDict()
        self._max = max_entries
        self.hits = 0
        self.misses = 0

    @staticmethod
    def key(graph: Graph) -> tuple[object, ...]:
        return (graph.structure_key(), tuple(static_title(graph, n) for n in graph.nodes))

    def get(self, graph: Graph) -> Layout:
        """The layout of ``graph``'s structure, laid out now if not seen before."""
        key = self.key(graph)
        found = self._entries.get(key)
        if found is not None:
            self.hits += 1
            self._entries.move_to_end(key)
            return found
        self.misses += 1
        layout = build_layout(graph)
        self._entries[key] = layout
        while len(self._entries) > self._max:
            self._entries.popitem(last=False)
        return layout

    def clear(self) -> None:
        self._entries.clear()


def base_css(scope: str) -> str:
    """CSS sent once with the layout: fonts, pending look, the stale outlines and the legend."""
    pending = STATE_STYLES[NodeState.PENDING]
    rules = [
        f".{scope} .fm-graph-box{{position:relative;display:block}}",
        f".{scope} .fm-graph-box>.fm-graph,.{scope} .fm-graph-box>.fm-state{{margin:0;padding:0}}",
        f".{scope} .fm-graph-box>.fm-graph{{width:100%;min-width:0;flex:1 1 auto}}",
        f".{scope} .fm-graph-box>.fm-state{{position:absolute;top:0;left:0;right:0;"
        "pointer-events:none}",
        f".{scope} .fm-graph-svg,.{scope} .fm-overlay{{display:block;max-width:100%;height:auto}}",
        f".{scope} .fm-tip{{fill:transparent;stroke:none;pointer-events:all}}",
        f".{scope} .fm-node>{_SHAPE_PARTS}{{fill:{pending.fill};stroke:{pending.stroke}}}",
        f".{scope} .fm-legend{{display:flex;flex-wrap:wrap;gap:4px 12px;font:12px sans-serif}}",
        f".{scope} .fm-legend-item{{display:inline-flex;align-items:center;gap:4px}}",
        f".{scope} .fm-swatch{{display:inline-block;width:14px;height:10px;border:2px solid}}",
        f".{scope} .fm-why{{font:12px sans-serif;margin:2px 0;padding-left:18px}}",
        f".{scope} .fm-evidence-rows{{border-collapse:collapse;font:12px sans-serif}}",
        f".{scope} .fm-evidence-rows :is(th,td){{text-align:left;padding:1px 8px 1px 0;"
        "vertical-align:top}",
        f".{scope} .fm-evidence-rows th{{border-bottom:1px solid #bbb}}",
    ]
    return "\n".join(rules)


def _state_declarations(state: NodeState, stale: StaleKind) -> str:
    style = STATE_STYLES[state]
    dash = STALE_DASH.get(stale, "") if state is NodeState.STALE else style.dash
    decl = f"fill:{style.fill};stroke:{style.stroke};stroke-width:{style.width}"
    return decl + (f";stroke-dasharray:{dash}" if dash else "")


def state_css(scope: str, layout: Layout, views: Mapping[str, NodeView]) -> str:
    """The per-step style block: one grouped rule per (state, stale kind) present.

    Pending nodes need no rule (the base CSS draws them), so a fresh run costs almost nothing and
    a finished 200-node run is about one short selector per node.
    """
    groups: dict[tuple[NodeState, StaleKind], list[int]] = {}
    for node_id, view in views.items():
        if view.state is NodeState.PENDING or node_id not in layout.index:
            continue
        groups.setdefault((view.state, view.stale), []).append(layout.index[node_id])
    rules = []
    for (state, stale), indices in sorted(groups.items()):
        selector = ",".join(f".fm-n{i}" for i in sorted(indices))
        rules.append(
            f".{scope} :is({selector})>{_SHAPE_PARTS}{{{_state_declarations(state, stale)}}}"
        )
    return "<style>" + "\n".join(rules) + "</style>"


def parse_state_css(css: str, layout: Layout) -> dict[str, tuple[NodeState, StaleKind]]:
    """Read back which state each node gets from :func:`state_css` output (tests, exports)."""
    by_index = {i: node_id for node_id, i in layout.index.items()}
    result: dict[str, tuple[NodeState, StaleKind]] = {
        node_id: (NodeState.PENDING, StaleKind.NONE) for node_id in layout.index
    }
    lookup: dict[str, tuple[NodeState, StaleKind]] = {}
    for state in NodeState:
        for stale in (StaleKind.NONE, StaleKind.BASELINE, StaleKind.RUN):
            lookup.setdefault(_state_declarations(state, stale), (state, stale))
    for match in re.finditer(r":is\(([^)]*)\)>:is\([^)]*\)\{([^}]*)\}", css):
        state_stale = lookup[match.group(2)]
        for cls in match.group(1).split(","):
            result[by_index[int(cls.strip()[len(".fm-n") :])]] = state_stale
    return result


def legend_html() -> str:
    """A legend of every state with its colours (HTML, no pipeline text)."""
    items = []
    for state, style in STATE_STYLES.items():
        items.append(
            f'<span class="fm-legend-item" data-state="{state.value}">'
            f'<span class="fm-swatch" style="background:{style.fill};border-color:{style.stroke}">'
            f"</span>{state.value}</span>"
        )
    for kind, dash in STALE_DASH.items():
        style = STATE_STYLES[NodeState.STALE]
        border = "dashed" if kind is StaleKind.BASELINE else "dotted"
        label = "stale since baseline" if kind is StaleKind.BASELINE else "stale since run"
        items.append(
            f'<span class="fm-legend-item" data-state="stale" data-stale="{kind.value}" '
            f'title="stroke-dasharray {dash}">'
            f'<span class="fm-swatch" style="background:{style.fill};border-color:{style.stroke};'
            f'border-style:{border}"></span>{label}</span>'
        )
    return '<div class="fm-legend">' + "".join(items) + "</div>"


def why_html(views: Mapping[str, NodeView], limit: int = 12) -> str:
    """The nodes that need attention (anything but pending/succeeded), with why, escaped."""
    quiet = {NodeState.PENDING, NodeState.SUCCEEDED, NodeState.SKIPPED}
    rows = [(n, v) for n, v in views.items() if v.state not in quiet and v.why]
    if not rows:
        return ""
    items = []
    for node_id, view in rows[:limit]:
        stale = f' data-stale="{view.stale.value}"' if view.stale is not StaleKind.NONE else ""
        items.append(
            f'<li class="fm-why-item" data-node="{html.escape(node_id)}" '
            f'data-state="{view.state.value}"{stale}><b>{html.escape(node_id)}</b> '
            f"({view.state.value}): {html.escape(view.why)}</li>"
        )
    more = f"<li>… and {len(rows) - limit} more</li>" if len(rows) > limit else ""
    return '<ul class="fm-why">' + "".join(items) + more + "</ul>"


TIP_STATES = frozenset(
    {
        NodeState.RUNNING, NodeState.PARTIAL, NodeState.FAILED, NodeState.RETRYING,
        NodeState.WAITING, NodeState.BLOCKED, NodeState.STALE,
    }
)  # fmt: skip
"""States whose live tooltip says why (others keep the static tooltip of the layout)."""


def overlay_svg(layout: Layout, views: Mapping[str, NodeView], limit: int = 60) -> str:
    """Transparent boxes over the nodes that need attention, each with a ``<title>`` saying why.

    Sent with the state CSS (the layout SVG stays as it is); drawn exactly over the graph because
    it has the same size, viewBox and transform. Only nodes in :data:`TIP_STATES` get one.
    """
    frame = layout.frame
    tips = []
    for node_id, view in views.items():
        box = layout.boxes.get(node_id)
        if box is None or view.state not in TIP_STATES:
            continue
        x, y, width, height = box
        title = html.escape(
            f"{layout.titles.get(node_id, node_id)}\n{view.state.value}: {view.why}"
        )
        stale = f' data-stale="{view.stale.value}"' if view.stale is not StaleKind.NONE else ""
        tips.append(
            f'<rect class="fm-tip" data-node="{html.escape(node_id)}" '
            f'data-state="{view.state.value}"{stale} x="{x:.1f}" y="{y:.1f}" '
            f'width="{width:.1f}" height="{height:.1f}"><title>{title}</title></rect>'
        )
        if len(tips) >= limit:
            break
    return (
        f'<svg xmlns="{SVG_NS}" class="fm-overlay" width="{html.escape(frame.get("width", ""))}" '
        f'height="{html.escape(frame.get("height", ""))}" '
        f'viewBox="{html.escape(frame.get("viewBox", ""))}">'
        f'<g transform="{html.escape(frame.get("transform", ""))}">{"".join(tips)}</g></svg>'
    )


def snapshot_svg(layout: Layout, views: Mapping[str, NodeView]) -> str:
    """The SVG with each node's state written as classes, data attributes and tooltip.

    Used for static exports (no widget runtime) and to check states in tests; the live widget
    keeps the layout SVG fixed and restyles it with :func:`state_css` instead.
    """
    root = ET.fromstring(layout.svg)
    for group in root.iter(f"{{{SVG_NS}}}g"):
        node_id = group.get("data-node")
        if node_id is None:
            continue
        view = views.get(node_id, NodeView())
        classes = f"node fm-node fm-n{layout.index[node_id]} fm-state-{view.state.value}"
        if view.stale is not StaleKind.NONE:
            classes += f" fm-stale-{view.stale.value}"
            group.set("data-stale", view.stale.value)
        group.set("class", classes)
        group.set("data-state", view.state.value)
        why = f"\n{view.state.value}: {view.why}" if view.why else f"\n{view.state.value}"
        _set_title(group, layout.titles.get(node_id, node_id) + why)
        style = STATE_STYLES[view.state]
        dash = STALE_DASH.get(view.stale, "") if view.state is NodeState.STALE else style.dash
        for part in group:
            if _local(part.tag) in ("polygon", "ellipse", "path"):
                part.set("fill", style.fill)
                part.set("stroke", style.stroke)
                part.set("stroke-width", str(style.width))
                if dash:
                    part.set("stroke-dasharray", dash)
    return ET.tostring(root, encoding="unicode")


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
