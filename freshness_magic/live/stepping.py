"""The notebook's step loop: one :meth:`Run.step` at a time, a line and a view update after each.

Stepping here rather than in ``Run.run`` lets the notebook publish the views at every step
boundary, stop between nodes when asked, and turn a kernel interrupt inside a node into an
``interrupted`` node of a resumable run instead of a traceback.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from freshness_magic.engine import RunState
from freshness_magic.engine.events import EventType
from freshness_magic.freshness.events import FreshnessEvent, describe_stale_input
from freshness_magic.views import text

if TYPE_CHECKING:
    from freshness_magic.engine.events import Event
    from freshness_magic.engine.run import Run


@dataclass
class Stepped:
    """What a loop did: one line per step (and per stop or interrupt), and the run after it.

    ``show`` gets each line as it is made (a terminal prints it at once; the notebook's widget
    shows the steps live instead).
    """

    run: Run
    steps: int = 0
    lines: list[str] = field(default_factory=list)
    interrupted: bool = False
    show: Callable[[str], None] | None = None

    def say(self, *lines: str) -> None:
        self.lines.extend(lines)
        if self.show is not None:
            for line in lines:
                self.show(line)


_ENDED = (EventType.STAGE_COMPLETED, EventType.STAGE_FAILED)


def step_loop(
    run: Run,
    *,
    stop: threading.Event,
    after_step: Callable[[], None],
    on_interrupt: Callable[[str], Run],
    to: str | None = None,
    max_steps: int | None = None,
    show: Callable[[str], None] | None = None,
    go_on: str = "%pipeline run or step",
) -> Stepped:
    """Step until ``to`` (not executed), ``max_steps``, a gate, the end, ``stop`` or an interrupt.

    ``after_step`` runs at every step boundary (publish the views); ``on_interrupt(node)`` gets
    a run that is consistent again after a ``KeyboardInterrupt`` that the engine let through.
    A step the engine reports as ``interrupted`` (``Run.interrupt``, or a kernel interrupt it
    caught) ends the loop too: the run is paused at that node, and ``go_on`` (the actions that
    continue, in the caller's words) is said.
    """
    done = Stepped(run, show=show)
    under: list[str] = []
    """Shown under a step's line: its parallel branches' nodes and what STALE_INPUT said."""

    def note(event: Event) -> None:
        if event.type == FreshnessEvent.STALE_INPUT:
            said = f"  {event.node_id}: {describe_stale_input(event.data)}"
            if said not in under:  # a block's retries check again: say the same news once
                under.append(said)
        elif event.type in _ENDED and event.data.get("branch_of"):
            under.append(text.branch_line(event))

    listener = run.events.subscribe(note)
    try:
        _loop(done, under, stop, after_step, on_interrupt, to, max_steps, go_on)
    finally:
        run.events.unsubscribe(listener)
    return done


def _loop(
    done: Stepped,
    under: list[str],
    stop: threading.Event,
    after_step: Callable[[], None],
    on_interrupt: Callable[[str], Run],
    to: str | None,
    max_steps: int | None,
    go_on: str,
) -> None:
    run = done.run
    while not run.state.finished and run.state is not RunState.WAITING:
        if to is not None and run.next_node == to:
            run.run(to=to)
            break
        if (max_steps is not None and done.steps >= max_steps) or stop.is_set():
            break
        node_id = run.next_node or "?"
        try:
            result = run.step()
        except KeyboardInterrupt:
            done.run = run = on_interrupt(node_id)
            done.interrupted = True
            done.say(f"interrupted at {node_id}; {go_on} goes on from there")
            break
        if result.interrupted:  # the engine stopped the node (Stop, a kernel interrupt)
            after_step()
            done.interrupted = True
            why = "stopped" if stop.is_set() else "interrupted"
            done.say(f"{why} at {node_id}; {go_on} goes on from there")
            stop.clear()
            break
        done.steps += 1
        after_step()
        done.say(text.step_line(result), *under)
        under.clear()
    if stop.is_set():
        done.say(f"stopped; the run is paused (next: {run.next_node})")
        stop.clear()
