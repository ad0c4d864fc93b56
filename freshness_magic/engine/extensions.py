"""Run extensions: how features outside the engine (freshness checks, evidence records, the hub)
join a run without the engine knowing them.

A run calls its extensions at fixed points of its life:

- ``on_run_start(run)`` once, before the first node executes (take baselines);
- ``on_resume(run, saved_state)`` when a run is restored from a checkpoint; ``saved_state`` is
  what ``checkpoint_state()`` returned when that checkpoint was written (None if nothing was);
- ``before_execute(run, node, attempt)`` before each attempt; returning an Outcome replaces the
  handler call for that attempt (an extension that finds a node's inputs stale returns RETRY);
- ``after_execute(run, node, outcome, attempt, started_at)`` after each attempt; returns the
  outcome to use (an extension that judges the work may turn SUCCESS into FAIL);
- ``on_step_finished(run, step_result)`` after the step's routing, before its checkpoint (so
  the state an extension records there is in that checkpoint);
- ``on_step_saved(run, step_result)`` (optional) after the journal record that holds the step:
  the place for files that must not exist unless the step's end is recorded (evidence records;
  what such a hook will write belongs in ``checkpoint_state`` meanwhile, so a kill between the
  record and the write loses nothing);
- ``checkpoint_state()`` is stored in every checkpoint under ``extensions[<name>]``;
- ``lint_rules()`` (optional) adds validation rules for the attributes the extension reads, so a
  run refuses a pipeline whose extension attributes are wrong without the engine knowing those
  attributes (validation outside a run registers the same rules: :mod:`freshness_magic.lint`);
- ``event_kinds()`` (optional) lists the ``StrEnum`` vocabularies of the events the extension
  emits; the run's bus accepts them and maps their stored names back (readers outside a run use
  :func:`freshness_magic.events.session_event_kinds`).

``on_step_finished`` is called once per executed node: for the node of a step, and for every node
of a parallel branch (``step_result.branch_of`` names the parallel node); also for a node stopped
by an interrupt (``step_result.interrupted``: it did not finish and runs again). Hooks are called
one at a time even while branches run in threads; inside a branch ``run.context`` is the branch's
context.

An extension that raises in ``before_execute``/``after_execute`` makes that attempt FAIL with the
error text; one that raises elsewhere is logged and skipped.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from freshness_magic.engine.events import EventKinds
from freshness_magic.engine.model import Node
from freshness_magic.engine.outcome import Outcome
from freshness_magic.errors import FreshnessMagicError

if TYPE_CHECKING:
    from freshness_magic.engine.run import Run
    from freshness_magic.engine.state import StepResult
    from freshness_magic.engine.validation import LintRule

log = logging.getLogger(__name__)

_HOOK_WORK = {
    "on_run_start": "its work at the start of the run",
    "on_resume": "its work on resuming the run",
    "on_step_finished": "its record of the step of node {node!r}",
    "on_step_saved": "its record of the step of node {node!r}",
}
"""What an extension's hook does, for the one-line warning when it fails."""


def call_extension(ext: RunExtension, hook: str, *args: Any) -> None:
    """Call ``ext.hook(*args)``; an exception is logged and skipped, never raised.

    An error of our own hierarchy (a file the extension cannot write, say) is one line that
    says what was skipped; any other is a bug, logged with its traceback.
    """
    name = getattr(ext, "name", ext)
    try:
        getattr(ext, hook)(*args)
    except FreshnessMagicError as exc:
        work = _HOOK_WORK.get(hook, hook).format(node=getattr(args[-1], "node_id", None))
        log.warning("run extension %r: %s was skipped: %s", name, work, exc)
    except Exception:
        log.exception("run extension %r raised in %s; skipped", name, hook)


def extension_rules(ext: RunExtension) -> Sequence[LintRule]:
    """The lint rules an extension contributes (none when it has no ``lint_rules``)."""
    rules = getattr(ext, "lint_rules", None)
    return tuple(rules()) if callable(rules) else ()


def extension_event_kinds(extensions: Iterable[RunExtension]) -> EventKinds:
    """The engine's events and every vocabulary ``extensions`` list in ``event_kinds()``."""
    enums: list[type[StrEnum]] = []
    for ext in extensions:
        kinds = getattr(ext, "event_kinds", None)
        if callable(kinds):
            enums.extend(kinds())
    return EventKinds(*enums)


@runtime_checkable
class RunExtension(Protocol):
    """The hooks a run calls; see the module docstring for when."""

    name: str

    def on_run_start(self, run: Run) -> None: ...

    def on_resume(self, run: Run, saved_state: dict[str, Any] | None) -> None: ...

    def before_execute(self, run: Run, node: Node, attempt: int) -> Outcome | None: ...

    def after_execute(
        self, run: Run, node: Node, outcome: Outcome, attempt: int, started_at: float
    ) -> Outcome: ...

    def on_step_finished(self, run: Run, step_result: StepResult) -> None: ...

    def checkpoint_state(self) -> dict[str, Any]: ...


class BaseRunExtension:
    """A no-op extension to subclass: override only the hooks you need."""

    name: str = "extension"

    def on_run_start(self, run: Run) -> None:
        return None

    def on_resume(self, run: Run, saved_state: dict[str, Any] | None) -> None:
        return None

    def before_execute(self, run: Run, node: Node, attempt: int) -> Outcome | None:
        return None

    def after_execute(
        self, run: Run, node: Node, outcome: Outcome, attempt: int, started_at: float
    ) -> Outcome:
        return outcome

    def on_step_finished(self, run: Run, step_result: StepResult) -> None:
        return None

    def on_step_saved(self, run: Run, step_result: StepResult) -> None:
        return None

    def checkpoint_state(self) -> dict[str, Any]:
        return {}

    def lint_rules(self) -> Sequence[LintRule]:
        return ()

    def event_kinds(self) -> Sequence[type[StrEnum]]:
        return ()
