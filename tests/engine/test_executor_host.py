"""The node executor needs of its run only ``RunHost``; ``Run`` composes its parts.

A host written here (a real pipeline, handler registry, event bus and run folder, and lists for
what the executor reports) runs a node with a retry through ``NodeExecutor`` exactly as a run's
step does: the events, the status file, the retry counts and the outcome reach the host, and
the extensions are handed the host's run, and the execution's trace is kept by the host.
"""

from __future__ import annotations

import contextlib
import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from freshness_magic.engine.context import Context
from freshness_magic.engine.events import EventBus, EventType
from freshness_magic.engine.execute import NodeExecutor, RunHost, Timing
from freshness_magic.engine.extensions import BaseRunExtension
from freshness_magic.engine.handlers.base import ChildRuns, HandlerRegistry
from freshness_magic.engine.model import Graph, Node
from freshness_magic.engine.outcome import Outcome, StageStatus
from freshness_magic.engine.retry import BackoffConfig
from freshness_magic.engine.reuse import ReuseIndex, Reuser
from freshness_magic.engine.run import Run
from freshness_magic.engine.state import RunState, StepResult
from freshness_magic.engine.trace import Trace
from tests.engine.runkit import FakeClock, Scripted, graph, registry
from tests.pipelines import one_step

PIPELINE = one_step('prompt="do it", max_retries=1', name="g")


class Seen(BaseRunExtension):
    """Remembers the run object each hook is handed."""

    name = "seen"

    def __init__(self) -> None:
        self.runs: list[object] = []

    def before_execute(self, run: Any, node: Node, attempt: int) -> Outcome | None:
        self.runs.append(run)
        return None


class Host:
    """Everything ``RunHost`` lists, and nothing else."""

    def __init__(self, pipeline: Graph, reg: HandlerRegistry, folder: Path, ext: Seen) -> None:
        self.graph = pipeline
        self.run_id = "r1"
        self.run_dir = folder / "run"
        self.workdir = folder
        self.registry = reg
        self.dispatch = None
        self.child_runs: ChildRuns = _NoChildren()
        self.extensions = [ext]
        self.run: Any = object()
        self.reuses = False
        self.reuser = Reuser(ReuseIndex(folder), pipeline.name)
        self.bus = EventBus("r1", self.run_dir / "events.jsonl")
        self.outcomes: list[tuple[str, str]] = []
        self.retries: list[int] = []
        self.traces: list[Trace] = []

    def emit(self, kind: str, node_id: str | None, data: dict[str, Any]) -> None:
        self.bus.emit(kind, node_id, data)

    @contextlib.contextmanager
    def context_scope(self, context: Context) -> Iterator[None]:
        yield

    def record_outcome(self, node_id: str, outcome: Outcome) -> int:
        self.outcomes.append((node_id, outcome.status.value))
        return len(self.outcomes) - 1

    def set_retries(self, node_id: str, retries: int) -> None:
        self.retries.append(retries)

    def keep_partial(self, node_id: str, value: Any) -> None:
        raise AssertionError("no node here keeps partial work")

    def record_traces(self, traces: list[Trace]) -> None:
        self.traces.extend(traces)

    def take_rearmed(self) -> bool:
        return False


class _NoChildren:
    def start(self, graph: Graph, workdir: Path, runs_dir: Path) -> Any:
        raise AssertionError("no manager node here")

    def resume(self, run_dir: Path, graph: Graph, workdir: Path) -> Any:
        raise AssertionError("no manager node here")


def test_a_node_runs_through_a_host_that_has_only_what_run_host_lists(tmp_path: Path) -> None:
    pipeline = graph(PIPELINE)
    handler = Scripted({"work": [StageStatus.RETRY, StageStatus.SUCCESS]})
    ext = Seen()
    host = Host(pipeline, registry(handler), tmp_path, ext)
    clock = FakeClock()
    typed: RunHost = host
    executor = NodeExecutor(typed, Timing(clock, clock.sleep, random.Random(0), BackoffConfig()))
    seen: list[EventType] = []
    host.bus.subscribe(lambda e: seen.append(e.type))
    context = Context()

    result = executor.execute(pipeline.nodes["work"], context)
    executor.finish(result, context)
    executor.node_finished(
        StepResult(
            "work", result.outcome, result.attempts, result.duration, "done", "", RunState.PAUSED
        )
    )

    assert (result.attempts, result.interrupted) == (2, False)
    assert handler.calls == [("work", 1), ("work", 2)]
    assert seen == [EventType.STAGE_STARTED, EventType.STAGE_RETRYING, EventType.STAGE_COMPLETED]
    assert host.retries == [0, 1]
    assert host.outcomes == [("work", "success")]
    status_file = host.run_dir / "nodes" / "work" / "status.json"
    assert not status_file.exists()  # written after the journal record that holds the step
    executor.saved()
    status = json.loads(status_file.read_text())
    assert status["outcome"] == "success"
    assert context.get("outcome") == "success"
    assert ext.runs == [host.run, host.run]
    assert [(t.node_id, t.run_id) for t in host.traces] == [("work", "r1")]


def test_run_is_composed_not_stacked(tmp_path: Path) -> None:
    """``Run`` has no base class; a step still records through its journal and executor."""
    assert Run.__mro__ == (Run, object)
    with Run(graph(PIPELINE), workdir=tmp_path, registry=registry(Scripted())) as run:
        result = run.run()
    assert result.state is RunState.COMPLETED
    assert run.completed_nodes == ["start", "work", "done"]
