"""The IPython magics: ``%%pipeline``, ``%pipeline <subcommand>`` and ``%%node``.

Parsing and dispatch only: each magic parses its line (:mod:`~freshness_magic.notebook.arguments`)
and calls one method of a :class:`~freshness_magic.notebook.pipeline.Pipeline`. The loaded
pipelines live in the user namespace (the variable bound to each), not in this object, so they
survive ``%reload_ext``; the newest loaded is the default. Errors from the engine are shown as a
one-line ``UsageError`` (DOT errors with the cell-relative line and a caret). Cell bodies are never
variable-expanded, and neither are magic lines (a condition may contain ``{`` or ``$``); only the
path of ``%pipeline load`` is.
"""

from __future__ import annotations

import argparse
import builtins
import functools
import keyword
import os
import re
import sys
import weakref
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, cell_magic, line_cell_magic, magics_class, no_var_expand
from traitlets import Bool, CaselessStrEnum, TraitError, Unicode, validate

from freshness_magic.cluster import ClusterPool, parse_executor
from freshness_magic.engine.model import Graph
from freshness_magic.engine.pipeline import read_pipeline_text
from freshness_magic.engine.validation import Diagnostic
from freshness_magic.engine.validation.attrs import closest, no_node
from freshness_magic.errors import ClusterError, FreshnessMagicError, ParseError, PipelineFileError
from freshness_magic.notebook.arguments import (
    HelpShown,
    MagicArgumentParser,
    build_cell_parser,
    build_node_parser,
    build_pipeline_parser,
    split_line,
)
from freshness_magic.notebook.completion import complete_line
from freshness_magic.notebook.pipeline import RUN_SPECS, Pipeline
from freshness_magic.pathsafety import workdir_problem
from freshness_magic.views.explain import ConditionAnswer
from freshness_magic.views.render import LayoutCache
from freshness_magic.views.text import TextResult

HubHandler = Callable[["PipelineMagics", Sequence[str]], Any]
_NEEDS_NODE = ("why",)
_MAY_NAME_NODE = ("evidence", "resume", "retry")


_REPLACED = {
    "wait.human": "a human gate: the run no longer asks there, the cell's outcome routes on",
    "parallel": "a parallel node: its branches no longer fan out from it",
    "parallel.fan_in": "a fan-in node: the cell runs instead of joining the branches' results",
    "stack.manager_loop": "a manager node: its child pipeline no longer runs",
    "conditional": "a conditional node: the cell's outcome routes on instead",
}
"""What a ``%%node`` cell takes away when it replaces one of these handlers (said, not refused:
replacing a gate with code is how a notebook automates it)."""


@magics_class
class PipelineMagics(Magics):
    """Pipelines in the notebook: load, step, run, answer gates, inspect."""

    default_workdir = Unicode(
        "", help="working directory for pipelines loaded without --workdir (default: cwd)"
    ).tag(config=True)
    auto_refresh = Bool(
        True, help="re-check stale inputs after every cell (cheap stat-cache check)"
    ).tag(config=True)
    backend = Unicode(
        "", help="codergen backend spec of new runs (e.g. 'simulated'); '' is the default"
    ).tag(config=True)
    executor = Unicode(
        "",
        help="where tool commands of new runs run: 'local', 'dask' (a cluster on this machine) "
        "or 'dask://HOST:PORT'; '' takes the pipeline's executor attribute",
    ).tag(config=True)
    step_lines = CaselessStrEnum(
        ("auto", "live", "end"),
        default_value="auto",
        help="when run, resume and retry print their step lines: 'live' as each step ends, "
        "'end' in the result (a notebook's view is live already); 'auto': live in terminal "
        "IPython. A single step's line is always its result",
    ).tag(config=True)

    def _live_lines(self) -> Callable[[str], None] | None:
        """Where step lines go as they come (:attr:`step_lines`); None: only in the result."""
        live = self.step_lines == "live" or (
            self.step_lines == "auto" and type(self.shell).__name__ == "TerminalInteractiveShell"
        )
        return functools.partial(print, flush=True) if live else None

    @validate("default_workdir")
    def _folder_workdir(self, proposal: Any) -> str:
        """Refuse a file (or a path under one) when it is set, not at the first step."""
        value = str(proposal["value"])
        if value and (problem := workdir_problem(_as_path(value))):
            raise TraitError(f"PipelineMagics.default_workdir = {value!r}: {problem}")
        return value

    @validate("executor")
    def _known_executor(self, proposal: Any) -> str:
        """Refuse an unknown spec when it is set, not at the first run."""
        try:
            parse_executor(proposal["value"])
        except ClusterError as exc:
            raise TraitError(str(exc)) from None
        return str(proposal["value"])

    def __init__(self, shell: Any = None, **kwargs: Any) -> None:
        super().__init__(shell=shell, **kwargs)
        self.layout_cache = LayoutCache()
        self.clusters = ClusterPool()
        self.hub_handler: HubHandler | None = None
        self._pipeline_parser = build_pipeline_parser()
        self._cell_parser = build_cell_parser()
        self._node_parser = build_node_parser()
        self._loaded: weakref.WeakSet[Pipeline] = weakref.WeakSet()
        """Every pipeline object loaded here, also those no variable names any more (``del``):
        a newer load of the name supersedes them all, so an old view cannot act."""

    # --- the loaded pipelines --------------------------------------------------------------------

    @property
    def namespace(self) -> dict[str, Any]:
        return self.shell.user_ns if self.shell is not None else {}

    def pipelines(self) -> dict[str, Pipeline]:
        """The loaded pipelines by name (the variables bound to live pipeline objects)."""
        found = [
            (name, value)
            for name, value in list(self.namespace.items())
            if isinstance(value, Pipeline) and value.name == name and not value.live.superseded
        ]
        return dict(sorted(found, key=lambda item: item[1].loaded_at))

    @property
    def current(self) -> str | None:
        """The name of the newest loaded pipeline."""
        names = list(self.pipelines())
        return names[-1] if names else None

    def get(self, name: str | None) -> Pipeline:
        """The pipeline called ``name``, or the last loaded one."""
        loaded = self.pipelines()
        key = name or self.current
        if key is None:
            raise UsageError(
                "no pipeline loaded yet: use %%pipeline NAME or %pipeline load FILE (after a "
                "kernel restart, run that cell again: it offers the run it left on disk)"
            )
        found = loaded.get(key)
        if found is None:
            near = closest(key, loaded)
            hint = f" (did you mean {near!r}?)" if near is not None else ""
            raise UsageError(
                f"no pipeline named {key!r}{hint}; loaded: {', '.join(loaded) or 'none'}"
            )
        return found

    def target_note(self) -> str:
        """Which pipeline a ``%pipeline`` line without ``--name`` acts on now (``%pipeline?``)."""
        loaded = list(self.pipelines())
        if not loaded:
            return "Now: no pipeline is loaded, so a %pipeline action has nothing to act on."
        note = f"Now: without --name, %pipeline acts on {loaded[-1]} (the last loaded)"
        if len(loaded) > 1:
            note += f"; loaded: {', '.join(loaded)} (add --name NAME for another)"
        return note + "."

    # --- helpers ---------------------------------------------------------------------------------

    def _node_check(self, pipeline: Pipeline, *, named: bool) -> Callable[[str | None, str], None]:
        """A check that a node id given to ``where`` is one of ``pipeline``'s: a name another
        loaded pipeline has is refused naming that pipeline and the ``--name`` to add (magics
        go to the last loaded pipeline unless told otherwise)."""

        def require(node_id: str | None, where: str) -> None:
            if node_id is None or node_id in pipeline.graph.nodes:
                return
            owners = [
                name
                for name, other in self.pipelines().items()
                if other is not pipeline and node_id in other.graph.nodes
            ]
            if not owners:
                _require_node(pipeline, node_id, where)
                return
            which = "named by --name" if named else "the last loaded, which magics act on"
            raise UsageError(
                f"{where}: no node {node_id!r} in {pipeline.name} ({which}); {node_id!r} is a "
                f"node of {' and '.join(owners)}: add --name {owners[0]}"
            )

        return require

    def _parse(self, parser: MagicArgumentParser, line: str) -> argparse.Namespace | TextResult:
        try:
            argv = split_line(line)
        except ValueError as exc:
            raise UsageError(
                f"{parser.prog}: cannot split the line: {unsplit(line, exc)}"
            ) from None
        try:
            return parser.parse_args(argv)
        except HelpShown as shown:
            return TextResult(shown.text)
        except UsageError as exc:
            named = [arg for arg in argv[1:] if arg in self.pipelines()]
            if not named or "unrecognized arguments" not in str(exc):
                raise
            raise UsageError(
                f"{exc}; a pipeline is named with --name: %pipeline {argv[0]} --name {named[0]}"
            ) from None

    def _workdir(self, given: str | None, *, loading: bool = False) -> Path:
        """The working directory: ``--workdir``, else ``default_workdir``, else the current
        folder. A path that is a file (or under one) is refused here, before a run is opened;
        a missing folder is created by the first step (``loading``: a note says so)."""
        raw = given or self.default_workdir or os.getcwd()
        path = _as_path(raw)
        problem = workdir_problem(path)
        if problem is not None:
            what = "--workdir" if given else "PipelineMagics.default_workdir"
            raise UsageError(f"{what} {raw}: {problem}")
        if loading and not path.exists():
            print(
                f"note: the working directory {path} does not exist yet; the first step creates it",
                file=sys.stderr,
            )
        return path

    def _load_graph(
        self, text: str, path: str | None, workdir: Path, cell: str | None = None
    ) -> Graph:
        """Parse and validate against ``workdir`` (where the run reads its ``source_files``); in a
        cell (``cell`` names it) lines count from the magic line.

        Warnings are printed on stderr (notes are not), as ``freshness-magic run`` prints them.
        A pipeline with errors is refused with its errors and its warnings in source order, as
        ``freshness-magic validate`` lists them: a warning often says why (``tool_comand``, a
        misspelt ``tool_command``, is what leaves a tool node without its command).
        """
        from freshness_magic.engine.pipeline import load_pipeline
        from freshness_magic.engine.validation import Severity
        from freshness_magic.lint import session_validator

        validator = session_validator(workdir=workdir)
        try:
            graph = load_pipeline(text, path=path)
            diagnostics = validator.validate(graph)
        except ParseError as exc:
            if cell is None:
                raise UsageError(str(exc)) from None
            raise UsageError(_parse_error_in_cell(text, cell) or str(exc)) from None
        except FreshnessMagicError as exc:
            raise UsageError(str(exc)) from None
        shown = [d for d in diagnostics if d.severity is not Severity.INFO]
        if shown and cell is not None:
            below = validator.validate(_as_below_magic_line(text))
            shown = [d for d in below if d.severity is not Severity.INFO]
        if any(d.severity is Severity.ERROR for d in shown):
            raise UsageError(_refusal(graph, shown, cell or path))
        for diagnostic in shown:
            print(diagnostic.format(cell or path), file=sys.stderr)
        return graph

    def _register(
        self,
        name: str,
        graph: Graph,
        workdir: Path,
        *,
        resume: bool,
        force: bool,
        keep_run: bool = False,
    ) -> Pipeline:
        if not name.isidentifier() or keyword.iskeyword(name):
            kind = "a Python keyword" if name.isidentifier() else "not a Python identifier"
            raise UsageError(f"pipeline name {name!r} is {kind}; choose another name")
        namespace = self.namespace
        old = namespace.get(name)
        if name in namespace and not isinstance(old, Pipeline) and not force:
            raise UsageError(
                f"{name!r} is already a variable ({type(old).__name__}), not a pipeline; "
                "choose another name or add --force to replace it"
            )
        if name not in namespace and hasattr(builtins, name) and not force:
            raise UsageError(
                f"{name!r} is a Python builtin, which a pipeline of that name would hide in this "
                "notebook; choose another name or add --force"
            )
        earlier = {p for p in self._loaded if p.name == name and not p.live.superseded}
        if isinstance(old, Pipeline):
            earlier.add(old)
        _refuse_while_running(name, earlier)
        cells = dict(old.live.cells) if isinstance(old, Pipeline) else {}
        pipeline = Pipeline.loaded(
            name,
            graph,
            workdir,
            namespace=namespace,
            layout_cache=self.layout_cache,
            clusters=self.clusters,
            cells={k: v for k, v in cells.items() if k in graph.nodes},
        )
        for key in RUN_SPECS:  # the configured specs, so every action uses them
            if getattr(self, key):
                pipeline.live.run_options[key] = getattr(self, key)
        if resume and keep_run:
            raise UsageError("--resume and --keep-run: give one (--keep-run resumes it edited)")
        if keep_run:
            for replaced in earlier:  # a live run of the old text goes on in this object
                replaced.supersede()
            print(self._call(pipeline.keep_run).text)
        if resume and not self._call(pipeline.live.resume_latest):
            raise UsageError(
                f"--resume: no saved run of {graph.name!r} under {workdir}/.freshness/runs"
            )
        for line in pipeline.live.resume_notes:
            print(line)
        if not resume and not keep_run:
            pipeline.live.offer_resume()
        for replaced in earlier:
            replaced.supersede()
        self._loaded.add(pipeline)
        namespace[name] = pipeline
        return pipeline

    def _call(self, func: Callable[[], Any]) -> Any:
        try:
            return func()
        except FreshnessMagicError as exc:
            raise UsageError(str(exc)) from None

    def _run_options(self, pipeline: Pipeline, args: argparse.Namespace) -> None:
        """``--backend``/``--executor`` (else the configured ones) for the run: the next one, or
        the open one while it has not begun. A run that has begun keeps what it was opened with
        unless the action names a spec: then it is reopened from its directory with it (as the
        CLI's ``resume --backend``), so a run whose model failed goes on with another one; a
        configured spec waits for the next run."""
        wanted: dict[str, str] = {}
        for key in RUN_SPECS:
            value = getattr(args, key, None) or getattr(self, key)
            if value and pipeline.live.run_options.get(key) != value:
                wanted[key] = value
        if not wanted or self._call(lambda: pipeline.live.use_run_options(wanted)):
            return
        given = {key: value for key, value in wanted.items() if getattr(args, key, None)}
        if given:
            self._call(lambda: pipeline.live.use_run_options(given, reopen=True))
            said = ", ".join(f"{key} {value}" for key, value in given.items())
            print(f"note: the run of {pipeline.name} goes on with {said}")

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
        workdir = self._workdir(args.workdir, loading=True)
        graph = self._load_graph(cell, None, workdir, cell=f"%%pipeline {args.name} cell")
        return self._register(
            args.name,
            graph,
            workdir,
            resume=args.resume,
            force=args.force,
            keep_run=args.keep_run,
        )

    def _load(self, args: argparse.Namespace) -> Pipeline:
        workdir = self._workdir(args.workdir, loading=True)
        if args.var:
            graph = self._graph_from_variable(args.var, workdir)
        elif args.path:
            expanded = self.shell.var_expand(args.path) if self.shell is not None else args.path
            path = Path(os.path.expanduser(expanded))
            try:
                text = read_pipeline_text(path)
            except PipelineFileError as exc:
                unknown = [
                    name
                    for name in re.findall(r"(?<!\{)\{([A-Za-z_]\w*)\}", expanded)
                    if name not in self.namespace
                ]
                if unknown and not path.exists():
                    raise UsageError(
                        f"%pipeline load: {exc}; {{{unknown[0]}}} names no variable of this "
                        "notebook (it is expanded from the notebook's variables: define it "
                        "first, or write the path)"
                    ) from None
                raise UsageError(f"%pipeline load: {exc}") from None
            graph = self._load_graph(text, str(path), workdir)
        else:
            raise UsageError("%pipeline load: give a PATH or --var VARIABLE")
        name = args.name or graph.name
        if not name.isidentifier():
            raise UsageError(f"graph name {name!r} is not an identifier; pass --name NAME")
        return self._register(
            name, graph, workdir, resume=args.resume, force=args.force, keep_run=args.keep_run
        )

    def _graph_from_variable(self, variable: str, workdir: Path) -> Graph:
        """A Graph, DOT text, or (with the interop module) a pydot / graphviz object."""
        if variable not in self.namespace:
            raise UsageError(f"%pipeline load --var: no variable {variable!r}")
        value = self.namespace[variable]
        if isinstance(value, Graph):
            return value
        if isinstance(value, str):
            return self._load_graph(value, None, workdir)
        from freshness_magic.interop import graph_from_object

        try:
            return graph_from_object(value)
        except FreshnessMagicError as exc:
            raise UsageError(f"%pipeline load --var {variable}: {exc}") from None

    def _dispatch(self, args: argparse.Namespace) -> Any:
        command = args.command
        if command == "load":
            return self._load(args)
        if command == "list":
            return self._list()
        if command == "show":
            return self.get(args.name)
        if command == "hub":
            return self._call(lambda: self._hub()(self, args.args))
        pipeline = self.get(args.name)
        node = getattr(args, "node", None)
        require = self._node_check(pipeline, named=args.name is not None)
        if command in _NEEDS_NODE or command in _MAY_NAME_NODE:
            require(node, f"%pipeline {command}")
        for node_id in getattr(args, "nodes", ()):  # accept's
            require(node_id, f"%pipeline {command}")
        if command in ("run", "resume"):
            require(args.to, f"%pipeline {command} --to")
        if command == "run" and args.max_steps is not None and args.max_steps < 1:
            raise UsageError("%pipeline run --max-steps: N must be at least 1")
        if command == "cond":
            require(args.from_node, "%pipeline cond --from")
        if command in ("step", "run", "resume", "retry"):
            self._run_options(pipeline, args)
            pipeline.live.use_reuse(args.reuse)
        pipeline.live_lines = self._live_lines()
        if command in ("why", "status"):
            pipeline.live.refresh_freshness()
        actions: dict[str, Callable[[], Any]] = {
            "step": pipeline.step,
            "run": lambda: pipeline.run_to(args.to, args.max_steps),
            "resume": lambda: pipeline.resume(node, args.choice, args.comment, to=args.to),
            "retry": lambda: pipeline.retry(node),
            "stop": pipeline.stop,
            "accept": lambda: pipeline.accept(*args.nodes),
            "why": lambda: pipeline.why(str(node)),
            "cond": lambda: _cond_text(
                pipeline.view.explain(args.expr, args.from_node, step=args.step)
            ),
            "status": pipeline.status,
            "evidence": lambda: pipeline.evidence(node),
            "reset": pipeline.reset,
            "keep": pipeline.keep_run,
        }
        return self._call(actions[command])

    def _list(self) -> TextResult:
        loaded = self.pipelines()
        if not loaded:
            return TextResult("no pipelines loaded")
        current = self.current
        rows = [("", "variable", "graph", "nodes", "state", "workdir")]
        for name, pipeline in loaded.items():
            graph = pipeline.graph
            mark = "*" if name == current else " "
            state = pipeline.view.state_name
            rows.append(
                (mark, name, graph.name, str(len(graph.nodes)), state, str(pipeline.workdir))
            )
        widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
        return TextResult(
            "\n".join(
                "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
                for row in rows
            )
        )

    def _hub(self) -> HubHandler:
        """The ``%pipeline hub`` implementation: ``hub_handler`` if set, else a
        :class:`~freshness_magic.notebook.hubcmd.NotebookHub` (created once, closed on unload)."""
        if self.hub_handler is None:
            from freshness_magic.notebook.hubcmd import NotebookHub

            self.hub_handler = NotebookHub()
        return self.hub_handler

    def close(self) -> None:
        """Stop what the magics started (hub subscriptions, input watchers); on unload and exit."""
        close = getattr(self.hub_handler, "close", None)
        if callable(close):
            close()
        for pipeline in self.pipelines().values():
            pipeline.close()
        self.clusters.close()

    @no_var_expand
    @cell_magic
    def node(self, line: str, cell: str) -> Any:
        args = self._parse(self._node_parser, line)
        if isinstance(args, TextResult):
            return args
        pipeline = self.get(args.name)
        _require_node(pipeline, args.node, "%%node")
        try:
            compile(cell, f"<%%node {args.node}>", "exec")
        except SyntaxError as exc:
            raise UsageError(f"%%node {args.node}: line {exc.lineno}: {exc.msg}") from None
        replaced = pipeline.graph.nodes[args.node].handler_type
        self._call(lambda: pipeline.live.set_cell(args.node, cell))
        said = f"{pipeline.name}.{args.node}: handled by this cell"
        lost = _REPLACED.get(replaced)
        return TextResult(f"{said}\nnote: it was {lost}" if lost else said)

    # --- hooks -----------------------------------------------------------------------------------

    def post_execute(self) -> None:
        """After every cell: re-check stale inputs of every loaded pipeline with a run."""
        if not self.auto_refresh:
            return
        for pipeline in self.pipelines().values():
            try:
                pipeline.live.refresh_freshness()
            except FreshnessMagicError as exc:
                print(f"freshness_magic: cannot re-check {pipeline.name}: {exc}", file=sys.stderr)

    def complete(self, line: str, symbol: str) -> list[str]:
        """Completions for a magic line: subcommands, flags, node ids, pipeline names."""
        return complete_line(self, line, symbol)


def _as_path(raw: str) -> Path:
    return Path(os.path.expanduser(raw)).resolve()


def _require_node(pipeline: Pipeline, node_id: str | None, where: str) -> None:
    """A UsageError from ``where`` when ``node_id`` (None: not given) is not a node."""
    if node_id is not None and node_id not in pipeline.graph.nodes:
        raise UsageError(f"{where}: {no_node(pipeline.name, node_id, pipeline.graph.nodes)}")


def _as_below_magic_line(text: str) -> Graph:
    """``text`` (a cell's body) loaded as if the ``%%pipeline`` line were its first line: every
    position, the error's and the ones inside messages (``found 'done' at line 5``, ``opened at
    line 2``, ``appears only in edges (line 6)``), then counts from the magic line. Used only to
    report; the pipeline itself keeps the cell's text as written (its source hash)."""
    from freshness_magic.engine.pipeline import load_pipeline

    return load_pipeline("\n" + text)


def _parse_error_in_cell(text: str, cell: str) -> str | None:
    """The parse error of a cell's ``text``, named ``cell`` and counted from the magic line
    (None if, against expectation, the text parses that way)."""
    try:
        _as_below_magic_line(text)
    except ParseError as exc:
        return str(
            ParseError(
                exc.message,
                line=exc.line,
                column=exc.column,
                source_line=exc.source_line,
                path=cell,
            )
        )
    return None


def _refusal(graph: Graph, diagnostics: Sequence[Diagnostic], where: str | None) -> str:
    """Why a pipeline did not load: its errors, and its warnings with them in source order (a
    warning often explains an error: a misspelt attribute leaves the one it meant unset)."""
    from freshness_magic.engine.validation import Severity

    errors = sum(d.severity is Severity.ERROR for d in diagnostics)
    warnings = len(diagnostics) - errors
    name = f"pipeline `{graph.name}`" if graph.name else "the pipeline"
    head = f"{name} did not load: {errors} validation error{'s' if errors != 1 else ''}"
    head += " to fix (the `error` lines)"
    if warnings:
        noun = "warning" if warnings == 1 else "warnings"
        head += f"; {warnings} {noun} with {'it' if errors == 1 else 'them'}, in source order"
        head += ", may say why"
    return "\n".join([head + ":", *("  " + d.format(where) for d in diagnostics)])


def _set_docs() -> None:
    """Make ``%pipeline?`` and ``%%node?`` show the argparse help."""
    PipelineMagics.pipeline.__doc__ = (
        build_cell_parser().format_help() + "\n" + build_pipeline_parser().format_help()
    )
    PipelineMagics.node.__doc__ = build_node_parser().format_help()


def unsplit(line: str, error: ValueError) -> str:
    """Why ``shlex.split`` refused ``line``, naming an unclosed quote by the text after it."""
    quote, start, i = "", 0, 0
    while i < len(line):
        char = line[i]
        if char == "\\" and quote != "'":
            i += 2
            continue
        if not quote and char in "'\"":
            quote, start = char, i
        elif char == quote:
            quote = ""
        i += 1
    if not quote:
        return str(error)
    after = line[start + 1 : start + 21]
    where = f"before {after!r}" if after else "at the end"
    return f"the {quote} {where} is never closed (close it, or escape it: \\{quote})"


_set_docs()


def _refuse_while_running(name: str, loaded: set[Pipeline]) -> None:
    """UsageError when a loaded object of ``name`` is in the middle of an action (the view's
    Run, a step): replacing it then would cut its run off mid-step, and the new load would
    run that node again."""
    for pipeline in loaded:
        if pipeline.live.busy:
            running = pipeline.live.model.running
            what = f"running {running[0]}" if running is not None else "in the middle of an action"
            raise UsageError(
                f"{name} is {what} (started earlier in this kernel); wait for it to end, or "
                f"stop it ({name}.stop(), %pipeline stop or the view's Stop), then run this cell "
                "again"
            )


def _cond_text(answer: ConditionAnswer) -> TextResult:
    """``%pipeline cond``'s answer: the explanation's text, the explanation as its data."""
    return TextResult(answer.text, answer.explanation)
