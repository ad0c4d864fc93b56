"""What the notebook says about one node or one condition: ``why``, node details, ``cond``.

Built from the pipeline's published views and its run at a step boundary; the text itself
comes from :mod:`~freshness_magic.notebook.text`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from freshness_magic.engine.condition_explain import ConditionExplanation, explain_condition
from freshness_magic.engine.edges import select_edge
from freshness_magic.engine.model import Graph
from freshness_magic.engine.outcome import Outcome, StageStatus
from freshness_magic.engine.state import RunState
from freshness_magic.freshness.attrs import freshness_mode
from freshness_magic.freshness.extension import missing_inputs
from freshness_magic.notebook import text
from freshness_magic.notebook.cells import CELL_OUTPUT_FILE
from freshness_magic.notebook.render import NodeState, StaleKind, inputs_text
from freshness_magic.notebook.viewstate import BannerKind, RunBanner

if TYPE_CHECKING:
    from freshness_magic.notebook.readout import PipelineReadout


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
    return text if size <= FILE_TAIL_BYTES else "…" + text


def node_details(pipeline: PipelineReadout, node_id: str) -> NodeDetails:
    """The details of ``node_id`` from the last published views and the run folder on disk."""
    node = pipeline.require_node(node_id)
    view = pipeline.views()[node_id]
    outcome = pipeline.outcomes().get(node_id)
    output = pipeline.model.outputs.get(node_id, "")
    run = pipeline.live_run
    if not output and run is not None:
        path = Path(run.run_dir) / "nodes" / node_id / CELL_OUTPUT_FILE
        try:
            output = path.read_text(encoding="utf-8")
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


def details_dict(pipeline: PipelineReadout, node_id: str) -> dict[str, Any]:
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
        where = f"all of them: freshness-magic check {run_dir}"
        data["stale_files"] = text.first_items(listed, where)
    if run is not None:
        folder = Path(run.run_dir) / "nodes" / node_id
        for key, name in NODE_FILES:
            tail = _tail(folder / name)
            if tail:
                data[key] = tail
        if "output" in data and data["output"] in (data.get("response"), data.get("stdout")):
            del data["output"]  # the streamed output is the response (or stdout) shown below
    records = pipeline.evidence_records(node_id)
    if records:
        rows = [text.evidence_row(r) for r in records[-3:]][::-1]
        data["evidence"] = [{k: v for k, v in row.items() if v} for row in rows]  # no empty fields
    data["attributes"] = found.attrs
    return data


def banner(pipeline: PipelineReadout) -> RunBanner | None:
    """The run-level message for the view (failed, dead end, interrupted, superseded) or None."""
    kinds, make = BannerKind, RunBanner
    model = pipeline.model
    if pipeline.superseded:
        return make(kinds.SUPERSEDED, f"this view was replaced by a newer load of {pipeline.name}")
    offer = pipeline.resume_offer
    if offer is not None and not pipeline.has_run:
        return make(kinds.RESUME, offer.headline(pipeline.name), offer.where or "", way=offer.way)
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


def why_text(pipeline: PipelineReadout, node_id: str) -> str:
    """Why ``node_id`` is in its state: outcome, failure, stale files, waiting question, output."""
    node = pipeline.require_node(node_id)
    view = pipeline.views()[node_id]
    word = text.state_word(view)
    lines = [f"{node_id}: {word}"]
    if why := text.reason(view):
        lines.append(f"  {why}")
    outcome = pipeline.outcomes().get(node_id)
    if outcome is not None:
        again = view.state in (NodeState.WAITING, NodeState.NEXT, NodeState.RUNNING)
        label = "outcome of its last visit" if again else "last outcome"  # it is being run again
        lines.append(f"  {label}: {outcome.status.value}")
        if outcome.notes and outcome.notes != view.why:
            lines.append(f"  notes: {text.one_line(outcome.notes, 200)}")
        if outcome.failure_reason and outcome.failure_reason != view.why:
            lines.append(f"  failure: {text.one_line(outcome.failure_reason, 300)}")
    route = pipeline.model.routes.get(node_id)
    if route is not None and view.state is NodeState.FAILED:  # the run went on past it
        lines.append(f"  then the run went on to {route[0]}: {route[1]}")
    stale = pipeline.stale.get(node_id)
    if stale is not None and stale.describe() != view.why:
        lines.append(f"  {stale.describe()}")
    run = pipeline.live_run
    if stale is not None and run is not None:
        from freshness_magic.notebook.hubcmd import why_lines

        lines.extend(text.indented(why_lines(run, node_id)))
    if inputs := inputs_text(node):
        lines.append(f"  {inputs}")
        if run is not None and (missing := missing_inputs(run, node_id)):
            lines.append(
                f"  missing: {', '.join(missing)}; freshness tracks nothing there, so it counts "
                "as unchanged (fix the path in source_files, or create the file)"
            )
    output = node_details(pipeline, node_id).output
    if output:
        lines.append(f"  output: {text.one_line(output, 200)}")
    if view.state is NodeState.PENDING and stale is None:
        lines.append("  not run yet; inputs unchanged")
    return "\n".join([*lines, *text.indented(next_action(pipeline, node_id))])


def next_action(pipeline: PipelineReadout, node_id: str) -> list[str]:
    """What ``why`` ends with: the lines that answer a waiting gate (with a note on changed
    inputs upstream of it), or what ``%pipeline accept`` does for a stale node (and, for one
    that ran, that ``retry`` runs it again). A node held back by ``freshness=block`` says that
    already (its notes), so nothing is added there."""
    if pipeline.superseded:
        return []  # its actions are refused: the newer load's why says what to do
    gate = pipeline.pending_gate()
    if gate is not None and gate.node_id == node_id:
        default = next((c for c in gate.choices if c.target == gate.default), None)
        head = "answer with one of"
        if default is not None:
            head += f" (without --choice: the default, {text.choice_text(default)})"
        note = pipeline.gate_note()
        return [*([note] if note else []), f"{head}:", *text.indented(text.answer_lines(gate))]
    view = pipeline.views()[node_id]
    upstream = view.details.get("upstream") if view.state is NodeState.OUTDATED else None
    if upstream is not None:
        return [
            f"next: %pipeline accept {upstream} clears this mark without running anything again"
        ]
    stale = pipeline.stale.get(node_id)
    if stale is None or node_id in pipeline.blocked_nodes():
        return []
    mode = freshness_mode(pipeline.graph.nodes[node_id])
    accept = f"next: %pipeline accept {node_id} takes its current inputs as its new baseline"
    if stale.kind is StaleKind.BASELINE:
        effect = {
            "block": "without that, freshness=block holds it back when the run reaches it, "
            "until accepted or the files are restored",
            "warn": "without that, it runs anyway with a warning (freshness=warn)",
        }.get(mode, "it runs on the current files either way (freshness=ignore)")
        return [f"{accept} (it is no longer stale); {effect}"]
    after = sum(1 for v in pipeline.views().values() if v.details.get("upstream") == node_id)
    cleared = "it is no longer stale"
    if after:
        cleared += f", nor the {after} node{'s' if after > 1 else ''} after it shown outdated"
    line = f"{accept} without running it again ({cleared})"
    if mode == "block":
        line += (
            "; without that, freshness=block holds it back if the run reaches it again, "
            "until accepted or the files are restored"
        )
    elif mode == "warn":
        line += "; if the run reaches it again, it runs anyway with a warning (freshness=warn)"
    lines = [line]
    if pipeline.pending_gate() is None:  # a waiting gate is answered first
        first = f"%pipeline accept {node_id}, then " if mode == "block" else ""
        lines.append(
            f"or: {first}%pipeline retry {node_id} runs it again on the current files, and the "
            "run goes on from it"
        )
    return lines


def explain_condition_live(
    pipeline: PipelineReadout, expr: str, from_node: str | None
) -> tuple[str, ConditionExplanation]:
    """Explain ``expr`` against the run's context and (with a node) the edge that would be taken.

    The outcome used is the last outcome of ``from_node`` (or of the last executed node).
    """
    run = pipeline.live_run
    context: dict[str, Any] = dict(run.context) if run is not None else {}
    outcomes = pipeline.outcomes()
    outcome: Outcome | None = None
    if from_node is not None:
        outcome = outcomes.get(from_node)
    elif outcomes:
        outcome = list(outcomes.values())[-1]
    if outcome is None:
        outcome = Outcome(StageStatus.SUCCESS)
    explanation = explain_condition(
        expr, outcome=outcome.status.value, preferred_label=outcome.preferred_label, context=context
    )
    edge = None
    if from_node is not None:
        selection = select_edge(pipeline.graph, from_node, outcome, context)
        target = selection.edge.target if selection.edge is not None else "(none)"
        edge = f"edge from {from_node}: -> {target} ({selection.reason})"
    answer = text.condition_text(
        expr,
        explanation,
        outcome=outcome.status.value,
        preferred_label=outcome.preferred_label,
        edge=edge,
        checks=condition_checks(pipeline.graph, expr),
    )
    return answer, explanation


def condition_checks(graph: Graph, expr: str) -> list[str]:
    """What ``validate`` warns about ``expr`` as an edge condition of ``graph`` (a key that
    looks like a typo of ``outcome``, ``'succes' is not an outcome status``), each with its fix:
    the validator's own findings, so the playground and ``validate`` never disagree."""
    from freshness_magic.engine.validation.flow import condition_findings

    return [f"{f.message} (fix: {f.fix})" for f in condition_findings(graph, expr)]
