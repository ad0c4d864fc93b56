"""``freshness-magic check RUN_DIR [--json]``: are the inputs of a run's nodes still fresh?

Reads the freshness baselines from the run's newest valid checkpoint and compares them with the
working directory, without changing the run. Every recorded baseline is listed (an audit); a node
whose inputs are not checked (``freshness`` ignore, also when unset) is marked so and is never
stale, as in every other view. Exit codes: 0 nothing stale, 1 something stale, 2 usage or input
error (no such run, no freshness state).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from freshness_magic.choices import path_arg

if TYPE_CHECKING:
    from freshness_magic.freshness.runcheck import RunCheck
    from freshness_magic.freshness.snapshot import HashSource


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "check",
        help="report stale inputs of a run's nodes",
        description=(
            "Compare the source_files of every node of the run in RUN_DIR with the snapshots in "
            "its checkpoint: since the run started (or the change was accepted) and, for nodes "
            "that ran, since they last completed. Nodes with freshness=ignore (the default) are "
            "listed and marked, never stale. Exit codes: 0 nothing stale, 1 something stale, "
            "2 usage or input error."
        ),
    )
    from freshness_magic.commands._rundir import RUN_DIR_HELP

    parser.add_argument("run_dir", metavar="RUN_DIR", nargs="?", type=path_arg, help=RUN_DIR_HELP)
    parser.add_argument("--json", action="store_true", help="print the report as one JSON object")
    parser.add_argument(
        "--all-files", action="store_true", help="with --json: list the fresh files too"
    )
    parser.set_defaults(handler=main)


def main(args: argparse.Namespace) -> int:
    from freshness_magic.commands._rundir import run_dir_or_newest
    from freshness_magic.engine.runread import follow_restarts
    from freshness_magic.freshness.gitstart import start_for_run

    run_dir = run_dir_or_newest(args.run_dir, "check")
    started = start_for_run(follow_restarts(run_dir))  # first: the check ends about when git does
    from freshness_magic.freshness.runcheck import check_run
    from freshness_magic.hub.lock import lock_held

    checked = check_run(run_dir, hash_sources=hub_hashes, started=started)
    report = checked.report
    outdated = outdated_nodes(checked)
    if args.json:
        data = report.to_dict(all_files=args.all_files)
        data["outdated"] = outdated
        json.dump(data, sys.stdout, indent=2, sort_keys=True)
        sys.stdout.write("\n")
    else:
        print(report)
        if lock_held(report.workdir):  # what changed inside stale Python files
            from freshness_magic.hub.integration import report_symbol_lines

            stale = [*report.stale_nodes, *report.changed_unchecked]
            for line in report_symbol_lines(report, stale):
                print(f"  {line}")
        for node_id, because in outdated.items():
            print(f"outdated: {node_id}: {because}")
    return 0 if report.all_fresh else 1


def hub_hashes(workdir: str) -> HashSource | None:
    """The hub's known digests of ``workdir``'s files when a hub serves it, else None (every
    file is hashed here): the hub's client is imported only then, so that a check where no hub
    runs does not pay for loading it."""
    from freshness_magic.hub.lock import lock_held

    if not lock_held(workdir):
        return None
    from freshness_magic.hub.integration import HubHashSource

    return HubHashSource(workdir)


def outdated_nodes(checked: RunCheck) -> dict[str, str]:
    """The nodes whose latest execution is outdated, each with its chain (the derivation of
    every view, :func:`~freshness_magic.engine.marks.node_marks`); empty without the run's
    stored pipeline. ``checked`` is the :class:`~freshness_magic.freshness.runcheck.RunCheck`
    the report came from (its checkpoint, pipeline and traces are not read again)."""
    if checked.graph is None or not checked.traces:  # no trace: nothing can be outdated
        return {}
    from freshness_magic.engine.marks import MarkKind, node_marks
    from freshness_magic.freshness.runcheck import changed_since_run

    marks = node_marks(checked.traces, changed_since_run(checked.report, checked.graph))
    return {n: m.because() for n, m in marks.items() if m.kind is MarkKind.OUTDATED}
