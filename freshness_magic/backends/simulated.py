"""The simulated backend (spec §4.5, the default): no model is called, and every view says so."""

from __future__ import annotations

from freshness_magic.engine.handlers.codergen import CallableBackend, simulated_backend
from freshness_magic.engine.model import Node

SIMULATED_NOTICE = (
    "simulated (no model is called; use --backend openai:MODEL, anthropic:MODEL or command:...)"
)
"""What the CLI prints when a run uses the simulated backend."""


class SimulatedBackend(CallableBackend):
    """Answers ``[Simulated] Response for stage: <id>``; records the model a node asked for."""

    name = "simulated"

    def __init__(self) -> None:
        super().__init__(simulated_backend, label="simulated")

    def for_node(self, node: Node) -> CallableBackend:
        return CallableBackend(simulated_backend, node, "simulated")
