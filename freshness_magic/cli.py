"""The ``freshness-magic`` / ``python -m freshness_magic`` command line.

Each subcommand lives in its own module under :mod:`freshness_magic.commands` and registers an
argparse sub-parser whose ``handler`` returns the exit code. Registering is cheap: a command module
imports the engine, hub or evidence code only inside its handler, so ``--version``, ``--help`` and
``validate`` start without loading what they do not use.

Manners every command shares (handled here, once):

- Errors of our own hierarchy and usage errors exit 2 without a traceback: one line on stderr
  (a parse error adds its source line and a caret), or with ``--json`` one JSON object on stdout:
  ``{"error", "kind", "command", "file", "line", "column"}`` (plus ``diagnostics`` for a pipeline
  that does not validate). A file the operating system refuses (permissions, a full disk, a
  read-only mount) is such an error too (``FileAccessError``: what, which file, what to do).
- A closed output pipe (``freshness-magic status RUN --json | head -1``) ends the command quietly
  with exit code 141 (128 + SIGPIPE, what a shell reports for other programs cut off the same
  way): stdout is pointed at ``os.devnull`` so nothing more is written, as the Python docs advise.
  A ``run`` keeps running to its normal stop when only its progress output is closed.
- ``--print-completion bash|zsh|tcsh`` prints a shell completion script (needs ``shtab``:
  ``pip install 'freshness_magic[completion]'``).
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from freshness_magic import __version__
from freshness_magic.choices import HintingParser
from freshness_magic.commands import invoked_as
from freshness_magic.errors import FileAccessError, FreshnessMagicError

COMMAND_MODULES: tuple[str, ...] = (
    "parse",
    "validate",
    "evidence",
    "run",
    "resume",
    "status",
    "why",
    "check",
    "hub",
)
"""Subcommand modules in the order ``--help`` lists them."""

EXIT_USAGE = 2
EXIT_BROKEN_PIPE = 141
"""128 + SIGPIPE: the code a shell shows for a program whose output pipe was closed."""
COMPLETION_SHELLS = ("bash", "zsh", "tcsh")


class UsageProblem(Exception):
    """A command line argparse rejects (raised instead of argparse's own exit)."""

    def __init__(self, message: str, parser: argparse.ArgumentParser) -> None:
        super().__init__(message)
        self.parser = parser


class HelpFormatter(argparse.HelpFormatter):
    """argparse's formatter, told the terminal width so it does not import ``shutil``.

    argparse builds a formatter for every argument it registers and asks
    ``shutil.get_terminal_size`` for the width: importing ``shutil`` (and the compression
    modules it loads) was 2 ms of a 60 ms ``validate``. Same width rule: ``COLUMNS``, else the
    terminal of stdout, else 80; minus 2, as argparse does.
    """

    def __init__(
        self,
        prog: str,
        indent_increment: int = 2,
        max_help_position: int = 24,
        width: int | None = None,
    ) -> None:
        super().__init__(
            prog, indent_increment, max_help_position, _columns() - 2 if width is None else width
        )


def _columns() -> int:
    try:
        columns = int(os.environ.get("COLUMNS", "0"))
    except ValueError:
        columns = 0
    if columns > 0:
        return columns
    try:
        columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
    except (AttributeError, ValueError, OSError):
        columns = 0
    return columns or 80


class Parser(HintingParser):
    """argparse, but a usage error is raised so :func:`main` can report it as text or JSON.

    Every parser (the sub-commands' too: argparse makes them of this class) formats its help
    with :class:`HelpFormatter` unless told otherwise.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        raise UsageProblem(message, self)


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The parser; imports only the command modules (which import nothing heavy).

    With ``only`` (a command name) just that subcommand is registered: what :func:`main` does
    when the first argument names a command, so a command does not pay for the others' parsers.
    """
    parser = Parser(
        prog=invoked_as(),
        description="Load, validate, run and inspect Attractor DOT pipelines.",
    )
    parser.add_argument("--version", action="version", version=f"freshness-magic {__version__}")
    parser.add_argument(
        "--print-completion",
        choices=COMPLETION_SHELLS,
        metavar="SHELL",
        help="print a completion script for SHELL (bash, zsh, tcsh) and exit",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in (only,) if only else COMMAND_MODULES:
        module = importlib.import_module(f"freshness_magic.commands.{name}")
        module.register(subparsers)
    return parser


def print_completion(parser: argparse.ArgumentParser, shell: str) -> int:
    """Write the completion script of ``shell`` to stdout (shtab builds it from the parser)."""
    try:
        import shtab
    except ImportError:
        raise FreshnessMagicError(
            "shell completion needs the shtab package: pip install 'freshness_magic[completion]'"
        ) from None
    parser.prog = "freshness-magic"  # what the shell completes is the script, however this ran
    sys.stdout.write(shtab.complete(parser, shell=shell))
    return 0


def error_document(exc: BaseException, command: str | None, args: Any) -> dict[str, Any]:
    """The JSON form of an error: message, kind, and where (file, line, column) when known."""
    where = getattr(args, "pipeline", None) or getattr(args, "run_dir", None)
    document: dict[str, Any] = {
        "error": getattr(exc, "message", None) or str(exc),
        "kind": "usage" if isinstance(exc, UsageProblem) else type(exc).__name__,
        "command": command,
        "file": getattr(exc, "path", None) or where,
        "line": getattr(exc, "line", None),
        "column": getattr(exc, "column", None),
    }
    diagnostics = getattr(exc, "diagnostics", None)
    if diagnostics:
        document["diagnostics"] = [d.to_dict() for d in diagnostics if hasattr(d, "to_dict")]
    return document


def _wants_json(argv: Sequence[str], args: Any) -> bool:
    return bool(getattr(args, "json", False)) or "--json" in argv


def _run(argv: Sequence[str]) -> int:
    parser = build_parser(argv[0] if argv and argv[0] in COMMAND_MODULES else None)
    args: Any = None
    try:
        args = parser.parse_args(argv)
        if args.print_completion:
            return print_completion(parser, args.print_completion)
        handler = getattr(args, "handler", None)
        if handler is None:
            parser.print_help(sys.stderr)
            return EXIT_USAGE
        return int(handler(args))
    except (UsageProblem, FreshnessMagicError) as exc:
        return _report(exc, argv, args)
    except OSError as exc:  # the machine refused: permissions, a full disk, a read-only mount
        if isinstance(exc, BrokenPipeError):
            raise
        return _report(FileAccessError(exc), argv, args)
    except KeyboardInterrupt:
        print(f"{_prefix(getattr(args, 'command', None))}: interrupted", file=sys.stderr)
        return 130
    except ModuleNotFoundError as exc:
        package = REQUIRED_MODULES.get((exc.name or "").split(".")[0])
        if package is None:
            raise
        print(
            f"{_prefix(getattr(args, 'command', None))}: the package {package!r}, which "
            f"freshness_magic needs, is not installed; install it (pip install {package}) or "
            "install freshness_magic again with its dependencies",
            file=sys.stderr,
        )
        return EXIT_USAGE


def _report(exc: Exception, argv: Sequence[str], args: Any) -> int:
    """An error as one line on stderr (a parse error with its source line and caret), or as one
    JSON object on stdout with ``--json``; exit code 2."""
    command = getattr(args, "command", None) or next(
        (a for a in argv if a in COMMAND_MODULES), None
    )
    if _wants_json(argv, args):
        print(json.dumps(error_document(exc, command, args), ensure_ascii=False))
    elif isinstance(exc, UsageProblem):
        exc.parser.print_usage(sys.stderr)
        print(f"{exc.parser.prog}: error: {exc}", file=sys.stderr)
    elif hasattr(exc, "render"):  # a parse error: message, source line, caret
        print(exc.render(), file=sys.stderr)
    else:
        print(f"{_prefix(command)}: {exc}", file=sys.stderr)
    return EXIT_USAGE


REQUIRED_MODULES = {
    "xxhash": "xxhash",
    "watchfiles": "watchfiles",
    "anywidget": "anywidget",
    "ipywidgets": "ipywidgets",
    "IPython": "ipython",
}
"""The modules of the package's required dependencies (pyproject.toml) -> their package names: a
missing one (an install with ``--no-deps``) is one line that says what to install."""


def _prefix(command: str | None) -> str:
    """What an error line starts with: the program as it was called (``python -m
    freshness_magic status``, ``freshness-magic status``), as argparse's usage errors say it."""
    return f"{invoked_as()} {command}" if command else invoked_as()


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code (see the module docstring)."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    try:
        if arguments == ["--version"]:  # answered before the parser and its modules load
            print(f"freshness-magic {__version__}")
            return 0
        code = _run(arguments)
        sys.stdout.flush()  # a closed pipe shows here, inside the handler below
        return code
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return EXIT_BROKEN_PIPE


def program() -> int:
    """The ``freshness-magic`` program (and ``python -m freshness_magic``): :func:`main`, after
    which the process ends."""
    return main()
