"""The notebook's pipeline object: one loaded pipeline, its run, and the views of it.

The magics and the widget's buttons both call these methods, so a click and a magic do exactly
the same thing. Everything here goes through the engine's public API (``session.open_run``,
``Run.step/run/answer``), the freshness report and the evidence log on disk.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from freshness_magic.engine.model import Graph, Node
from freshness_magic.engine.outcome import Choice, Outcome, Question, StageStatus
from freshness_magic.errors import FreshnessMagicError, RunError
from freshness_magic.freshness.labels import FileLabel
from freshness_magic.freshness.report import FreshnessReport
from freshness_magic.notebook.render import LayoutCache, NodeState, NodeView, StaleKind, state_table

if TYPE_CHECKING:
    from freshness_magic.engine.run import Run

CELL_HANDLER_TYPE = "notebook.cell"
"""The handler type given to nodes whose handler is a ``%%node`` cell."""

OUTCOME_WORDS: Mapping[str, StageStatus] = {
    "success": StageStatus.SUCCESS,
    "fail": StageStatus.FAIL,
    "partial_success": StageStatus.PARTIAL_SUCCESS,
    "retry": StageStatus.RETRY,
}


@dataclass(frozen=True)
class StaleFile:
    """One changed input of a node with its label (``modified``, ``deleted``, ``added`` ...)."""

    path: str
    label: str


@dataclass(frozen=True)
class NodeStale:
    """A node's stale inputs and since when (run-start baseline or the node's own completion)."""

    kind: StaleKind
    files: tuple[StaleFile, ...]

    def describe(self) -> str:
        since = "baseline" if self.kind is StaleKind.BASELINE else "it ran"
        files = ", ".join(f"{f.path} ({f.label})" for f in self.files)
        return f"inputs changed since {since}: {files}"


class TextResult:
    """A magic's answer: plain text everywhere (terminal, nbval), same text in rich frontends."""

    def __init__(self, text: str, data: Any = None) -> None:
        self.text = text
        self.data = data

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        return {"text/plain": self.text}

    def __repr__(self) -> str:
        return self.text

    def __str__(self) -> str:
        return self.text


@dataclass
class CellHandler:
    """A ``%%node`` cell as a node handler: runs the code in the user namespace.

    The cell sees ``context`` (the live run context), ``node`` and ``outcome`` (a string); an
    exception is the node's FAIL with the traceback as the failure reason.
    """

    cells: dict[str, str]
    namespace: dict[str, Any]
    fallback: Callable[[Node, Any, Any], Outcome] | None = None

    def execute(self, node: Node, context: Any, env: Any) -> Outcome:
        code = self.cells.get(node.id)
        if code is None:
            if self.fallback is None:
                return Outcome(StageStatus.FAIL, failure_reason=f"no %%node cell for {node.id}")
            return self.fallback(node, context, env)
        ns = self.namespace
        saved: dict[str, Any] = {k: ns[k] for k in ("context", "node", "outcome") if k in ns}
        ns["context"], ns["node"], ns["outcome"] = context, node, "success"
        try:
            exec(compile(code, f"<%%node {node.id}>", "exec"), ns)
            word = str(ns.get("outcome", "success")).strip().lower()
        except Exception as exc:
            tb = traceback.format_exc(limit=-6)
            return Outcome(
                StageStatus.FAIL,
                failure_reason=f"%%node {node.id} raised {type(exc).__name__}: {exc}\n{tb}",
            )
        finally:
            for key in ("context", "node", "outcome"):
                ns.pop(key, None)
            ns.update(saved)
        status = OUTCOME_WORDS.get(word)
        if status is None:
            return Outcome(
                StageStatus.FAIL,
                failure_reason=f"%%node {node.id} set outcome={word!r}; use one of "
                + ", ".join(OUTCOME_WORDS),
            )
        notes = f"%%node {node.id} cell ran"
        reason = "" if status.is_success else f"%%node {node.id} set outcome={word}"
        return Outcome(status, notes=notes, failure_reason=reason)


class EvidenceTail:
    """Reads an append-only evidence log incrementally: only bytes added since the last read.

    Each complete line is checked with the evidence module's validator; a torn last line is
    left for the next read, and a log that shrank (a new run reused the path) is re-read.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._offset = 0
        self._records: list[dict[str, Any]] = []

    def read(self) -> list[dict[str, Any]]:
        from freshness_magic.evidence.record import validate_evidence

        try:
            size = self.path.stat().st_size
        except FileNotFoundError:
            self._offset, self._records = 0, []
            return []
        if size < self._offset:
            self._offset, self._records = 0, []
        if size == self._offset:
            return list(self._records)
        with self.path.open("rb") as handle:
            handle.seek(self._offset)
            chunk = handle.read(size - self._offset)
        end = chunk.rfind(b"\n") + 1
        for raw in chunk[:end].splitlines():
            try:
                data = json.loads(raw)
            except ValueError:
                continue
            node_id = data.get("nodeId") if isinstance(data, dict) else None
            result = validate_evidence(data, node_id if isinstance(node_id, str) else "")
            if result.record is not None:
                self._records.append(result.record.to_dict())
        self._offset += end
        return list(self._records)


def _stale_from_report(report: FreshnessReport) -> dict[str, NodeStale]:
    """Per-node stale inputs from the freshness report: since the node ran, else since baseline."""
    result: dict[str, NodeStale] = {}
    for node_id, entry in report.nodes.items():
        if entry.since_run is not None:
            view, kind = entry.since_run, StaleKind.RUN
        else:
            view, kind = entry.since_baseline, StaleKind.BASELINE
        files = tuple(
            StaleFile(f.path, _short_label(f.label.value))
            for f in view.files
            if f.label is not FileLabel.FRESH
        )
        if files and view.is_stale:
            result[node_id] = NodeStale(kind, files)
    return result


def _report_of(run: Any) -> FreshnessReport | None:
    """The freshness report of ``run`` from its freshness extension (None without one)."""
    for ext in getattr(run, "extensions", ()):
        report = getattr(ext, "report", None)
        if getattr(ext, "name", "") == "freshness" and callable(report):
            found = report(run)
            return found if isinstance(found, FreshnessReport) else None
    return None


def _short_label(label: str) -> str:
    words = {
        "stale_changed": "modified",
        "stale_deleted": "deleted",
        "stale_added": "added",
        "unknown": "unknown",
    }
    return words.get(label.rsplit(".", 1)[-1].lower(), label)


@dataclass(repr=False, eq=False)
class NotebookPipeline:
    """A pipeline loaded in the notebook under ``name``; owns its run and its widget."""

    name: str
    graph: Graph
    workdir: Path
    namespace: dict[str, Any] = field(default_factory=dict)
    layout_cache: LayoutCache = field(default_factory=LayoutCache)
    run_options: dict[str, Any] = field(default_factory=dict)
    cells: dict[str, str] = field(default_factory=dict)
    _run: Run | None = None
    _widget: Any = None
    _started: float | None = None
    _finished: float | None = None
    _stale: dict[str, NodeStale] = field(default_factory=dict)
    _listeners: list[Callable[[Any], None]] = field(default_factory=list)
    _evidence: EvidenceTail | None = None
    _lock: threading.RLock = field(default_factory=threading.RLock)
    _views_memo: tuple[tuple[int, int, int], dict[str, NodeView]] | None = None
    _stale_version: int = 0
    _run_version: int = 0
    structure_version: int = 0
    """Bumped whenever something the layout shows changes (a ``%%node`` changes a node's type)."""

    # --- display -------------------------------------------------------------------------------

    def __repr__(self) -> str:
        return f"<pipeline {self.name}: {len(self.graph.nodes)} nodes, {self.state_name}>"

    @property
    def widget(self) -> Any:
        """The pipeline's widget (created on first use; one per pipeline, many views)."""
        if self._widget is None:
            from freshness_magic.notebook.widget import PipelineWidget

            self._widget = PipelineWidget(self)
        return self._widget

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        """The widget for rich frontends, the graph with its states as static ``text/html`` for
        front ends without a widget runtime, and the node-state table as ``text/plain``."""
        from freshness_magic.notebook.render import RenderError
        from freshness_magic.notebook.snapshot import static_html
        from freshness_magic.notebook.widget import in_kernel

        bundle: dict[str, Any] = {}
        if in_kernel() or self._widget is not None:
            widget_bundle = self.widget._repr_mimebundle_()
            if isinstance(widget_bundle, dict):
                bundle.update(widget_bundle)
        if "text/html" not in bundle:
            with contextlib.suppress(RenderError):
                layout = self.layout_cache.get(self.graph)
                bundle["text/html"] = static_html(layout, self.views(), self.status_line())
        bundle["text/plain"] = self.status_text()
        return bundle

    # --- the run -------------------------------------------------------------------------------

    @property
    def run(self) -> Run:
        """The current run, opened on first use (``session.open_run``)."""
        if self._run is None:
            return self._open(resume=False)
        return self._run

    @property
    def has_run(self) -> bool:
        return self._run is not None

    def _open(self, *, resume: bool) -> Run:
        from freshness_magic import session

        self._install_cells()
        self.workdir.mkdir(parents=True, exist_ok=True)
        run = None
        if resume:
            latest = self.latest_run_dir()
            if latest is not None:
                run = session.resume_run(latest, **self._resume_options())
        if run is None:
            run = session.open_run(self.graph, workdir=self.workdir, **self.run_options)
        self._attach(run)
        return run

    def _resume_options(self) -> dict[str, Any]:
        return {k: v for k, v in self.run_options.items() if k in ("registry", "backend")}

    def _attach(self, run: Run) -> None:
        self._run = run
        self._run_version += 1
        self._started = None
        self._finished = None
        registry = getattr(run, "registry", None)
        if registry is not None and self.cells:
            registry.register(CELL_HANDLER_TYPE, CellHandler(self.cells, self.namespace))
        run.events.subscribe(self._on_event)
        self.refresh_freshness()
        self._notify()

    def resume_latest(self) -> bool:
        """Reopen the newest run of this pipeline from its checkpoint; False when there is none."""
        if self.latest_run_dir() is None:
            return False
        self._open(resume=True)
        return True

    def latest_run_dir(self) -> Path | None:
        """The newest run folder under ``<workdir>/.freshness/runs`` for this pipeline."""
        root = self.workdir / ".freshness" / "runs"
        if not root.is_dir():
            return None
        candidates = [p for p in root.iterdir() if (p / "checkpoint.json").is_file()]
        mine = [p for p in candidates if self._belongs(p)]
        if not mine:
            return None
        return max(mine, key=lambda p: (p / "checkpoint.json").stat().st_mtime_ns)

    def _belongs(self, run_dir: Path) -> bool:
        path = run_dir / "manifest.json"
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return False
        return isinstance(data, dict) and data.get("name") == self.graph.name

    def _on_event(self, event: Any) -> None:
        kind = str(getattr(getattr(event, "type", None), "value", ""))
        if kind == "stage_started" and self._started is None:
            self._started = time.monotonic()
        if kind in ("pipeline_completed", "pipeline_failed"):
            self._finished = time.monotonic()
        self._notify(event)

    def subscribe(self, listener: Callable[..., None]) -> None:
        """Call ``listener(event_or_None)`` after every run event and every refresh."""
        self._listeners.append(listener)

    def _notify(self, event: Any = None) -> None:
        for listener in list(self._listeners):
            listener(event)

    # --- %%node cells ----------------------------------------------------------------------------

    def set_cell(self, node_id: str, code: str) -> None:
        """Make ``code`` the handler of ``node_id`` (a ``%%node`` cell)."""
        if node_id not in self.graph.nodes:
            raise FreshnessMagicError(
                f"pipeline {self.name!r} has no node {node_id!r}; nodes: "
                + ", ".join(self.graph.nodes)
            )
        self.cells[node_id] = code
        self.structure_version += 1
        self._install_cells()
        registry = getattr(self._run, "registry", None) if self._run is not None else None
        if registry is not None:
            registry.register(CELL_HANDLER_TYPE, CellHandler(self.cells, self.namespace))
        self._notify()

    def _install_cells(self) -> None:
        for node_id in self.cells:
            node = self.graph.nodes[node_id]
            node.attrs["type"] = CELL_HANDLER_TYPE
        if self.cells:
            registry = self.run_options.get("registry")
            if registry is None:
                from freshness_magic.engine.handlers.builtin import default_registry

                registry = default_registry(backend=self.run_options.get("backend"))
                self.run_options["registry"] = registry
            registry.register(CELL_HANDLER_TYPE, CellHandler(self.cells, self.namespace))

    # --- actions ---------------------------------------------------------------------------------

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[None]:
        """One action at a time: a second one (another thread) is refused, not queued."""
        if not self._lock.acquire(blocking=False):
            raise RunError(
                f"pipeline {self.name!r} is busy with another action (a widget button); "
                "wait until it finishes"
            )
        try:
            yield
        finally:
            self._lock.release()

    @property
    def busy(self) -> bool:
        """Whether an action is running in another thread."""
        if self._lock.acquire(blocking=False):
            self._lock.release()
            return False
        return True

    def _finished_text(self) -> str | None:
        state = self.state_name
        if state in ("completed", "failed"):
            return f"run {state}; nothing to do (use reset to start again)"
        return None

    def step(self) -> TextResult:
        """Execute the next node."""
        with self.exclusive():
            done = self._finished_text()
            if done is not None:
                return TextResult(done + "\n" + self.status_text())
            if self.state_name == "waiting":
                return TextResult(self._waiting_text() + "\n" + self.status_text())
            result = self.run.step()
            self.refresh_freshness()
            self._notify()
            return TextResult(self._step_line(result) + "\n" + self.status_text(), result)

    def run_to(self, to: str | None = None, max_steps: int | None = None) -> TextResult:
        """Run until ``to``, the exit, a failure or a gate (``run`` on a finished run: no-op)."""
        with self.exclusive():
            if to is not None:
                self.require_node(to)
            done = self._finished_text()
            if done is not None:
                return TextResult(done + "\n" + self.status_text())
            if self.state_name == "waiting":
                return TextResult(self._waiting_text() + "\n" + self.status_text())
            before = len(self.run.history)
            result = self.run.run(to=to, max_steps=max_steps)
            self.refresh_freshness()
            self._notify()
            steps = len(self.run.history) - before
            return TextResult(self._run_line(result, steps) + "\n" + self.status_text(), result)

    def resume(self, node_id: str, choice: str | None) -> TextResult:
        """Answer the gate at ``node_id`` with ``choice`` (None: its default), then ``run``."""
        self.require_node(node_id)
        with self.exclusive():
            self.run.answer(node_id, choice)
            self._notify()
            return self.run_to()

    def accept(self, node_id: str | None = None) -> TextResult:
        """Accept the current inputs as the new baseline: of one node, or of every node that is
        not run yet or is shown stale now (also nodes whose inputs changed after they ran)."""
        if node_id is not None:
            self.require_node(node_id)
        from freshness_magic.freshness.extension import accept_changes

        self.refresh_freshness()
        with self.exclusive():
            accepted = accept_changes(self.run, node_id=node_id)
            if node_id is None:
                for stale_id in sorted(set(self._stale) - set(accepted)):
                    accepted.update(accept_changes(self.run, node_id=stale_id))
        self.refresh_freshness()
        self._notify()
        target = node_id or "all stale nodes and nodes not run yet"
        files = sorted({f for changed in accepted.values() for f in changed})
        what = f": {', '.join(files)}" if files else ": no changed files"
        return TextResult(f"accepted current inputs of {target}{what}\n" + self.status_text())

    def reset(self) -> TextResult:
        """Drop the current run; the next action starts a new one."""
        with self.exclusive():
            if self._run is not None:
                self._run.events.unsubscribe(self._on_event)
            self._run = None
            self._stale = {}
            self._stale_version += 1
            self._open(resume=False)
        return TextResult("reset: a new run starts at the beginning\n" + self.status_text())

    def require_node(self, node_id: str) -> Node:
        node = self.graph.nodes.get(node_id)
        if node is None:
            raise RunError(
                f"pipeline {self.name!r} has no node {node_id!r}; nodes: "
                + ", ".join(self.graph.nodes)
            )
        return node

    # --- freshness -------------------------------------------------------------------------------

    def refresh_freshness(self) -> bool:
        """Re-check stale inputs (cheap stat-cache check); True when anything changed."""
        if self._run is None:
            return False
        before = self._stale
        report = _report_of(self._run)
        self._stale = _stale_from_report(report) if report is not None else {}
        self._stale_version += 1
        changed = self._stale != before
        if changed:
            self._notify()
        return changed

    @property
    def stale(self) -> Mapping[str, NodeStale]:
        return self._stale

    # --- views -----------------------------------------------------------------------------------

    @property
    def state_name(self) -> str:
        if self._run is None:
            return "ready"
        state = self._run.state
        return str(getattr(state, "value", state)).lower()

    @property
    def elapsed(self) -> float:
        if self._started is None:
            return 0.0
        end = self._finished if self._finished is not None else time.monotonic()
        return end - self._started

    def outcomes(self) -> Mapping[str, Outcome]:
        if self._run is None:
            return {}
        return dict(self._run.node_outcomes)

    def pending_gate(self) -> Question | None:
        if self._run is None:
            return None
        gate: Question | None = self._run.pending_gate
        return gate

    def next_node(self) -> str | None:
        if self._run is None:
            start = self.graph.start_node()
            return start.id if start else None
        nxt: str | None = self._run.next_node
        return nxt

    def views(self) -> dict[str, NodeView]:
        """Every node's visible state and why (DESIGN §7); a fresh dict the caller may keep."""
        run = self._run
        key = (self._run_version, run.events.seq if run is not None else 0, self._stale_version)
        if self._views_memo is None or self._views_memo[0] != key:
            self._views_memo = (key, self._compute_views())
        return dict(self._views_memo[1])

    def _compute_views(self) -> dict[str, NodeView]:
        outcomes = self.outcomes()
        gate = self.pending_gate()
        state = self.state_name
        nxt = self.next_node() if state not in ("completed", "failed", "ready") else None
        blocked = self.blocked_nodes()
        result: dict[str, NodeView] = {}
        for node_id, node in self.graph.nodes.items():
            outcome = outcomes.get(node_id)
            view = self._outcome_view(node, outcome, blocked)
            if gate is not None and gate.node_id == node_id:
                choices = ", ".join(choice_text(c) for c in gate.choices)
                view = NodeView(NodeState.WAITING, why=f"{gate.text} [{choices}]")
            elif node_id == nxt and view.state not in (NodeState.RETRYING, NodeState.BLOCKED):
                view = NodeView(NodeState.RUNNING, why="next to run")
            stale = self._stale.get(node_id)
            quiet = (NodeState.PENDING, NodeState.SUCCEEDED, NodeState.PARTIAL)
            if stale is not None and view.state in quiet:
                kind = StaleKind.BASELINE if view.state is NodeState.PENDING else StaleKind.RUN
                view = NodeView(NodeState.STALE, kind, stale.describe())
            result[node_id] = view
        return result

    def blocked_nodes(self) -> frozenset[str]:
        """Nodes the freshness extension holds back until their changed inputs are accepted."""
        if self._run is None:
            return frozenset()
        for ext in getattr(self._run, "extensions", ()):
            if getattr(ext, "name", "") == "freshness":
                return frozenset(getattr(ext, "blocked", ()))
        return frozenset()

    @staticmethod
    def _outcome_view(node: Node, outcome: Outcome | None, blocked: frozenset[str]) -> NodeView:
        if outcome is None:
            return NodeView()
        status = outcome.status
        if status is StageStatus.SUCCESS:
            return NodeView(NodeState.SUCCEEDED, why=outcome.notes or "success")
        if status is StageStatus.PARTIAL_SUCCESS:
            return NodeView(NodeState.PARTIAL, why=outcome.failure_reason or outcome.notes)
        if status in (StageStatus.FAIL, StageStatus.RETRY) and node.id in blocked:
            return NodeView(NodeState.BLOCKED, why=outcome.failure_reason)
        if status is StageStatus.FAIL:
            return NodeView(NodeState.FAILED, why=outcome.failure_reason or "failed")
        if status is StageStatus.SKIPPED:
            return NodeView(NodeState.SKIPPED, why=outcome.notes)
        if status is StageStatus.RETRY:
            return NodeView(NodeState.RETRYING, why=outcome.failure_reason or "retry requested")
        return NodeView(NodeState.WAITING, why=outcome.notes)

    def status_line(self) -> str:
        state = self.state_name
        gate = self.pending_gate()
        parts = [f"pipeline {self.name}: {state}"]
        if gate is not None:
            parts.append(f"waiting at {gate.node_id}")
        elif state not in ("completed", "failed"):
            nxt = self.next_node()
            if nxt:
                parts.append(f"next: {nxt}")
        parts.append(f"{len(self.outcomes())}/{len(self.graph.nodes)} nodes run")
        return " · ".join(parts)

    def status_text(self) -> str:
        """The node-state table (stable: no times, ids or paths)."""
        views = self.views()
        rows = [
            (node_id, self._state_word(view), _one_line(view.why, 90))
            for node_id, view in views.items()
        ]
        return self.status_line() + "\n" + state_table(rows)

    @staticmethod
    def _state_word(view: NodeView) -> str:
        if view.state is NodeState.STALE:
            return f"stale({view.stale.value})"
        return view.state.value

    def _waiting_text(self) -> str:
        gate = self.pending_gate()
        if gate is None:
            return "waiting"
        choices = "  ".join(choice_text(c) for c in gate.choices)
        return (
            f"waiting at {gate.node_id}: {gate.text}\n  choices: {choices}\n"
            f"  answer with: %pipeline resume {gate.node_id} --choice <key>"
        )

    def _step_line(self, result: Any) -> str:
        if not result.executed or result.outcome is None:
            line = f"step: nothing executed ({result.reason})"
        else:
            line = f"step: {result.node_id} -> {result.outcome.status.value}"
            if result.next_node:
                line += f"; next: {result.next_node}"
        if self.state_name == "waiting":
            line += "\n" + self._waiting_text()
        return line

    def _run_line(self, result: Any, steps: int) -> str:
        line = f"run: {steps} step(s); {self.state_name}"
        reason = getattr(result, "failure_reason", "")
        if reason:
            line += f": {_one_line(reason, 200)}"
        if self.state_name == "waiting":
            line += "\n" + self._waiting_text()
        return line

    def why(self, node_id: str) -> TextResult:
        """Why ``node_id`` is in its state: outcome, failure, stale files, waiting question."""
        node = self.require_node(node_id)
        view = self.views()[node_id]
        lines = [f"{node_id}: {self._state_word(view)}"]
        if view.why:
            lines.append(f"  {view.why}")
        outcome = self.outcomes().get(node_id)
        if outcome is not None:
            lines.append(f"  last outcome: {outcome.status.value}")
            if outcome.notes and outcome.notes != view.why:
                lines.append(f"  notes: {_one_line(outcome.notes, 200)}")
            if outcome.failure_reason and outcome.failure_reason != view.why:
                lines.append(f"  failure: {_one_line(outcome.failure_reason, 300)}")
        stale = self._stale.get(node_id)
        if stale is not None and stale.describe() != view.why:
            lines.append(f"  {stale.describe()}")
        if stale is not None and self._run is not None:
            from freshness_magic.hub.notebook import why_lines

            lines.extend(f"  {line}" for line in why_lines(self._run, node_id))
        if node.source_files:
            lines.append(f"  inputs: {', '.join(node.source_files)} (freshness={node.freshness})")
        if view.state is NodeState.PENDING and stale is None:
            lines.append("  not run yet; inputs unchanged")
        return TextResult("\n".join(lines))

    def evidence_records(self, node_id: str | None = None) -> list[dict[str, Any]]:
        """The valid records in the run's evidence log on disk, oldest first."""
        if self._run is None:
            return []
        log_path = Path(self._run.run_dir) / "evidence.jsonl"
        if self._evidence is None or self._evidence.path != log_path:
            self._evidence = EvidenceTail(log_path)
        records = self._evidence.read()
        return [r for r in records if node_id is None or r.get("nodeId") == node_id]

    def evidence(self, node_id: str | None = None) -> TextResult:
        if node_id is not None:
            self.require_node(node_id)
        records = self.evidence_records(node_id)
        if not records:
            where = f" for {node_id}" if node_id else ""
            return TextResult(f"no evidence records{where} yet", [])
        rows = [evidence_row(rec) for rec in records]
        table = [
            (
                row["node"],
                row["status"],
                row["method"],
                row["summary"] + (f"  [stale: {row['stale']}]" if row["stale"] else ""),
            )
            for row in rows
        ]
        widths = [max(len(h), *(len(r[i]) for r in table)) for i, h in enumerate(_EV_HEAD[:3])]
        lines = [
            "  ".join(f"{cell:<{widths[i]}}" for i, cell in enumerate(r[:3])) + "  " + r[3]
            for r in [_EV_HEAD, *table]
        ]
        header, lines = lines[0].rstrip(), lines[1:]
        return TextResult(header + "\n" + "\n".join(lines), records)


_EV_HEAD = ("node", "status", "method", "summary")


def choice_text(choice: Choice) -> str:
    """A gate choice as shown to people: ``[K] label`` (the key not repeated)."""
    label = choice.label or choice.target
    if choice.key and choice.key.lower() in label[:4].lower():
        return label
    return f"[{choice.key}] {label}" if choice.key else label


def _one_line(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def evidence_row(record: Mapping[str, Any]) -> dict[str, str]:
    """The panel's columns for one record: time, node, status, method, stale, summary, duration."""
    found = record.get("outcome")
    outcome: dict[str, Any] = found if isinstance(found, dict) else {}
    facts = outcome.get("engine")
    engine: dict[str, Any] = facts if isinstance(facts, dict) else {}
    status = engine.get("status") or outcome.get("status") or ""
    method = engine.get("evidence_method") or record.get("type") or ""
    stale = engine.get("stale_files") or []
    if isinstance(stale, list):
        stale_text = ", ".join(
            str(s.get("path", s)) if isinstance(s, dict) else str(s) for s in stale
        )
    else:
        stale_text = str(stale)
    seconds = engine.get("duration_seconds")
    duration = f"{float(seconds) * 1000:.0f} ms" if isinstance(seconds, int | float) else ""
    return {
        "time": str(record.get("timestamp", "")),
        "node": str(record.get("nodeId", "")),
        "status": str(status),
        "method": str(method),
        "stale": stale_text,
        "summary": _one_line(str(record.get("summary", "")), 120),
        "duration": duration,
    }
