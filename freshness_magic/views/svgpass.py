"""One pass over the SVG ``dot`` writes: cleaned and annotated while it is copied.

The SVG is read with expat and written back as text in the same pass, without an element tree:
the tree of a 1,000-node layout is tens of thousands of objects that live until it is written
out (and that Python's cycle collector walks meanwhile); this pass keeps only the elements still
open. The text written is the markup ``xml.etree.ElementTree.tostring`` gives for the same
document (attributes in document order, ``<x />`` for an element with no content, the SVG
namespace as the default one; comments, processing instructions and the doctype left out).

Cleaning (defence in depth; ``dot`` writes none of it): elements that run code or pull content
in (:data:`UNSAFE_ELEMENTS`) are dropped with all they hold, as are ``on*`` attributes and
``javascript:`` links, anywhere in the document.

Annotating (:class:`Marks`): a node's group gets its classes, ``data-node``, ``data-state``, its
tooltip and an empty state mark (``text.fm-glyph``) in the top right corner of its outline; an
edge's group its ends and index; strokes and text that ``dot`` draws black in edges and clusters
take the text colour, so they stay visible on a dark background.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from xml.parsers import expat

from freshness_magic.engine.model import Edge
from freshness_magic.engine.visible import CONTROL_PICTURES

__all__ = [
    "SVG_NS",
    "UNSAFE_ELEMENTS",
    "XLINK_NS",
    "XML_TEXT",
    "Marks",
    "annotate_svg",
    "clean_svg",
    "shape_box",
]

SVG_NS = "http://www.w3.org/2000/svg"
XLINK_NS = "http://www.w3.org/1999/xlink"
XML_NS = "http://www.w3.org/XML/1998/namespace"
"""The ``xml:`` prefix's namespace: bound by XML itself, never declared."""
_KNOWN_PREFIXES = {SVG_NS: "", XLINK_NS: "xlink", XML_NS: "xml"}
UNSAFE_ELEMENTS = frozenset({"script", "foreignObject", "iframe", "object", "embed", "use"})
_TITLE = f"{SVG_NS}}}title"
XML_TEXT = {
    code: picture
    for code, picture in CONTROL_PICTURES.items()
    if code < 0x20 and code not in (9, 10, 13)
}
"""C0 control characters (invalid in XML) put into the SVG as their Unicode pictures; tooltips
keep tabs and line breaks."""
GLYPH_PX = 12
"""The size of a node's state mark (:attr:`StateStyle.glyph`), in the layout's units."""


_TEXT_ESCAPES = (("&", "&amp;"), ("<", "&lt;"), (">", "&gt;"))
_ATTR_ESCAPES = (*_TEXT_ESCAPES, ('"', "&quot;"), ("\r", "&#13;"), ("\n", "&#10;"), ("\t", "&#09;"))
_TEXT_SPECIAL = re.compile("[&<>]").search
_ATTR_SPECIAL = re.compile('[&<>"\r\n\t]').search


def _escaped(value: str, escapes: tuple[tuple[str, str], ...]) -> str:
    for char, entity in escapes:  # "&" first, so no entity is escaped again
        value = value.replace(char, entity)
    return value


def _text(value: str) -> str:
    """``value`` escaped as element text."""
    return value if _TEXT_SPECIAL(value) is None else _escaped(value, _TEXT_ESCAPES)


def _attr(value: str) -> str:
    """``value`` escaped as a double-quoted attribute (line breaks and tabs kept as such)."""
    return value if _ATTR_SPECIAL(value) is None else _escaped(value, _ATTR_ESCAPES)


def _undefined_entity(name: str, _parameter: bool) -> None:
    raise expat.ExpatError(f"undefined entity &{name};")


def shape_box(tag: str, attrs: Mapping[str, str]) -> tuple[float, float, float, float] | None:
    """The bounding box (left, top, right, bottom) of a node's outline element (a ``polygon``
    with points or an ``ellipse``, inset to the part inside the curve), else None."""
    if tag == "polygon":
        xs: list[float] = []
        ys: list[float] = []
        for pair in attrs.get("points", "").split():
            x, y = pair.split(",")  # no tuple per point: this runs for every node
            xs.append(float(x))
            ys.append(float(y))
        if xs:
            return min(xs), min(ys), max(xs), max(ys)
    elif tag == "ellipse":
        cx, cy = float(attrs.get("cx", 0)), float(attrs.get("cy", 0))
        rx, ry = float(attrs.get("rx", 0)), float(attrs.get("ry", 0))
        return cx - rx * 0.7, cy - ry * 0.7, cx + rx * 0.7, cy + ry * 0.7
    return None


@dataclass(frozen=True)
class Marks:
    """What the layout writes into ``dot``'s SVG: per node id its index and tooltip, edges by
    their SVG id, clusters by index (name, label), the graph's name and state."""

    index: Mapping[str, int]
    titles: Mapping[str, str]
    edges: Mapping[str, Edge]
    clusters: Mapping[int, tuple[str, str]]
    graph_name: str
    state: str
    """The ``data-state`` every node starts with."""


class _Group(enum.Enum):
    """What an element is to the annotation."""

    OTHER = "other"
    NODE = "node"
    EDGE = "edge"
    CLUSTER = "cluster"
    GRAPH = "graph"


@dataclass(slots=True)
class _Open:
    """An element being copied: its name as written and what the pass still owes it."""

    name: str
    group: _Group = _Group.OTHER
    pending: bool = True
    """Its start tag still lacks ``>`` (no content yet: it may end as ``<x />``)."""
    colour: bool = False
    """Black strokes and fills, and text without a fill, take the text colour (itself and below)."""
    title: str | None = None
    """The tooltip to give it (its ``title`` child's text replaced, or one put first)."""
    slot: int = -1
    """Where in the output a missing title goes (before its first child)."""
    box: tuple[float, float, float, float] | None = None


@dataclass
class _Pass:
    """The state of one pass; :meth:`run` feeds expat and returns the text."""

    marks: Marks | None
    out: list[str] = field(default_factory=list)
    stack: list[_Open] = field(default_factory=list)
    prefixes: dict[str, str] = field(default_factory=dict)
    skip: int = 0
    """Depth inside an element being left out (unsafe, or a title whose text is replaced)."""
    skip_unsafe: bool = False
    drop_tail: bool = False
    """The text after a dropped element is dropped with it (as removing it from a tree does)."""
    root: tuple[str, dict[str, str]] | None = None
    frame: dict[str, str] = field(default_factory=dict)
    """The root's ``width``, ``height``, ``viewBox`` and the graph group's ``transform``."""
    transform_seen: bool = False
    names: dict[str, tuple[str, str]] = field(default_factory=dict)
    """Each name seen: (as written, local part); names repeat on every node."""
    keys: dict[str, tuple[bool, bool]] = field(default_factory=dict)
    """Each attribute name seen: (an event handler, a link)."""

    def run(self, svg: str) -> str:
        parser = expat.ParserCreate(namespace_separator="}")
        parser.ordered_attributes = True
        parser.buffer_text = True
        parser.buffer_size = 1 << 16
        parser.StartElementHandler = self.start
        parser.EndElementHandler = self.end
        parser.CharacterDataHandler = self.data
        parser.SkippedEntityHandler = _undefined_entity
        self.out.append("")  # the root's start tag, written once every namespace is known
        parser.Parse(svg, True)
        if self.root is not None:
            name, attrs = self.root
            written = self._attrs(attrs)
            declared = sorted(self.prefixes.items(), key=lambda item: item[1])
            spaces = "".join(
                f' xmlns{":" + prefix if prefix else ""}="{_attr(uri)}"'
                for uri, prefix in declared
                if uri != XML_NS
            )
            self.out[0] = f"<{name}{spaces}{written}"
        return "".join(self.out)

    # --- names -----------------------------------------------------------------------------

    def _name(self, name: str) -> tuple[str, str]:
        """``name`` (expat's ``uri}local``) as written, and its local part."""
        found = self.names.get(name)
        if found is None:
            uri, sep, local = name.rpartition("}")
            if not sep:
                found = (name, name)
            else:
                prefix = self.prefixes.get(uri)
                if prefix is None:
                    prefix = _KNOWN_PREFIXES.get(uri, f"ns{len(self.prefixes)}")
                    self.prefixes[uri] = prefix
                found = (f"{prefix}:{local}" if prefix else local, local)
            self.names[name] = found
        return found

    def _qname(self, name: str) -> str:
        return self._name(name)[0]

    def _key(self, name: str) -> tuple[bool, bool]:
        """Whether attribute ``name`` is an event handler, and whether a link (its namespace
        is named only if it is written)."""
        found = self.keys.get(name)
        if found is None:
            lowered = name.rpartition("}")[2].lower()
            found = (lowered.startswith("on"), lowered == "href")
            self.keys[name] = found
        return found

    def _attrs(self, attrs: Mapping[str, str]) -> str:
        names = self.names
        return "".join(
            [f' {(names.get(k) or self._name(k))[0]}="{_attr(v)}"' for k, v in attrs.items()]
        )

    def _title(self, name: str, attrs: Mapping[str, str], text: str) -> str:
        shown = _text(text.translate(XML_TEXT))
        start = f"<{name}{self._attrs(attrs)}"
        return f"{start}>{shown}</{name}>" if shown else f"{start} />"

    # --- expat's events --------------------------------------------------------------------

    def _content(self, top: _Open) -> None:
        if top.pending:
            self.out.append(">")
            top.pending = False

    def start(self, name: str, pairs: list[str]) -> None:
        if self.skip:
            self.skip += 1
            return
        self.drop_tail = False
        written, local = self.names.get(name) or self._name(name)
        parent = self.stack[-1] if self.stack else None
        if parent is not None:
            self._content(parent)
            if parent.title is not None and parent.slot < 0:
                parent.slot = len(self.out)
                self.out.append("")
            if local in UNSAFE_ELEMENTS:
                self.skip, self.skip_unsafe = 1, True
                return
        attrs = {}
        keys = self.keys
        for i in range(0, len(pairs), 2):
            key, value = pairs[i], pairs[i + 1]
            handler, link = keys.get(key) or self._key(key)
            if handler or (link and value.strip().lower().startswith("javascript:")):
                continue  # event handlers and javascript: links never reach the page
            attrs[key] = value
        element = _Open(written, colour=parent is not None and parent.colour)
        if parent is None:
            self._root(element, attrs)
        else:
            self._child(parent, element, local, attrs)
        if parent is not None and parent.title is not None and name == _TITLE:
            self.out.append(self._title(element.name, attrs, parent.title))
            parent.title = None
            self.skip, self.skip_unsafe = 1, False  # its own text is replaced
            return
        if element.colour:
            _follow_text_colour(local, attrs)
        self.stack.append(element)
        if parent is not None:
            self.out.append(f"<{element.name}{self._attrs(attrs)}")

    def _root(self, element: _Open, attrs: dict[str, str]) -> None:
        if self.marks is not None:
            attrs["class"] = "fm-graph-svg"
            attrs["role"] = "img"
            attrs["aria-label"] = f"pipeline {self.marks.graph_name}"
        self.frame = {key: attrs.get(key, "") for key in ("width", "height", "viewBox")}
        self.frame["transform"] = ""
        self._attrs(attrs)  # its attributes' namespaces are named before its children's
        self.root = (element.name, attrs)

    def _child(self, parent: _Open, element: _Open, local: str, attrs: dict[str, str]) -> None:
        """Annotate a child of ``parent`` (its own attributes; what it owes at its end)."""
        marks = self.marks
        if marks is None:
            return
        if local == "g":
            if len(self.stack) == 1 and not self.transform_seen:  # the graph's group
                self.frame["transform"] = attrs.get("transform", "")
                self.transform_seen = True
            _group(element, attrs, marks)
        if parent.group is _Group.NODE and parent.box is None:
            parent.box = shape_box(local, attrs)
        elif parent.group is _Group.CLUSTER and local == "polygon":
            attrs["fill"] = "none"
            attrs["stroke"] = "#8a8a8a"
            attrs["stroke-dasharray"] = "4,3"
        elif parent.group is _Group.GRAPH and local == "text":
            attrs["class"] = "fm-graph-label"
            attrs["fill"] = "currentColor"

    def data(self, text: str) -> None:
        if self.skip or self.drop_tail or not self.stack or not text:
            return
        self._content(self.stack[-1])
        self.out.append(_text(text))

    def end(self, _name: str) -> None:
        if self.skip:
            self.skip -= 1
            if self.skip == 0:
                self.drop_tail = self.skip_unsafe
            return
        self.drop_tail = False
        element = self.stack.pop()
        if element.title is not None:
            markup = self._title(self._qname(_TITLE), {}, element.title)
            if element.slot >= 0:
                self.out[element.slot] = markup
            else:
                self._content(element)
                self.out.append(markup)
        if element.group is _Group.NODE and element.box is not None:
            left, top, right, _bottom = element.box
            glyph = {
                "class": "fm-glyph",
                "x": f"{max(right - 4, left):.1f}",
                "y": f"{top + GLYPH_PX + 1:.1f}",
                "text-anchor": "end",
                "font-size": str(GLYPH_PX),
                "aria-hidden": "true",
            }
            self._content(element)
            self.out.append(f"<{self._qname(f'{SVG_NS}}}text')}{self._attrs(glyph)} />")
        self.out.append(" />" if element.pending else f"</{element.name}>")


def _group(element: _Open, attrs: dict[str, str], marks: Marks) -> None:
    """What a ``g`` of ``dot``'s is (node, edge, cluster, the graph) and its marks."""
    gid = attrs.get("id", "")
    classes = attrs.get("class", "").split()
    if "node" in classes and gid.startswith("fm-node-"):
        node_id = gid[len("fm-node-") :]
        i = marks.index.get(node_id)
        if i is None:
            return
        attrs["class"] = f"node fm-node fm-n{i}"
        attrs["data-node"] = node_id
        attrs["data-state"] = marks.state
        element.group, element.title = _Group.NODE, marks.titles[node_id]
    elif "edge" in classes and gid in marks.edges:
        edge = marks.edges[gid]
        attrs["class"] = "edge fm-edge"
        attrs["data-source"] = edge.source
        attrs["data-target"] = edge.target
        attrs["data-index"] = str(edge.index)
        label = f"\nlabel: {edge.label}" if edge.label else ""
        cond = f"\ncondition: {edge.condition}" if edge.condition else ""
        element.group, element.colour = _Group.EDGE, True
        element.title = f"{edge.source} → {edge.target}{label}{cond}"
    elif "cluster" in classes and gid.startswith("fm-cluster-"):
        name, label = marks.clusters[int(gid[len("fm-cluster-") :])]
        attrs["class"] = "cluster fm-cluster"
        element.group, element.colour = _Group.CLUSTER, True
        element.title = f"subgraph {name or '(unnamed)'}: {label}".rstrip(": ")
    elif "graph" in classes:
        element.group, element.title = _Group.GRAPH, marks.graph_name


def _follow_text_colour(local: str, attrs: dict[str, str]) -> None:
    for key in ("fill", "stroke"):
        if attrs.get(key) == "black":
            attrs[key] = "currentColor"
    if local == "text" and "fill" not in attrs:
        attrs["fill"] = "currentColor"


def annotate_svg(svg: str, marks: Marks) -> tuple[str, dict[str, str]]:
    """``svg`` (from ``dot``) cleaned and annotated with ``marks``; and its frame: the root's
    ``width``, ``height``, ``viewBox`` and the graph group's ``transform``.

    Raises ``expat.ExpatError`` when ``svg`` is not well-formed XML.
    """
    done = _Pass(marks)
    text = done.run(svg)
    return text, done.frame


def clean_svg(svg: str) -> str:
    """``svg`` without scripts, foreign objects, ``on*`` handlers or ``javascript:`` links.

    Raises ``expat.ExpatError`` when ``svg`` is not well-formed XML.
    """
    return _Pass(None).run(svg)
