"""The IPython magics: ``%%pipeline``, ``%pipeline <subcommand>`` and ``%%node``.

One :class:`PipelineMagics` class holds the loaded pipelines (the last loaded is the default).
Every magic parses its line with argparse, so ``--help`` works and a user mistake is a one-line
``UsageError``; errors from the engine (a DOT syntax error, an unknown node, a bad answer) are
shown the same way, with the DOT line and a caret where there is one. Cell bodies are never
variable-expanded, and neither are magic lines (a condition may contain ``{`` or ``$``).
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn

from IPython.core.error import UsageError
from IPython.core.magic import (
    Magics,
    cell_magic,
    line_cell_magic,
    magics_class,
    no_var_expand,
)
from traitlets import Bool, Unicode

from freshness_magic.engine.model import Graph
from freshness_magic.errors import FreshnessMagicError
from freshness_magic.notebook.handle import NotebookPipeline, TextResult
from freshness_magic.notebook.render import LayoutCache

SUBCOMMANDS: tuple[str, ...] = (
    "load", "step", "run", "resume", "accept", "why", "cond", "status", "evidence", "reset",
    "list", "show", "hub",
)  # fmt: skip


class _HelpShown(Exception):
    """argparse printed help (``--help``); the text is returned to the user instead."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text


class MagicArgumentParser(argparse.ArgumentParser):
    """argparse that reports mistakes as ``UsageError`` and returns ``--help`` as text."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog}: {message} (see {self.prog} --help)")

    def exit(self, status: int = 0, message: str | None = None) -> NoReturn:
        if status:
            raise UsageError(message or f"{self.prog}: error")
        raise _HelpShown(self.format_help())

    def print_help(self, file: Any = None) -> None:
        raise _HelpShown(self.format_help())


def _parser(prog: str, description: str) -> MagicArgumentParser:
    return MagicArgumentParser(prog=prog, description=description, add_help=True)


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
        "load", help="load a pipeline from a .dot file", description="Load a .dot file."
    )
    p.add_argument("path", help="the .dot file")
    p.add_argument("--name", help="bind the pipeline to this name (default: the graph's name)")
    p.add_argument("--workdir", help="working directory of its runs")
    p.add_argument("--resume", action="store_true", help="resume its latest run if any")
    add("step", "execute the next node")
    p = add("run", "run to the exit, a failure, a human gate, or --to NODE")
    p.add_argument("--to", metavar="NODE", help="stop before executing this node")
    p.add_argument("--max-steps", type=int, metavar="N", help="stop after N steps")
    p = add("resume", "answer the waiting gate at NODE with CHOICE, then continue like run")
    p.add_argument("node", metavar="NODE")
    p.add_argument(
        "--choice",
        help="a choice key, label or target node id (default: the gate's human.default_choice)",
    )
    p = add("accept", "accept changed inputs as the new baseline (one node or all)")
    p.add_argument("node", nargs="?", metavar="NODE")
    p = add("why", "why a node is stale, blocked, failed or waiting")
    p.add_argument("node", metavar="NODE")
    p = add("cond", "evaluate a condition on the live context, clause by clause")
    p.add_argument("expr", metavar="EXPR", help='e.g. "outcome=success && context.x=1"')
    p.add_argument("--from", dest="from_node", metavar="NODE", help="also show the edge taken")
    add("status", "the node-state table")
    p = add("evidence", "evidence records from the run's log on disk")
    p.add_argument("node", nargs="?", metavar="NODE")
    add("reset", "discard the current run; the next step starts a new one")
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
    parser.add_argument("--workdir", help="working directory of its runs")
    parser.add_argument("--resume", action="store_true", help="resume its latest run if any")
    return parser


def build_node_parser() -> MagicArgumentParser:
    parser = _parser(
        "%%node",
        "Make the cell the handler of NODE. The cell sees `context`, `node` and `outcome`; set "
        "outcome to success|fail|partial_success|retry (default success). An exception is FAIL.",
    )
    parser.add_argument("node", metavar="NODE")
    parser.add_argument("--name", help="the pipeline (default: the last loaded)")
    return parser


HubHandler = Callable[["PipelineMagics", Sequence[str]], Any]


@magics_class
class PipelineMagics(Magics):
    """Pipelines in the notebook: load, step, run, answer gates, inspect."""

    default_workdir = Unicode(
        "", help="working directory for pipelines loaded without --workdir (default: cwd)"
    ).tag(config=True)
    auto_refresh = Bool(
        True, help="re-check stale inputs after every cell (cheap stat-cache check)"
    ).tag(config=True)

    def __init__(self, shell: Any = None, **kwargs: Any) -> None:
        super().__init__(shell=shell, **kwargs)
        self.pipelines: dict[str, NotebookPipeline] = {}
        self.current: str | None = None
        self.layout_cache = LayoutCache()
        self.hub_handler: HubHandler | None = None
        self._pipeline_parser = build_pipeline_parser()
        self._cell_parser = build_cell_parser()
        self._node_parser = build_node_parser()

    # --- helpers ---------------------------------------------------------------------------------

    def _parse(self, parser: MagicArgumentParser, line: str) -> argparse.Namespace | TextResult:
        try:
            argv = shlex.split(line)
        except ValueError as exc:
            raise UsageError(f"{parser.prog}: cannot split the line: {exc}") from None
        try:
            return parser.parse_args(argv)
        except _HelpShown as shown:
            return TextResult(shown.text)

    def _workdir(self, given: str | None) -> Path:
        raw = given or self.default_workdir or os.getcwd()
        return Path(os.path.expanduser(raw)).resolve()

    def get(self, name: str | None) -> NotebookPipeline:
        """The pipeline called ``name``, or the last loaded one."""
        key = name or self.current
        if key is None:
            raise UsageError("no pipeline loaded yet: use %%pipeline NAME or %pipeline load FILE")
        found = self.pipelines.get(key)
        if found is None:
            raise UsageError(
                f"no pipeline named {key!r}; loaded: {', '.join(self.pipelines) or 'none'}"
            )
        return found

    def _load_graph(self, text: str, path: str | None) -> Graph:
        from freshness_magic.engine.pipeline import load_pipeline
        from freshness_magic.engine.validation import validate_or_raise

        try:
            graph = load_pipeline(text, path=path)
            validate_or_raise(graph)
        except FreshnessMagicError as exc:
            raise UsageError(_error_text(exc)) from None
        return graph

    def _register(self, name: str, graph: Graph, workdir: Path, resume: bool) -> NotebookPipeline:
        if not name.isidentifier():
            raise UsageError(f"pipeline name {name!r} is not a Python identifier")
        namespace = self.shell.user_ns if self.shell is not None else {}
        old = self.pipelines.get(name)
        pipeline = NotebookPipeline(
            name=name,
            graph=graph,
            workdir=workdir,
            namespace=namespace,
            layout_cache=self.layout_cache,
            cells=dict(old.cells) if old is not None else {},
        )
        pipeline.cells = {k: v for k, v in pipeline.cells.items() if k in graph.nodes}
        if resume and not pipeline.resume_latest():
            raise UsageError(
                f"--resume: no saved run of {graph.name!r} under {workdir}/.freshness/runs"
            )
        self.pipelines[name] = pipeline
        self.current = name
        namespace[name] = pipeline
        return pipeline

    def _call(self, func: Callable[[], Any]) -> Any:
        try:
            return func()
        except FreshnessMagicError as exc:
            raise UsageError(_error_text(exc)) from None

    # --- magics ----------------------------------------------------------------------------------

    @no_var_expand
    @line_cell_magic
    def pipeline(self, line: str, cell: str | None = None) -> Any:
        if cell is not None:
            return self._pipeline_cell(line, cell)
        args = self._parse(self._pipeline_parser, line)
        if isinstance(args, TextResult):
            return args
        if args.command is None:
            return TextResult(self._pipeline_parser.format_help())
        return self._dispatch(args)

    def _pipeline_cell(self, line: str, cell: str) -> Any:
        args = self._parse(self._cell_parser, line)
        if isinstance(args, TextResult):
            return args
        graph = self._load_graph(cell, None)
        return self._register(args.name, graph, self._workdir(args.workdir), args.resume)

    def _dispatch(self, args: argparse.Namespace) -> Any:
        command = args.command
        if command == "load":
            path = Path(os.path.expanduser(args.path))
            try:
                text = path.read_text(encoding="utf-8")
            except OSError as exc:
                raise UsageError(f"%pipeline load: cannot read {path}: {exc.strerror}") from None
            graph = self._load_graph(text, str(path))
            name = args.name or graph.name
            if not name.isidentifier():
                raise UsageError(f"graph name {name!r} is not an identifier; pass --name NAME")
            return self._register(name, graph, self._workdir(args.workdir), args.resume)
        if command == "list":
            if not self.pipelines:
                return TextResult("no pipelines loaded")
            lines = [
                f"{'*' if n == self.current else ' '} {n:<16} {p.graph.name:<16} "
                f"{len(p.graph.nodes)} nodes  {p.state_name}"
                for n, p in self.pipelines.items()
            ]
            return TextResult("\n".join(lines))
        if command == "show":
            return self.get(args.name)
        if command == "hub":
            return self._call(lambda: self._hub()(self, args.args))
        pipeline = self.get(args.name)
        if command in ("resume", "why") or (command in ("accept", "evidence") and args.node):
            node = args.node
            if node not in pipeline.graph.nodes:
                raise UsageError(
                    f"%pipeline {command}: no node {node!r} in {pipeline.name}; nodes: "
                    + ", ".join(pipeline.graph.nodes)
                )
        actions: dict[str, Callable[[], Any]] = {
            "step": pipeline.step,
            "run": lambda: pipeline.run_to(args.to, args.max_steps),
            "resume": lambda: pipeline.resume(args.node, args.choice),
            "accept": lambda: pipeline.accept(args.node),
            "why": lambda: pipeline.why(args.node),
            "cond": lambda: self._cond(pipeline, args.expr, args.from_node),
            "status": lambda: TextResult(pipeline.status_text()),
            "evidence": lambda: pipeline.evidence(args.node),
            "reset": pipeline.reset,
        }
        if command in ("why", "status"):
            pipeline.refresh_freshness()
        if command == "run" and args.to is not None and args.to not in pipeline.graph.nodes:
            raise UsageError(f"%pipeline run --to: no node {args.to!r} in {pipeline.name}")
        if command == "run" and args.max_steps is not None and args.max_steps < 1:
            raise UsageError("%pipeline run --max-steps: N must be at least 1")
        return self._call(actions[command])

    def _hub(self) -> HubHandler:
        """The ``%pipeline hub`` implementation: ``hub_handler`` if set, else the hub package's
        :class:`~freshness_magic.hub.notebook.NotebookHub` (created once, closed on unload)."""
        if self.hub_handler is None:
            try:
                from freshness_magic.hub.notebook import NotebookHub
            except ImportError:
                raise UsageError(
                    "%pipeline hub: the Node State Hub commands are not available in this install"
                ) from None
            self.hub_handler = NotebookHub()
        return self.hub_handler

    def close(self) -> None:
        """Stop what the magics started (hub subscriptions); called on unload."""
        close = getattr(self.hub_handler, "close", None)
        if callable(close):
            close()

    @staticmethod
    def _cond(pipeline: NotebookPipeline, expr: str, from_node: str | None) -> TextResult:
        from freshness_magic.notebook.widget import explain_on_live_context

        if from_node is not None and from_node not in pipeline.graph.nodes:
            raise UsageError(f"%pipeline cond --from: no node {from_node!r} in {pipeline.name}")
        text, explanation = explain_on_live_context(pipeline, expr, from_node)
        return TextResult(text, explanation)

    @no_var_expand
    @cell_magic
    def node(self, line: str, cell: str) -> Any:
        args = self._parse(self._node_parser, line)
        if isinstance(args, TextResult):
            return args
        pipeline = self.get(args.name)
        if args.node not in pipeline.graph.nodes:
            raise UsageError(
                f"%%node: no node {args.node!r} in {pipeline.name}; nodes: "
                + ", ".join(pipeline.graph.nodes)
            )
        try:
            compile(cell, f"<%%node {args.node}>", "exec")
        except SyntaxError as exc:
            raise UsageError(f"%%node {args.node}: line {exc.lineno}: {exc.msg}") from None
        self._call(lambda: pipeline.set_cell(args.node, cell))
        return TextResult(f"{pipeline.name}.{args.node}: handled by this cell")

    # --- hooks -----------------------------------------------------------------------------------

    def post_execute(self) -> None:
        """After every cell: re-check stale inputs of every loaded pipeline with a run."""
        if not self.auto_refresh:
            return
        for pipeline in self.pipelines.values():
            if not pipeline.has_run or pipeline.busy:
                continue
            try:
                pipeline.refresh_freshness()
            except FreshnessMagicError as exc:
                print(f"freshness_magic: cannot re-check {pipeline.name}: {exc}", file=sys.stderr)

    def complete(self, line: str, symbol: str) -> list[str]:
        """Completions for a magic line: subcommands, flags, node ids, pipeline names."""
        words = line.split()
        if line.endswith(" "):
            words.append("")
        if not words:
            return []
        magic = words[0].lstrip("%")
        args = words[1:]
        if magic == "node":
            return self._complete_nodes(args, symbol)
        if len(args) <= 1:
            return [c for c in SUBCOMMANDS if c.startswith(symbol)]
        sub = args[0]
        flags = _FLAGS.get(sub, ["--name"])
        if symbol.startswith("-"):
            return [f for f in [*flags, "--help"] if f.startswith(symbol)]
        previous = args[-2] if len(args) >= 2 else ""
        if previous == "--name" or sub == "show":
            return [n for n in self.pipelines if n.startswith(symbol)]
        if sub == "load" and previous not in ("--workdir",):
            return []
        if sub in ("list", "status", "step", "reset", "hub"):
            return []
        try:
            pipeline = self.get(_name_from(args))
        except UsageError:
            return []
        if previous == "--choice":
            gate = pipeline.pending_gate()
            return [c.key for c in gate.choices if c.key.startswith(symbol)] if gate else []
        return [n for n in pipeline.graph.nodes if n.startswith(symbol)]

    def _complete_nodes(self, args: list[str], symbol: str) -> list[str]:
        previous = args[-2] if len(args) >= 2 else ""
        if previous == "--name":
            return [n for n in self.pipelines if n.startswith(symbol)]
        if symbol.startswith("-"):
            return [f for f in ("--name", "--help") if f.startswith(symbol)]
        try:
            pipeline = self.get(_name_from(args))
        except UsageError:
            return []
        return [n for n in pipeline.graph.nodes if n.startswith(symbol)]


_FLAGS: dict[str, list[str]] = {
    "load": ["--name", "--workdir", "--resume"],
    "run": ["--to", "--max-steps", "--name"],
    "resume": ["--choice", "--name"],
    "cond": ["--from", "--name"],
    "list": [],
    "show": [],
    "hub": [],
}


def _name_from(args: list[str]) -> str | None:
    for i, word in enumerate(args[:-1]):
        if word == "--name":
            return args[i + 1]
        if word.startswith("--name="):
            return word.split("=", 1)[1]
    return None


def _error_text(exc: FreshnessMagicError) -> str:
    """The user-facing text of an engine error (ParseError already has line + caret)."""
    return str(exc)


def _set_docs() -> None:
    """Make ``%pipeline?`` and ``%%node?`` show the argparse help."""
    PipelineMagics.pipeline.__doc__ = (
        build_cell_parser().format_help() + "\n" + build_pipeline_parser().format_help()
    )
    PipelineMagics.node.__doc__ = build_node_parser().format_help()


_set_docs()
