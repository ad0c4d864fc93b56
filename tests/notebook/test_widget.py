"""The widget at model level: what it syncs per step, the actions its messages trigger, the
replies (details, evidence, playground), the static fallback and escaping."""

from __future__ import annotations

import json
import random
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from IPython.core.interactiveshell import InteractiveShell

from freshness_magic.notebook.pipeline import Pipeline
from freshness_magic.notebook.widget import PipelineWidget
from freshness_magic.views.evidence_log import evidence_detail
from freshness_magic.views.render import NodeState, node_groups
from freshness_magic.views.state import STATE_CODES
from freshness_magic.views.wire import ActiveTime, active_seconds
from tests.notebook.conftest import load_review
from tests.pipelines import fan_out, one_step, one_tool, rework_loop
from tests.waiting import wait_until

STATE_OF_CODE = {code: state.value for state, code in STATE_CODES.items()} | {"T": "stale"}


def states(widget: PipelineWidget) -> dict[str, str]:
    """Each node's state as the page receives it (one character per node, layout order)."""
    return {
        node: STATE_OF_CODE[code]
        for node, code in zip(widget.graph["nodes"], widget.states, strict=True)
    }


class Replies:
    """The custom messages the widget sends to the page (its comm's ``send``)."""

    def __init__(self, widget: PipelineWidget) -> None:
        self.sent: list[dict[str, Any]] = []
        widget.send = self.sent.append  # type: ignore[method-assign]

    def last(self, kind: str) -> dict[str, Any]:
        found = [m for m in self.sent if m.get("reply") == kind]
        assert found, f"no {kind!r} reply in {self.sent}"
        return found[-1]


def test_graph_sent_once_and_states_per_step(shell: InteractiveShell, workdir: Path):
    pipeline: Pipeline = load_review(shell, workdir)
    widget = pipeline.widget
    svg = widget.graph["svg"]
    assert [g.get("data-node") for g in node_groups(svg)] == list(pipeline.graph.nodes)
    assert widget.graph["nodes"] == list(pipeline.graph.nodes)
    assert states(widget) == {"start": "next"} | dict.fromkeys(
        list(pipeline.graph.nodes)[1:], "pending"
    )
    expected = [
        {"start": "succeeded", "lint": "next", "draft": "pending"},
        {"start": "succeeded", "lint": "succeeded", "draft": "next"},
        {"lint": "succeeded", "draft": "succeeded", "approve": "next"},
        {"draft": "succeeded", "approve": "waiting", "done": "pending"},
    ]
    misses = pipeline.layout_cache.misses
    for want in expected:
        widget.update_stats.clear()
        widget.handle({"action": "step"})
        got = states(widget)
        assert {k: got[k] for k in want} == want
        assert widget.graph["svg"] == svg
        assert all(size < 2000 for _, size in widget.update_stats), widget.update_stats
    assert pipeline.layout_cache.misses == misses
    assert widget.errors == []


def test_run_line_and_progress_follow_the_run(shell: InteractiveShell, workdir: Path):
    pipeline = load_review(shell, workdir)
    widget = pipeline.widget
    assert widget.run["state"] == "ready" and widget.run["done"] == 0
    assert widget.run["backend"] == "simulated"
    widget.handle({"action": "run_to", "node": "draft"})
    assert widget.run["state"] == "paused" and "next: draft" in widget.run["line"]
    assert widget.run["done"] == 2
    widget.handle({"action": "run"})
    assert widget.run["state"] == "waiting" and widget.run["done"] == 3


def test_gate_value_and_answer_routes(shell: InteractiveShell, workdir: Path):
    pipeline = load_review(shell, workdir)
    widget = pipeline.widget
    assert widget.gate == {}
    widget.handle({"action": "run"})
    gate = widget.gate
    assert gate["node"] == "approve" and gate["question"] == "Ship it?"
    assert [c["text"] for c in gate["choices"]] == ["[Y] Yes", "[N] No, redo"]
    assert [c["target"] for c in gate["choices"]] == ["done", "draft"]
    assert "draft" in gate["approving"]["title"]
    widget.handle({"action": "answer", "node": "approve", "choice": "N", "comment": ""})
    assert pipeline.view.state_name == "waiting"
    assert pipeline.view.outcomes()["approve"].preferred_label == "[N] No, redo"
    widget.handle({"action": "answer", "node": "approve", "choice": "Y", "comment": ""})
    assert pipeline.view.state_name == "completed"
    assert widget.gate == {}
    assert states(widget)["done"] == "succeeded"


def test_a_gate_comment_from_the_view_reaches_the_context(
    shell: InteractiveShell, workdir: Path
) -> None:
    pipeline = load_review(shell, workdir)
    widget = pipeline.widget
    widget.handle({"action": "run"})
    widget.handle({"action": "answer", "node": "approve", "choice": "Y", "comment": "ok by me"})
    assert pipeline.view.state_name == "completed"
    assert pipeline.current_run.context.get("human.gate.comment") == "ok by me"


def test_action_errors_are_replied_not_raised(shell: InteractiveShell, workdir: Path):
    pipeline = load_review(shell, workdir)
    widget = pipeline.widget
    replies = Replies(widget)
    widget._on_msg(widget, {"action": "answer", "node": "approve", "choice": "Y"}, [])
    assert "gate 'approve' is not waiting" in replies.last("error")["text"]
    widget._on_msg(widget, {"action": "details", "node": "nope"}, [])
    assert "no node 'nope'" in replies.last("error")["text"]
    widget._on_msg(widget, {"action": "fly"}, [])
    assert "unknown action 'fly'" in replies.last("error")["text"]
    assert len(widget.errors) == 3


def test_details_on_request(shell: InteractiveShell, workdir: Path):
    pipeline = load_review(shell, workdir)
    widget = pipeline.widget
    replies = Replies(widget)
    widget.handle({"action": "run_to", "node": "draft"})
    widget.handle({"action": "details", "node": "lint"})
    data = replies.last("details")["data"]
    assert replies.last("details")["node"] == "lint"
    assert data["state"] == "succeeded"
    assert data["attributes"]["tool_command"] == "true"
    assert data["evidence"][0]["method"] == "external_effect"
    assert "stale" not in data["evidence"][0]  # no empty field: its inputs were fresh


def test_evidence_rows_newest_first_bounded_and_expandable(shell: InteractiveShell, workdir: Path):
    pipeline = load_review(shell, workdir)
    widget = pipeline.widget
    replies = Replies(widget)
    assert widget.evidence == {"total": 0, "rows": []}
    for _ in range(3):
        widget.handle({"action": "step"})
    log = [
        json.loads(x)
        for x in (pipeline.current_run.run_dir / "evidence.jsonl").read_text().splitlines()
    ]
    rows = widget.evidence["rows"]
    assert (
        [r[2] for r in rows] == [r["nodeId"] for r in reversed(log)] == ["draft", "lint", "start"]
    )
    assert [r[0] for r in rows] == [2, 1, 0]
    widget.handle({"action": "evidence_detail", "seq": 1})
    record = replies.last("evidence_detail")
    assert record["seq"] == 1 and "tool node 'lint' success" in record["record"]["summary"]
    assert record["record"]["method"] == "external_effect"
    widget.handle({"action": "evidence_detail", "seq": 7})  # the log changed under the page
    missing = replies.last("evidence_detail")
    assert missing["seq"] == 7 and missing["record"] is None
    assert "record 7 is not in this run's evidence log (3 records)" in missing["note"]
    widget.handle({"action": "evidence_all"})
    assert [r[2] for r in replies.last("evidence_all")["rows"]] == ["draft", "lint", "start"]


def test_evidence_panel_sends_only_the_newest_rows(shell: InteractiveShell, workdir: Path):
    pipeline = load_review(shell, workdir)
    widget = pipeline.widget
    widget.handle({"action": "run"})
    for _ in range(4):
        widget.handle({"action": "answer", "node": "approve", "choice": "N", "comment": ""})
    assert widget.evidence["total"] > 8
    assert len(widget.evidence["rows"]) == 8


def test_playground_replies_text_edge_and_keys(shell: InteractiveShell, workdir: Path):
    pipeline = load_review(shell, workdir)
    widget = pipeline.widget
    replies = Replies(widget)
    widget.handle({"action": "step"})
    widget.handle({"action": "playground", "expr": "outcome=success && context.x=1", "node": None})
    reply = replies.last("playground")
    assert "result: false" in reply["text"] and "held" in reply["text"]
    assert reply["edge"] == {"source": "start", "target": "lint", "index": 0}
    assert ["outcome", ""] in reply["keys"]
    assert any(key.startswith("context.") for key, _ in reply["keys"])
    widget.handle({"action": "playground", "expr": "outcome == success", "node": "approve"})
    reply = replies.last("playground")
    assert "syntax error at column" in reply["text"]
    assert reply["edge"]["source"] == "approve"
    assert widget.errors == []


def test_the_widget_serialises_the_frame_the_pipeline_pushes(
    shell: InteractiveShell, workdir: Path
) -> None:
    """At every step boundary the pipeline pushes one frame; the widget shows that frame (the
    same object), not what it could read back from the pipeline object."""
    pipeline = load_review(shell, workdir)
    widget = pipeline.widget
    pushed: list[Any] = []
    pipeline.subscribe_frames(pushed.append)
    shell.run_line_magic("pipeline", "run")
    assert pushed and widget.frame is pushed[-1]
    frame = pushed[-1]
    assert frame.gate is not None and frame.gate.node_id == "approve"
    assert widget.gate["node"] == "approve" and widget.gate["visit"] == frame.gate_visit == 1
    assert widget.run["line"] == frame.status_line
    assert states(widget)["approve"] == frame.views["approve"].state.value == "waiting"
    assert widget.evidence["total"] == len(frame.evidence) == 4  # the gate waiting has one


def test_playground_and_cond_give_one_explanation_with_the_same_warnings(
    shell: InteractiveShell, workdir: Path
) -> None:
    """The playground warns of a key that looks like a typo of ``outcome`` as ``cond`` does,
    with the same text; both read the live context the same way."""
    pipeline = load_review(shell, workdir)
    widget = pipeline.widget
    replies = Replies(widget)
    widget.handle({"action": "step"})
    widget.handle({"action": "playground", "expr": "outcom=success", "node": "start"})
    played = replies.last("playground")["text"]
    said = shell.run_line_magic("pipeline", 'cond "outcom=success" --from start').text
    assert played.splitlines()[:2] == ["in the context after start ran (step 1)", "result: false"]
    assert "warning: key `outcom` looks like a typo of `outcome`" in played
    assert "(fix: write `outcome` instead of `outcom`)" in played
    assert played == said
    assert widget.errors == []


def test_playground_after_completion_names_no_edge_from_the_exit(
    shell: InteractiveShell, workdir: Path
) -> None:
    """Once the run completed, the last node executed is the exit: no edge leaves it, so the
    playground's answer names none (it used to end every answer with ``-> (none)``)."""
    pipeline = load_review(shell, workdir)
    widget = pipeline.widget
    replies = Replies(widget)
    shell.run_line_magic("pipeline", "run")
    shell.run_line_magic("pipeline", "resume approve --choice Y")
    assert pipeline.view.state_name == "completed"
    widget.handle({"action": "playground", "expr": "outcome=success", "node": None})
    reply = replies.last("playground")
    assert reply["text"].splitlines()[0] == "result: true"
    assert "edge from" not in reply["text"] and "(none)" not in reply["text"]
    assert reply["edge"] is None
    said = shell.run_line_magic("pipeline", 'cond "outcome=success" --from done').text
    assert "edge from" not in said
    widget.handle({"action": "playground", "expr": "outcome=success", "node": "approve"})
    assert "edge from approve: -> done" in replies.last("playground")["text"]


XSS_DOT = """digraph xss {
  start [shape=Mdiamond, label="<img src=x onerror=alert(1)>"]
  gate  [shape=hexagon, label="<script>alert(2)</script>"]
  done  [shape=Msquare, label="\\"><svg onload=alert(3)>"]
  start -> gate
  gate -> done [label="[Y] <b onmouseover=alert(4)>yes</b>"]
}
"""


def test_pipeline_text_is_escaped_in_the_svg_and_static_html(
    shell: InteractiveShell, workdir: Path
):
    pipeline = shell.run_cell_magic("pipeline", f"xss --workdir {workdir}", XSS_DOT)
    widget = pipeline.widget
    widget.handle({"action": "run"})
    assert pipeline.view.state_name == "waiting"
    for value in (widget.graph["svg"], widget.static_html()):
        assert "<img" not in value and "<script" not in value
        assert "<svg onload" not in value and "<b onmouseover" not in value
    assert "&lt;img src=x onerror=alert(1)&gt;" in widget.graph["svg"]
    assert widget.gate["question"] == "<script>alert(2)</script>"  # the page sets it as text


def test_static_html_carries_the_states(shell: InteractiveShell, workdir: Path):
    pipeline = load_review(shell, workdir)
    widget = pipeline.widget
    widget.handle({"action": "run"})
    bundle = pipeline._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle
    html = bundle["text/html"]
    assert html == widget.static_html()
    groups = {
        g.get("data-node"): g for g in node_groups(html[html.index("<svg") :].split("</div>")[0])
    }
    assert groups["approve"].get("data-state") == "waiting"
    assert groups["lint"].get("data-state") == "succeeded"
    shape = next(p for p in groups["lint"] if p.tag.endswith("polygon"))
    assert shape.get("fill") == "#c8e6c9"
    assert "fm-node>" not in html.split("<svg")[0]  # no rule that paints every node one colour
    legend = html.split('<div class="fm-legend">')[1]
    assert 'data-state="waiting"' in legend and 'data-state="blocked"' in legend
    assert 'data-state="partial"' in legend  # freshness=block retries can end partial


def test_superseded_view_refuses_actions(shell: InteractiveShell, workdir: Path):
    pipeline = load_review(shell, workdir)
    widget = pipeline.widget
    replies = Replies(widget)
    widget.supersede("a newer %%pipeline review replaced this one")
    widget._on_msg(widget, {"action": "step"}, [])
    assert "no longer drives a run" in replies.last("error")["text"]
    assert pipeline.view.state_name == "ready"


def test_accept_and_reset(shell: InteractiveShell, workdir: Path):
    pipeline = load_review(shell, workdir)
    widget = pipeline.widget
    widget.handle({"action": "run_to", "node": "approve"})
    (workdir / "src" / "login.py").write_text("changed = True\n")
    shell.run_cell("x = 1")
    assert states(widget)["lint"] == "stale"
    assert widget.states[widget.graph["nodes"].index("lint")] == "T"  # stale since it ran
    assert "src/login.py (modified)" in widget.notes["lint"]
    widget.handle({"action": "accept", "node": "lint"})
    assert states(widget)["lint"] == "succeeded"
    first_dir = pipeline.current_run.run_dir
    widget.handle({"action": "reset"})
    assert pipeline.current_run.run_dir != first_dir
    assert states(widget)["start"] == "next"
    assert {s for n, s in states(widget).items() if n != "start"} == {"pending"}
    assert widget.evidence["total"] == 0
    assert widget.errors == []


def test_accept_on_an_outdated_node_accepts_the_changed_nodes_upstream_that_make_it_so(
    shell: InteractiveShell, workdir: Path
):
    """The details panel's Accept on an outdated node accepted that node's own inputs, which
    had not changed: "no changed files", and the mark stayed."""
    pipeline = load_review(shell, workdir)
    widget = pipeline.widget
    widget.handle({"action": "run_to", "node": "approve"})
    (workdir / "src" / "login.py").write_text("changed = True\n")
    shell.run_cell("x = 1")
    assert states(widget)["draft"] == "outdated"
    widget.handle({"action": "accept", "node": "draft"})
    assert states(widget)["lint"] == "succeeded" and states(widget)["draft"] == "succeeded"
    assert widget.errors == []
    assert (
        pipeline.accept_here("draft").text == "accepted current inputs of draft: no changed files"
    )


def test_node_cell_changes_the_layout_once(shell: InteractiveShell, workdir: Path):
    pipeline = load_review(shell, workdir)
    widget = pipeline.widget
    before = widget.graph["svg"]
    assert "type: codergen" in before
    shell.run_cell_magic("node", "draft", "pass\n")
    after = widget.graph["svg"]
    assert after != before and "type: notebook.cell" in after
    widget.handle({"action": "step"})
    assert widget.graph["svg"] == after


def test_background_action_keeps_the_kernel_free_and_refuses_a_second_one(
    shell: InteractiveShell, workdir: Path
):
    from IPython.core.error import UsageError

    dot = one_step("label=Work", name="slow")
    pipeline = shell.run_cell_magic("pipeline", f"slow --workdir {workdir}", dot)
    entered, release = threading.Event(), threading.Event()
    shell.user_ns.update(entered=entered, release=release)
    shell.run_cell_magic("node", "work", "entered.set()\nassert release.wait(30)\n")
    widget = pipeline.widget
    replies = Replies(widget)
    widget.background = True
    widget.handle({"action": "run"})
    assert entered.wait(30)
    assert widget.busy
    wait_until(lambda: widget.run["running"] == "work", "the view to show `work` running")
    with pytest.raises(UsageError, match="busy"):
        shell.run_line_magic("pipeline", "step")
    widget._on_msg(widget, {"action": "step"}, [])
    assert "still running" in replies.last("error")["text"]
    release.set()
    widget.wait(30)
    assert pipeline.view.state_name == "completed"
    assert not widget.busy
    assert replies.last("done")["action"] == "run"
    assert states(widget)["done"] == "succeeded"


def test_views_states_are_all_known(shell: InteractiveShell, workdir: Path):
    pipeline = load_review(shell, workdir)
    pipeline.run_to()
    assert {v.state for v in pipeline.view.views().values()} <= set(NodeState)


def test_the_view_offers_an_unfinished_run_and_resumes_it(
    shell: InteractiveShell, workdir: Path
) -> None:
    """After a kernel restart the view shows a Resume / Start new banner; Resume reopens the run
    at its gate, so the gate's buttons answer the run that waited on disk."""
    first = load_review(shell, workdir)
    first.run_to()
    run_id = first.current_run.run_id
    del shell.user_ns["review"]  # what a kernel restart leaves: nothing in memory
    again = load_review(shell, workdir)
    widget = again.widget
    assert widget.banner["kind"] == "resume"
    assert run_id in widget.banner["text"] and widget.banner["node"] == "approve"
    widget.handle({"action": "resume_offered"})
    assert again.current_run.run_id == run_id and again.view.resume_offer is None
    assert widget.banner.get("kind") is None
    assert states(widget)["approve"] == "waiting"
    widget.handle({"action": "answer", "node": "approve", "choice": "Y"})
    assert again.view.state_name == "completed"


def test_the_view_can_decline_the_offer(shell: InteractiveShell, workdir: Path) -> None:
    first = load_review(shell, workdir)
    first.run_to()
    old = first.current_run.run_dir
    del shell.user_ns["review"]
    again = load_review(shell, workdir)
    again.widget.handle({"action": "start_new"})
    assert again.view.resume_offer is None
    assert again.widget.banner.get("kind") is None
    assert again.current_run.run_dir != old


def test_an_evidence_row_lists_at_most_100_files_and_says_where_the_rest_are() -> None:
    record = {
        "summary": "s",
        "outcome": {
            "engine": {
                "files": {"added": [f"gen/f{i:03d}.py" for i in range(130)]},
                "stale_files": [f"src/s{i:03d}.py" for i in range(101)],
            }
        },
    }
    detail = evidence_detail(record)
    assert len(detail["files changed"]) == 101 and detail["files changed"][99] == (
        "gen/f099.py (added)"
    )
    assert detail["files changed"][100] == (
        "… and 30 more (all of them: the record in evidence.jsonl)"
    )
    assert detail["stale files"][-1] == "… and 1 more (all of them: the record in evidence.jsonl)"


def test_a_superseded_view_says_so_once_and_keeps_its_evidence(
    shell: InteractiveShell, workdir: Path
) -> None:
    """Loading the same name again greys the old view with a note; the note is the one message
    (no banner repeating it) and the view keeps the evidence rows and gate it showed, read-only."""
    old = load_review(shell, workdir)
    widget = old.widget
    widget.handle({"action": "run"})
    rows, gate = widget.evidence["rows"], widget.gate
    assert len(rows) == 4 and gate["node"] == "approve"
    load_review(shell, workdir)
    assert "replaced by a newer load of review" in widget.note
    assert widget.banner.get("kind") != "superseded"
    assert widget.evidence["rows"] == rows and widget.evidence["total"] == 4
    assert widget.gate == gate


SLOW_GATE = rework_loop(
    'shape=parallelogram, tool_command="sleep 0.3"', node="work", choices=("[Y] Yes", "[N] No")
)


def test_elapsed_is_the_runs_active_time_and_goes_on_across_a_resume(
    shell: InteractiveShell, workdir: Path
) -> None:
    """The run line's elapsed time is the time the run's steps took (from its evidence log), so
    a run reopened after a restart and answered goes on from there instead of from 0."""
    first = load_review(shell, workdir, SLOW_GATE)
    first.widget.handle({"action": "run"})
    assert first.widget.run["state"] == "waiting"
    before = first.widget.run["elapsed"]
    assert before >= 0.3  # `work` slept 0.3 s
    del shell.user_ns["review"]  # what a kernel restart leaves: nothing in memory
    again = load_review(shell, workdir, SLOW_GATE)
    again.widget.handle({"action": "resume_offered"})
    assert again.widget.run["elapsed"] == before
    again.widget.handle({"action": "answer", "node": "approve", "choice": "Y"})
    assert again.view.state_name == "completed"
    assert again.widget.run["elapsed"] >= before


STOPPABLE = one_tool("test -f go || sleep 30", name="review")


def test_elapsed_counts_an_attempt_stopped_midway_also_after_a_restart(
    shell: InteractiveShell, workdir: Path
) -> None:
    """A stopped attempt leaves no evidence record; its time still counts, so the run line's
    elapsed time does not drop when Stop ends a node, nor when the run is reopened."""
    first = load_review(shell, workdir, STOPPABLE)
    worker = threading.Thread(target=first.run_to)
    worker.start()
    wait_until(lambda: first.view.views()["work"].state is NodeState.RUNNING, "work running")
    threading.Event().wait(0.6)
    first.stop()
    worker.join(30)
    assert first.view.views()["work"].state is NodeState.INTERRUPTED
    stopped = first.widget.run["elapsed"]
    assert stopped >= 0.5
    del shell.user_ns["review"]  # what a kernel restart leaves: nothing in memory
    (workdir / "go").write_text("")  # the next attempt ends at once
    again = load_review(shell, workdir, STOPPABLE)
    again.widget.handle({"action": "resume_offered"})
    assert again.view.state_name == "completed"
    assert stopped <= again.widget.run["elapsed"] < stopped + 5


def test_stopped_spans_pair_a_start_with_its_interruption(tmp_path: Path) -> None:
    """Stop (the engine's event) and a kernel interrupt (the notebook's, without a duration)
    alike; a node started and never ended (a kill) and a torn last line count nothing."""
    from freshness_magic.views.model import stopped_spans

    def event(kind: str, node: str, second: int) -> str:
        stamp = f"2025-01-01T10:00:{second:02d}Z"
        return json.dumps({"type": kind, "node_id": node, "timestamp": stamp, "data": {}})

    lines = [
        event("stage_started", "a", 0),
        event("stage_interrupted", "a", 4),
        event("stage_started", "a", 10),
        event("stage_completed", "a", 12),
        event("stage_started", "b", 20),
        event("stage_interrupted", "b", 21),
        event("stage_started", "c", 30),
        '{"type": "stage_interrupted", "node_id": "c", "timest',
    ]
    (tmp_path / "events.jsonl").write_text("\n".join(lines))
    base = datetime(2025, 1, 1, 10, tzinfo=UTC).timestamp()
    assert stopped_spans(tmp_path) == [(base, base + 4), (base + 20, base + 21)]
    assert stopped_spans(tmp_path / "missing") == []
    spans = stopped_spans(tmp_path)
    assert ActiveTime().update([], spans) == pytest.approx(5.0)


def test_active_time_merges_overlapping_steps() -> None:
    """Branch nodes run inside their parallel node's step: their time is not counted twice;
    the time between steps (a gate waiting, a paused run) is not counted at all."""

    def record(end: str, seconds: float) -> dict[str, Any]:
        return {
            "timestamp": f"2025-01-01T10:00:{end}Z",
            "outcome": {"engine": {"duration_seconds": seconds}},
        }

    records = [record("10.000", 2.0), record("09.500", 1.0), record("30.000", 3.0)]
    assert active_seconds(records) == pytest.approx(5.0)
    assert active_seconds([*records, {"timestamp": "x"}, {"nodeId": "y"}]) == pytest.approx(5.0)


def test_active_time_folded_in_record_by_record_is_the_whole_logs() -> None:
    """The view folds each new record into the merged spans (a refresh per step does not pass
    over the whole log); any order of overlaps gives the total of the log read at once, and
    the records of another log start again."""
    rng = random.Random(3)

    def record(end: float, seconds: float) -> dict[str, Any]:
        stamp = datetime.fromtimestamp(1_700_000_000 + end, tz=UTC).isoformat()
        return {"timestamp": stamp, "outcome": {"engine": {"duration_seconds": seconds}}}

    def covered(spans: list[tuple[float, float]]) -> float:  # sort and sweep, as by hand
        total, reach = 0.0, float("-inf")
        for start, end in sorted(spans):
            if end > reach:
                total += end - max(start, reach)
                reach = end
        return total

    spans = [
        (end - seconds, end)
        for end, seconds in ((rng.uniform(0, 500), rng.uniform(0.01, 30)) for _ in range(300))
    ]
    records = [record(end, end - start) for start, end in spans]
    folded = ActiveTime()
    for count in range(1, len(records) + 1):
        assert folded.update(records[:count]) == pytest.approx(covered(spans[:count]), abs=1e-3)
    assert active_seconds(records) == pytest.approx(covered(spans), abs=1e-3)
    other = [record(10.0, 4.0)]
    assert folded.update(other) == pytest.approx(4.0)


def test_active_time_before_a_moment_is_the_covered_time_before_it() -> None:
    rng = random.Random(5)
    spans = [(s, s + rng.uniform(0.01, 20)) for s in (rng.uniform(0, 300) for _ in range(200))]
    folded = ActiveTime()
    folded.update(
        [
            {
                "timestamp": datetime.fromtimestamp(1_700_000_000 + end, tz=UTC).isoformat(),
                "outcome": {"engine": {"duration_seconds": end - start}},
            }
            for start, end in spans
        ]
    )
    for moment in (rng.uniform(-10, 330) for _ in range(50)):
        clipped = [(s, min(e, moment)) for s, e in spans if s < moment]
        expected = 0.0
        reach = float("-inf")
        for start, end in sorted(clipped):
            if end > reach:
                expected += end - max(start, reach)
                reach = end
        assert folded.before(1_700_000_000 + moment) == pytest.approx(expected, abs=1e-3)


BRANCH_ENDS_FIRST = fan_out(
    {
        "quick": 'shape=parallelogram, tool_command="sleep 1; echo quick >> quick.txt"',
        "slow": 'shape=parallelogram, tool_command="until test -f go; do sleep 0.05; done"',
    }
)


def test_the_active_time_does_not_count_a_finished_branch_again_while_its_fan_runs(
    shell: InteractiveShell, workdir: Path
) -> None:
    """A Notebook 7 trial: the header's time ran ahead of the clock while four branches ran
    (the finished branches' time was added to the running parallel node's), then fell back."""
    pipeline = shell.run_cell_magic("pipeline", f"p --workdir {workdir}", BRANCH_ENDS_FIRST)
    widget = pipeline.widget
    widget.background = True
    widget.handle({"action": "step"})
    widget.wait(30)
    before = widget.run["elapsed"]
    widget.handle({"action": "step"})
    wait_until(lambda: widget.run.get("running") == "fan" and widget.run["done"] >= 2, "quick ends")
    assert widget.run["elapsed"] == before
    (workdir / "go").touch()
    widget.wait(30)
    assert widget.run["elapsed"] >= before + 1.0
