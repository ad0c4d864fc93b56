"""Who holds a run directory, in words: a live driver and what it runs, or a notebook kernel
left idle.

A kernel keeps its run (and the driver lock) between cells, so the engine's "wait for it to
finish" would wait for ever: ``status``, ``why``, a refused ``resume`` (CLI) and a refused load
in another kernel say where to act instead.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from freshness_magic.errors import RunError

if TYPE_CHECKING:
    from freshness_magic.engine.activity import Activity
    from freshness_magic.engine.runlock import RunBusyError


def clock(since: object) -> str:
    """``16:28:30`` (local time) for a timestamp a lock file holds; ``?`` when unreadable."""
    try:
        return time.strftime("%H:%M:%S", time.localtime(float(since or 0)))  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError):
        return "?"


def driven_now(driver: dict[str, Any], now: Activity) -> str:
    """``driven now by pid N (freshness-magic, since 16:28:30, running lint)``: a live driver,
    its program when its lock says, and what it runs (or the gate it waits at for an answer)."""
    from freshness_magic.engine.runlock import program_name

    said = [name] if (name := program_name(driver)) else []
    said.append(f"since {clock(driver.get('since'))}")
    if now.running:
        said.append(f"running {', '.join(now.running)}")
    elif now.waiting_gate is not None:
        said.append(f"waiting at gate '{now.waiting_gate}'")
    return f"driven now by pid {driver.get('pid', '?')} ({', '.join(said)})"


def held_open(
    driver: dict[str, Any], now: Activity, gate_node: str | None, then: str
) -> tuple[str, str, str] | None:
    """When a notebook (a Jupyter kernel, IPython) holds the run open with no node running, what
    to say instead of "driven now": who (``held open by an IPython kernel (pid N, since T)``),
    what it does (``idle and waiting at gate 'review'``) and where to act (answer there, or
    ``%pipeline reset`` there to ``then``). None for any other holder, or while a node runs.

    A kernel keeps its run (and the lock) between cells: "wait for it to finish" would wait
    for ever. ``gate_node`` is the checkpoint's waiting gate; the events must agree (the gate's
    ``gate_waiting`` is the driver's last word) to call the kernel idle there.
    """
    from freshness_magic.engine.runlock import NOTEBOOK_PROGRAMS, program_name

    if driver.get("program") not in NOTEBOOK_PROGRAMS or now.running:
        return None
    who = f"held open by {program_name(driver)} (pid {driver.get('pid', '?')}, since "
    who += f"{clock(driver.get('since'))})"
    leave = f"or leave the run there (%pipeline reset) to {then}"
    if gate_node is not None and now.waiting_gate == gate_node:
        answer = f"answer it there (%pipeline resume {gate_node} --choice KEY), {leave}"
        return who, f"idle and waiting at gate '{gate_node}'", answer
    return who, "no node running now", f"go on there (%pipeline resume), {leave}"


def busy_refusal(exc: RunBusyError) -> RunError | None:
    """The refusal when the run is held open by an idle notebook (a Jupyter kernel, IPython):
    the engine's "wait for it to finish" would wait for ever, so say where to act instead
    (answer the gate there, or leave the run there to resume it here). None otherwise."""
    import socket

    from freshness_magic.engine.activity import activity
    from freshness_magic.engine.checkpoint import load_checkpoint
    from freshness_magic.errors import FreshnessMagicError

    if exc.holder.get("host") != socket.gethostname():
        return None
    try:
        data, _ = load_checkpoint(exc.run_dir)
        gate = data.get("pending_gate")
    except FreshnessMagicError:
        gate = None
    gate_node = gate.get("node") if isinstance(gate, dict) else None
    held = held_open(exc.holder, activity(exc.run_dir), gate_node, "resume it here")
    if held is None:
        return None
    who, doing, advice = held
    return RunError(f"run directory {exc.run_dir} is {who}, {doing}: {advice}")
