"""The render layer: real `dot` layouts, per-node SVG groups, state CSS, escaping."""

from __future__ import annotations

from freshness_magic.engine.pipeline import load_pipeline
from freshness_magic.notebook.render import (
    STATE_STYLES,
    LayoutCache,
    NodeState,
    NodeView,
    StaleKind,
    legend_html,
    node_groups,
    overlay_svg,
    parse_state_css,
    sanitize_svg,
    snapshot_svg,
    state_css,
    why_html,
)

XSS = "<img src=x onerror=alert(1)>"


def chain(n: int) -> str:
    body = ["start [shape=Mdiamond]", "done [shape=Msquare]"]
    body += [f'n{i} [label="step {i}"]' for i in range(n)]
    body.append("start -> " + " -> ".join(f"n{i}" for i in range(n)) + " -> done")
    return "digraph chain {\n" + "\n".join(body) + "\n}\n"


def test_one_group_per_node_with_stable_ids_and_shapes():
    graph = load_pipeline(
        'digraph g { start [shape=Mdiamond]; ask [shape=hexagon, label="Ask?"]; '
        "done [shape=Msquare]; start -> ask -> done }"
    )
    layout = LayoutCache().get(graph)
    groups = node_groups(layout.svg)
    assert [g.get("data-node") for g in groups] == ["start", "ask", "done"]
    assert [g.get("id") for g in groups] == ["fm-node-start", "fm-node-ask", "fm-node-done"]
    assert all("fm-node" in (g.get("class") or "").split() for g in groups)
    shapes = [[child.tag.rsplit("}", 1)[1] for child in g] for g in groups]
    assert shapes[1] == ["title", "polygon", "text"]
    assert "polyline" in shapes[0]  # Mdiamond draws its extra strokes
    assert layout.svg.count('class="edge fm-edge"') == 2
    assert 'data-source="start" data-target="ask"' in layout.svg


def test_layout_cached_per_structure():
    cache = LayoutCache()
    text = chain(3)
    first = cache.get(load_pipeline(text))
    again = cache.get(load_pipeline(text))
    assert first is again
    assert (cache.hits, cache.misses) == (1, 1)
    cache.get(load_pipeline(chain(4)))
    assert cache.misses == 2


def test_labels_are_escaped_text_never_markup():
    graph = load_pipeline(
        'digraph g { start [shape=Mdiamond, label="' + XSS + '"]; '
        'b [label="\\"><svg onload=alert(2)>"]; done [shape=Msquare]; '
        'start -> b [label="<script>alert(3)</script>"]; b -> done }'
    )
    svg = LayoutCache().get(graph).svg
    assert "<img" not in svg and "<script" not in svg and "<svg onload" not in svg
    assert "&lt;img src=x onerror=alert(1)&gt;" in svg
    assert "&lt;script&gt;alert(3)&lt;/script&gt;" in svg
    assert "onload=" not in svg.replace("&lt;svg onload=alert(2)&gt;", "")


def test_sanitize_drops_scripts_handlers_and_js_links():
    dirty = (
        '<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink" '
        'onload="alert(1)"><script>alert(2)</script><g onclick="x()"><a xlink:href="javascript:'
        'alert(3)"><text>ok</text></a></g><foreignObject><div/></foreignObject></svg>'
    )
    clean = sanitize_svg(dirty)
    assert "alert" not in clean and "script" not in clean and "foreignObject" not in clean
    assert ">ok<" in clean


def test_state_css_groups_nodes_and_reads_back():
    graph = load_pipeline(chain(4))
    layout = LayoutCache().get(graph)
    views = {
        "start": NodeView(NodeState.SUCCEEDED, why="ok"),
        "n0": NodeView(NodeState.SUCCEEDED),
        "n1": NodeView(NodeState.STALE, StaleKind.BASELINE, "inputs changed"),
        "n2": NodeView(NodeState.STALE, StaleKind.RUN, "inputs changed since it ran"),
        "n3": NodeView(NodeState.RUNNING, StaleKind.RUN),
    }
    css = state_css("fm-w-x", layout, views)
    read = parse_state_css(css, layout)
    assert read["start"] == (NodeState.SUCCEEDED, StaleKind.NONE)
    assert read["n1"] == (NodeState.STALE, StaleKind.BASELINE)
    assert read["n2"] == (NodeState.STALE, StaleKind.RUN)
    assert read["n3"] == (NodeState.RUNNING, StaleKind.NONE)  # running is never stale
    assert read["done"] == (NodeState.PENDING, StaleKind.NONE)
    assert css.count("{") == 4  # one rule per (state, stale kind)
    assert "stroke-dasharray:8,4" in css and "stroke-dasharray:2,3" in css
    assert all(rule.startswith(".fm-w-x ") for rule in css[7:-8].split("\n"))


def test_state_css_is_small_for_200_nodes():
    graph = load_pipeline(chain(198))
    layout = LayoutCache().get(graph)
    views = {n: NodeView(NodeState.SUCCEEDED) for n in graph.nodes}
    assert len(state_css("fm-w-0123456789", layout, views).encode()) < 5000


def test_snapshot_writes_state_classes_data_and_tooltips():
    graph = load_pipeline(chain(2))
    layout = LayoutCache().get(graph)
    views = {
        "start": NodeView(NodeState.SUCCEEDED, why="Pipeline started"),
        "n0": NodeView(NodeState.STALE, StaleKind.RUN, "inputs changed: docs/spec.md (modified)"),
        "n1": NodeView(NodeState.WAITING, why="Ship it?"),
    }
    groups = {g.get("data-node"): g for g in node_groups(snapshot_svg(layout, views))}
    assert groups["start"].get("data-state") == "succeeded"
    assert "fm-state-stale" in (groups["n0"].get("class") or "")
    assert "fm-stale-run" in (groups["n0"].get("class") or "")
    assert groups["done"].get("data-state") == "pending"
    title = groups["n0"].find("{http://www.w3.org/2000/svg}title")
    assert title is not None and "docs/spec.md (modified)" in (title.text or "")
    assert groups["n1"].get("class", "").endswith("fm-state-waiting")


def test_legend_and_why_list():
    legend = legend_html()
    for state in STATE_STYLES:
        assert f'data-state="{state.value}"' in legend
    assert "stale since baseline" in legend and "stale since run" in legend
    why = why_html({"a": NodeView(NodeState.FAILED, why=XSS), "b": NodeView(NodeState.SUCCEEDED)})
    assert 'data-node="a" data-state="failed"' in why
    assert "&lt;img" in why and "<img" not in why
    assert 'data-node="b"' not in why


def test_overlay_tips_sit_on_the_nodes_that_need_attention():
    graph = load_pipeline(chain(3))
    layout = LayoutCache().get(graph)
    views = {
        "start": NodeView(NodeState.SUCCEEDED, why="ok"),
        "n0": NodeView(
            NodeState.STALE, StaleKind.RUN, "inputs changed since it ran: a.py (modified)"
        ),
        "n1": NodeView(NodeState.FAILED, why=XSS),
    }
    overlay = overlay_svg(layout, views)
    assert overlay.count('class="fm-tip"') == 2
    assert 'data-node="n0" data-state="stale" data-stale="run"' in overlay
    assert "a.py (modified)</title>" in overlay
    assert "&lt;img src=x onerror=alert(1)&gt;" in overlay and "<img" not in overlay
    assert f'viewBox="{layout.frame["viewBox"]}"' in overlay
    assert f'transform="{layout.frame["transform"]}"' in overlay
    x, y, width, height = layout.boxes["n0"]
    assert f'x="{x:.1f}" y="{y:.1f}" width="{width:.1f}" height="{height:.1f}"' in overlay
    polygon = next(g for g in node_groups(layout.svg) if g.get("data-node") == "n0")[1]
    points = [tuple(map(float, p.split(","))) for p in polygon.get("points", "").split()]
    assert min(p[0] for p in points) == x and min(p[1] for p in points) == y
