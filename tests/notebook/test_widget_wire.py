"""The widget on the wire: the messages ipywidgets really publishes for it, recorded by a comm
created through the comm package's own hook (``comm.create_comm``), as the kernel would send
them. A step sends exactly one state update; a node that runs longer than the live delay is
shown running while it runs."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import comm
import pytest
from comm.base_comm import BaseComm
from IPython.core.interactiveshell import InteractiveShell

from freshness_magic.notebook.pipeline import Pipeline
from freshness_magic.views.state import STATE_CODES, NodeState
from tests.notebook.conftest import load_review
from tests.pipelines import one_tool
from tests.waiting import wait_until


class Wire:
    """Every comm message the widgets publish: (message type, data) in order."""

    def __init__(self) -> None:
        self.messages: list[tuple[str, dict[str, Any]]] = []

    def updates(self) -> list[dict[str, Any]]:
        """The state updates (``comm_msg`` with method ``update``), each as its state dict."""
        return [
            data["state"]
            for kind, data in self.messages
            if kind == "comm_msg" and data.get("method") == "update"
        ]

    def replies(self) -> list[dict[str, Any]]:
        """The custom messages (``comm_msg`` with method ``custom``), each as its content."""
        return [
            data["content"]
            for kind, data in self.messages
            if kind == "comm_msg" and data.get("method") == "custom"
        ]

    def clear(self) -> None:
        self.messages.clear()


@pytest.fixture
def wire(monkeypatch: pytest.MonkeyPatch) -> Iterator[Wire]:
    log = Wire()

    class RecordingComm(BaseComm):  # type: ignore[misc]
        def publish_msg(
            self,
            msg_type: str,
            data: Any = None,
            metadata: Any = None,
            buffers: Any = None,
            **keys: Any,
        ) -> None:
            json.dumps(data)  # what the kernel would serialise: it must be JSON
            log.messages.append((msg_type, data if isinstance(data, dict) else {}))

    monkeypatch.setattr(comm, "create_comm", RecordingComm)
    yield log


def test_a_step_sends_one_update_with_everything_that_changed(
    shell: InteractiveShell, workdir: Path, wire: Wire
) -> None:
    pipeline: Pipeline = load_review(shell, workdir)
    widget = pipeline.widget
    widget.live_delay = 3600  # steps here are short; a long node's live updates: the next test
    assert [kind for kind, _ in wire.messages][:1] == ["comm_open"]
    nodes = widget.graph["nodes"]
    for how in ("magic", "button", "magic", "button"):
        wire.clear()
        if how == "magic":
            shell.run_line_magic("pipeline", "step")
        else:
            widget.handle({"action": "step"})
        updates = wire.updates()
        assert len(updates) == 1, f"{how}: {len(updates)} updates: {updates}"
        assert "states" in updates[0] and "run" in updates[0]
        assert "graph" not in updates[0]  # the layout goes once per structure
        assert updates[0]["states"] == widget.states
    assert widget.states[nodes.index("approve")] == STATE_CODES[NodeState.WAITING]
    assert widget.errors == []


def test_a_step_from_the_button_in_a_kernel_sends_one_update_and_its_end(
    shell: InteractiveShell, workdir: Path, wire: Wire
) -> None:
    """In a kernel the button's action runs on a worker thread: the step's one update, then
    the reply that ends the action (the page re-enables its buttons on it)."""
    pipeline: Pipeline = load_review(shell, workdir)
    widget = pipeline.widget
    widget.background = True
    widget.live_delay = 3600
    for node, after in (("start", "lint"), ("lint", "draft"), ("draft", "approve")):
        wire.clear()
        widget.handle({"action": "step"})
        widget.wait(30)
        assert len(wire.updates()) == 1, wire.updates()
        said = f"step: {node} -> success; next: {after}"  # the page shows it under the toolbar
        assert wire.replies() == [{"reply": "done", "action": "step", "text": said, "line": said}]
    wire.clear()
    widget.handle({"action": "run"})
    widget.wait(30)
    (done,) = wire.replies()
    assert done["line"] == "run: 1 step(s); waiting"  # the summary, not the gate's lines
    wire.clear()
    widget.handle({"action": "reset"})
    widget.wait(30)
    (done,) = wire.replies()
    assert done["line"].startswith("reset: the next action starts a new run; ")  # not status
    assert widget.errors == []


DOT = one_tool("echo started; while [ ! -f go ]; do sleep 0.02; done", name="held")


def run_until_work_is_shown_running(widget: Any, wire: Wire) -> int:
    """Press Run and wait for an update that shows ``work`` running (its tool waits for the
    file ``go``); the index of ``work`` in the widget's states."""
    work = widget.graph["nodes"].index("work")
    widget.handle({"action": "run"})
    running = STATE_CODES[NodeState.RUNNING]
    wait_until(
        lambda: any(u.get("states", "")[work : work + 1] == running for u in wire.updates()),
        "an update showing `work` running while its tool waits for the file `go`",
    )
    return int(work)


def test_the_live_updates_of_a_long_node_are_pushed_not_asked_for(
    shell: InteractiveShell, workdir: Path, wire: Wire, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While a node runs, its live frames come from the pipeline: the widget never reads the
    pipeline back to learn what to show (only the reply to its own action does, at the end)."""
    pipeline: Pipeline = shell.run_cell_magic("pipeline", f"held --workdir {workdir}", DOT)
    widget = pipeline.widget
    widget.background = True
    widget.live_delay = 0.05
    asked: list[str] = []
    made = pipeline.view.frame

    def frame() -> Any:
        if sys._getframe(1).f_globals["__name__"] == "freshness_magic.notebook.widget":
            asked.append("widget")  # the widget reading back, not the pipeline pushing
        return made()

    monkeypatch.setattr(pipeline.view, "frame", frame)
    run_until_work_is_shown_running(widget, wire)
    live = len([u for u in wire.updates() if "run" in u])
    assert live >= 1 and asked == []
    (workdir / "go").write_text("")
    widget.wait(30)
    assert pipeline.view.state_name == "completed" and widget.errors == []


def test_a_long_node_is_shown_running_while_it_runs(
    shell: InteractiveShell, workdir: Path, wire: Wire
) -> None:
    pipeline: Pipeline = shell.run_cell_magic("pipeline", f"held --workdir {workdir}", DOT)
    widget = pipeline.widget
    widget.background = True
    widget.live_delay = 0.05
    work = run_until_work_is_shown_running(widget, wire)
    assert widget.run["running"] == "work"
    (workdir / "go").write_text("")
    widget.wait(30)
    assert pipeline.view.state_name == "completed"
    assert widget.states[work] == STATE_CODES[NodeState.SUCCEEDED]
    assert widget.errors == []
