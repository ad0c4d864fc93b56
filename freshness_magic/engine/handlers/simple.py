"""The no-op handlers: start, exit and conditional (spec §4.3, §4.4, §4.7).

Routing and goal gates belong to the engine, so these only report SUCCESS. Their notes leave
out the node's id: every place that shows them names the node already.
"""

from __future__ import annotations

from freshness_magic.engine.context import Context
from freshness_magic.engine.handlers.base import StepEnv
from freshness_magic.engine.model import Node
from freshness_magic.engine.outcome import Outcome, StageStatus


class StartHandler:
    """The pipeline's entry point."""

    def execute(self, node: Node, context: Context, env: StepEnv) -> Outcome:
        return Outcome(status=StageStatus.SUCCESS, notes="Pipeline started")


class ExitHandler:
    """The pipeline's exit point; the engine checks goal gates before running it."""

    def execute(self, node: Node, context: Context, env: StepEnv) -> Outcome:
        return Outcome(status=StageStatus.SUCCESS, notes="Pipeline complete")


class ConditionalHandler:
    """A routing point: the engine evaluates the outgoing edges' conditions."""

    def execute(self, node: Node, context: Context, env: StepEnv) -> Outcome:
        return Outcome(status=StageStatus.SUCCESS, notes="Conditions evaluated")
