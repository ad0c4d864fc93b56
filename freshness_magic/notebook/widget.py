"""The pipeline view: one anywidget model, its ES module and CSS shipped in the package.

The model carries the laid-out SVG once per pipeline structure and, per step, the node states as
one character per node plus the few lines that explain nodes needing attention, so a step at 200
nodes sends a few hundred bytes in one update. The widget only serialises the frames the
pipeline pushes: one per step boundary and, inside a long step, at most one per the pipeline's
``live_delay`` (a node still running is shown running, its timer, its latest output); a step that
ends sooner sends nothing but its one update at the end.

Clicks come back as ``{"action": ...}`` messages and call the pipeline object (``step``,
``run_to``, ``retry``, ``accept``, ``resume``, ``stop``, ``reset``); node details, evidence
records and playground answers are asked for when needed and answered with a custom message.
Every view comes with the graph with its states as static HTML for front ends without a widget
runtime: in a kernel as its own output that follows the run (see
:meth:`PipelineWidget._repr_mimebundle_`), elsewhere in the bundle's ``text/html``.

The page contract (what browser tests may rely on): root ``.fm-root.fm-widget`` (also
``.fm-superseded`` or ``.fm-dead`` when it no longer drives a run: greyed, controls disabled but
zoom, pan and details); node groups
``svg g.fm-node[data-node][data-state]`` (``data-stale`` for stale kinds), edges ``g.fm-edge
[data-source][data-target][data-index]`` (``.fm-chosen`` = the playground's edge, ``.fm-focus`` =
the banner's), clusters ``g.fm-cluster``; ``.fm-viewport`` (scrolls) with ``.fm-zoom-in``,
``.fm-zoom-out``, ``.fm-fit``, ``.fm-zoom-reset`` and ``.fm-scale``; controls ``.fm-step``,
``.fm-run``, ``.fm-run-to`` + ``select.fm-run-to-node``, ``.fm-stop``, ``.fm-accept``,
``.fm-reset``; ``.fm-status span[data-state]`` ending in ``.fm-elapsed`` (the run's active time),
``.fm-timer[data-node]``, ``.fm-badge``, ``.fm-goal`` (the graph's goal), ``.fm-said`` (the last
line the view's last action answered);
``.fm-banner[data-kind][data-node]``; ``.fm-details[data-node]`` with ``.fm-act-run-to``,
``.fm-act-retry``, ``.fm-act-accept``; ``.fm-legend-item[data-state]`` (``[data-stale]`` for the
two stale kinds) with ``svg.fm-swatch g.fm-key[data-state] > polygon`` painted as nodes are;
``.fm-gate`` with
``.fm-gate-question [data-node]``, ``.fm-gate-note`` (changed inputs upstream),
``textarea.fm-gate-comment``, ``.fm-gate-choice-<key>``;
``.fm-evidence-row[data-node][data-seq]`` newest first, ``.fm-evidence-all``; playground
``.fm-playground-input input``, ``.fm-playground-node select``, ``.fm-playground-result``
(``data-edge``), ``.fm-suggest-item[data-key]``; errors ``.fm-log .fm-error``; a click the
kernel has not answered ``.fm-notice``.
"""

from __future__ import annotations

import threading
import time
import traceback
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anywidget
import traitlets

from freshness_magic.errors import RunError
from freshness_magic.notebook.interrupts import InterruptForwarding
from freshness_magic.views.evidence_log import evidence_detail
from freshness_magic.views.render import Layout
from freshness_magic.views.snapshot import snapshot_svg, static_html
from freshness_magic.views.state import (
    NodeState,
    NodeView,
    palette_css,
    state_code,
)
from freshness_magic.views.text import cut
from freshness_magic.views.wire import (
    ActiveTime,
    context_keys,
    evidence_summary_row,
    gate_value,
    graph_value,
    node_details,
    run_value,
    short,
    to_json,
)

if TYPE_CHECKING:
    from freshness_magic.notebook.pipeline import Pipeline
    from freshness_magic.views.frame import ViewFrame


__all__ = ["PipelineWidget", "in_kernel"]

STATIC = Path(__file__).with_name("static")
EVIDENCE_ROWS = 8
"""Evidence rows sent with every step (newest first); "show all" asks for the rest."""
NOTE_CHARS = 240
"""An explanation sent with the states is cut here; the node's details have the whole text."""
_QUIET = frozenset(
    {NodeState.PENDING, NodeState.SUCCEEDED, NodeState.REUSED, NodeState.SKIPPED, NodeState.NEXT}
)


def in_kernel() -> bool:
    """Whether this runs inside a Jupyter kernel (not a plain or terminal IPython)."""
    from IPython import get_ipython

    return getattr(get_ipython(), "kernel", None) is not None


class PipelineWidget(anywidget.AnyWidget):
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

    def __init__(self, pipeline: Pipeline, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.pipeline = pipeline
        self.background = in_kernel()
        """Run actions on a worker thread (True inside a Jupyter kernel: the kernel stays free)."""
        self._worker: threading.Thread | None = None
        self._interrupts = InterruptForwarding(self._stop_from_signal)
        """Kernel > Interrupt stops what a click started, as the view's Stop does."""
        self._refresh_lock = threading.Lock()
        self._layout: Layout | None = None
        self._layout_key: tuple[object, ...] | None = None
        self._evidence_count = -1
        self._records: Sequence[Mapping[str, Any]] = []
        self.frame: ViewFrame
        """The frame the page shows (pushed by the pipeline at every step boundary)."""
        self._active = ActiveTime()
        """The run's active time, folded in from ``_records`` as they come."""
        self.errors: list[BaseException] = []
        self.update_stats: list[tuple[float, int]] = []
        """(seconds, bytes of changed state) of every refresh that sent something (benchmarks)."""
        self.follow_id = f"fm-static-{uuid.uuid4().hex}"
        """The display id of the static graph shown beside each view (see :meth:`follow`)."""
        self._followed: str | None = None
        """The static HTML last published under ``follow_id`` (None: not displayed yet)."""
        self._follow_lock = threading.Lock()
        self.on_msg(self._on_msg)
        pipeline.subscribe_frames(self._on_frame, self._report)
        self.refresh()

    # --- the pipeline's side ---------------------------------------------------------------------

    @property
    def layout(self) -> Layout:
        """The layout shown (laid out once per pipeline structure)."""
        if self._layout is None:
            self._layout = self.pipeline.layout_cache.get(self.pipeline.graph)
        return self._layout

    def views(self) -> dict[str, NodeView]:
        """Every node's view as the last frame sent showed it."""
        return dict(self.frame.views)

    def snapshot(self) -> str:
        """The SVG with states written in (what a static export shows)."""
        return snapshot_svg(self.layout, self.views())

    def static_html(self) -> str:
        """The text/html fallback: the graph with its states, the status line and the legend."""
        frame = self.frame
        return static_html(self.layout, dict(frame.views), frame.status_line, frame.banner)

    # --- state sent to the page ------------------------------------------------------------------

    def _evidence_value(self, records: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
        if len(records) == self._evidence_count:
            return None
        self._evidence_count = len(records)
        self._records = records
        newest = list(enumerate(records))[-EVIDENCE_ROWS:][::-1]
        return {"total": len(records), "rows": [evidence_summary_row(i, r) for i, r in newest]}

    def refresh(self, frame: ViewFrame | None = None) -> None:
        """Bring the page up to date with ``frame`` (None: the pipeline's frame now): only
        changed values, all in one model update.

        Runs on the kernel thread and on the action's worker thread; one at a time, so a slower
        refresh never overwrites a newer one with older values.
        """
        with self._refresh_lock:
            self._refresh(frame if frame is not None else self.pipeline.view.frame())

    def _refresh(self, frame: ViewFrame) -> None:
        started = time.perf_counter()
        self.frame = frame
        values: dict[str, Any] = {}
        key = (id(frame.graph), frame.structure_version)
        if key != self._layout_key:
            self._layout = self.pipeline.layout_cache.get(frame.graph)
            self._layout_key = key
            values["graph"] = graph_value(frame.graph, self.layout)
        views = frame.views
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
                notes[node_id] = short(text, NOTE_CHARS)
        values["states"] = "".join(codes)
        values["notes"] = notes
        if not self.note:
            # Superseded (a note), the view keeps what it showed last, read-only: its banner,
            # gate and evidence rows. The note says why, once (the superseded banner would say it
            # again), and the pipeline object no longer has a run to read the rest from.
            banner = frame.banner
            values["banner"] = (
                {}
                if banner is None
                else {
                    "kind": banner.kind.value,
                    "text": cut(banner.text, 1500),
                    "node": banner.node,
                    "edge": list(banner.edge) if banner.edge else None,
                    "holds": banner.holds,
                }
            )
            values["gate"] = gate_value(frame)
            found = self._evidence_value(frame.evidence)
            if found is not None:
                values["evidence"] = found
        self._active.update(self._records, frame.stopped)
        values["run"] = run_value(frame, time.time(), self._active)
        changed = {k: v for k, v in values.items() if getattr(self, k) != v}
        if not changed:
            return
        if {"states", "banner", "gate"} & changed.keys() or (
            changed.get("run", {}).get("line") != self.run.get("line")
        ):
            self.follow()
        with self.hold_sync():
            for name, value in changed.items():
                setattr(self, name, value)
        size = sum(len(to_json(v)) for v in changed.values())
        self.update_stats.append((time.perf_counter() - started, size))

    @property
    def live_delay(self) -> float:
        """Seconds between events inside a step and the frame the pipeline pushes for them."""
        return float(self.pipeline.live_delay)

    @live_delay.setter
    def live_delay(self, seconds: float) -> None:
        self.pipeline.live_delay = seconds

    def _on_frame(self, frame: ViewFrame) -> None:
        """A frame the pipeline pushed (a step boundary, or a long step's live frame): sent in
        one update."""
        self._safe_refresh(frame)

    def _safe_refresh(self, frame: ViewFrame | None = None) -> None:
        try:
            self.refresh(frame)
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

    def _stop_from_signal(self) -> None:
        try:
            self.pipeline.stop()
        except Exception as exc:  # a signal handler must not raise into the kernel's loop
            self._report(exc)

    def _on_msg(self, _widget: Any, content: Any, _buffers: Any) -> None:
        if not isinstance(content, dict):
            return
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
            pipeline.view.require_node(str(node))
        if action == "details":
            self.send({"reply": "details", "node": node, "data": self.node_details(str(node))})
        elif action == "playground":
            self.send(self.playground(str(msg.get("expr", "")), node))
        elif action == "evidence_all":
            rows = [
                evidence_summary_row(i, r) for i, r in enumerate(pipeline.view.evidence_records())
            ][::-1]
            self.send({"reply": "evidence_all", "rows": rows})
        elif action == "evidence_detail":
            seq = msg.get("seq")
            if not isinstance(seq, int):
                raise RunError(f"the view asked for evidence record {seq!r}, not a number")
            records = pipeline.view.evidence_records()
            reply: dict[str, Any] = {"reply": "evidence_detail", "seq": seq, "record": None}
            if 0 <= seq < len(records):
                reply["record"] = evidence_detail(records[seq])
            else:  # the log changed under the page (a new run, a restart): say so in the row
                reply["note"] = (
                    f"record {seq} is not in this run's evidence log ({len(records)} records); "
                    "show the list again"
                )
            self.send(reply)
        elif action == "stop":
            self._call("stop")
        elif action in _ACTIONS:
            self._act(action, _ACTIONS[action](self, msg, node))
        else:
            raise RunError(f"the view sent an unknown action {action!r}")

    def _call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        return getattr(self.pipeline, name)(*args, **kwargs)

    def _answer(self, node: str | None, choice: str, comment: str) -> Callable[[], Any]:
        if node is None:
            raise RunError("the view sent an answer without a gate")
        return lambda: self.pipeline.resume(node, choice, comment=comment.strip() or None)

    @property
    def busy(self) -> bool:
        """Whether an action from the page still runs on the worker thread."""
        worker = self._worker
        return worker is not None and worker.is_alive()

    def _act(self, name: str, action: Callable[[], Any]) -> None:
        """Run a pipeline action; in a kernel on a worker thread so the kernel stays free.

        On the worker the action's steps send their own updates; at its end whatever else
        changed goes in one more update (often nothing) and the page gets ``{"reply": "done"}``
        with the action's text (what the magic would print) and the one line of it the page
        shows (:meth:`_gist`, so a click that did nothing says why), which re-enables its
        buttons (the page disables them itself when it sends an action).
        """
        if not self.background:
            action()
            self.refresh()
            return
        if self.busy:
            raise RunError("an action is still running; wait until it finishes or press Stop")

        def work() -> None:
            said = ""
            try:
                said = str(getattr(action(), "text", "") or "")
            except Exception as exc:
                self._report(exc)
            finally:
                self._interrupts.disarm()
                self._worker = None
                self._safe_refresh()  # the reply to the page's own action
                self.send({"reply": "done", "action": name, "text": said, "line": self._gist(said)})

        self._worker = threading.Thread(target=work, name="fm-widget", daemon=True)
        self._interrupts.arm()
        self._worker.start()

    def _gist(self, said: str) -> str:
        """The line of an action's text the page shows under its toolbar: the last one, the
        status line left out (the header shows it)."""
        status = self.pipeline.view.status_line()
        lines = [line for line in said.splitlines() if line.strip() and line != status]
        return lines[-1].strip() if lines else ""

    def wait(self, timeout: float | None = None) -> None:
        """Wait for a background action to finish (scripts and tests)."""
        worker = self._worker
        if worker is not None:
            worker.join(timeout)

    def playground(self, expr: str, node: str | None = None) -> dict[str, Any]:
        """The condition playground's answer: the explanation text, the edge routing would take
        from ``node`` (default: the last executed node) and the context keys for completion."""
        answer = self.pipeline.view.explain(expr, node, infer_node=True)
        text, edge = answer.text, answer.edge
        if not expr.strip():
            text = "type a condition, e.g. outcome=success && context.tests.passed=true"
        found = None
        if edge is not None:
            found = {"source": edge.source, "target": edge.target, "index": edge.index}
        return {
            "reply": "playground",
            "text": text,
            "edge": found,
            "keys": context_keys(self.pipeline.view),
        }

    def node_details(self, node_id: str) -> dict[str, Any]:
        """A node's details: the pipeline's ``details(node)`` plus its attributes and state."""
        return node_details(self.pipeline.view, node_id, self.views().get(node_id, NodeView()))

    def follow(self) -> None:
        """Bring the static graph shown beside the views up to this step (an updated display):
        a notebook saved at any moment, or executed by ``nbconvert --execute``, then shows the
        states of its last step without a widget runtime or network."""
        if self._followed is None:
            return
        from IPython.display import update_display

        with self._follow_lock:
            html = following_html(self.static_html())
            if html == self._followed:
                return
            self._followed = html
            update_display({"text/html": html}, raw=True, display_id=self.follow_id)

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:  # type: ignore[override]
        """The widget view and the state table as text; the static graph as ``text/html``.

        In a kernel the static graph is its own output, published just before the view under
        :attr:`follow_id` and updated at every step, so it follows the run; the widget's CSS
        hides it wherever the view itself is drawn. The widget's own bundle then carries no
        ``text/html``: saved from a front end, it would show the graph as it was when the cell
        ran. Outside a kernel there is nothing to update: the bundle carries it."""
        found = super()._repr_mimebundle_(**kwargs)
        data = dict(found[0] if isinstance(found, tuple) else found or {})
        data["text/plain"] = self.pipeline.view.status_text()
        if not self.background:
            data["text/html"] = self.static_html()
            return data
        from IPython.display import display

        with self._follow_lock:
            self._followed = following_html(self.static_html())
            display({"text/html": self._followed}, raw=True, display_id=self.follow_id)
        return data


def following_html(html: str) -> str:
    """``html`` (the static graph) marked as the output that follows a widget view."""
    return f'<div class="fm-static-follow">{html}</div>'


_Factory = Callable[[PipelineWidget, Mapping[str, Any], Any], Callable[[], Any]]
_ACTIONS: dict[str, _Factory] = {
    "step": lambda w, _m, _n: w.pipeline.step,
    "run": lambda w, _m, _n: w.pipeline.run_to,
    "run_to": lambda w, _m, n: lambda: w.pipeline.run_to(to=n),
    "retry": lambda w, _m, n: lambda: w._call("retry", n),
    "accept": lambda w, _m, n: (lambda: w.pipeline.accept_here(n)) if n else w.pipeline.accept,
    "reset": lambda w, _m, _n: w.pipeline.reset,
    "resume_offered": lambda w, _m, _n: w.pipeline.resume,
    "start_new": lambda w, _m, _n: w.pipeline.start_new,
    "keep_run": lambda w, _m, _n: w.pipeline.keep_run,
    "answer": lambda w, m, n: w._answer(n, str(m.get("choice", "")), str(m.get("comment", ""))),
}
"""Actions that change the run: each gives the call to make (on a worker thread in a kernel)."""
