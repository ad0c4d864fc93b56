"""``freshness-magic resume RUN_DIR``: continue a run from its newest valid checkpoint.

The pipeline is the run directory's copy (``pipeline.dot``), checked against the hash the
checkpoint recorded; ``--pipeline FILE`` gives it instead (the same text) when that copy is
damaged or missing. The engine's errors about the copy name its Python API (``graph=``): they are
said here in the command's own terms.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from shlex import quote
from typing import Any, TextIO

from freshness_magic.choices import path_arg
from freshness_magic.commands import invoked_as
from freshness_magic.commands.run import add_drive_options, checked_answers, drive, existing_dir
from freshness_magic.errors import (
    CheckpointError,
    NothingToRetryError,
    RunError,
    StoredPipelineError,
)


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "resume",
        help="continue a run from its checkpoint",
        description=(
            "Continue the run in RUN_DIR exactly where it stopped (a waiting gate stays waiting "
            "unless --answer or --auto-approve answers it). The pipeline is rebuilt from the "
            "copy in the run directory (pipeline.dot, checked against the hash in the checkpoint). "
            "Exit codes as for run."
        ),
    )
    parser.add_argument(
        "run_dir", metavar="RUN_DIR", type=path_arg, help="the run directory (.freshness/runs/ID)"
    )
    parser.add_argument(
        "--pipeline",
        dest="pipeline_file",
        metavar="PIPELINE.dot",
        type=path_arg,
        help="the pipeline file: the same text the run was started with, when the run "
        "directory's copy pipeline.dot is damaged or missing; or an edit of that pipeline, "
        "to go on with it keeping the run (unchanged nodes keep their results, edited ones "
        "show stale, removed ones drop out, added ones are pending; a refused edit changes "
        "nothing)",
    )
    parser.add_argument(
        "--workdir",
        metavar="DIR",
        type=path_arg,
        help="the working directory to go on in, when the run's own moved (default: the one "
        "the run was started in)",
    )
    add_drive_options(parser)
    parser.add_argument(
        "--accept",
        metavar="NODE",
        action="append",
        default=[],
        help="accept NODE's changed source_files as its new freshness baseline before "
        "continuing (unblocks a freshness=block node); repeat for several nodes",
    )
    parser.add_argument(
        "--retry",
        metavar="NODE",
        nargs="?",
        const="",
        default=None,
        help="go on after a failure or an interrupt: run the failed node again (or NODE, a node "
        "to run again from), keeping the context, outcomes and evidence so far",
    )
    parser.set_defaults(handler=main)


def say_drift(run: Any, out: TextIO) -> None:
    """One line per node whose inputs changed while the run was stopped."""
    from freshness_magic.freshness.extension import resume_drift

    for node_id, words in resume_drift(run):
        print(f"  {'drift':<7} {node_id:<24} {'':8}  {words}", file=out, flush=True)


def say_pipeline_changed(run: Any, out: TextIO) -> None:
    """A note when the file the run was started from now holds another pipeline: the run goes
    on with the text it started with, which a user who just fixed the file would not expect."""
    from freshness_magic.engine.persistence import PIPELINE_FILE, same_pipeline, source_hash

    path, source = run.graph.path, run.graph.source
    if not path or not source or not os.path.isfile(path):
        return
    try:
        now = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return
    if not same_pipeline(now, source_hash(source)):
        print(
            f"note: {path} has changed since this run started; the run goes on with the pipeline "
            f"it started with ({Path(run.run_dir) / PIPELINE_FILE}). To run the changed file, "
            f"start a new run: {invoked_as()} run {path}",
            file=out,
            flush=True,
        )


def is_edit(run_dir: Path, source: str) -> bool:
    """Whether ``source`` is another text than the pipeline the run executes (an edit to carry
    the run over to), rather than that text given again for a damaged copy."""
    from freshness_magic.engine.checkpoint import load_checkpoint
    from freshness_magic.engine.persistence import follow_restarts, same_pipeline, stored_pipeline

    folder = follow_restarts(run_dir)
    data, used = load_checkpoint(folder)
    pipeline = data.get("pipeline") or {}
    stored = str(pipeline.get("sha256") or "")
    if not stored or same_pipeline(source, stored):
        return False
    try:  # a damaged or missing copy is put back from the run's own text first, not edited
        stored_pipeline(folder, pipeline, used)
    except StoredPipelineError:
        return False
    return True


def main(args: argparse.Namespace) -> int:
    from freshness_magic.engine.runlock import RunBusyError
    from freshness_magic.holders import busy_refusal
    from freshness_magic.rundirs import checked_run_dir
    from freshness_magic.session import resume_run

    checked_run_dir(args.run_dir)
    graph = None
    if args.pipeline_file is not None:
        from freshness_magic.commands.parse import load_for_command

        graph = load_for_command(args.pipeline_file)
    options: dict[str, Any] = {
        "backend": args.backend,
        "executor": args.executor,
        "workdir": existing_dir(Path(args.workdir), "--workdir") if args.workdir else None,
        "reuse": args.reuse,
    }
    try:
        if graph is not None and is_edit(Path(args.run_dir), graph.source):
            from freshness_magic.session import carry_over

            run, plan = carry_over(args.run_dir, graph, **options)
            for line in plan.lines():
                print(f"  {'edit':<7} {line}", file=sys.stderr if args.json else sys.stdout)
        else:
            run = resume_run(args.run_dir, graph=graph, **options)
    except RunBusyError as exc:
        raise busy_refusal(exc) or exc from None
    except StoredPipelineError as exc:
        raise CheckpointError(
            f"{exc.problem}; give the pipeline file the run was started with: {invoked_as()} "
            f"resume {quote(str(args.run_dir))} --pipeline FILE (or copy that file over "
            f"{args.run_dir}/pipeline.dot)"
        ) from None
    with run:
        checked_answers(run.graph, args.answer)  # before --accept and --retry change the run
        say_pipeline_changed(run, sys.stderr)
        say_drift(run, sys.stderr if args.json else sys.stdout)
        if args.accept:
            from freshness_magic.freshness.events import some_files
            from freshness_magic.freshness.extension import accept_changes

            out = sys.stderr if args.json else sys.stdout
            for node_id in args.accept:
                files = accept_changes(run, node_id).get(node_id) or []
                news = some_files(files, 3) if files else "nothing had changed"
                print(f"  {'accept':<7} {node_id:<24} {'':8}  new baseline: {news}", file=out)
        if args.retry is not None:
            from freshness_magic.engine.recovery import rearmed_note

            try:
                armed = run.retry(args.retry or None)
                note = rearmed_note(args.retry or None, armed)
                if note:
                    print(f"  {'retry':<7} {note}", file=sys.stderr if args.json else sys.stdout)
            except NothingToRetryError as exc:  # the engine names its Python call
                raise RunError(
                    f"{exc.problem} ({invoked_as()} resume {quote(str(args.run_dir))} --retry NODE)"
                ) from None
        return drive(run, args, every_answer=True)
