"""What the notebook says about one node or one condition: ``why``, node details, ``cond``.

Built from the pipeline's published views and its run at a step boundary; the text itself
comes from :mod:`~freshness_magic.views.text`, and ``why`` from :mod:`freshness_magic.views.why`
(which the command line's ``why`` shares).
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from freshness_magic.engine.context import partial_key
from freshness_magic.engine.fidelity import key_set_prefix
from freshness_magic.engine.handlers.parallel import kept_branch_ids
from freshness_magic.engine.outcome import StageStatus
from freshness_magic.engine.state import RunState
from freshness_magic.engine.trace import NO_VALUE, Trace
from freshness_magic.engine.visible import visible
from freshness_magic.freshness.attrs import source_files
from freshness_magic.freshness.extension import missing_inputs
from freshness_magic.views import text, why
from freshness_magic.views.state import CELL_OUTPUT_FILE, BannerKind, RunBanner
from freshness_magic.views.why import NodeFacts

if TYPE_CHECKING:
    from freshness_magic.views.pipeline_view import PipelineView


@dataclass(frozen=True)
class NodeDetails:
    """What the details panel of one node shows (all plain text; the view escapes it)."""

    node_id: str
    state: str
    why: str
    attrs: dict[str, str]
    failure_reason: str
    notes: str
    output: str
    """The node's streamed output so far, else what its ``%%node`` cell printed."""
    retries: int


def hub_symbol_lines(run: Any, node_id: str) -> list[str]:
    """Symbol-level lines (``src/auth.py: login() signature changed``) for a stale node.

    Uses the node's effective freshness view (since it ran, else since its baseline) and the
    hub's change log after that snapshot's time; empty when no hub runs or nothing applies.
    """
    from freshness_magic.hub.integration import report_symbol_lines

    for ext in getattr(run, "extensions", ()):
        if getattr(ext, "name", "") == "freshness" and callable(getattr(ext, "report", None)):
            lines = report_symbol_lines(ext.report(run), [node_id])
            return [line.split(": ", 1)[1] for line in lines]
    return []


NODE_FILES = (
    ("prompt", "prompt.md"),
    ("response", "response.md"),
    ("stdout", "stdout.txt"),
    ("stderr", "stderr.txt"),
)
"""Files of a node's folder the details panel shows (their tails)."""
FILE_TAIL_BYTES = 4000


def _tail(path: Path) -> str:
    """The last ``FILE_TAIL_BYTES`` of a text file ('' when missing), never the whole file."""
    try:
        with path.open("rb") as handle:
            handle.seek(0, 2)
            size = handle.tell()
            handle.seek(max(size - FILE_TAIL_BYTES, 0))
            text = handle.read().decode("utf-8", "replace")
    except OSError:
        return ""
    return visible(text if size <= FILE_TAIL_BYTES else "…" + text)


def node_details(pipeline: PipelineView, node_id: str) -> NodeDetails:
    """The details of ``node_id`` from the last published views and the run folder on disk."""
    node = pipeline.require_node(node_id)
    view = pipeline.views()[node_id]
    outcome = pipeline.outcomes().get(node_id)
    output = pipeline.model.outputs.get(node_id, "")
    run = pipeline.live_run
    if not output and run is not None:
        path = Path(run.run_dir) / "nodes" / node_id / CELL_OUTPUT_FILE
        try:
            output = visible(path.read_text(encoding="utf-8"))
        except OSError:
            output = ""
    retries = run.node_retries.get(node_id, 0) if run is not None else 0
    return NodeDetails(
        node_id=node_id,
        state=text.state_word(view),
        why=view.why,
        attrs=dict(node.attrs),
        failure_reason=outcome.failure_reason if outcome is not None else "",
        notes=outcome.notes if outcome is not None else "",
        output=output,
        retries=retries,
    )


def details_dict(pipeline: PipelineView, node_id: str) -> dict[str, Any]:
    """What the widget's details panel shows for a node, as plain JSON-able values."""
    found = node_details(pipeline, node_id)
    data: dict[str, Any] = {"state": found.state, "why": found.why}
    for key in ("failure_reason", "notes", "output"):
        value = getattr(found, key)
        if value:
            data[key] = value
    if found.retries:
        data["retries"] = found.retries
    run = pipeline.live_run
    stale = pipeline.stale.get(node_id)
    if stale is not None:
        listed = [f"{f.path} ({f.label})" for f in stale.files]
        run_dir = run.run_dir if run is not None else "RUN_DIR"
        where = f"all of them: freshness-magic check {shlex.quote(str(run_dir))}"
        data["stale_files"] = text.first_items(listed, where)
    if run is not None:
        folder = Path(run.run_dir) / "nodes" / node_id
        for key, name in NODE_FILES:
            tail = _tail(folder / name)
            if tail:
                data[key] = tail
        if "output" in data and data["output"] in (data.get("response"), data.get("stdout")):
            del data["output"]  # the streamed output is the response (or stdout) shown below
    if run is not None:
        data.update(execution_lines(run.traces, node_id))
    records = pipeline.evidence_records(node_id)
    if records:
        rows = [text.evidence_row(r) for r in records[-3:]][::-1]
        data["evidence"] = [{k: v for k, v in row.items() if v} for row in rows]  # no empty fields
    data["attributes"] = found.attrs
    return data


def execution_lines(traces: Sequence[Trace], node_id: str) -> dict[str, Any]:
    """What the latest execution of ``node_id`` read and wrote, for the details panel:
    ``execution`` (its step), ``read`` (``key = value, from NODE (step N)``) and ``wrote``
    (``key = value``); a value too long to keep shows its fingerprint. Empty when it has not
    run."""
    mine = [t for t in traces if t.node_id == node_id and t.step is not None]
    if not mine:
        return {}
    trace = mine[-1]
    names = {t.step: t.node_id for t in traces}

    def shown(value: Any, fingerprint: str) -> str:
        return f"(fingerprint {fingerprint[:12]})" if value is NO_VALUE else repr(value)

    read = []
    if trace.reads_unknown:
        read.append("(its worker did not report what it read: these are the values it was sent)")
    for r in trace.reads:
        if key_set_prefix(r.key) is not None:  # which keys were set, not a value
            found = r.value if isinstance(r.value, list) else None
            listed = ", ".join(map(str, found)) if found else "none"
            if found is None:
                listed = shown(r.value, r.fingerprint)
            read.append(f"which {r.key} keys were set (its fidelity carries them): {listed}")
            continue
        key = f"{r.key}[{r.part}]" if r.part is not None else r.key
        if r.writer is None:
            origin = "set by the run"
        elif r.writer_run is not None:
            origin = f"from run {r.writer_run} (step {r.writer})"
        else:
            origin = f"from {names.get(r.writer, '?')} (step {r.writer})"
        read.append(f"{key} = {shown(r.value, r.fingerprint)}, {origin}")
    if trace.truncated:
        read.append(f"... and {trace.truncated} more reads not kept")
    wrote = [f"{k} = {shown(w.value, w.fingerprint)}" for k, w in trace.writes.items()]
    data: dict[str, Any] = {"execution": f"step {trace.step} ({trace.status})"}
    data["read"] = read or ["nothing from the context"]
    data["wrote"] = wrote
    return data


def banner(pipeline: PipelineView) -> RunBanner | None:
    """The run-level message for the view (failed, dead end, interrupted, superseded) or None."""
    kinds, make = BannerKind, RunBanner
    model = pipeline.model
    if pipeline.superseded:
        return make(kinds.SUPERSEDED, f"this view was replaced by a newer load of {pipeline.name}")
    offer = pipeline.resume_offer
    if offer is not None and not pipeline.has_run:
        return make(
            kinds.KEEP_RUN if offer.edited else kinds.RESUME,
            offer.headline(pipeline.name),
            offer.where or "",
            way=offer.way,
            holds=not offer.left,
        )
    if model.dead_end is not None and model.snapshot.state in (RunState.COMPLETED, RunState.FAILED):
        node = str(model.dead_end.get("node", ""))
        return make(kinds.DEAD_END, text.dead_end_text(model.dead_end), node)
    if model.snapshot.state is RunState.FAILED:
        failed = [n for n, o in model.snapshot.outcomes.items() if o.status is StageStatus.FAIL]
        node = failed[-1] if failed else ""
        return make(kinds.FAILED, pipeline.failure_text() or "the run failed", node)
    interrupted = [n for n in model.interrupted if n == model.snapshot.next_node]
    if interrupted:
        node = interrupted[0]
        return make(kinds.INTERRUPTED, f"{node} was interrupted; run or step goes on from it", node)
    return None


def why_facts(pipeline: PipelineView, node_id: str) -> NodeFacts:
    """What ``why`` says about ``node_id``, from the pipeline's published views and its run."""
    node = pipeline.require_node(node_id)
    views = pipeline.views()
    gate = pipeline.pending_gate()
    stale = pipeline.stale.get(node_id)
    run = pipeline.live_run
    symbols: list[str] = []
    if stale is not None and run is not None:
        symbols = hub_symbol_lines(run, node_id)
    snapshot = pipeline.model.snapshot
    going_on = snapshot.next_node if snapshot.state is RunState.PAUSED else None
    return NodeFacts(
        graph=pipeline.graph,
        node=node,
        views=views,
        outcome=pipeline.outcomes().get(node_id),
        route=pipeline.model.routes.get(node_id),
        stale=stale,
        symbols=symbols,
        missing=missing_inputs(run, node_id) if run is not None and source_files(node) else [],
        output=node_details(pipeline, node_id).output,
        gate=gate,
        gate_upstream=pipeline.stale_upstream(gate.node_id) if gate else ((), 0),
        blocked=pipeline.blocked_nodes(),
        failed=snapshot.state is RunState.FAILED and run is not None and run.failed_node == node_id,
        paused_at=snapshot.state is RunState.PAUSED and snapshot.next_node == node_id,
        resumes_at=going_on,
        kept=kept_branch_ids(run.context.get(partial_key(going_on))) if run and going_on else (),
        superseded=pipeline.superseded,
    )


def why_text(pipeline: PipelineView, node_id: str, commands: why.Commands = why.NOTEBOOK) -> str:
    """Why ``node_id`` is in its state: outcome, failure, stale files, waiting question, output,
    and what to do next in ``commands``' words (default: the magics';
    :mod:`freshness_magic.views.why`)."""
    return why.why_text(why_facts(pipeline, node_id), commands)
