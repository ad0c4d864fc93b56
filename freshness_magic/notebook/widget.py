"""The pipeline widget: the laid-out graph with node states, controls, gate, evidence, playground.

Core ipywidgets only. The graph SVG goes into one HTML widget and is set once per layout; node
states go into a second HTML widget as a small CSS block scoped to this widget instance, so a step
sends a few hundred bytes. Every control has a stable DOM class (``fm-...``) for browser tests.
All pipeline text is escaped before it reaches an HTML widget.

The page contract (what browser tests may rely on):

- root ``.fm-widget.fm-w-<uid>``; graph ``.fm-graph svg.fm-graph-svg``; one node group per node
  ``g.fm-node#fm-node-<id>[data-node=<id>]`` (its shape is the ``polygon``/``ellipse`` child);
  edges ``g.fm-edge[data-source][data-target]``; legend ``.fm-legend-item[data-state]``.
- node state in the live page = computed style of the node's shape (fill/stroke, see
  ``render.STATE_STYLES``; stale since baseline ``stroke-dasharray: 8, 4``, since run ``2, 3``),
  set by the ``<style>`` in ``.fm-state``. Nodes needing attention (running, waiting, failed,
  blocked, retrying, partial, stale) get a hover box ``.fm-state svg.fm-overlay
  rect.fm-tip[data-node][data-state][data-stale]`` whose ``<title>`` says why, laid exactly over
  the node, and a line ``.fm-attention li.fm-why-item[data-node][data-state][data-stale]``.
- controls ``.fm-step``, ``.fm-run``, ``.fm-run-to``, ``.fm-run-to-node``, ``.fm-accept``,
  ``.fm-reset``; ``.fm-progress``; ``.fm-status span[data-state=<run state>]``.
- gate ``.fm-gate`` (hidden when no gate waits), ``.fm-gate-question [data-node]``, one
  ``.fm-gate-choice.fm-gate-choice-<key>`` button per choice.
- evidence ``.fm-evidence-table tr.fm-evidence-row[data-node]`` newest first,
  ``.fm-evidence-select``, ``.fm-evidence-detail pre.fm-evidence-json``.
- playground ``.fm-playground-input input``, ``.fm-playground-node select``,
  ``.fm-playground-result pre.fm-playground-text``; callback errors in ``.fm-log``.
"""

from __future__ import annotations

import html
import json
import threading
import time
import traceback
import uuid
from collections.abc import Callable
from typing import Any

import ipywidgets as w

from freshness_magic.engine.outcome import StageStatus
from freshness_magic.errors import RunError
from freshness_magic.notebook.pipeline import NotebookPipeline
from freshness_magic.notebook.render import (
    Layout,
    base_css,
    legend_html,
    overlay_svg,
    snapshot_svg,
    state_css,
    why_html,
)
from freshness_magic.notebook.text import choice_text, evidence_row


def in_kernel() -> bool:
    """Whether this runs inside a Jupyter kernel (not a plain or terminal IPython)."""
    from IPython import get_ipython

    return getattr(get_ipython(), "kernel", None) is not None


_FULL_REFRESH = frozenset(
    {
        "gate_waiting", "gate_answered", "pipeline_completed",
        "pipeline_failed", "pipeline_started", "pipeline_resumed", "pipeline_paused",
        "baseline_accepted",
    }
)  # fmt: skip
"""Events after which the gate and evidence panels may change too."""
_STYLE_REFRESH = frozenset({"stage_started", "stage_retrying", "stale_input"})
"""Events that change only node states (restyle, no panel rebuild)."""
EVIDENCE_ROWS = 25
"""Rows shown in the evidence panel (newest first); ``%pipeline evidence`` lists all."""


def playground_html(pipeline: NotebookPipeline, expr: str, from_node: str | None) -> str:
    """The condition playground's answer as escaped HTML (per-clause table, edge, or error)."""
    text, _ = explain_on_live_context(pipeline, expr, from_node)
    return f'<pre class="fm-playground-text">{html.escape(text)}</pre>'


def explain_on_live_context(
    pipeline: NotebookPipeline, expr: str, from_node: str | None
) -> tuple[str, Any]:
    """Explain ``expr`` against the run's context (see :meth:`NotebookPipeline.explain`)."""
    return pipeline.explain(expr, from_node)


def _clock_time(timestamp: str) -> str:
    """``HH:MM:SS`` of an ISO timestamp (the full one is in the record's JSON)."""
    return timestamp[11:19] if len(timestamp) >= 19 and timestamp[10] in "T " else timestamp


class PipelineWidget(w.VBox):
    """The notebook view of a :class:`NotebookPipeline`; refreshes on the run's events."""

    def __init__(self, pipeline: NotebookPipeline, **kwargs: Any) -> None:
        self.pipeline = pipeline
        self.uid = uuid.uuid4().hex[:10]
        self.scope = f"fm-w-{self.uid}"
        self.bytes_last_update = 0
        self.background = in_kernel()
        """Run button actions on a worker thread (True inside a Jupyter kernel)."""
        self._worker: threading.Thread | None = None
        self.panel_bytes_last_update = 0
        self.update_stats: list[tuple[float, int, int]] = []
        """(seconds, graph/status bytes, panel bytes) of every refresh (benchmarks)."""
        self._layout: Layout | None = None
        self._layout_key: tuple[object, ...] | None = None
        self._gate_key: object = None
        self._evidence_count = -1
        self._records: list[dict[str, Any]] = []

        self.graph_html = w.HTML()
        self.graph_html.add_class("fm-graph")
        self.state_html = w.HTML()
        self.state_html.add_class("fm-state")
        self.graph_box = w.Box([self.graph_html, self.state_html])
        self.graph_box.add_class("fm-graph-box")
        self.attention = w.HTML()
        self.attention.add_class("fm-attention")
        self.legend = w.HTML(legend_html())
        self.legend.add_class("fm-legend-box")

        self.step_button = self._button("Step", "fm-step", "play", self._on_step)
        self.run_button = self._button("Run", "fm-run", "forward", self._on_run)
        self.run_to_button = self._button("Run to", "fm-run-to", "step-forward", self._on_run_to)
        self.run_to_select = w.Dropdown(
            options=list(pipeline.graph.nodes), layout=w.Layout(width="160px")
        )
        self.run_to_select.add_class("fm-run-to-node")
        self.accept_button = self._button("Accept changes", "fm-accept", "check", self._on_accept)
        self.reset_button = self._button("Reset", "fm-reset", "undo", self._on_reset)
        self.progress = w.IntProgress(value=0, min=0, max=max(len(pipeline.graph.nodes), 1))
        self.progress.add_class("fm-progress")
        self.status = w.HTML()
        self.status.add_class("fm-status")

        self.gate_question = w.HTML()
        self.gate_question.add_class("fm-gate-question")
        self.gate_buttons = w.HBox()
        self.gate_buttons.add_class("fm-gate-choices")
        self.gate_panel = w.VBox([self.gate_question, self.gate_buttons])
        self.gate_panel.add_class("fm-gate")
        self.gate_panel.layout.display = "none"

        self.evidence_table = w.HTML()
        self.evidence_table.add_class("fm-evidence-table")
        self.evidence_select = w.Select(options=[], rows=5, layout=w.Layout(width="100%"))
        self.evidence_select.add_class("fm-evidence-select")
        self.evidence_select.observe(self._guard(self._on_evidence_select), names="value")
        self.evidence_detail = w.HTML()
        self.evidence_detail.add_class("fm-evidence-detail")
        self.evidence_panel = w.VBox(
            [w.HTML("<b>Evidence</b>"), self.evidence_table, self.evidence_select,
             self.evidence_detail]
        )  # fmt: skip
        self.evidence_panel.add_class("fm-evidence")

        self.playground_input = w.Text(
            placeholder="outcome=success && context.x=1",
            continuous_update=True,
            layout=w.Layout(width="60%"),
        )
        self.playground_input.add_class("fm-playground-input")
        self.playground_node = w.Dropdown(
            options=[("(last node)", "")] + [(n, n) for n in pipeline.graph.nodes],
            layout=w.Layout(width="160px"),
        )
        self.playground_node.add_class("fm-playground-node")
        self.playground_result = w.HTML()
        self.playground_result.add_class("fm-playground-result")
        self.playground_input.observe(self._guard(self._on_playground), names="value")
        self.playground_node.observe(self._guard(self._on_playground), names="value")
        self.playground = w.VBox(
            [
                w.HBox([w.HTML("<b>Condition</b>&nbsp;"), self.playground_input,
                        self.playground_node]),
                self.playground_result,
            ]
        )  # fmt: skip
        self.playground.add_class("fm-playground")

        self.log_area = w.Output(layout=w.Layout(max_height="200px", overflow="auto"))
        self.log_area.add_class("fm-log")

        controls = w.HBox(
            [self.step_button, self.run_button, self.run_to_button, self.run_to_select,
             self.accept_button, self.reset_button]
        )  # fmt: skip
        controls.add_class("fm-controls")
        progress_row = w.HBox([self.progress, self.status])
        progress_row.add_class("fm-progress-row")
        super().__init__(
            [
                w.HTML(f"<style>{base_css(self.scope)}</style>"),
                self.graph_box,
                self.attention,
                self.legend,
                controls,
                progress_row,
                self.gate_panel,
                self.evidence_panel,
                self.playground,
                self.log_area,
            ],
            **kwargs,
        )
        self.add_class("fm-widget")
        self.add_class(self.scope)
        pipeline.subscribe(self._guard(self._on_pipeline_event))
        self.refresh(full=True)

    # --- building blocks -------------------------------------------------------------------------

    def _button(self, label: str, css: str, icon: str, handler: Callable[[Any], None]) -> w.Button:
        button = w.Button(description=label, icon=icon, tooltip=label)
        button.add_class(css)
        button.on_click(self._guard(handler))
        return button

    def _guard(self, func: Callable[..., None]) -> Callable[..., None]:
        """Run a callback; an exception is shown in the log area (and kept), never dropped."""

        def wrapper(*args: Any) -> None:
            try:
                func(*args)
            except Exception as exc:
                self.errors.append(exc)
                self.log_area.append_stderr(traceback.format_exc())

        return wrapper

    @property
    def errors(self) -> list[BaseException]:
        found: list[BaseException] | None = getattr(self, "_errors", None)
        if found is None:
            found = []
            self._errors = found
        return found

    # --- callbacks -------------------------------------------------------------------------------

    def _show(self, text: str) -> None:
        self.log_area.append_stdout(text.rstrip("\n").split("\n", 1)[0] + "\n")

    def _act(self, action: Callable[[], Any]) -> None:
        """Run a pipeline action; in a kernel on a worker thread so the kernel stays free.

        The action buttons are disabled while it runs; an error goes to the log area.
        """
        if not self.background:
            self._show(action().text)
            return
        if self.pipeline.busy or (self._worker is not None and self._worker.is_alive()):
            raise RunError("an action is still running; wait until it finishes")

        def work() -> None:
            self._set_busy(True)
            try:
                self._show(action().text)
            finally:
                self._set_busy(False)

        self._worker = threading.Thread(target=self._guard(work), name="fm-widget", daemon=True)
        self._worker.start()

    def wait(self, timeout: float | None = None) -> None:
        """Wait for a background action to finish (scripts and tests)."""
        if self._worker is not None:
            self._worker.join(timeout)

    def _set_busy(self, busy: bool) -> None:
        for button in (
            self.step_button,
            self.run_button,
            self.run_to_button,
            self.accept_button,
            self.reset_button,
            *self.gate_buttons.children,
        ):
            button.disabled = busy  # fmt: skip

    def _on_step(self, _button: Any) -> None:
        self._act(self.pipeline.step)

    def _on_run(self, _button: Any) -> None:
        self._act(self.pipeline.run_to)

    def _on_run_to(self, _button: Any) -> None:
        target = self.run_to_select.value
        self._act(lambda: self.pipeline.run_to(to=target))

    def _on_accept(self, _button: Any) -> None:
        self._act(self.pipeline.accept)

    def _on_reset(self, _button: Any) -> None:
        self._act(self.pipeline.reset)

    def _on_choice(self, node_id: str, key: str) -> Callable[[Any], None]:
        def answer(_button: Any) -> None:
            self._act(lambda: self.pipeline.resume(node_id, key))

        return self._guard(answer)

    def _on_evidence_select(self, change: dict[str, Any]) -> None:
        index = change.get("new")
        if index is None or not isinstance(index, int) or index >= len(self._records):
            self.evidence_detail.value = ""
            return
        record = self._records[index]
        body = html.escape(json.dumps(record, indent=2, sort_keys=True, default=str))
        self.evidence_detail.value = f'<pre class="fm-evidence-json">{body}</pre>'

    def _on_playground(self, _change: Any) -> None:
        expr = self.playground_input.value
        if not expr.strip():
            self.playground_result.value = ""
            return
        node = self.playground_node.value or None
        self.playground_result.value = playground_html(self.pipeline, expr, node)

    def _on_pipeline_event(self, event: Any) -> None:
        kind = str(getattr(getattr(event, "type", None), "value", ""))
        if event is None or kind in _FULL_REFRESH:
            self.refresh(full=True)
        elif kind == "evidence_recorded":
            self.refresh(full=False, evidence=True)
        elif kind in _STYLE_REFRESH:
            self.refresh(full=False)

    # --- views -----------------------------------------------------------------------------------

    @property
    def layout(self) -> Layout:
        """The layout currently shown (set in ``__init__`` by the first refresh)."""
        if self._layout is None:
            self._layout = self.pipeline.layout_cache.get(self.pipeline.graph)
        return self._layout

    def snapshot(self) -> str:
        """The SVG with states written in (what a static export shows)."""
        return snapshot_svg(self.layout, self.pipeline.views())

    def static_html(self) -> str:
        """Graph snapshot, legend and attention list as one static HTML block (exports)."""
        views = self.pipeline.views()
        return (
            f'<div class="fm-static {self.scope}"><style>{base_css(self.scope)}</style>'
            f"{self.snapshot()}{legend_html()}{why_html(views)}</div>"
        )

    def refresh(self, full: bool = True, evidence: bool = False) -> None:
        """Update the views (panels too when ``full``); the layout only on a new structure."""
        started = time.perf_counter()
        self._refresh(full, evidence)
        elapsed = time.perf_counter() - started
        self.update_stats.append((elapsed, self.bytes_last_update, self.panel_bytes_last_update))

    def _refresh(self, full: bool, evidence: bool) -> None:
        pipeline = self.pipeline
        key = (id(pipeline.graph), pipeline.structure_version)
        sent = 0
        if key != self._layout_key:
            self._layout = pipeline.layout_cache.get(pipeline.graph)
            self._layout_key = key
            self.graph_html.value = self._layout.svg
            sent = len(self._layout.svg.encode("utf-8"))
        layout = self.layout
        views = pipeline.views()
        css = state_css(self.scope, layout, views)
        overlay = overlay_svg(layout, views)
        why = why_html(views)
        if self.state_html.value != css + overlay:
            self.state_html.value = css + overlay
            sent += len(self.state_html.value.encode("utf-8"))
        if self.attention.value != why:
            self.attention.value = why
            sent += len(why.encode("utf-8"))
        done = sum(1 for o in pipeline.outcomes().values() if o.status is not StageStatus.WAITING)
        if pipeline.state_name == "completed":
            done = self.progress.max
        if self.progress.value != min(done, self.progress.max):
            self.progress.value = min(done, self.progress.max)
            sent += 8
        status = (
            f'<span data-state="{html.escape(pipeline.state_name)}">'
            f"{html.escape(pipeline.status_line())} · {pipeline.elapsed:.1f}s</span>"
        )
        if self.status.value != status:
            self.status.value = status
            sent += len(status)
        self.bytes_last_update = sent
        panels = self._refresh_gate() if full else 0
        if full or evidence:
            panels += self._refresh_evidence()
        self.panel_bytes_last_update = panels

    def _refresh_gate(self) -> int:
        gate = self.pipeline.pending_gate()
        key = None if gate is None else (gate.node_id, gate.text, gate.choices)
        if key == self._gate_key:
            return 0
        self._gate_key = key
        if gate is None:
            self.gate_panel.layout.display = "none"
            self.gate_buttons.children = ()
            self.gate_question.value = ""
            return 32
        self.gate_question.value = (
            f'<div data-node="{html.escape(gate.node_id)}"><b>{html.escape(gate.node_id)}</b>: '
            f"{html.escape(gate.text)}</div>"
        )
        buttons = []
        for choice in gate.choices:
            button = w.Button(description=choice_text(choice), tooltip=f"-> {choice.target}")
            button.add_class("fm-gate-choice")
            safe_key = "".join(ch for ch in choice.key if ch.isalnum() or ch in "-_")
            if safe_key:
                button.add_class(f"fm-gate-choice-{safe_key}")
            button.on_click(self._on_choice(gate.node_id, choice.key))
            buttons.append(button)
        self.gate_buttons.children = tuple(buttons)
        self.gate_panel.layout.display = "flex"
        return len(self.gate_question.value) + 200 * len(buttons)

    def _refresh_evidence(self) -> int:
        records = self.pipeline.evidence_records()
        if len(records) == self._evidence_count:
            return 0
        self._evidence_count = len(records)
        self._records = list(reversed(records))[:EVIDENCE_ROWS]
        rows = []
        options = []
        for i, record in enumerate(self._records):
            row = evidence_row(record)
            row["time"] = _clock_time(row["time"])
            cells = "".join(
                f'<td class="fm-ev-{k}">{html.escape(row[k])}</td>'
                for k in ("time", "node", "status", "method", "stale", "summary", "duration")
            )
            rows.append(
                f'<tr class="fm-evidence-row" data-node="{html.escape(row["node"])}" '
                f'data-index="{i}">{cells}</tr>'
            )
            options.append((f"{row['time']}  {row['node']}  {row['status']}  {row['method']}", i))
        head = "".join(
            f"<th>{h}</th>"
            for h in ("time", "node", "status", "method", "stale files", "summary", "duration")
        )
        more = len(records) - len(self._records)
        note = (
            f'<div class="fm-evidence-more">newest {len(self._records)} of {len(records)} '
            "records; %pipeline evidence lists all</div>"
            if more > 0
            else ""
        )
        self.evidence_table.value = (
            '<table class="fm-evidence-rows" style="font-size:12px">'
            f"<thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>{note}"
            if rows
            else '<div class="fm-evidence-empty">no evidence records yet</div>'
        )
        self.evidence_select.options = options
        return len(self.evidence_table.value)

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        bundle = super()._repr_mimebundle_(**kwargs)
        if isinstance(bundle, dict):
            bundle["text/plain"] = self.pipeline.status_text()
        return bundle
