"""``freshness-magic why RUN_DIR NODE [--json]``: why a node of a run is in its state.

The same explanation as ``%pipeline why NODE`` (:mod:`freshness_magic.views.why`), read from the run
directory (:mod:`freshness_magic.views.runview`) without taking its driver lock, and ending with the
command-line commands that go on (``resume RUN_DIR --answer``, ``--accept``, ``--retry``). When a
live process holds the run (a notebook's kernel, a ``run`` in progress), a note says who and
where to act.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from freshness_magic.choices import path_arg

if TYPE_CHECKING:
    from freshness_magic.views.runview import RunView


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "why",
        help="explain why a node of a run is in its state",
        description=(
            "Explain why NODE of the run in RUN_DIR is in its state (as %pipeline why does in "
            "a notebook): its state and reason, last outcome and failure, changed and missing "
            "inputs, output, and the commands that go on from here (answer a waiting gate, "
            "accept changed inputs, retry). Reads the run without changing it. Exit codes: "
            "0 explained, 2 not a run directory or no such node."
        ),
    )
    parser.add_argument(
        "run_dir", metavar="RUN_DIR", type=path_arg, help="the run directory (.freshness/runs/ID)"
    )
    parser.add_argument("node", metavar="NODE", help="the node to explain")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(handler=main)


def main(args: argparse.Namespace) -> int:
    from freshness_magic.commands import invoked_as
    from freshness_magic.engine.state import RunState
    from freshness_magic.errors import CheckpointError, StoredPipelineError
    from freshness_magic.rundirs import checked_run_dir
    from freshness_magic.views import why
    from freshness_magic.views.runview import read_run

    try:
        view = read_run(checked_run_dir(args.run_dir))
    except StoredPipelineError as exc:  # the engine names its Python API (graph=)
        raise CheckpointError(
            f"{exc.problem}; why reads the run's nodes from it (copy the file the run was "
            f"started with, if you have it, over {Path(args.run_dir) / 'pipeline.dot'})"
        ) from None
    facts = view.facts(args.node)
    memory = view.memory
    # a paused run goes on after --accept: --to its next node stops it before anything runs
    stop_at = memory.next_node if memory.state is RunState.PAUSED else None
    commands = why.CliCommands(invoked_as(), str(view.run_dir), stop_at, view.driver is None)
    offers = any(step.command for step in why.next_steps(facts, commands))
    note = driver_note(view, offers)
    unchecked = unchecked_note(view, args.node)
    if args.json:
        document = {
            "run_dir": str(view.run_dir),
            "run_state": memory.state.value,
            **why.why_dict(facts, commands),
        }
        if view.driver is not None:
            document["driver"] = view.driver
        if note:
            document["note"] = note
        if unchecked:
            document["inputs_unchecked"] = view.unchecked
        print(json.dumps(document, indent=2, ensure_ascii=False, default=str))
        return 0
    out = sys.stdout
    print(why.why_text(facts, commands), file=out)
    if unchecked:
        print(f"note: {unchecked}", file=out)
    if note:
        print(f"note: {note}", file=out)
    return 0


def unchecked_note(view: RunView, node_id: str) -> str:
    """Why the inputs of ``node_id`` were not checked though it has checked inputs ("" when
    they were, or it has none): without it, a node whose files changed reads as fresh."""
    from freshness_magic.freshness.attrs import inputs_checked, source_files

    node = view.graph.nodes.get(node_id)
    if view.unchecked is None or node is None or not source_files(node):
        return ""
    return f"its inputs were not checked: {view.unchecked}" if inputs_checked(node) else ""


def driver_note(view: RunView, offers: bool) -> str:
    """Who holds the run now and where to act ("" when nobody does): the commands ``why``
    offers (``offers``) need the run's lock, which a notebook keeps between cells."""
    from freshness_magic.engine.activity import activity
    from freshness_magic.holders import driven_now, held_open

    driver = view.driver
    if driver is None:
        return ""
    now = activity(view.run_dir)
    gate = view.memory.pending_gate
    held = held_open(driver, now, gate.node_id if gate else None, "go on from here")
    if held is not None:
        who, doing, advice = held
        return f"the run is {who}, {doing}: {advice}"
    note = f"the run is {driven_now(driver, now)}"
    return f"{note}; the commands above work once it stops" if offers else note
