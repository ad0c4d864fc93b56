"""The argument parsers of ``%pipeline``, ``%%pipeline`` and ``%%node`` (argparse, so ``--help``
works and a mistake is a one-line ``UsageError``)."""

from __future__ import annotations

import argparse
import shlex
from typing import Any, NoReturn

from IPython.core.error import UsageError

from freshness_magic.choices import HintingParser, path_arg

SUBCOMMANDS: tuple[str, ...] = (
    "load", "step", "run", "resume", "retry", "stop", "accept", "why", "cond", "status",
    "evidence", "reset", "list", "show", "hub",
)  # fmt: skip

FLAGS: dict[str, list[str]] = {
    "load": ["--name", "--workdir", "--resume", "--var", "--force"],
    "step": ["--backend", "--executor", "--name"],
    "run": ["--to", "--max-steps", "--backend", "--executor", "--name"],
    "resume": ["--choice", "--comment", "--to", "--backend", "--executor", "--name"],
    "retry": ["--backend", "--executor", "--name"],
    "cond": ["--from", "--step", "--name"],
    "list": [],
    "show": [],
    "hub": [],
}
"""The flags each subcommand completes (``--name`` when not listed)."""


class HelpShown(Exception):
    """argparse printed help (``--help``); the text is returned to the user instead."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text


class MagicArgumentParser(HintingParser):
    """argparse that reports mistakes as ``UsageError`` and returns ``--help`` as text."""

    def parse_args(self, args: Any = None, namespace: Any = None) -> Any:
        self._argv = list(args or [])
        return super().parse_args(args, namespace)

    def error(self, message: str) -> NoReturn:
        """A ``UsageError`` pointing at the help of the subcommand the line named, if any."""
        argv = getattr(self, "_argv", [])
        sub = argv[0] if argv and argv[0] in _subcommands(self) else ""
        help_of = f"{self.prog} {sub}".rstrip()
        raise UsageError(f"{self.prog}: {message} (see {help_of} --help)")

    def exit(self, status: int = 0, message: str | None = None) -> NoReturn:
        if status:
            raise UsageError(message or f"{self.prog}: error")
        raise HelpShown(self.format_help())

    def print_help(self, file: Any = None) -> None:
        raise HelpShown(self.format_help())


def _subcommands(parser: argparse.ArgumentParser) -> set[str]:
    """The subcommand names ``parser`` takes (none for a parser without subcommands)."""
    names: set[str] = set()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            names.update(action.choices)
    return names


def _parser(prog: str, description: str) -> MagicArgumentParser:
    return MagicArgumentParser(prog=prog, description=description, add_help=True)


def _run_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--backend",
        metavar="SPEC",
        help="codergen backend (default: %%config PipelineMagics.backend); a run that has "
        "begun is reopened with it",
    )
    parser.add_argument(
        "--executor",
        metavar="SPEC",
        help="where node work runs (default: %%config PipelineMagics.executor); a run that "
        "has begun is reopened with it",
    )
    parser.add_argument(
        "--reuse",
        action="store_true",
        help="in this action, take a node from an earlier successful execution with the same "
        "definition, input files and read values instead of running it",
    )


def build_pipeline_parser() -> MagicArgumentParser:
    """The parser of ``%pipeline``: one subcommand per action."""
    parser = _parser(
        "%pipeline",
        "Drive a loaded pipeline. With several pipelines loaded, --name selects one "
        "(default: the last loaded). The cell form %%pipeline NAME loads DOT from the cell.",
    )
    sub = parser.add_subparsers(
        dest="command", metavar="SUBCOMMAND", parser_class=MagicArgumentParser
    )

    def add(name: str, help_text: str) -> Any:
        p = sub.add_parser(name, help=help_text, description=help_text)
        p.add_argument("--name", help="the pipeline to act on (default: the last loaded)")
        return p

    p = sub.add_parser(
        "load",
        help="load a pipeline from a .dot file or a variable",
        description="Load a .dot file ({var} and $var in PATH expand from the user namespace), "
        "or with --var a Graph, pydot.Dot, graphviz.Digraph or DOT string variable.",
    )
    p.add_argument("path", nargs="?", help="the .dot file")
    p.add_argument("--var", metavar="VARIABLE", help="load from this user variable instead")
    p.add_argument("--name", help="bind the pipeline to this name (default: the graph's name)")
    p.add_argument("--workdir", type=path_arg, help="working directory of its runs")
    p.add_argument("--resume", action="store_true", help="resume its latest run if any")
    p.add_argument(
        "--keep-run",
        action="store_true",
        help="go on with the run of this pipeline, carried over to the edited pipeline",
    )
    p.add_argument("--force", action="store_true", help="replace a variable of that name")
    p = add("step", "execute the next node")
    _run_options(p)
    p = add("run", "run to the exit, a failure, a human gate, or --to NODE")
    p.add_argument("--to", metavar="NODE", help="stop before executing this node")
    p.add_argument("--max-steps", type=int, metavar="N", help="stop after N steps")
    _run_options(p)
    p = add(
        "resume",
        "answer the waiting gate at NODE with CHOICE, then continue like run; without NODE, "
        "reopen the unfinished or failed run found on disk",
    )
    p.add_argument("node", nargs="?", metavar="NODE")
    p.add_argument(
        "--choice",
        help="a choice key, label or target node id (default: the gate's human.default_choice)",
    )
    p.add_argument("--comment", help="a note kept in the gate's evidence and context")
    p.add_argument("--to", metavar="NODE", help="stop before executing this node")
    _run_options(p)
    p = add("retry", "re-arm a failed or stopped run at its failed node (or NODE), then run")
    p.add_argument("node", nargs="?", metavar="NODE")
    _run_options(p)
    add("stop", "stop the running action after (or, where the engine can, during) its node")
    p = add("accept", "accept changed inputs as the new baseline (of the nodes named, or all)")
    p.add_argument("nodes", nargs="*", metavar="NODE")
    p = add("why", "why a node is stale, blocked, failed or waiting")
    p.add_argument("node", metavar="NODE")
    p = add("cond", "evaluate a condition on the live context, clause by clause")
    p.add_argument("expr", metavar="EXPR", help='e.g. "outcome=success && context.x=1"')
    p.add_argument(
        "--from",
        dest="from_node",
        metavar="NODE",
        help="in the context and outcome of NODE's latest execution; also show the edge taken",
    )
    p.add_argument(
        "--step",
        type=int,
        metavar="N",
        help="in the context of the execution at step N (with --from: an earlier one of NODE)",
    )
    add("status", "the node-state table")
    p = add("evidence", "evidence records from the run's log on disk")
    p.add_argument("node", nargs="?", metavar="NODE")
    add("reset", "discard the current run; the next step starts a new one")
    add(
        "keep",
        "carry the run of an earlier text of this pipeline (the one offered, else the latest) "
        "over to this text: unchanged nodes keep their results, edited ones show stale",
    )
    sub.add_parser("list", help="the loaded pipelines", description="List loaded pipelines.")
    p = sub.add_parser("show", help="display a pipeline's widget", description="Show the widget.")
    p.add_argument("name", nargs="?", metavar="NAME")
    p = sub.add_parser("hub", help="Node State Hub commands",
                       description="Node State Hub commands.")  # fmt: skip
    p.add_argument("args", nargs=argparse.REMAINDER)
    return parser


def build_cell_parser() -> MagicArgumentParser:
    parser = _parser(
        "%%pipeline",
        "Load the cell's DOT as pipeline NAME (bound to NAME). Neither the DOT nor the magic "
        "line is variable-expanded ($x and {x} stay as written); set a default folder with "
        "%config PipelineMagics.default_workdir = '...'.",
    )
    parser.add_argument("name", metavar="NAME", help="a Python identifier")
    parser.add_argument("--workdir", type=path_arg, help="working directory of its runs")
    parser.add_argument("--resume", action="store_true", help="resume its latest run if any")
    parser.add_argument(
        "--keep-run",
        action="store_true",
        help="go on with the run of NAME (the live one, else the latest on disk), carried over "
        "to the edited pipeline: unchanged nodes keep their results, edited ones show stale",
    )
    parser.add_argument(
        "--force", action="store_true", help="replace a variable NAME that is not a pipeline"
    )
    return parser


def build_node_parser() -> MagicArgumentParser:
    parser = _parser(
        "%%node",
        "Make the cell the handler of NODE. The cell sees `context`, `node` and `outcome`; set "
        "outcome to success|fail|partial_success|retry (default success). An exception is FAIL. "
        "What the cell prints goes to the node's folder (nodes/NODE/cell_output.txt).",
    )
    parser.add_argument("node", metavar="NODE")
    parser.add_argument("--name", help="the pipeline (default: the last loaded)")
    return parser


def name_from(args: list[str]) -> str | None:
    """The value of ``--name`` in a partly typed magic line."""
    for i, word in enumerate(args[:-1]):
        if word == "--name":
            return args[i + 1]
        if word.startswith("--name="):
            return word.split("=", 1)[1]
    return None


CELL_MAGICS: tuple[str, ...] = ("pipeline", "node")
"""The cell magics whose ``--help`` works without a body (see :func:`help_without_body`)."""


def split_line(line: str) -> list[str]:
    """A magic line's words, as a POSIX shell splits them: quotes group, and a ``#`` that starts
    a word begins a comment to the end of the line (``%pipeline step  # the next node``), so the
    lines the documentation shows work pasted; ``fix#2`` and ``"#2"`` stay words. Raises
    ``ValueError`` for an unclosed quote, as :func:`shlex.split` does."""
    return shlex.split(line[: _comment_start(line)])


def _comment_start(line: str) -> int:
    """Where a shell comment begins in ``line`` (its length when there is none)."""
    quote: str | None = None
    escaped = False
    for at, char in enumerate(line):
        if escaped:
            escaped = False
        elif char == "\\" and quote != "'":
            escaped = True
        elif quote is not None:
            quote = None if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (at == 0 or line[at - 1].isspace()):
            return at
    return len(line)


def asks_for_help(line: str) -> bool:
    """Whether a magic line asks for help: ``-h``, ``--help`` or an abbreviation argparse takes
    (``--he``), before any ``--``."""
    try:
        words = split_line(line)
    except ValueError:
        return False
    for word in words:
        if word == "--":
            return False
        if word == "-h" or (len(word) >= 3 and "--help".startswith(word)):
            return True
    return False


def help_without_body(lines: list[str]) -> list[str]:
    """An input transformer (IPython's cleanup stage): ``%%pipeline --help`` or ``%%node -h``
    alone in a cell gets an empty line as its body.

    IPython refuses a cell magic whose body is empty before calling it ("the cell body is
    empty"), so the magic's parser never saw the help request; with a body it does, and the
    help is shown as ``%pipeline --help`` shows it. Any other cell is left as it is.
    """
    if len(lines) != 1 or not lines[0].startswith("%%"):
        return lines
    name, _, rest = lines[0][2:].rstrip().partition(" ")
    if name not in CELL_MAGICS or not asks_for_help(rest):
        return lines
    return [lines[0] if lines[0].endswith("\n") else lines[0] + "\n", "\n"]
