"""Helpers shared by the run tests: scripted handlers, a fake clock, graphs from DOT text."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from freshness_magic.engine.context import Context
from freshness_magic.engine.handlers.base import HandlerRegistry, StepEnv
from freshness_magic.engine.model import Graph, Node
from freshness_magic.engine.outcome import Outcome, StageStatus
from freshness_magic.engine.pipeline import load_pipeline
from freshness_magic.engine.run import Run
from freshness_magic.engine.trace import Trace


def graph(dot: str) -> Graph:
    """A pipeline from DOT text, through the real loader (stylesheet, $goal expansion)."""
    return load_pipeline(dot)


@dataclass
class FakeClock:
    """A monotonic clock that only moves when the run sleeps (or a test advances it)."""

    now: float = 1000.0
    sleeps: list[float] = field(default_factory=list)

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


OutcomeSpec = Outcome | StageStatus | str | Callable[[Node, Context, StepEnv], Outcome]


class Scripted:
    """A handler whose outcomes per node come from a script; the last entry repeats.

    An entry is an Outcome, a StageStatus, a status string, an Exception to raise, or a callable
    ``(node, context, env) -> Outcome``. Nodes without a script succeed. Every call is recorded.
    """

    def __init__(self, script: dict[str, list[Any]] | None = None) -> None:
        self.script = {k: list(v) for k, v in (script or {}).items()}
        self.calls: list[tuple[str, int]] = []

    def execute(self, node: Node, context: Context, env: StepEnv) -> Outcome:
        self.calls.append((node.id, env.attempt))
        entries = self.script.get(node.id)
        if not entries:
            return Outcome(notes=f"ran {node.id}", context_updates={"last_stage": node.id})
        entry = entries.pop(0) if len(entries) > 1 else entries[0]
        if isinstance(entry, BaseException):
            raise entry
        if isinstance(entry, Outcome):
            return entry
        if isinstance(entry, StageStatus | str):
            status = StageStatus.parse(str(entry))
            return Outcome(status=status, failure_reason=f"{node.id} said {status.value}")
        result: Outcome = entry(node, context, env)
        return result


def registry(
    handler: Scripted | None = None, extra: dict[str, Any] | None = None
) -> HandlerRegistry:
    """The built-in registry with ``handler`` for codergen (and as default) plus ``extra``."""
    from freshness_magic.engine.handlers.builtin import default_registry

    reg = default_registry()
    if handler is not None:
        reg.register("codergen", handler)
    for name, h in (extra or {}).items():
        reg.register(name, h)
    return reg


def make_run(
    dot: str | Graph,
    tmp_path: Path,
    *,
    handler: Scripted | None = None,
    clock: FakeClock | None = None,
    extra: dict[str, Any] | None = None,
    **kwargs: Any,
) -> Run:
    clock = clock or FakeClock()
    g = dot if isinstance(dot, Graph) else graph(dot)
    return Run(
        g,
        workdir=tmp_path,
        registry=kwargs.pop("registry", None) or registry(handler, extra),
        clock=clock,
        sleep=clock.sleep,
        **kwargs,
    )


def path_of(run: Run) -> list[str]:
    return run.completed_nodes


def outcomes(statuses: Iterable[str]) -> list[StageStatus]:
    return [StageStatus.parse(s) for s in statuses]


def trace_shape(traces: Iterable[Trace]) -> list[tuple[Any, ...]]:
    """What each execution is and read, comparable across two runs of one pipeline: the
    fingerprints of values are left out (a tool's output files name the run's own folder)."""
    return [
        (
            t.node_id,
            t.step,
            t.status,
            t.cause,
            t.branch_of,
            t.within,
            t.definition,
            t.inputs,
            sorted((r.key, r.part, r.writer, r.via) for r in t.reads),
            sorted(t.writes),
        )
        for t in traces
    ]
