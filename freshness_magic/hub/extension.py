"""The hub's run extension: a code-context packet for ``hub_context=true`` codergen nodes.

Before a codergen node with ``hub_context=true`` runs, the packet for its ``source_files``
(signatures, related tests, complexity, flags; see :meth:`HubClient.context_packet`) is appended
to the node's prompt through the codergen prompt-suffix context key, and the hub's change-log seq
it was read at is kept in the context as ``hub.<node_id>.seq`` (the evidence record copies it as
proof of which state the prompt saw). Without a running, caught-up hub the prompt says so in one
line and ``hub.<node_id>.seq`` is left empty: the run never fails or waits because of the hub.

It must come after the evidence extension in the list: evidence *sets* the suffix key before
execution, this extension *appends* to it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from freshness_magic.engine.extensions import BaseRunExtension
from freshness_magic.engine.handlers.codergen import PROMPT_SUFFIX_KEY
from freshness_magic.errors import HubError
from freshness_magic.freshness.attrs import source_files
from freshness_magic.hub.integration import context_packet_for

if TYPE_CHECKING:
    from freshness_magic.engine.model import Node
    from freshness_magic.engine.outcome import Outcome
    from freshness_magic.engine.run import Run
    from freshness_magic.engine.validation import LintRule

NAME = "hub"

TRUE_WORDS = frozenset({"true", "1", "yes", "on"})


def seq_key(node_id: str) -> str:
    """Context key holding the hub seq a node's prompt packet was read at."""
    return f"hub.{node_id}.seq"


def wants_hub_context(node: Node) -> bool:
    return node.attrs.get("hub_context", "").strip().lower() in TRUE_WORDS


class HubContextExtension(BaseRunExtension):
    """Appends the hub's context packet to ``hub_context=true`` codergen prompts."""

    name = NAME

    def before_execute(self, run: Run, node: Node, attempt: int) -> Outcome | None:
        if node.handler_type != "codergen" or not wants_hub_context(node):
            return None
        patterns = list(source_files(node))
        try:
            packet = context_packet_for(run.workdir, patterns) if patterns else None
        except HubError:
            packet = None
        if packet is None:
            text = "## Code context (Node State Hub)\n- not available: " + (
                "no hub running or not caught up" if patterns else "the node has no source_files"
            )
            run.context.set(seq_key(node.id), "")
        else:
            text = packet.text
            run.context.set(seq_key(node.id), str(packet.seq))
        key = PROMPT_SUFFIX_KEY.format(node_id=node.id)
        existing = run.context.get_string(key)
        run.context.set(key, f"{existing}\n\n{text}" if existing else text)
        return None

    def after_execute(
        self, run: Run, node: Node, outcome: Outcome, attempt: int, started_at: float
    ) -> Outcome:
        """Drop the suffix so a later attempt or visit builds a fresh packet."""
        if node.handler_type == "codergen" and wants_hub_context(node):
            run.context.delete(PROMPT_SUFFIX_KEY.format(node_id=node.id))
        return outcome

    def lint_rules(self) -> list[LintRule]:
        """The rule for ``hub_context`` (see :mod:`freshness_magic.hub.lint`)."""
        from freshness_magic.hub.lint import hub_rules

        return hub_rules()
