"""The one pass over dot's SVG: the markup ElementTree would write, cleaned and annotated."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from freshness_magic.engine.model import Edge
from freshness_magic.views.render import RenderError, sanitize_svg
from freshness_magic.views.svgpass import UNSAFE_ELEMENTS, Marks, annotate_svg, clean_svg

DOCUMENTS = [
    # event handlers, javascript: links, unsafe elements with the text after them
    '<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink"'
    ' onload="x()"><g id="a" onclick="e()">t<script>alert(1)</script>tail<a'
    ' xlink:href="javascript:alert(2)" href=" JavaScript:x"><text>hi</text></a><use'
    ' xlink:href="#x"/>after</g><!-- c --><foreignObject><div/></foreignObject></svg>',
    # declaration, doctype, entities, CDATA, empty elements, line breaks in attributes
    '<?xml version="1.0"?><!DOCTYPE svg PUBLIC "-//W3C//DTD SVG 1.1//EN"'
    ' "http://www.w3.org/Graphics/SVG/1.1/DTD/svg11.dtd"><svg'
    ' xmlns="http://www.w3.org/2000/svg"><g/><g></g><text>a&amp;b&lt;c&gt;&#45;&quot;"</text>'
    '<text x="a&quot;b&#10;c&#9;d&lt;"><![CDATA[x<y]]></text></svg>',
    # other namespaces, the xml: prefix, an element in no namespace
    '<svg xmlns="http://www.w3.org/2000/svg" xmlns:foo="urn:foo" xmlns:bar="urn:bar">'
    '<foo:x bar:y="1" xml:space="preserve"/><plain xmlns=""/></svg>',
    '<svg xmlns="http://www.w3.org/2000/svg"><g>a<script/>b<script/>c</g>\n<?pi x?>\n</svg>',
    '<svg xmlns="http://www.w3.org/2000/svg"/>',
    '<svg xmlns="http://www.w3.org/2000/svg">x<!--c-->y\r\n<g>\r</g></svg>',
]


def through_element_tree(svg: str) -> str:
    """The same cleaning done on an element tree, written by ElementTree (the reference)."""
    root = ET.fromstring(svg)
    for parent in root.iter():
        for child in list(parent):
            if child.tag.rsplit("}", 1)[-1] in UNSAFE_ELEMENTS:
                parent.remove(child)
        for key in list(parent.attrib):
            name = key.rsplit("}", 1)[-1].lower()
            if name.startswith("on") or (
                name == "href" and parent.attrib[key].strip().lower().startswith("javascript:")
            ):
                del parent.attrib[key]
    return ET.tostring(root, encoding="unicode")


@pytest.mark.parametrize("svg", DOCUMENTS)
def test_cleaning_writes_what_element_tree_writes(svg: str) -> None:
    assert clean_svg(svg) == through_element_tree(svg)


def test_cleaning_drops_code_and_keeps_the_rest() -> None:
    clean = clean_svg(DOCUMENTS[0])
    assert "script" not in clean and "onload" not in clean and "onclick" not in clean
    assert "javascript" not in clean.lower() and "foreignObject" not in clean
    assert "tail" not in clean and "after" not in clean  # the text after a dropped element
    assert ">t<" in clean and "<text>hi</text>" in clean


MARKS = Marks(
    index={"a": 0, "b": 1},
    titles={"a": "a\x01tip", "b": "b tip"},
    edges={"fm-edge-0": Edge("a", "b", {"label": "go", "condition": "outcome=success"})},
    clusters={0: ("cluster_x", "X")},
    graph_name="g",
    state="pending",
)
LAYOUT = (
    '<svg xmlns="http://www.w3.org/2000/svg" width="10pt" height="20pt" viewBox="0 0 10 20">'
    '<g id="graph0" class="graph" transform="translate(4 16)"><title>g</title>'
    "<text>Top</text>"
    '<g id="fm-node-a" class="node"><ellipse cx="10" cy="20" rx="10" ry="5"/>'
    "<title>old</title></g>"
    '<g id="fm-node-b" class="node"><polygon points=""/><polygon points="1,2 15,-6"/></g>'
    '<g id="fm-node-zz" class="node"><title>other</title></g>'
    '<g id="fm-edge-0" class="edge"><title>n0&#45;&gt;n1</title><path stroke="black"/>'
    "<text>go</text></g>"
    '<g id="fm-cluster-0" class="cluster"><polygon fill="black" points="0,0 1,1"/></g>'
    "</g></svg>"
)


def groups(svg: str) -> dict[str, ET.Element]:
    root = ET.fromstring(svg)
    return {g.get("id", ""): g for g in root.iter("{http://www.w3.org/2000/svg}g")}


def test_annotation_marks_nodes_edges_clusters_and_the_frame() -> None:
    svg, frame = annotate_svg(LAYOUT, MARKS)
    assert frame == {
        "width": "10pt",
        "height": "20pt",
        "viewBox": "0 0 10 20",
        "transform": "translate(4 16)",
    }
    found = groups(svg)
    ns = "{http://www.w3.org/2000/svg}"
    a, b = found["fm-node-a"], found["fm-node-b"]
    assert a.get("class") == "node fm-node fm-n0" and a.get("data-state") == "pending"
    # a title that is not the first child is replaced where it is; a control character is
    # shown as its picture
    assert [c.tag for c in a] == [f"{ns}ellipse", f"{ns}title", f"{ns}text"]
    assert a[1].text == "a\u2401tip"
    # a group without a title gets one first; the mark goes in its outline's corner
    assert b[0].tag == f"{ns}title" and b[0].text == "b tip"
    glyph = b[-1]
    assert glyph.get("class") == "fm-glyph" and (glyph.get("x"), glyph.get("y")) == ("11.0", "7.0")
    assert found["fm-node-zz"].get("data-node") is None  # not a node of the pipeline
    edge = found["fm-edge-0"]
    assert edge.get("data-source") == "a" and edge.get("data-index") == "0"
    assert edge[0].text == "a → b\nlabel: go\ncondition: outcome=success"
    assert edge[1].get("stroke") == "currentColor" and edge[2].get("fill") == "currentColor"
    cluster = found["fm-cluster-0"]
    assert cluster[0].text == "subgraph cluster_x: X"
    assert cluster[1].get("fill") == "none" and cluster[1].get("stroke-dasharray") == "4,3"
    label = found["graph0"][1]
    assert label.get("class") == "fm-graph-label" and label.get("fill") == "currentColor"
    root = ET.fromstring(svg)
    assert (root.get("class"), root.get("aria-label")) == ("fm-graph-svg", "pipeline g")


@pytest.mark.parametrize(
    "svg", ["<svg", '<svg xmlns="http://www.w3.org/2000/svg"><text>&nbsp;</text></svg>']
)
def test_svg_that_is_not_xml_is_a_render_error(svg: str) -> None:
    with pytest.raises(RenderError, match="not well-formed XML"):
        sanitize_svg(svg)
