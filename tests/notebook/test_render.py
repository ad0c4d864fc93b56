"""The render layer: real `dot` layouts, per-node SVG groups, state CSS, escaping."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from IPython.core.interactiveshell import InteractiveShell

from freshness_magic.engine.pipeline import load_pipeline
from freshness_magic.views.render import (
    SVG_NS,
    LayoutCache,
    NodeState,
    NodeView,
    StaleKind,
    layout_dot,
    node_groups,
    run_dot,
    sanitize_svg,
)
from freshness_magic.views.snapshot import snapshot_svg, static_html
from freshness_magic.views.state import (
    DARK_BACKGROUND,
    LIGHT_BACKGROUND,
    STALE_DASH,
    STATE_STYLES,
    BannerKind,
    RunBanner,
    contrast_ratio,
    legend_items,
    palette_css,
    possible_states,
    state_code,
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
    assert shapes[1] == ["title", "polygon", "text", "text"]  # the label, then the state mark
    assert "polyline" in shapes[0]  # Mdiamond draws its extra strokes
    marks = [g[-1] for g in groups]
    assert all(m.get("class") == "fm-glyph" and not m.text for m in marks)  # the view fills it
    polygon = groups[1][1]
    xs = [float(pair.split(",")[0]) for pair in (polygon.get("points") or "").split()]
    assert min(xs) < float(marks[1].get("x") or 0) < max(xs)  # inside the node's box
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


def test_a_cached_layout_shows_the_legend_of_the_graph_asked_for():
    cache = LayoutCache()
    plain = cache.get(load_pipeline(chain(3)))
    retried = cache.get(load_pipeline(chain(3).replace("{", "{ default_max_retries=2", 1)))
    assert cache.misses == 1 and retried.svg is plain.svg
    assert NodeState.RETRYING not in plain.states
    assert NodeState.RETRYING in retried.states


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


def test_every_state_outline_contrasts_with_both_backgrounds():
    for state, style in STATE_STYLES.items():
        assert contrast_ratio(style.stroke, LIGHT_BACKGROUND) >= 3, state
        assert contrast_ratio(style.dark_stroke, DARK_BACKGROUND) >= 3, state
        assert contrast_ratio(style.fill, "#1a1a1a") >= 4.5, state  # label on the fill
        assert contrast_ratio(style.dark_fill, "#e0e0e0") >= 4.5, state
    pairs = {(s.fill, s.stroke) for s in STATE_STYLES.values()}
    assert len(pairs) == len(STATE_STYLES) == len(NodeState)


def test_palette_css_colours_states_by_attribute_in_both_themes():
    css = palette_css()
    painted = '.fm-root :is(g.fm-node,g.fm-key)[data-state="failed"]>:is(polygon,ellipse,path)'
    assert painted in css  # node groups and legend swatches alike
    assert "--fm-failed-stroke:#c62828" in css and "--fm-failed-stroke:#ef5350" in css
    assert 'body[data-jp-theme-light="false"] .fm-root' in css
    assert '[data-stale="run"]' in css and "stroke-dasharray:2,3" in css


def test_state_codes_are_one_character_and_distinct():
    codes = [state_code(NodeView(s)) for s in NodeState]
    assert all(len(c) == 1 for c in codes) and len(set(codes)) == len(codes)
    assert state_code(NodeView(NodeState.STALE, StaleKind.RUN)) == "T"
    assert NodeView(NodeState.NEXT, StaleKind.RUN).stale is StaleKind.NONE


def test_legend_lists_only_the_states_a_pipeline_can_show():
    plain = possible_states(load_pipeline(chain(2)))
    assert NodeState.WAITING not in plain and NodeState.STALE not in plain
    assert NodeState.SKIPPED not in plain and NodeState.SUCCEEDED in plain
    gated = possible_states(
        load_pipeline(
            'digraph g { start [shape=Mdiamond]; ask [shape=hexagon]; a [source_files="x.py",'
            " freshness=warn]; done [shape=Msquare]; start -> ask; ask -> a; ask -> done;"
            " a -> done }"
        )
    )
    assert {NodeState.WAITING, NodeState.SKIPPED, NodeState.STALE, NodeState.OUTDATED} <= set(gated)
    assert NodeState.BLOCKED not in gated
    for mode in ("", ", freshness=ignore"):  # inputs not checked: never shown stale
        unchecked = possible_states(
            load_pipeline(
                f'digraph g {{ start [shape=Mdiamond]; a [source_files="x.py"{mode}];'
                " done [shape=Msquare]; start -> a -> done }"
            )
        )
        assert NodeState.STALE not in unchecked and NodeState.OUTDATED not in unchecked


def test_the_legend_draws_each_stale_kind_as_its_nodes_are_drawn():
    """Stale nodes are dashed (since baseline) or dotted (since they ran): the legend has one
    entry per kind with that dash, and outdated (dashed too, before) has a pattern of its own."""
    items = legend_items([NodeState.STALE, NodeState.OUTDATED])
    stale = {i["stale"]: i for i in items if i["state"] == "stale"}
    assert {k: i["dash"] for k, i in stale.items()} == {
        kind.value: dash for kind, dash in STALE_DASH.items()
    }
    assert stale["baseline"]["label"] == "stale since baseline"
    assert stale["run"]["label"] == "stale since it ran"
    outdated = STATE_STYLES[NodeState.OUTDATED].dash
    assert outdated and outdated not in STALE_DASH.values()
    watched = load_pipeline(
        'digraph g { start [shape=Mdiamond]; a [source_files="x.py", freshness=block];'
        " done [shape=Msquare]; start -> a -> done }"
    )
    html = static_html(LayoutCache().get(watched), {})
    legend = html.split('<div class="fm-legend">')[1]
    for kind, dash in STALE_DASH.items():
        swatch = legend.split(f'data-stale="{kind.value}"')[2].split("</svg>")[0]
        assert f'stroke-dasharray="{dash}"' in swatch, swatch
    assert f'stroke-dasharray="{outdated}"' in legend
    assert '<g class="fm-key" data-state="stale" data-stale="run">' in legend


CLUSTERED = """digraph c {
  start [shape=Mdiamond]
  subgraph cluster_outer { label="Outer"
    a
    subgraph cluster_inner { label="Inner" b; c }
  }
  subgraph { rank=same; d }
  done [shape=Msquare]
  start -> a -> b -> c -> d -> done
  c -> a [condition="context.again=true"]
}
"""


def test_subgraphs_become_labelled_nested_clusters():
    graph = load_pipeline(CLUSTERED)
    dot = layout_dot(graph)
    assert dot.count("subgraph cluster_") == 2  # the unnamed, unlabelled one is not drawn
    svg = LayoutCache().get(graph).svg
    assert svg.count('class="cluster fm-cluster"') == 2
    assert ">Outer</text>" in svg and ">Inner</text>" in svg
    inner = 'graph [id="fm-cluster-1", label="Inner", fontsize=12];'
    assert f"subgraph cluster_1 {{\n      {inner}\n      n2" in dot
    raw = run_dot(dot).replace("&#45;", "-")
    assert raw.index('id="fm-cluster-1"') < raw.index('id="fm-node-b"')


def test_the_graph_label_is_drawn_as_the_title_above_the_graph():
    titled = CLUSTERED.replace("{", '{ label="Weekly <retrain>";', 1)
    svg = LayoutCache().get(load_pipeline(titled)).svg
    title = svg.split('class="fm-graph-label"')[0].rsplit("<text", 1)[1]
    assert 'font-size="14.00"' in title
    label = svg.split('class="fm-graph-label"')[1]
    assert label.startswith(' fill="currentColor">Weekly &lt;retrain&gt;</text>')
    assert svg.count('font-size="12.00"') == 2  # the clusters' labels keep their size
    assert 'class="fm-graph-label"' not in LayoutCache().get(load_pipeline(CLUSTERED)).svg
    assert ".fm-graph-label{fill:var(--fm-text)" in static_html(
        LayoutCache().get(load_pipeline(titled)), {}
    )


def test_edge_conditions_show_cut_with_the_whole_in_the_tooltip():
    graph = load_pipeline(
        CLUSTERED.replace("context.again=true", "context.review.needs_another_pass=true")
    )
    svg = LayoutCache().get(graph).svg
    assert ">if context.review.needs_another…</text>" in svg
    assert "condition: context.review.needs_another_pass=true</title>" in svg
    edges = svg.split('class="edge fm-edge"')[1:]
    assert edges and all('"black"' not in e.split("</g>")[0] for e in edges)
    assert all('stroke="currentColor"' in e.split("</g>")[0] for e in edges)


def test_layout_cache_sees_conditions_and_subgraphs():
    cache = LayoutCache()
    cache.get(load_pipeline(CLUSTERED))
    cache.get(load_pipeline(CLUSTERED.replace("again=true", "again=false")))
    cache.get(load_pipeline(CLUSTERED.replace('label="Inner"', 'label="Core"')))
    cache.get(load_pipeline(CLUSTERED.replace("{", '{ label="Weekly";', 1)))
    assert cache.misses == 4


def test_layout_cache_keeps_apart_values_that_would_run_together():
    cache = LayoutCache()
    two = (
        'digraph {name} {{ start [shape=Mdiamond] a [label="{a}"] b [label="{b}"]'
        " start -> a -> b }}"
    )
    first = cache.get(load_pipeline(two.format(name="g", a="x", b="y z")))
    second = cache.get(load_pipeline(two.format(name="g", a="x y", b="z")))
    renamed = cache.get(load_pipeline(two.format(name="h", a="x", b="y z")))
    assert cache.misses == 3 and first.svg != second.svg
    assert 'aria-label="pipeline h"' in renamed.svg


def test_state_string_is_small_for_200_nodes():
    graph = load_pipeline(chain(198))
    layout = LayoutCache().get(graph)
    codes = "".join(state_code(NodeView(NodeState.SUCCEEDED)) for _ in layout.nodes)
    assert len(codes) == 200 and layout.nodes[0] == "start"


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


def test_stale_kinds_and_outdated_differ_by_mark_and_outline_not_only_shade():
    """Stale since baseline, stale since it ran and outdated: each its own corner mark, dash
    pattern and outline width, in the static graph and its legend swatches alike."""
    graph = load_pipeline(chain(3))
    layout = LayoutCache().get(graph)
    views = {
        "n0": NodeView(NodeState.STALE, StaleKind.RUN),
        "n1": NodeView(NodeState.OUTDATED),
        "n2": NodeView(NodeState.STALE, StaleKind.BASELINE),
    }
    drawn = {}
    for group in node_groups(snapshot_svg(layout, views)):
        shape = next(p for p in group if p.tag.endswith(("polygon", "ellipse", "path")))
        mark = next(p for p in group if p.get("class") == "fm-glyph")
        drawn[group.get("data-node")] = (
            mark.text,
            shape.get("stroke-dasharray"),
            shape.get("stroke-width"),
        )
    kinds = [drawn["n0"], drawn["n1"], drawn["n2"]]
    assert [k[0] for k in kinds] == ["!", "↑", "Δ"]
    assert len({k[1] for k in kinds}) == 3 and len({k[2] for k in kinds}) == 3
    swatches = {
        (item["state"], item["stale"]): item["swatch"]
        for item in legend_items([NodeState.STALE, NodeState.OUTDATED])
    }
    assert (
        ">!</text>" in swatches[("stale", "run")]
        and 'stroke-width="4.0"' in swatches[("stale", "run")]
    )
    assert ">Δ</text>" in swatches[("stale", "baseline")]
    assert ">↑</text>" in swatches[("outdated", "")]
    css = palette_css()
    assert (
        '[data-stale="run"]>:is(polygon,ellipse,path){stroke-dasharray:2,3;stroke-width:4.0px}'
        in css
    )


def test_static_html_shows_states_banner_and_legend():
    graph = load_pipeline(chain(2))
    layout = LayoutCache().get(graph)
    views = {
        "start": NodeView(NodeState.SUCCEEDED),
        "n0": NodeView(NodeState.FAILED, why=XSS),
    }
    banner = RunBanner(BannerKind.FAILED, "n0: exit code 3 " + XSS, "n0")
    html = static_html(layout, views, "pipeline chain: failed", banner)
    assert 'class="fm-banner" data-kind="failed" data-node="n0"' in html
    assert "<img" not in html and "&lt;img" in html
    style = html[: html.index("</style>")]
    assert ".fm-node>" not in style  # the old rule painted every node white over its state
    assert 'fill="#ffcdd2"' in html  # the failed fill as an attribute where CSS is stripped
    assert 'data-state="failed"' in html.split('<div class="fm-legend">')[1]
    assert 'data-state="waiting"' not in html.split('<div class="fm-legend">')[1]


def test_every_state_but_pending_has_a_mark_beside_its_colour_on_the_node_and_in_the_legend():
    """Told by colour alone, succeeded, partial, failed and retrying looked alike to a reader
    with deuteranopia, and failed, interrupted and blocked were one grey without colour (a
    JupyterLab trial)."""
    marks = {state: style.glyph for state, style in STATE_STYLES.items()}
    assert marks[NodeState.PENDING] == ""
    shown = [mark for state, mark in marks.items() if state is not NodeState.PENDING]
    assert all(shown) and len(set(shown)) == len(shown)
    graph = load_pipeline(chain(2))
    layout = LayoutCache().get(graph)
    views = {"start": NodeView(NodeState.SUCCEEDED), "n0": NodeView(NodeState.FAILED)}
    svg = ET.fromstring(snapshot_svg(layout, views))
    drawn = {
        g.get("data-node"): g[-1].text or ""
        for g in svg.iter(f"{{{SVG_NS}}}g")
        if g.get("data-node") is not None
    }
    assert drawn == {"start": "✓", "n0": "✗", "n1": "", "done": ""}
    legend = static_html(layout, views, "pipeline chain: failed").split('<div class="fm-legend">')[
        1
    ]
    assert '<text class="fm-glyph" x="13" y="12" text-anchor="middle" font-size="10">✗</text>' in (
        legend
    )


def test_terminal_ipython_gets_the_text_without_a_layout_and_a_bounded_table(
    shell: InteractiveShell, workdir: Path
) -> None:
    """A trial loaded a 38,000-node pipeline in terminal IPython: the display made the graph's
    layout for HTML the terminal never shows (61 s) and printed a row per node."""
    chain = " -> ".join(f"n{i}" for i in range(100))
    dot = (
        f"digraph long {{ start [shape=Mdiamond]; done [shape=Msquare]; start -> {chain} -> done }}"
    )
    pipeline = shell.run_cell_magic("pipeline", f"long --workdir {workdir}", dot)
    formatter = shell.display_formatter
    saved = list(formatter.active_types)
    formatter.active_types = ["text/plain"]  # as terminal IPython has it
    try:
        cached = len(pipeline.layout_cache._entries)
        data, _ = formatter.format(pipeline)
    finally:
        formatter.active_types = saved
    assert list(data) == ["text/plain"]
    assert len(pipeline.layout_cache._entries) == cached  # no layout made
    rows = data["text/plain"].splitlines()
    assert rows[-1] == "… and 42 more nodes (%pipeline status lists them all)"
    assert len(rows) == 1 + 1 + 60 + 1  # status line, header, rows, how many more
    assert len(pipeline.status().text.splitlines()) == 1 + 1 + 102
