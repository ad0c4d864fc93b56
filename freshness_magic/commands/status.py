"""``freshness-magic status RUN_DIR``: where a run stands, read from its checkpoint."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from shlex import quote
from typing import TYPE_CHECKING, Any

from freshness_magic.choices import path_arg
from freshness_magic.commands.run import EXIT_CODES
from freshness_magic.holders import driven_now, held_open

if TYPE_CHECKING:
    from freshness_magic.engine.model import Graph
    from freshness_magic.engine.trace import Trace
    from freshness_magic.views.runview import RunView


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "status",
        help="show where a run stands",
        description=(
            "Print the state of the run in RUN_DIR from its newest valid checkpoint: the nodes "
            "executed with their outcomes, the next node and any waiting gate. Exit codes: 0 "
            "completed, 1 failed, 3 paused or waiting, 2 not a run directory."
        ),
    )
    from freshness_magic.commands._rundir import RUN_DIR_HELP

    parser.add_argument("run_dir", metavar="RUN_DIR", nargs="?", type=path_arg, help=RUN_DIR_HELP)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(handler=main)


def status_dict(run_dir: Path, data: dict[str, Any]) -> dict[str, Any]:
    """The checkpoint in the shape of ``run --json`` (the same RunResult)."""
    from freshness_magic.engine.persistence import restore_memory

    memory, context = restore_memory(data, run_dir)
    return memory.result(run_dir, context).to_dict()


def main(args: argparse.Namespace) -> int:
    from freshness_magic.commands import invoked_as
    from freshness_magic.commands._rundir import run_dir_or_newest
    from freshness_magic.engine.activity import CUT_OFF_BY_ERROR, CUT_OFF_BY_KILL, activity, cut_off
    from freshness_magic.engine.checkpoint import load_checkpoint
    from freshness_magic.engine.gates import parse_accelerator
    from freshness_magic.engine.persistence import follow_restarts, workdir_gone
    from freshness_magic.engine.runlock import live_driver
    from freshness_magic.engine.trace import Trace
    from freshness_magic.views.state import NodeState

    run_dir = follow_restarts(run_dir_or_newest(args.run_dir, "status"))
    data, used = load_checkpoint(run_dir)
    info = status_dict(run_dir.resolve(), data)
    graph, damage = stored_graph(run_dir, data, used)
    view = run_view(run_dir) if graph is not None else None
    if view is not None:  # the marks as every view shows them: one snapshot, one set of rules
        views = view.model.views()
        # stale: changed inputs (whatever the node shows), or an edited definition (as shown)
        edited = [n for n, v in views.items() if v.state is NodeState.STALE]
        edited = [n for n in edited if n not in view.model.stale]
        stale = None if view.report is None and not edited else [*view.model.stale, *edited]
        outdated = [n for n, v in views.items() if v.state is NodeState.OUTDATED]
        unchecked = view.unchecked
    else:
        views, outdated = {}, []
        stale, unchecked = changed_nodes(data, used, run_dir)
    if stale:  # as driver and orphaned_tools: only when there is something to say
        info["stale_nodes"] = stale
    if outdated:
        info["outdated_nodes"] = outdated
    if unchecked:
        info["inputs_unchecked"] = unchecked
    if damage:
        info["stored_pipeline_problem"] = damage
    elif view is not None and args.json:
        info["nodes"] = {n: {"state": v.state.value, "why": v.why} for n, v in views.items()}
    if gone := workdir_gone(run_dir, data.get("workdir")):
        info["workdir_missing"] = gone
    driver = live_driver(run_dir)
    if driver is not None:
        info["driver"] = driver
    else:
        from freshness_magic.engine.handlers.tool import orphaned_tools

        if orphans := orphaned_tools(run_dir):
            info["orphaned_tools"] = orphans
        # started and never ended, with no driver left: it stopped without a word (kill -9)
        stopped = cut_off(run_dir)
        if stopped.nodes and not info["interrupted_node"]:
            info["cut_off_nodes"] = stopped.nodes
            info["cut_off_by"] = "kill" if stopped.reason == CUT_OFF_BY_KILL else "error"
    if args.json:
        print(json.dumps(info, indent=2, ensure_ascii=False, default=str))
        return EXIT_CODES[info["status"]]
    out = sys.stdout
    state = info["status"]
    gate = info["pending_gate"]
    advice = None
    if driver is not None:
        now = activity(run_dir)
        gate_node = gate.get("node") if isinstance(gate, dict) else None
        held = held_open(
            driver, now, gate_node, f"resume it: {invoked_as()} resume {quote(str(run_dir))}"
        )
        if held is not None:
            who, doing, advice = held
            state = f"{state}; {who}, {doing}"
        else:
            state = f"{driven_now(driver, now)}; its last checkpoint says {state}"
    print(f"run {data.get('run_id', run_dir.name)}: {state}", file=out)
    print(f"pipeline: {(data.get('pipeline') or {}).get('path') or '(from code)'}", file=out)
    rows = []
    for node in dict.fromkeys(info["completed_nodes"]):
        outcome = info["node_outcomes"].get(node, {})
        note = _first_line(outcome.get("failure_reason") or outcome.get("notes") or "")
        mark = (
            " (stale)"
            if node in (stale or ())
            else " (outdated)"
            if node in views and views[node].state is NodeState.OUTDATED
            else ""
        )
        said = outcome.get("status", "")
        source = outcome.get("reused_from")
        if isinstance(source, dict):  # not run: taken from an earlier execution
            said = "reused"
            note = f"reused (from run {source.get('run_id')}, step {source.get('step')})"
        rows.append((said + mark, node, note))
    width = max([16, *(len(said) for said, _, _ in rows)])
    for said, node, note in rows:
        print(f"  {said:<{width}} {node:<24} {note}".rstrip(), file=out)
    if info["failure_reason"]:
        where = f" at '{info['failed_node']}'" if info["failed_node"] else ""
        print(f"failed{where}: {info['failure_reason']}", file=out)
    if info["dead_end"]:
        print(info["summary"], file=out)
    if info["interrupted_node"]:
        print(info["summary"], file=out)
    traces = [Trace.from_dict(t, str(data.get("run_id") or "")) for t in data.get("traces") or ()]
    for line in _stale_lines(run_dir, graph, stale or [], gate, traces):
        print(line, file=out)
    if isinstance(gate, dict):
        print(f"waiting at gate '{gate.get('node')}': {gate.get('question')}", file=out)
        for choice in gate.get("choices") or []:
            print(
                f"  [{choice.get('key')}] {parse_accelerator(str(choice.get('label')))[1]} "
                f"-> {choice.get('target')}",
                file=out,
            )
    elif info["next_node"]:
        print(f"next node: {info['next_node']}", file=out)
    for node in info.get("cut_off_nodes", ()):
        reason = CUT_OFF_BY_KILL if info.get("cut_off_by") == "kill" else CUT_OFF_BY_ERROR
        print(f"note: {node} {reason}", file=out)
    for line in info.get("orphaned_tools", ()):
        print(f"note: {line}", file=out)
    if damage:
        print(
            f"note: {damage}; resume and why need the file the run was started with: "
            f"{invoked_as()} resume {quote(str(run_dir))} --pipeline FILE (or copy it over "
            f"{run_dir / 'pipeline.dot'})",
            file=out,
        )
    if gone:
        print(f"note: {gone}; its inputs were not checked", file=out)
    if unchecked:
        print(f"note: its inputs were not checked: {unchecked}", file=out)
    if advice is not None:
        print(f"note: {advice}", file=out)
    return EXIT_CODES[info["status"]]


def stored_graph(
    run_dir: Path, data: dict[str, Any], used: Path
) -> tuple[Graph | None, str | None]:
    """The run's pipeline from the run directory's copy (read once for all ``status`` says),
    and what is wrong with that copy (missing, unreadable, altered: ``resume`` and ``why``
    refuse it); neither for a run started from a graph built in code (it has no copy)."""
    from freshness_magic.engine.runread import stored_pipeline
    from freshness_magic.errors import FreshnessMagicError, StoredPipelineError

    pipeline = data.get("pipeline") or {}
    if not pipeline.get("source_file"):
        return None, None
    try:
        return stored_pipeline(run_dir, pipeline, used), None
    except StoredPipelineError as exc:
        return None, exc.problem
    except FreshnessMagicError as exc:  # it reads, but no longer loads
        stored = run_dir / str(pipeline["source_file"])
        return None, f"the stored pipeline {stored} does not load: {exc}"


def changed_nodes(
    data: dict[str, Any], used: Path, run_dir: Path
) -> tuple[list[str] | None, str | None]:
    """The nodes whose inputs changed (as ``check`` finds them), for a run ``status`` cannot
    read through the views (a pipeline built in code, or a stored copy that is damaged: no
    pipeline to tell the checked nodes or the outdated ones from), and why they could not be
    checked (:func:`~.freshness.runcheck.unchecked_because`); None when the run keeps no
    freshness state."""
    from freshness_magic.errors import FreshnessError
    from freshness_magic.freshness.runcheck import checkpoint_report, unchecked_because
    from freshness_magic.hub.integration import HubHashSource

    try:
        report = checkpoint_report(data, used, run_dir, hash_sources=HubHashSource)
    except FreshnessError as exc:
        return None, unchecked_because(exc, data, run_dir)
    return report.stale_nodes, None


def run_view(run_dir: Path) -> RunView | None:
    """The run as the notebook's views show it (:func:`~freshness_magic.views.runview.read_run`:
    the same view model and snapshot as ``%pipeline status``), where ``status`` reads every
    node's state, reason and marks; None when it cannot be read that way."""
    from freshness_magic.errors import FreshnessMagicError
    from freshness_magic.views.runview import read_run

    try:
        return read_run(run_dir)
    except FreshnessMagicError:
        return None


def _stale_lines(
    run_dir: Path, graph: Graph | None, stale: list[str], gate: object, traces: list[Trace]
) -> list[str]:
    """What ``status`` says about changed inputs: a line naming the stale nodes, and (next to
    the waiting gate) a note naming those whose executions led to it
    (:func:`~freshness_magic.engine.marks.led_to`), whose old results an answer goes on
    from."""
    from freshness_magic.commands import invoked_as
    from freshness_magic.engine.marks import led_to
    from freshness_magic.freshness.events import some_files

    if not stale:
        return []
    check = f"{invoked_as()} check {quote(str(run_dir))}"
    before: list[str] = []
    if isinstance(gate, dict) and graph is not None and gate.get("node") in graph.nodes:
        ahead = led_to(traces)
        before = [n for n in stale if n in ahead]
    lines = []
    if others := [n for n in stale if n not in before]:
        lines.append(f"stale: {some_files(others, 5)} (inputs changed; {check})")
    if before:
        lines.append(
            f"note: upstream of {gate['node']}: {some_files(before, 5)} stale "  # type: ignore[index]
            f"(inputs changed; {check})"
        )
    return lines


def _first_line(text: str) -> str:
    """A table cell: the first line of a reason (a stderr tail follows a tool's exit code)."""
    first, _, rest = text.strip().partition("\n")
    more = rest.count("\n") + 1 if rest.strip() else 0
    if not more:
        return first
    return f"{first} (+{more} more {'line' if more == 1 else 'lines'} in status --json)"
