"""The widget at model level: graph elements, state styles per step, gate, evidence, playground."""

from __future__ import annotations

import json
import re
from pathlib import Path

from IPython.core.interactiveshell import InteractiveShell

from freshness_magic.notebook.pipeline import NotebookPipeline
from freshness_magic.notebook.render import NodeState, node_groups, parse_state_css
from freshness_magic.notebook.widget import PipelineWidget
from tests.notebook.conftest import load_review


def states(widget: PipelineWidget) -> dict[str, str]:
    css = widget.state_html.value.split("</style>")[0] + "</style>"
    return {n: s.value for n, (s, _) in parse_state_css(css, widget.layout).items()}


def test_one_svg_element_per_node_and_state_classes_after_each_step(
    shell: InteractiveShell, workdir: Path
):
    pipeline: NotebookPipeline = load_review(shell, workdir)
    widget = pipeline.widget
    svg = widget.graph_html.value
    assert [g.get("data-node") for g in node_groups(svg)] == list(pipeline.graph.nodes)
    assert set(states(widget).values()) == {"pending"}
    expected = [
        {"start": "succeeded", "lint": "next", "draft": "pending"},
        {"start": "succeeded", "lint": "succeeded", "draft": "next"},
        {"lint": "succeeded", "draft": "succeeded", "approve": "next"},
        {"draft": "succeeded", "approve": "waiting", "done": "pending"},
    ]
    misses = pipeline.layout_cache.misses
    for want in expected:
        widget.step_button.click()
        got = states(widget)
        assert {k: got[k] for k in want} == want
        assert widget.graph_html.value == svg  # the layout is never re-sent
        snapshot = {g.get("data-node"): g.get("class") for g in node_groups(widget.snapshot())}
        for node_id, state in want.items():
            assert f"fm-state-{state}" in (snapshot[node_id] or "")
        assert widget.bytes_last_update < 5000
    assert pipeline.layout_cache.misses == misses
    assert widget.errors == []


def test_status_and_progress_follow_the_run(shell: InteractiveShell, workdir: Path):
    pipeline = load_review(shell, workdir)
    widget = pipeline.widget
    assert "ready" in widget.status.value and widget.progress.value == 0
    widget.run_to_select.value = "draft"
    widget.run_to_button.click()
    assert 'data-state="paused"' in widget.status.value
    assert "next: draft" in widget.status.value
    assert widget.progress.value == 2
    widget.run_button.click()
    assert 'data-state="waiting"' in widget.status.value
    assert widget.progress.value == 3


def test_gate_buttons_match_choices_and_click_continues(shell: InteractiveShell, workdir: Path):
    pipeline = load_review(shell, workdir)
    widget = pipeline.widget
    assert widget.gate_panel.layout.display == "none"
    widget.run_button.click()
    assert widget.gate_panel.layout.display == "flex"
    buttons = list(widget.gate_buttons.children)
    gate = pipeline.pending_gate()
    assert gate is not None
    assert [b.description for b in buttons] == ["[Y] Yes", "[N] No, redo"]
    assert [c.key for c in gate.choices] == ["Y", "N"]
    assert all("fm-gate-choice" in b._dom_classes for b in buttons)
    assert "fm-gate-choice-Y" in buttons[0]._dom_classes
    assert 'data-node="approve"' in widget.gate_question.value
    buttons[1].click()  # No, redo: back to draft, then the gate asks again
    assert pipeline.state_name == "waiting"
    assert pipeline.outcomes()["approve"].preferred_label == "[N] No, redo"
    widget.gate_buttons.children[0].click()
    assert pipeline.state_name == "completed"
    assert widget.gate_panel.layout.display == "none"
    assert states(widget)["done"] == "succeeded"


def test_callback_errors_show_in_the_log_area(shell: InteractiveShell, workdir: Path):
    pipeline = load_review(shell, workdir)
    widget = pipeline.widget
    widget.run_button.click()
    stale_button = widget.gate_buttons.children[0]
    shell.run_line_magic("pipeline", "resume approve --choice Y")
    stale_button.click()  # the gate was already answered from a magic
    assert len(widget.errors) == 1
    text = "".join(o.get("text", "") for o in widget.log_area.outputs)
    assert "no human gate is waiting" in text
    assert "Traceback" in text


def test_evidence_rows_match_the_log_newest_first(shell: InteractiveShell, workdir: Path):
    pipeline = load_review(shell, workdir)
    widget = pipeline.widget
    assert "no evidence records yet" in widget.evidence_table.value
    for _ in range(3):
        widget.step_button.click()
    log = [
        json.loads(x) for x in (pipeline.run.run_dir / "evidence.jsonl").read_text().splitlines()
    ]
    rows = re.findall(
        r'<tr class="fm-evidence-row" data-node="([^"]+)"', widget.evidence_table.value
    )
    assert rows == [r["nodeId"] for r in reversed(log)] == ["draft", "lint", "start"]
    assert len(widget.evidence_select.options) == 3
    widget.evidence_select.value = 1
    shown = widget.evidence_detail.value
    assert shown.startswith('<pre class="fm-evidence-json">')
    assert "&quot;nodeId&quot;: &quot;lint&quot;" in shown


def test_playground_explains_clauses_and_errors(shell: InteractiveShell, workdir: Path):
    pipeline = load_review(shell, workdir)
    widget = pipeline.widget
    widget.step_button.click()
    widget.playground_input.value = "outcome=success && context.missing=1"
    result = widget.playground_result.value
    assert "result: false" in result
    assert "outcome=success" in result and "held" in result and "failed" in result
    widget.playground_node.value = "approve"
    assert "edge from approve" in widget.playground_result.value
    widget.playground_input.value = "outcome == success"
    assert re.search(r"syntax error at column \d+", widget.playground_result.value)
    assert widget.errors == []


XSS_DOT = """digraph xss {
  start [shape=Mdiamond, label="<img src=x onerror=alert(1)>"]
  gate  [shape=hexagon, label="<script>alert(2)</script>"]
  done  [shape=Msquare, label="\\"><svg onload=alert(3)>"]
  start -> gate
  gate -> done [label="[Y] <b onmouseover=alert(4)>yes</b>"]
}
"""


def test_pipeline_text_is_escaped_everywhere(shell: InteractiveShell, workdir: Path):
    pipeline = shell.run_cell_magic("pipeline", f"xss --workdir {workdir}", XSS_DOT)
    widget = pipeline.widget
    widget.run_button.click()
    assert pipeline.state_name == "waiting"
    html_values = [
        widget.graph_html.value, widget.state_html.value, widget.gate_question.value,
        widget.evidence_table.value, widget.status.value, widget.static_html(),
    ]  # fmt: skip
    for value in html_values:
        assert "<img" not in value
        assert "<script" not in value
        assert "<svg onload" not in value
        assert "<b onmouseover" not in value
    assert "&lt;img src=x onerror=alert(1)&gt;" in widget.graph_html.value
    assert "&lt;script&gt;alert(2)&lt;/script&gt;" in widget.gate_question.value
    assert widget.gate_buttons.children[0].description == "[Y] <b onmouseover=alert(4)>yes</b>"


def test_views_states_are_all_known(shell: InteractiveShell, workdir: Path):
    pipeline = load_review(shell, workdir)
    pipeline.run_to()
    assert {v.state for v in pipeline.views().values()} <= set(NodeState)


def test_accept_and_reset_buttons(shell: InteractiveShell, workdir: Path):
    pipeline = load_review(shell, workdir)
    widget = pipeline.widget
    widget.run_to_select.value = "approve"
    widget.run_to_button.click()
    (workdir / "src" / "login.py").write_text("changed = True\n")
    shell.run_cell("x = 1")
    assert states(widget)["lint"] == "stale"
    assert 'data-node="lint" data-state="stale" data-stale="run"' in widget.state_html.value
    pipeline.accept("lint")
    assert states(widget)["lint"] == "succeeded"
    first_dir = pipeline.run.run_dir
    widget.reset_button.click()
    assert pipeline.run.run_dir != first_dir
    assert set(states(widget).values()) == {"pending"}
    assert "no evidence records yet" in widget.evidence_table.value
    assert widget.errors == []


def test_accept_button_accepts_nodes_not_run_yet(shell: InteractiveShell, workdir: Path):
    pipeline = load_review(shell, workdir)
    widget = pipeline.widget
    widget.step_button.click()
    (workdir / "docs" / "spec.md").write_text("# v2\n")
    shell.run_cell("x = 1")
    assert states(widget)["draft"] == "stale"
    widget.accept_button.click()
    assert states(widget)["draft"] == "pending"
    log = "".join(o.get("text", "") for o in widget.log_area.outputs)
    assert "accepted current inputs of all stale nodes and nodes not run yet: docs/spec.md" in log


def test_node_cell_changes_the_tooltip_layout_once(shell: InteractiveShell, workdir: Path):
    pipeline = load_review(shell, workdir)
    widget = pipeline.widget
    before = widget.graph_html.value
    assert "type: codergen" in before
    shell.run_cell_magic("node", "draft", "pass\n")
    after = widget.graph_html.value
    assert after != before and "type: notebook.cell" in after
    widget.step_button.click()
    assert widget.graph_html.value == after


def test_background_action_keeps_the_kernel_free_and_refuses_a_second_one(
    shell: InteractiveShell, workdir: Path
):
    import threading

    import pytest
    from IPython.core.error import UsageError

    dot = (
        "digraph slow { start [shape=Mdiamond]; work [label=Work]; done [shape=Msquare]; "
        "start -> work -> done }"
    )
    pipeline = shell.run_cell_magic("pipeline", f"slow --workdir {workdir}", dot)
    entered, release = threading.Event(), threading.Event()
    shell.user_ns.update(entered=entered, release=release)
    shell.run_cell_magic("node", "work", "entered.set()\nassert release.wait(30)\n")
    widget = pipeline.widget
    widget.background = True
    widget.run_button.click()
    assert entered.wait(30)
    assert widget.step_button.disabled and widget.run_button.disabled
    with pytest.raises(UsageError, match="busy"):
        shell.run_line_magic("pipeline", "step")
    widget.step_button.click()
    assert "still running" in "".join(o.get("text", "") for o in widget.log_area.outputs)
    release.set()
    widget.wait(30)
    assert pipeline.state_name == "completed"
    assert not widget.step_button.disabled
    assert states(widget)["done"] == "succeeded"
