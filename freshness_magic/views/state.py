"""What the pipeline view shows: node states, their colours in both themes, and the run banner.

The view model (filled from the run's events once per step) hands the widget one
:class:`NodeView` per node and at most one :class:`RunBanner`; the widget and the static HTML
fallback draw them with the fixed palette :data:`STATE_STYLES`. Every state has a light and a dark
pair of colours; the outline (stroke) of each keeps a contrast ratio of at least 3:1 against the
theme's background (checked in :func:`contrast_ratio` tests and in the browser).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from freshness_magic.engine.model import Graph

CELL_OUTPUT_FILE = "cell_output.txt"
"""What a ``%%node`` cell printed, in its node's folder of the run directory."""


class NodeState(StrEnum):
    """What the user sees for a node (the legend's states; start and exit are shapes)."""

    PENDING = "pending"
    NEXT = "next"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    REUSED = "reused"
    """Not run: its outcome and outputs were taken from an earlier equal execution (reuse)."""
    PARTIAL = "partial"
    FAILED = "failed"
    RETRYING = "retrying"
    WAITING = "waiting"
    BLOCKED = "blocked"
    SKIPPED = "skipped"
    INTERRUPTED = "interrupted"
    STALE = "stale"
    OUTDATED = "outdated"
    """Not stale itself, but an upstream node's inputs changed after this node used its output."""


class StaleKind(StrEnum):
    """Since when a stale node's inputs differ: the run-start baseline, or its own completion."""

    NONE = ""
    BASELINE = "baseline"
    RUN = "run"


@dataclass(frozen=True)
class NodeView:
    """A node's visible state, the line that explains it, and cheap facts for the view.

    ``details`` keys the widget reads (all optional): ``started_at`` (wall-clock seconds when a
    running node started; drives the live timer), ``attempt`` (retry count), ``upstream`` (the
    node whose inputs changed, for ``outdated``). The full details of a node (prompt, output
    tails, evidence) are not here: the widget asks the pipeline for them on click.
    """

    state: NodeState = NodeState.PENDING
    stale: StaleKind = StaleKind.NONE
    why: str = ""
    title: str = ""
    """Extra tooltip text (the layout's tooltip already names the node, its type and inputs)."""
    details: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.state in (NodeState.RUNNING, NodeState.NEXT) and self.stale is not StaleKind.NONE:
            object.__setattr__(self, "stale", StaleKind.NONE)


class BannerKind(StrEnum):
    """Run-level news shown above the graph."""

    FAILED = "failed"
    DEAD_END = "dead_end"
    INTERRUPTED = "interrupted"
    SUPERSEDED = "superseded"
    RESUME = "resume"
    """An unfinished run of the same pipeline waits on disk (after a kernel restart)."""
    KEEP_RUN = "keep_run"
    """A run of an earlier text of the pipeline exists: it can be carried over to this edit."""
    INFO = "info"


@dataclass(frozen=True)
class RunBanner:
    """One run-level message: why the run failed, stopped or ended, and the node it is about."""

    kind: BannerKind
    text: str
    node: str = ""
    edge: tuple[str, str] | None = None
    """An edge to highlight (a failed route), as (source, target)."""
    way: str = ""
    """The magics that act on it, for views without the widget's buttons (the static view)."""
    holds: bool = False
    """The view's Step and Run wait for this banner's choice (an unfinished run offered after
    a restart: Run would start a new run beside it)."""

    @property
    def full_text(self) -> str:
        """``text`` with ``way``: what a view without buttons shows."""
        return f"{self.text}: {self.way}" if self.way else self.text


@dataclass(frozen=True)
class StateStyle:
    """Colours of one state: fill and stroke in the light and the dark theme, width and dash."""

    fill: str
    stroke: str
    dark_fill: str
    dark_stroke: str
    width: float = 1.5
    dash: str = ""
    description: str = ""
    glyph: str = ""
    """A mark drawn in the node's corner and its legend swatch, so that no state is told by
    colour alone (a colour-blind reader, a greyscale print)."""


_PALETTE = """
state       light fill/stroke  dark fill/stroke   width dash glyph meaning
pending     #f7f7f7 #767676    #262626 #9e9e9e    1.2   -    -  not run yet
next        #e3f2fd #1565c0    #10263d #64b5f6    2.5   6,3  →  runs next
running     #90caf9 #0d47a1    #1e4a80 #90caf9    3.5   -    ▶  running
succeeded   #c8e6c9 #2e7d32    #1b3a1e #66bb6a    1.8   -    ✓  succeeded
reused      #dcedc8 #33691e    #1e3313 #9ccc65    1.8   5,2  ♻  taken from an earlier run
partial     #f0f4c3 #6b6b00    #33330d #d4e157    2.0   -    ½  partial success
failed      #ffcdd2 #c62828    #4a1414 #ef5350    3.0   -    ✗  failed
retrying    #ffe0b2 #bf4500    #45280a #ffa726    2.5   -    ↻  retrying
waiting     #e1bee7 #6a1b9a    #371643 #ce93d8    3.0   -    ?  waiting for a human
blocked     #d7ccc8 #4e342e    #3a2c27 #bcaaa4    3.0   -    ⊘  blocked by stale input
skipped     #ececec #858585    #1c1c1c #8a8a8a    1.2   2,3  –  branch not taken
interrupted #f8bbd0 #ad1457    #451228 #f48fb1    3.0   -    ‖  stopped; resumable
stale       #ffecb3 #a35200    #3f300a #ffca28    2.5   -    !  inputs changed
outdated    #fff8e1 #8a6d00    #2e2a1a #e0c46c    2.0   10,3,2,3 ↑ upstream changed or ran again
"""


def _palette(table: str) -> dict[NodeState, StateStyle]:
    """The palette table above as styles (one row per state, columns split on blanks)."""
    styles = {}
    for row in table.strip().splitlines()[1:]:
        name, fill, stroke, dark_fill, dark_stroke, width, dash, glyph, *words = row.split()
        styles[NodeState(name)] = StateStyle(
            fill,
            stroke,
            dark_fill,
            dark_stroke,
            float(width),
            dash.strip("-"),
            " ".join(words),
            glyph.strip("-"),
        )
    return styles


STATE_STYLES: Mapping[NodeState, StateStyle] = _palette(_PALETTE)
"""Fixed colours per state; outlines keep 3:1 against the light and the dark background."""
STALE_DASH: Mapping[StaleKind, str] = {StaleKind.BASELINE: "8,4", StaleKind.RUN: "2,3"}
"""Stale since baseline is dashed, stale since the node ran is dotted; ``outdated`` (the nodes
that ran after a stale one, or before an upstream node ran again) is dash-dotted, so neither stale
kind looks like it."""
STALE_WIDTH: Mapping[StaleKind, float] = {StaleKind.BASELINE: 2.5, StaleKind.RUN: 4.0}
"""Stale since the node ran has a heavy dotted outline, since baseline a thinner dashed one."""
STALE_GLYPH: Mapping[StaleKind, str] = {StaleKind.BASELINE: "Δ", StaleKind.RUN: "!"}
"""The corner mark of each stale kind: changed before the node ran (Δ), after it ran (!); an
outdated node shows ↑ (what it read upstream changed). Three marks, three outlines: the kinds
are told apart without their shade (a greyscale print, the dark theme at 64%)."""


def glyph_of(state: NodeState, stale: StaleKind | str = "") -> str:
    """The corner mark of a node in ``state`` (of the stale kind ``stale`` when stale)."""
    if state is NodeState.STALE and stale:
        return STALE_GLYPH[StaleKind(stale)]
    return STATE_STYLES[state].glyph


def width_of(state: NodeState, stale: StaleKind | str = "") -> float:
    """The outline width of a node in ``state`` (of the stale kind ``stale`` when stale)."""
    if state is NodeState.STALE and stale:
        return STALE_WIDTH[StaleKind(stale)]
    return STATE_STYLES[state].width


STALE_LEGEND: Mapping[StaleKind, str] = {
    StaleKind.BASELINE: "stale since baseline",
    StaleKind.RUN: "stale since it ran",
}
"""The legend's name of each stale kind (one swatch per kind, drawn as the nodes are)."""
STALE_MEANING: Mapping[StaleKind, str] = {
    StaleKind.BASELINE: "inputs changed since the run's baseline (before the node ran)",
    StaleKind.RUN: "inputs changed since the node ran",
}

STATE_CODES: Mapping[NodeState, str] = {
    NodeState.PENDING: "p", NodeState.NEXT: "n", NodeState.RUNNING: "r",
    NodeState.SUCCEEDED: "s", NodeState.PARTIAL: "a", NodeState.FAILED: "f",
    NodeState.RETRYING: "y", NodeState.WAITING: "w", NodeState.BLOCKED: "b",
    NodeState.SKIPPED: "k", NodeState.INTERRUPTED: "i", NodeState.STALE: "t",
    NodeState.OUTDATED: "o", NodeState.REUSED: "u",
}  # fmt: skip
"""One character per state: the widget receives all node states as one short string."""
STALE_CODES: Mapping[StaleKind, str] = {StaleKind.BASELINE: "t", StaleKind.RUN: "T"}
RERAN_CODE = "O"
"""``outdated`` because a node upstream ran again after it (not because inputs changed): no
accepting clears it, only running the node again, so the view offers no Accept for it."""

LIGHT_BACKGROUND = "#ffffff"
DARK_BACKGROUND = "#111111"
"""JupyterLab's ``--jp-layout-color0`` in its light and dark themes."""

DARK_SELECTORS = (
    'body[data-jp-theme-light="false"]',
    "body.vscode-dark",
    "body.vscode-high-contrast:not(.vscode-high-contrast-light)",
    ".fm-dark",
)
"""Where the dark palette applies: JupyterLab/Notebook 7 dark themes, VS Code's dark and high
contrast themes (classes on a webview's body), or forced."""


def state_code(view: NodeView) -> str:
    """The character the widget receives for ``view`` (stale kinds have their own)."""
    if view.state is NodeState.STALE and view.stale in STALE_CODES:
        return STALE_CODES[view.stale]
    if view.state is NodeState.OUTDATED and "reran" in view.details:
        return RERAN_CODE
    return STATE_CODES[view.state]


def _channel(value: int) -> float:
    c = value / 255
    return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4


def luminance(colour: str) -> float:
    """Relative luminance (WCAG 2) of ``#rrggbb``."""
    red, green, blue = (int(colour[i : i + 2], 16) for i in (1, 3, 5))
    return 0.2126 * _channel(red) + 0.7152 * _channel(green) + 0.0722 * _channel(blue)


def contrast_ratio(first: str, second: str) -> float:
    """WCAG contrast ratio of two ``#rrggbb`` colours (1 to 21)."""
    high, low = sorted((luminance(first), luminance(second)), reverse=True)
    return (high + 0.05) / (low + 0.05)


_SHAPE = ":is(polygon,ellipse,path)"
_PAINTED = ":is(g.fm-node,g.fm-key)"
"""Node groups of the graph and the legend's swatches: one rule paints both alike."""

_THEME = """
variable     jupyterlab            vs-code                       light    dark
text         ui-font-color1        editor-foreground             #1f1f1f  #e6e6e6
text-muted   ui-font-color2        descriptionForeground         #5f5f5f  #b0b0b0
bg           layout-color0         editor-background             #ffffff  #111111
bg-2         layout-color1         editor-background             #ffffff  #1a1a1a
bg-3         layout-color2         editorWidget-background       #eeeeee  #2b2b2b
border       border-color1         panel-border                  #bdbdbd  #5a5a5a
border-soft  border-color2         widget-border                 #e0e0e0  #3c3c3c
accent       brand-color1          focusBorder                   #1976d2  #64b5f6
edge         ui-font-color2        editor-foreground             #616161  #b0b0b0
"""
"""The view's theme colours: JupyterLab's variable, else VS Code's (a webview defines
``--vscode-*`` and no ``--jp-*``), else a default for the light or the dark page."""


def _theme_vars(dark: bool) -> str:
    found = []
    for row in _THEME.strip().splitlines()[1:]:
        name, lab, code, light, dark_default = row.split()
        default = dark_default if dark else light
        found.append(f"--fm-{name}:var(--jp-{lab},var(--vscode-{code},{default}))")
    return ";".join(found)


def palette_css(root: str = ".fm-root") -> str:
    """The theme and state colours as CSS variables on ``root`` (dark ones under a dark theme)
    and one rule per state keyed by the node group's ``data-state``: states change by attribute,
    not by CSS. The widget and the static HTML both use it."""
    light = [_theme_vars(dark=False)]
    dark = [_theme_vars(dark=True)]
    rules = []
    for state, style in STATE_STYLES.items():
        name = state.value
        light.append(f"--fm-{name}-fill:{style.fill};--fm-{name}-stroke:{style.stroke}")
        dark.append(f"--fm-{name}-fill:{style.dark_fill};--fm-{name}-stroke:{style.dark_stroke}")
        decl = (
            f"fill:var(--fm-{name}-fill);stroke:var(--fm-{name}-stroke);"
            f"stroke-width:{style.width}px"
        )
        dash = f";stroke-dasharray:{style.dash}" if style.dash else ";stroke-dasharray:none"
        rules.append(f'{root} {_PAINTED}[data-state="{name}"]>{_SHAPE}{{{decl}{dash}}}')
        rules.append(
            f'{root} {_PAINTED}[data-state="{name}"]>polyline{{stroke:var(--fm-{name}-stroke)}}'
        )
    for kind, dash in STALE_DASH.items():
        rules.append(
            f'{root} {_PAINTED}[data-state="stale"][data-stale="{kind.value}"]>{_SHAPE}'
            f"{{stroke-dasharray:{dash};stroke-width:{STALE_WIDTH[kind]}px}}"
        )
    marked = ",".join(f'[data-state="{s}"]' for s in ("stale", "outdated"))
    rules.append(f"{root} {_PAINTED}:is({marked})>text.fm-glyph{{font-size:15px}}")
    dark_scope = ",".join(f"{sel} {root}" for sel in DARK_SELECTORS[:-1])
    dark_scope += f",{root}{DARK_SELECTORS[-1]}"
    return "\n".join(
        [
            f"{root}{{{';'.join(light)}}}",
            f"{dark_scope}{{{';'.join(dark)}}}",
            *rules,
        ]
    )


def possible_states(graph: Graph) -> tuple[NodeState, ...]:
    """The states this pipeline can show (the legend lists only these), in palette order."""
    from freshness_magic.engine.reuse import reusable
    from freshness_magic.freshness.attrs import freshness_mode, inputs_checked, source_files

    nodes = list(graph.nodes.values())
    work = [n for n in nodes if n.handler_type not in ("start", "exit")]
    can: set[NodeState] = {NodeState.PENDING, NodeState.NEXT, NodeState.SUCCEEDED}
    if work:
        can |= {NodeState.RUNNING, NodeState.FAILED, NodeState.INTERRUPTED}
    if any(n.handler_type == "wait.human" for n in nodes):
        can.add(NodeState.WAITING)
    if len(work) > 1:  # a retry of an earlier node leaves the later ones outdated
        can.add(NodeState.OUTDATED)
    if any(source_files(n) and inputs_checked(n) for n in nodes):
        can |= {NodeState.STALE, NodeState.OUTDATED}
    if any(freshness_mode(n) == "block" for n in nodes):
        can |= {NodeState.BLOCKED, NodeState.RETRYING}
    if graph.default_max_retries > 0 or any((n.max_retries or 0) > 0 for n in nodes):
        can.add(NodeState.RETRYING)
    if any(n.allow_partial for n in nodes) or NodeState.RETRYING in can:
        can.add(NodeState.PARTIAL)
    if any(len(graph.outgoing(n.id)) > 1 for n in nodes):
        can.add(NodeState.SKIPPED)
    if any(reusable(n, declares_inputs=bool(source_files(n))) for n in nodes):
        can.add(NodeState.REUSED)
    return tuple(state for state in NodeState if state in can)


def swatch_svg(state: NodeState, stale: str = "") -> str:
    """A legend swatch drawn as the nodes are: an SVG shape in a ``g.fm-key`` group that the
    palette CSS paints like a node group (fill, outline, width and dash of the state or stale
    kind), with the light palette as attributes where the stylesheet is stripped."""
    style = STATE_STYLES[state]
    dash = STALE_DASH.get(StaleKind(stale), "") if state is NodeState.STALE else style.dash
    kind = f' data-stale="{stale}"' if stale else ""
    dashed = f' stroke-dasharray="{dash}"' if dash else ""
    glyph = glyph_of(state, stale)
    mark = (
        f'<text class="fm-glyph" x="13" y="12" text-anchor="middle" font-size="10">{glyph}</text>'
        if glyph
        else ""
    )
    return (
        f'<svg class="fm-swatch" width="26" height="16" viewBox="0 0 26 16" aria-hidden="true">'
        f'<g class="fm-key" data-state="{state.value}"{kind}>'
        f'<polygon points="2,2 24,2 24,14 2,14" fill="{style.fill}" stroke="{style.stroke}"'
        f' stroke-width="{width_of(state, stale)}"{dashed}/>{mark}</g></svg>'
    )


def legend_items(states: Iterable[NodeState]) -> list[dict[str, str]]:
    """Legend entries for the widget and the static HTML: ``state``, ``stale`` (the stale kind,
    "" for other states), ``label`` (what the legend says), ``text`` (its tooltip) and ``dash``
    (the outline's dash pattern, "" for solid) and ``swatch`` (its SVG, :func:`swatch_svg`, which
    the widget inserts as it is). ``stale`` has one entry per kind, since the two kinds are drawn
    differently (dashed and dotted)."""
    items: list[dict[str, str]] = []
    for state in states:
        style = STATE_STYLES[state]
        if state is NodeState.STALE:
            items.extend(
                {
                    "state": state.value,
                    "stale": kind.value,
                    "label": STALE_LEGEND[kind],
                    "text": STALE_MEANING[kind],
                    "dash": dash,
                    "swatch": swatch_svg(state, kind.value),
                }
                for kind, dash in STALE_DASH.items()
            )
            continue
        items.append(
            {
                "state": state.value,
                "stale": "",
                "label": state.value,
                "text": style.description,
                "dash": style.dash,
                "swatch": swatch_svg(state),
            }
        )
    return items
