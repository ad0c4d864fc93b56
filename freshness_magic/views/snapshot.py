"""The graph with its states written in, as static SVG and HTML: the ``text/html`` of every
display bundle, so nbconvert exports, GitHub, VS Code without widgets and ``make demo`` show the
real graph. The light palette goes into SVG attributes (kept where a site strips stylesheets);
the palette stylesheet recolours it for dark themes. No pipeline text is markup.
"""

from __future__ import annotations

import html
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Mapping

from freshness_magic.views.render import SVG_NS, Layout, local_name, set_title
from freshness_magic.views.state import (
    STALE_DASH,
    STATE_STYLES,
    NodeState,
    NodeView,
    RunBanner,
    StaleKind,
    glyph_of,
    legend_items,
    palette_css,
    width_of,
)


def snapshot_svg(layout: Layout, views: Mapping[str, NodeView]) -> str:
    """The SVG with each node's state written in: ``data-state``, classes, tooltip and the
    light palette as presentation attributes (what shows where no stylesheet applies).

    Used for the static HTML fallback and to check states in tests; the live widget keeps the
    layout SVG and sets ``data-state`` in the page instead.
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
        extra = f"\n{view.title}" if view.title else ""
        set_title(group, layout.titles.get(node_id, node_id) + why + extra)
        style = STATE_STYLES[view.state]
        dash = STALE_DASH.get(view.stale, "") if view.state is NodeState.STALE else style.dash
        for part in group:
            tag = local_name(part.tag)
            if tag in ("polygon", "ellipse", "path"):
                part.set("fill", style.fill)
                part.set("stroke", style.stroke)
                part.set("stroke-width", str(width_of(view.state, view.stale.value)))
                if dash:
                    part.set("stroke-dasharray", dash)
            elif tag == "polyline":
                part.set("stroke", style.stroke)
            elif tag == "text":
                part.set("fill", "#1a1a1a")
                if part.get("class") == "fm-glyph":
                    part.text = glyph_of(view.state, view.stale.value)
    return ET.tostring(root, encoding="unicode")


STATIC_CSS = """
.fm-root.fm-static{margin:4px 0;color:var(--fm-text);font:13px sans-serif}
.fm-root.fm-static .fm-static-view{max-height:640px;overflow:auto;border:1px solid
var(--fm-border-soft);border-radius:4px;background:var(--fm-bg)}
.fm-root.fm-static svg.fm-graph-svg{max-width:none;height:auto;display:block}
.fm-root g.fm-node text{fill:var(--fm-text)}
.fm-root g.fm-edge path{stroke:var(--fm-edge)}
.fm-root g.fm-edge polygon{fill:var(--fm-edge);stroke:var(--fm-edge)}
.fm-root g.fm-edge text,.fm-root g.fm-cluster text{fill:var(--fm-text)}
.fm-root text.fm-graph-label{fill:var(--fm-text);font-weight:600}
.fm-root .fm-legend{display:flex;flex-wrap:wrap;gap:4px 12px;margin:4px 0;font-size:12px}
.fm-root .fm-legend-item{display:inline-flex;align-items:center;gap:4px}
.fm-root .fm-swatch{display:inline-block;flex:none;overflow:visible}
.fm-root .fm-swatch text.fm-glyph,.fm-root text.fm-glyph{fill:var(--fm-text);font-weight:700}
.fm-root .fm-banner{padding:4px 8px;margin:4px 0;border-left:4px solid
var(--fm-failed-stroke);background:var(--fm-bg-3)}
"""


def _legend(states: Iterable[NodeState]) -> str:
    items = []
    for item in legend_items(states):
        name, stale = item["state"], item["stale"]
        kind = f' data-stale="{stale}"' if stale else ""
        items.append(
            f'<span class="fm-legend-item" data-state="{name}"{kind}'
            f' title="{html.escape(item["text"])}">{item["swatch"]}'
            f"{html.escape(item['label'])}</span>"
        )
    return '<div class="fm-legend">' + "".join(items) + "</div>"


def static_html(
    layout: Layout,
    views: Mapping[str, NodeView],
    status: str = "",
    banner: RunBanner | None = None,
) -> str:
    """The graph with its states as one HTML block: the text/html of every display bundle, so
    exports, GitHub and front ends without a widget manager show the real graph.

    Colours come from the palette CSS (light or dark theme) with the light palette written
    into the SVG as the fallback where the stylesheet is stripped. No pipeline text is markup.
    """
    present = {view.state for view in views.values()}
    states = [s for s in NodeState if s in set(layout.states) | present]
    head = f'<div class="fm-static-status">{html.escape(status)}</div>' if status else ""
    if banner is not None:
        node = f' data-node="{html.escape(banner.node)}"' if banner.node else ""
        head += (
            f'<div class="fm-banner" data-kind="{banner.kind.value}"{node}>'
            f"{html.escape(banner.full_text)}</div>"
        )
    return (
        f'<div class="fm-root fm-static"><style>{palette_css()}{STATIC_CSS}</style>{head}'
        f'<div class="fm-static-view">{snapshot_svg(layout, views)}</div>'
        f"{_legend(states)}</div>"
    )
