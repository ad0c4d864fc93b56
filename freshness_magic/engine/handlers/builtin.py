"""The registry of built-in handlers, one per handler type of spec §2.8."""

from __future__ import annotations

from freshness_magic.engine.handlers.base import CodergenBackend, HandlerRegistry
from freshness_magic.engine.handlers.codergen import CodergenHandler
from freshness_magic.engine.handlers.fan_in import FanInHandler
from freshness_magic.engine.handlers.human import WaitForHumanHandler
from freshness_magic.engine.handlers.manager import ManagerLoopHandler
from freshness_magic.engine.handlers.parallel import ParallelHandler
from freshness_magic.engine.handlers.simple import ConditionalHandler, ExitHandler, StartHandler
from freshness_magic.engine.handlers.tool import ToolHandler
from freshness_magic.engine.interviewers import Interviewer


def default_registry(
    backend: CodergenBackend | None = None, interviewer: Interviewer | None = None
) -> HandlerRegistry:
    """A registry with every built-in type; ``codergen`` is also the default for unknown types.

    ``backend`` drives codergen nodes (None: the simulated backend); ``interviewer`` answers human
    gates (None: gates put the run in WAITING until it is answered).
    """
    registry = HandlerRegistry(default="codergen")
    registry.register("start", StartHandler())
    registry.register("exit", ExitHandler())
    registry.register("conditional", ConditionalHandler())
    registry.register("codergen", CodergenHandler(backend))
    registry.register("tool", ToolHandler())
    registry.register("wait.human", WaitForHumanHandler(interviewer))
    registry.register("parallel", ParallelHandler())
    registry.register("parallel.fan_in", FanInHandler(backend))
    registry.register("stack.manager_loop", ManagerLoopHandler())
    return registry
