"""Handlers a front end gives some nodes of a run (a notebook's ``%%node`` cells), kept in the run.

The stored pipeline does not say that a node runs in such a handler. A process that reopens the
run without it (the command line resuming a notebook's run) would run the node's own type
instead, a codergen node's model call say, and record a success the node never had. So the
front end declares each such node in the run's context (:func:`declare`), and a run refuses to
execute a declared node whose handler its registry lacks (:func:`runs_elsewhere` says where the
node runs instead).
"""

from __future__ import annotations

from collections.abc import Container
from typing import Any

from freshness_magic.engine.context import Context

HANDLERS_KEY = "internal.front_end_handlers"
"""Context key: node id -> {"type": handler type, "runs_in": where that handler is}."""


def declare(context: Context, node_id: str, type_name: str, runs_in: str) -> None:
    """Record that ``node_id`` runs in the handler ``type_name``, found in ``runs_in`` (a phrase
    such as "a %%node cell of the notebook that runs it", with the commands that go on there)."""
    declared = dict(_declared(context.get(HANDLERS_KEY)))
    entry = {"type": type_name, "runs_in": runs_in}
    if declared.get(node_id) != entry:
        declared[node_id] = entry
        context.set(HANDLERS_KEY, declared)


def runs_elsewhere(context_value: Any, node_id: str, types: Container[str]) -> str | None:
    """Where ``node_id`` runs when its declared handler is not among ``types`` (else None).

    ``context_value`` is the context's :data:`HANDLERS_KEY` value, as a run or a reader of its
    checkpoint has it.
    """
    entry = _declared(context_value).get(node_id)
    if entry is None or entry.get("type") in types:
        return None
    return str(entry.get("runs_in") or f"a handler of type {entry.get('type')!r}")


def refusal(node_id: str, runs_in: str) -> str:
    """The message of a run asked to execute a node declared to run elsewhere."""
    return (
        f"node '{node_id}' runs in {runs_in}; this process does not have that handler and "
        "would run the node's own type instead: go on there"
    )


def _declared(value: Any) -> dict[str, dict[str, Any]]:
    if not isinstance(value, dict):
        return {}
    return {str(k): v for k, v in value.items() if isinstance(v, dict)}
