"""``freshness-magic validate PIPELINE.dot [--strict] [--json]``: lint a pipeline.

One line per diagnostic, ``path:line:col: severity rule: message (fix: ...)``, then a summary
on stderr. Exit 0 when there is no error (warnings allowed unless ``--strict``), 1 when there
are errors (or warnings under ``--strict``), 2 for an unreadable file or a parse error.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from freshness_magic.choices import path_arg
from freshness_magic.commands.parse import load_for_command, shown_name


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "validate",
        help="check a pipeline against the validation rules",
        description=(
            "Load a DOT pipeline and print every diagnostic as "
            "`path:line:col: severity rule: message (fix: ...)`. Exit status: 0 no errors, "
            "1 errors (or warnings with --strict), 2 unreadable file or parse error."
        ),
    )
    parser.add_argument(
        "pipeline",
        metavar="PIPELINE.dot",
        type=path_arg,
        help="the pipeline file (-: standard input)",
    )
    parser.add_argument("--strict", action="store_true", help="treat warnings as failures (exit 1)")
    parser.add_argument("--json", action="store_true", help="print the diagnostics as a JSON list")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from freshness_magic.engine.validation import Severity
    from freshness_magic.lint import session_validator

    graph = load_for_command(args.pipeline, stdin=True)
    # The working directory a `run` without --workdir uses, for `source_files_exist`.
    diagnostics = session_validator(workdir=".").validate(graph)
    name = shown_name(args.pipeline)
    counts = {severity: 0 for severity in Severity}
    for diagnostic in diagnostics:
        counts[diagnostic.severity] += 1
    if args.json:
        print(json.dumps([d.to_dict() for d in diagnostics], indent=2, ensure_ascii=False))
    else:
        for diagnostic in diagnostics:
            print(diagnostic.format(name))
        errors, warnings, infos = (counts[s] for s in Severity)
        print(
            f"{name}: {errors} error(s), {warnings} warning(s), {infos} info",
            file=sys.stderr,
        )
    if counts[Severity.ERROR] or (args.strict and counts[Severity.WARNING]):
        return 1
    return 0
