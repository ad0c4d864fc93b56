"""The pipeline view: one anywidget model, its ES module and CSS shipped in the package.

The model carries the laid-out SVG once per pipeline structure and, per step, the node states as
one character per node plus the few lines that explain nodes needing attention, so a step at 200
nodes sends a few hundred bytes in one update. Clicks come back as ``{"action": ...}`` messages
and call the pipeline object (``step``, ``run_to``, ``retry``, ``accept``, ``resume``, ``stop``,
``reset``); node details, evidence records and playground answers are asked for when needed and
answered with a custom message. Every bundle also carries ``text/html``: the graph with its
states as static SVG (:func:`render.static_html`) for front ends without a widget runtime.

The page contract (what browser tests may rely on): root ``.fm-root.fm-widget``; node groups
``svg g.fm-node[data-node][data-state]`` (``data-stale`` for stale kinds), edges ``g.fm-edge
[data-source][data-target][data-index]`` (``.fm-chosen`` = the playground's edge, ``.fm-focus`` =
the banner's), clusters ``g.fm-cluster``; ``.fm-viewport`` (scrolls) with ``.fm-zoom-in``,
``.fm-zoom-out``, ``.fm-fit``, ``.fm-zoom-reset`` and ``.fm-scale``; controls ``.fm-step``,
``.fm-run``, ``.fm-run-to`` + ``select.fm-run-to-node``, ``.fm-stop``, ``.fm-accept``,
``.fm-reset``; ``.fm-status span[data-state]``, ``.fm-timer[data-node]``, ``.fm-badge``;
``.fm-banner[data-kind][data-node]``; ``.fm-details[data-node]`` with ``.fm-act-run-to``,
``.fm-act-retry``, ``.fm-act-accept``; ``.fm-legend-item[data-state]``; ``.fm-gate`` with
``.fm-gate-question [data-node]``, ``textarea.fm-gate-comment``, ``.fm-gate-choice-<key>``;
``.fm-evidence-row[data-node][data-seq]`` newest first, ``.fm-evidence-all``; playground
``.fm-playground-input input``, ``.fm-playground-node select``, ``.fm-playground-result``
(``data-edge``), ``.fm-suggest-item[data-key]``; errors ``.fm-log .fm-error``.
"""

from __future__ import annotations

import inspect
import threading
import time
import traceback
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import anywidget
import traitlets

from freshness_magic.engine.conditions import explain_condition
from freshness_magic.engine.edges import select_edge
from freshness_magic.engine.outcome import Outcome, StageStatus
from freshness_magic.errors import RunError
from freshness_magic.notebook.handle import NotebookPipeline, choice_text, evidence_row
from freshness_magic.notebook.render import Layout, snapshot_svg, static_html
from freshness_magic.notebook.viewstate import (
    STATE_STYLES,
    BannerKind,
    NodeState,
    NodeView,
    RunBanner,
    legend_items,
    palette_css,
    state_code,
)

STATIC = Path(__file__).with_name("static")
EVIDENCE_ROWS = 8
"""Evidence rows sent with every step (newest first); "show all" asks for the rest."""
NOTE_CHARS = 240
"""An explanation sent with the states is cut here; the node's details have the whole text."""
_QUIET = frozenset({NodeState.PENDING, NodeState.SUCCEEDED, NodeState.SKIPPED, NodeState.NEXT})
_LIVE = frozenset({"stage_started", "stage_retrying", "stage_interrupted"})
"""Mid-step events the view shows at once (a node starts, retries or stops)."""
_STEP_END = frozenset(
    {
        "checkpoint_saved", "gate_waiting", "gate_answered", "pipeline_started",
        "pipeline_completed", "pipeline_failed", "pipeline_paused", "pipeline_resumed",
        "stale_input", "baseline_accepted", "dead_end", "run_retried", "stage_skipped",
    }
)  # fmt: skip
"""Events after which the whole view is brought up to date (one update per step)."""


def in_kernel() -> bool:
    """Whether this runs inside a Jupyter kernel (not a plain or terminal IPython)."""
    from IPython import get_ipython

    return getattr(get_ipython(), "kernel", None) is not None


def explain_on_live_context(
    pipeline: NotebookPipeline, expr: str, from_node: str | None
) -> tuple[str, Any]:
    """Explain ``expr`` against the run's context and (with a node) the edge that would be taken.

    The outcome used is the last outcome of ``from_node`` (or of the last executed node).
    """
    text, explanation, _ = _explain(pipeline, expr, from_node, infer_node=False)
    return text, explanation


def _explain(
    pipeline: NotebookPipeline, expr: str, from_node: str | None, infer_node: bool = True
) -> tuple[str, Any, Any]:
    """The explanation text, the explanation and the edge routing would take from the node
    (``from_node``, or with ``infer_node`` the last executed node)."""
    context: dict[str, Any] = dict(pipeline.run.context) if pipeline.has_run else {}
    outcomes = pipeline.outcomes()
    outcome: Outcome | None = None
    if from_node is not None:
        outcome = outcomes.get(from_node)
    elif outcomes:
        last, outcome = list(outcomes.items())[-1]
        from_node = last if infer_node else None
    if outcome is None:
        outcome = Outcome(StageStatus.SUCCESS)
    explanation = explain_condition(
        expr, outcome=outcome.status.value, preferred_label=outcome.preferred_label, context=context
    )
    lines = []
    if explanation.error is not None:
        err = explanation.error
        lines.append(f"syntax error at column {err.column}: {err.message}")
        lines.append(f"  {expr}")
        lines.append("  " + " " * max(err.column - 1, 0) + "^")
    else:
        lines.append(f"result: {'true' if explanation.result else 'false'}")
        lines.append(
            f"  (outcome={outcome.status.value}, preferred_label={outcome.preferred_label!r})"
        )
        for clause in explanation.clauses:
            found = clause.resolved_key if clause.resolved_key is not None else "(not set)"
            want = "truthy" if clause.expected is None else f"{clause.operator} {clause.expected}"
            mark = "held" if clause.held else "failed"
            lines.append(f"  {clause.text:<30} {found} = {clause.actual!r} (wanted {want}): {mark}")
    edge = None
    if from_node is not None and from_node in pipeline.graph.nodes:
        selection = select_edge(pipeline.graph, from_node, outcome, context)
        edge = selection.edge
        target = edge.target if edge is not None else "(none)"
        lines.append(f"edge from {from_node}: -> {target} ({selection.step}: {selection.reason})")
    return "\n".join(lines), explanation, edge


def _short(text: str, limit: int) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _clock_time(timestamp: str) -> str:
    """``HH:MM:SS`` of an ISO timestamp (the full one is in the record)."""
    return timestamp[11:19] if len(timestamp) >= 19 and timestamp[10] in "T " else timestamp


def evidence_detail(record: Mapping[str, Any]) -> dict[str, Any]:
    """What an expanded evidence row shows: summary, method, files changed, commit, tails."""
    found = record.get("outcome")
    outcome: Mapping[str, Any] = found if isinstance(found, dict) else {}
    facts = outcome.get("engine")
    engine: Mapping[str, Any] = facts if isinstance(facts, dict) else {}
    files = engine.get("files") if isinstance(engine.get("files"), dict) else {}
    changed = [
        f"{path} ({kind})"
        for kind in ("added", "modified", "deleted")
        for path in (files or {}).get(kind, [])
    ]
    detail: dict[str, Any] = {
        "summary": record.get("summary", ""),
        "status": engine.get("status") or outcome.get("status", ""),
        "method": engine.get("evidence_method") or record.get("type", ""),
        "files changed": changed,
        "commit": engine.get("commit") or "",
        "stale files": engine.get("stale_files") or [],
        "failure reason": engine.get("failure_reason", ""),
        "attempt": engine.get("attempt", ""),
        "time": record.get("timestamp", ""),
    }
    for key, value in engine.items():
        if "tail" in key or key in ("stdout", "stderr", "response"):
            detail[key.replace("_", " ")] = value
    return {k: v for k, v in detail.items() if v not in ("", None, [])}


class PipelineWidget(anywidget.AnyWidget):  # type: ignore[misc]
    """The notebook view of a pipeline object; refreshes on its events, acts on clicks."""

    _esm = STATIC / "graph.js"
    _css = (STATIC / "graph.css").read_text(encoding="utf-8") + "\n" + palette_css()

    graph = traitlets.Dict().tag(sync=True)
    """``svg``, ``nodes`` (index order), ``name``, ``legend``, ``describe``: once per structure."""
    states = traitlets.Unicode("").tag(sync=True)
    """One state code per node (``viewstate.STATE_CODES``), in ``graph["nodes"]`` order."""
    notes = traitlets.Dict().tag(sync=True)
    """node -> why, for nodes that need attention (cut to :data:`NOTE_CHARS`)."""
    run = traitlets.Dict().tag(sync=True)
    banner = traitlets.Dict().tag(sync=True)
    gate = traitlets.Dict().tag(sync=True)
    evidence = traitlets.Dict().tag(sync=True)
    note = traitlets.Unicode("").tag(sync=True)
    """Set when this view no longer drives a run (superseded): the view greys out."""

    def __init__(self, pipeline: NotebookPipeline, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.pipeline = pipeline
        self.background = in_kernel()
        """Run actions on a worker thread (True inside a Jupyter kernel: the kernel stays free)."""
        self._worker: threading.Thread | None = None
        self._layout: Layout | None = None
        self._layout_key: tuple[object, ...] | None = None
        self._running_since: dict[str, float] = {}
        self._evidence_count = -1
        self._records: list[dict[str, Any]] = []
        self.errors: list[BaseException] = []
        self.update_stats: list[tuple[float, int]] = []
        """(seconds, bytes of changed state) of every refresh that sent something (benchmarks)."""
        self.last_action: dict[str, Any] = {}
        self.on_msg(self._on_msg)
        pipeline.subscribe(self._on_pipeline_event)
        self.refresh()

    # --- the pipeline's side ---------------------------------------------------------------------

    @property
    def layout(self) -> Layout:
        """The layout shown (laid out once per pipeline structure)."""
        if self._layout is None:
            self._layout = self.pipeline.layout_cache.get(self.pipeline.graph)
        return self._layout

    def views(self) -> dict[str, NodeView]:
        return dict(self.pipeline.views())

    def current_banner(self) -> RunBanner | None:
        """The pipeline's banner (``banner()``), else one derived from a failed run."""
        own = getattr(self.pipeline, "banner", None)
        if callable(own):
            found = own()
            return found if isinstance(found, RunBanner) else None
        if self.pipeline.state_name != "failed":
            return None
        failed = [n for n, o in self.pipeline.outcomes().items() if o.status is StageStatus.FAIL]
        node = failed[-1] if failed else ""
        outcome = self.pipeline.outcomes().get(node)
        reason = (outcome.failure_reason if outcome is not None else "") or "the run failed"
        return RunBanner(BannerKind.FAILED, f"{node}: {reason}" if node else reason, node)

    def snapshot(self) -> str:
        """The SVG with states written in (what a static export shows)."""
        return snapshot_svg(self.layout, self.views())

    def static_html(self) -> str:
        """The text/html fallback: the graph with its states, the status line and the legend."""
        return static_html(
            self.layout, self.views(), self.pipeline.status_line(), self.current_banner()
        )

    # --- state sent to the page ------------------------------------------------------------------

    def _graph_value(self) -> dict[str, Any]:
        layout = self.layout
        return {
            "svg": layout.svg,
            "nodes": layout.nodes,
            "name": self.pipeline.graph.name,
            "legend": legend_items(layout.states),
            "describe": {item["state"]: item for item in legend_items(STATE_STYLES)},
        }

    def _run_value(self, views: Mapping[str, NodeView]) -> dict[str, Any]:
        pipeline = self.pipeline
        done = sum(1 for o in pipeline.outcomes().values() if o.status is not StageStatus.WAITING)
        total = max(len(pipeline.graph.nodes), 1)
        if pipeline.state_name == "completed":
            done = total
        running = next((n for n, v in views.items() if v.state is NodeState.RUNNING), "")
        running_for = 0.0
        now = time.time()
        if running:
            started = views[running].details.get("started_at")
            since = float(started) if isinstance(started, int | float) else None
            since = since or self._running_since.setdefault(running, now)
            running_for = max(now - since, 0.0)
        self._running_since = {running: now - running_for} if running else {}
        busy = bool(self._worker is not None and self._worker.is_alive())
        return {
            "state": pipeline.state_name,
            "line": pipeline.status_line(),
            "elapsed": round(pipeline.elapsed, 1),
            "done": min(done, total),
            "total": total,
            "running": running,
            "running_for": round(running_for, 1),
            "busy": busy,
            "backend": str(getattr(pipeline, "backend_name", "simulated")),
            "can_stop": callable(getattr(pipeline, "stop", None)),
        }

    def _gate_value(self) -> dict[str, Any]:
        gate = self.pipeline.pending_gate()
        if gate is None:
            return {}
        choices = [
            {"key": c.key, "label": c.label, "target": c.target, "text": choice_text(c)}
            for c in gate.choices
        ]
        return {
            "node": gate.node_id,
            "question": gate.text,
            "choices": choices,
            "approving": self._approving(gate.node_id),
        }

    def _approving(self, gate_node: str) -> dict[str, str]:
        """What the gate approves: the response or changed files of the node that ran before it."""
        records = [r for r in self.pipeline.evidence_records() if r.get("nodeId") != gate_node]
        if not records:
            return {}
        last = records[-1]
        node = str(last.get("nodeId", ""))
        details = getattr(self.pipeline, "details", None)
        if callable(details):
            found = details(node)
            if isinstance(found, dict):
                response = found.get("response") or ""
                if response:
                    return {"title": f"response of {node}", "text": _cut(str(response), 2000)}
        detail = evidence_detail(last)
        lines = [str(detail.get("summary", ""))]
        files = detail.get("files changed") or []
        if files:
            lines.append("files changed: " + ", ".join(files))
        return {"title": f"result of {node}", "text": "\n".join(lines)}

    def _evidence_value(self) -> dict[str, Any] | None:
        records = self.pipeline.evidence_records()
        if len(records) == self._evidence_count:
            return None
        self._evidence_count = len(records)
        self._records = records
        newest = list(enumerate(records))[-EVIDENCE_ROWS:][::-1]
        return {"total": len(records), "rows": [self._row(i, r) for i, r in newest]}

    @staticmethod
    def _row(seq: int, record: Mapping[str, Any]) -> list[Any]:
        row = evidence_row(record)
        return [
            seq,
            _clock_time(row["time"]),
            row["node"],
            row["status"],
            row["method"],
            _short(row["summary"], 90),
        ]

    def refresh(self) -> None:
        """Bring the page up to date: only changed values, all in one model update."""
        started = time.perf_counter()
        pipeline = self.pipeline
        values: dict[str, Any] = {}
        key = (id(pipeline.graph), pipeline.structure_version)
        if key != self._layout_key:
            self._layout = pipeline.layout_cache.get(pipeline.graph)
            self._layout_key = key
            values["graph"] = self._graph_value()
        views = self.views()
        layout = self.layout
        codes = ["p"] * len(layout.index)
        notes: dict[str, str] = {}
        for node_id, view in views.items():
            i = layout.index.get(node_id)
            if i is None:
                continue
            codes[i] = state_code(view)
            text = view.why or view.title
            if view.state not in _QUIET and text:
                notes[node_id] = _short(text, NOTE_CHARS)
        values["states"] = "".join(codes)
        values["notes"] = notes
        values["run"] = self._run_value(views)
        banner = self.current_banner()
        values["banner"] = (
            {}
            if banner is None
            else {
                "kind": banner.kind.value,
                "text": _cut(banner.text, 1500),
                "node": banner.node,
                "edge": list(banner.edge) if banner.edge else None,
            }
        )
        values["gate"] = self._gate_value()
        found = self._evidence_value()
        if found is not None:
            values["evidence"] = found
        changed = {k: v for k, v in values.items() if getattr(self, k) != v}
        if not changed:
            return
        with self.hold_sync():
            for name, value in changed.items():
                setattr(self, name, value)
        size = sum(len(_json(v)) for v in changed.values())
        self.update_stats.append((time.perf_counter() - started, size))

    def _on_pipeline_event(self, event: Any) -> None:
        kind = str(getattr(getattr(event, "type", None), "value", ""))
        if event is None or kind in _STEP_END or kind in _LIVE:
            try:
                self.refresh()
            except Exception as exc:  # a view error must never break the run
                self._report(exc)

    def supersede(self, note: str) -> None:
        """Grey this view out with ``note``; it refuses every action from now on."""
        self.note = note

    # --- actions from the page -------------------------------------------------------------------

    def _report(self, exc: BaseException) -> None:
        self.errors.append(exc)
        text = "".join(traceback.format_exception_only(type(exc), exc)).strip()
        self.send({"reply": "error", "text": text})

    def _on_msg(self, _widget: Any, content: Any, _buffers: Any) -> None:
        if not isinstance(content, dict):
            return
        self.last_action = dict(content)
        try:
            self.handle(content)
        except Exception as exc:
            self._report(exc)

    def handle(self, msg: Mapping[str, Any]) -> None:
        """Do what a message from the page asks (also the entry point for tests)."""
        action = str(msg.get("action", ""))
        node = msg.get("node") or None
        pipeline = self.pipeline
        if self.note:
            raise RunError(f"this view no longer drives a run: {self.note}")
        if node is not None:
            pipeline.require_node(str(node))
        if action == "details":
            self.send({"reply": "details", "node": node, "data": self.node_details(str(node))})
        elif action == "playground":
            text, _, edge = _explain(pipeline, str(msg.get("expr", "")), node)
            if not str(msg.get("expr", "")).strip():
                text = "type a condition, e.g. outcome=success && context.tests.passed=true"
            self.send(
                {
                    "reply": "playground",
                    "text": text,
                    "edge": None
                    if edge is None
                    else {"source": edge.source, "target": edge.target, "index": edge.index},
                    "keys": self.context_keys(),
                }
            )
        elif action == "evidence_all":
            rows = [self._row(i, r) for i, r in enumerate(pipeline.evidence_records())][::-1]
            self.send({"reply": "evidence_all", "rows": rows})
        elif action == "evidence_detail":
            seq = int(msg.get("seq", -1))
            records = pipeline.evidence_records()
            if 0 <= seq < len(records):
                self.send(
                    {"reply": "evidence_detail", "seq": seq, "record": evidence_detail(records[seq])}
                )
        elif action == "stop":
            self._call("stop")
        elif action in _ACTIONS:
            self._act(_ACTIONS[action](self, msg, node))
        else:
            raise RunError(f"the view sent an unknown action {action!r}")

    def _call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        method = getattr(self.pipeline, name, None)
        if not callable(method):
            raise RunError(f"this pipeline object has no {name}(); update freshness_magic")
        return method(*args, **kwargs)

    def _answer(self, node: str | None, choice: str, comment: str) -> Callable[[], Any]:
        resume = self.pipeline.resume
        if comment.strip() and "comment" in inspect.signature(resume).parameters:
            return lambda: resume(node, choice, comment=comment)
        if comment.strip():
            self.send({"reply": "error", "text": "the comment was not stored: this pipeline "
                       "object's resume() takes no comment"})  # fmt: skip
        return lambda: resume(node, choice)

    def _act(self, action: Callable[[], Any]) -> None:
        """Run a pipeline action; in a kernel on a worker thread so the kernel stays free."""
        if not self.background:
            action()
            self.refresh()
            return
        if self._worker is not None and self._worker.is_alive():
            raise RunError("an action is still running; wait until it finishes or press Stop")

        def work() -> None:
            try:
                action()
            except Exception as exc:
                self._report(exc)
            finally:
                self._worker = None
                self.refresh()
                self.send({"reply": "refresh_details"})

        self._worker = threading.Thread(target=work, name="fm-widget", daemon=True)
        self._worker.start()
        self.refresh()

    def wait(self, timeout: float | None = None) -> None:
        """Wait for a background action to finish (scripts and tests)."""
        worker = self._worker
        if worker is not None:
            worker.join(timeout)

    def node_details(self, node_id: str) -> dict[str, Any]:
        """A node's details: the pipeline's ``details(node)`` plus its attributes and state."""
        node = self.pipeline.require_node(node_id)
        view = self.views().get(node_id, NodeView())
        data: dict[str, Any] = {"state": view.state.value, "why": view.why}
        own = getattr(self.pipeline, "details", None)
        if callable(own):
            found = own(node_id)
            if isinstance(found, dict):
                data.update(found)
        else:
            outcome = self.pipeline.outcomes().get(node_id)
            if outcome is not None:
                data["failure_reason"] = outcome.failure_reason
                data["notes"] = outcome.notes
            stale = getattr(self.pipeline, "stale", {}).get(node_id)
            if stale is not None:
                data["stale_files"] = [f"{f.path} ({f.label})" for f in stale.files]
            records = self.pipeline.evidence_records(node_id)
            data["evidence"] = [evidence_detail(r) for r in records[-3:]][::-1]
        data.setdefault("attributes", dict(node.attrs))
        return data

    def context_keys(self, limit: int = 200) -> list[list[str]]:
        """The run context's keys with short values (the playground lists and completes them)."""
        keys = [["outcome", ""], ["preferred_label", ""]]
        if self.pipeline.has_run:
            for key, value in sorted(self.pipeline.run.context.items())[:limit]:
                keys.append([f"context.{key}", _short(repr(value), 60)])
        return keys

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        """The widget view, the static graph as ``text/html`` and the state table as text."""
        found = super()._repr_mimebundle_(**kwargs)
        data = dict(found[0] if isinstance(found, tuple) else found or {})
        data["text/plain"] = self.pipeline.status_text()
        data["text/html"] = self.static_html()
        return data


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _json(value: Any) -> str:
    import json

    return json.dumps(value, separators=(",", ":"), default=str)


_Factory = Callable[[PipelineWidget, Mapping[str, Any], Any], Callable[[], Any]]
_ACTIONS: dict[str, _Factory] = {
    "step": lambda w, _m, _n: w.pipeline.step,
    "run": lambda w, _m, _n: w.pipeline.run_to,
    "run_to": lambda w, _m, n: (lambda: w.pipeline.run_to(to=n)),
    "retry": lambda w, _m, n: (lambda: w._call("retry", n)),
    "accept": lambda w, _m, n: (lambda: w.pipeline.accept(n)),
    "reset": lambda w, _m, _n: w.pipeline.reset,
    "answer": lambda w, m, n: w._answer(n, str(m.get("choice", "")), str(m.get("comment", ""))),
}
"""Actions that change the run: each gives the call to make (on a worker thread in a kernel)."""
