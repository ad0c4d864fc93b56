"""The ``freshness-magic`` / ``python -m freshness_magic`` command line.

Each subcommand lives in its own module under :mod:`freshness_magic.commands` and registers an
argparse sub-parser whose ``handler`` returns the exit code. Errors of our own hierarchy become one
line on stderr and exit code 2; they never show a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from freshness_magic import __version__
from freshness_magic.errors import FreshnessMagicError

COMMAND_MODULES: tuple[str, ...] = (
    "parse",
    "validate",
    "evidence",
    "run",
    "resume",
    "status",
    "check",
    "hub",
)
"""Subcommand modules in the order ``--help`` lists them."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="freshness-magic",
        description="Load, validate, run and inspect Attractor DOT pipelines.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        module = importlib.import_module(f"freshness_magic.commands.{name}")
        module.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    handler = getattr(args, "handler", None)
    if handler is None:
        parser.print_help(sys.stderr)
        return 2
    try:
        return int(handler(args))
    except FreshnessMagicError as exc:
        print(f"freshness-magic {args.command}: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"freshness-magic {args.command}: interrupted", file=sys.stderr)
        return 130
