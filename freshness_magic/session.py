"""The one place that wires a :class:`~freshness_magic.engine.run.Run` with the default extensions.

The CLI and the notebook open and resume runs through :func:`open_run` and :func:`resume_run`, so
freshness and evidence join every run the same way. The engine itself never imports them.

For scripts, also: :func:`validate` (what ``freshness-magic validate`` reports),
:func:`accept_changes` and :func:`freshness_report` (what ``resume --accept`` and ``check`` do),
and :class:`PipelineWarning`, the category of the validation warnings :func:`open_run` issues.
"""

from __future__ import annotations

import concurrent.futures
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

from freshness_magic.cluster import Cluster, PlainExecutor
from freshness_magic.engine.extensions import BaseRunExtension, RunExtension
from freshness_magic.engine.handlers.base import HandlerRegistry
from freshness_magic.engine.model import Graph
from freshness_magic.engine.run import Run
from freshness_magic.errors import RunError
from freshness_magic.evidence.validator import EvidenceValidator

if TYPE_CHECKING:
    from freshness_magic.engine.carry import CarryPlan
    from freshness_magic.engine.validation import Diagnostic
    from freshness_magic.freshness.report import FreshnessReport

__all__ = [
    "PipelineWarning",
    "accept_changes",
    "carry_over",
    "default_extensions",
    "freshness_report",
    "open_run",
    "resume_run",
    "validate",
]


class PipelineWarning(UserWarning):
    """A validation warning of the pipeline :func:`open_run` opens (``path:line:col: warning
    rule: message (fix: ...)``), issued through :mod:`warnings` so a script sees it once."""


def validate(
    pipeline: Graph | str | Path | object, *, workdir: str | Path = "."
) -> list[Diagnostic]:
    """Every diagnostic ``freshness-magic validate`` reports for ``pipeline``, in source order:
    the engine's rules and those freshness, evidence, the backends and the cluster add, with
    plain ``source_files`` paths looked for in ``workdir``. (``freshness_magic.engine.validate``
    has the engine's rules only.)"""
    from freshness_magic.lint import session_validator

    return session_validator(workdir=workdir).validate(_load(pipeline))


def freshness_report(run: Run, node_ids: list[str] | None = None) -> FreshnessReport:
    """What ``freshness-magic check`` shows for ``run`` now: each tracked node (or ``node_ids``)
    compared with its baseline and with its last completion."""
    from freshness_magic.freshness.extension import extension_of

    return extension_of(run).report(run, node_ids).with_modes(run.graph)


def accept_changes(run: Run, node_id: str | None = None) -> dict[str, list[str]]:
    """Take the current inputs of ``node_id`` (None: of every node not run yet, and every
    blocked one) as its new freshness baseline, as ``resume --accept NODE`` does: a
    ``freshness="block"`` node then runs (``run.retry(node_id)`` after the block failed it).
    Returns node id -> the files that had changed; the next checkpoint is written at once."""
    from freshness_magic.freshness.extension import accept_changes as accept

    return accept(run, node_id)


ExecutorChoice = str | Cluster | concurrent.futures.Executor | None
"""Where a session run's portable node work runs (see :func:`open_run`)."""


def default_extensions(workdir: str | Path, **options: Any) -> list[RunExtension]:
    """The extensions every session run gets (freshness, evidence, hub), set by ``options``."""
    from freshness_magic.evidence.extension import EvidenceExtension
    from freshness_magic.freshness.extension import FreshnessExtension
    from freshness_magic.hub.extension import HubContextExtension
    from freshness_magic.hub.integration import HubHashSource

    extensions: list[RunExtension] = [
        FreshnessExtension(
            options.get("hash_size_limit"),
            allow_outside=options.get("freshness_allow_outside", False),
            hash_sources=HubHashSource,  # known digests from a running hub, else hashed here
        )
    ]
    # Evidence goes last: its after_execute must see the outcome the other extensions settled on.
    extensions.append(EvidenceExtension(validator=options.get("evidence_validator")))
    # The hub comes after evidence: it appends its context packet to the prompt suffix that
    # evidence sets, and it never changes an outcome.
    extensions.append(HubContextExtension())
    return extensions


REMEMBERED = {"backend": "backend.json", "executor": "executor.json"}
"""The spec strings a run was opened with (files in its run directory), so a resume uses them
again: the codergen backend and where node work runs."""


def _resolved_backend(kwargs: dict[str, Any]) -> str | None:
    """Replace ``kwargs["backend"]`` (a spec string, callable or None) by a resolved backend;
    return the spec string to remember (None for a callable)."""
    from freshness_magic.backends import is_simulated, resolve_backend

    spec = kwargs.get("backend")
    if kwargs.get("registry") is None:
        backend = resolve_backend(spec)
        # The engine's own default is the simulation (fan-in then ranks without asking it).
        kwargs["backend"] = None if is_simulated(backend) else backend
    if isinstance(spec, str):
        from freshness_magic.backends import parse_spec

        return parse_spec(spec).text()
    return None


def _check_models(graph: Graph, backend: Any) -> None:
    """Before a run starts: a real backend refuses a pipeline whose LLM nodes name an endpoint
    or a key (validated or not), and a model API backend one with LLM nodes it has no model
    or no API key for."""
    from freshness_magic.backends.base import ModelBackend

    _refuse_pipeline_endpoints(graph, backend)
    if isinstance(backend, ModelBackend):
        backend.check_models(graph)
        backend.check_credentials(graph)


def _refuse_pipeline_endpoints(graph: Graph, backend: Any) -> None:
    """BackendError (naming the node) when a real backend would run a node whose provider or
    model carries an endpoint or a key; the simulation (None) calls nothing."""
    if backend is None:
        return
    from freshness_magic.backends.choice import refuse_endpoint

    for node in graph.nodes.values():
        if node.handler_type == "codergen":
            refuse_endpoint(node)


class _RememberSpecs(BaseRunExtension):
    """Writes the spec strings a run was opened with (:data:`REMEMBERED`) into its directory
    when the run begins: a run that never begins (a load or reset followed by another) leaves
    no folder behind."""

    name = "remembered_specs"

    def __init__(self, specs: dict[str, str]) -> None:
        self.specs = specs

    def on_run_start(self, run: Run) -> None:
        from freshness_magic.atomicio import write_json_atomic

        for option, spec in self.specs.items():
            write_json_atomic(run.run_dir / REMEMBERED[option], {option: spec})


def remembered(run_dir: str | Path, option: str) -> str | None:
    """The ``option`` spec (``backend``, ``executor``) a run was opened with (None: not
    recorded, e.g. a Python callable or the default)."""
    import json

    from freshness_magic.engine.persistence import follow_restarts

    for folder in dict.fromkeys([Path(run_dir), follow_restarts(Path(run_dir))]):
        try:
            data = json.loads((folder / REMEMBERED[option]).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        spec = data.get(option) if isinstance(data, dict) else None
        if isinstance(spec, str):
            return spec
    return None


def _refuse_lost_credentials(spec: str | None) -> None:
    """BackendError when the remembered backend spec had credentials in its base URL: they are
    never written, so the spec as remembered would send ``***`` as the password."""
    from freshness_magic.backends.spec import lost_credentials
    from freshness_magic.errors import BackendError

    if spec is not None and lost_credentials(spec):
        raise BackendError(
            f"the run was opened with the backend {spec}, whose base URL held credentials, which "
            "are never stored: give the backend again to go on (--backend SPEC, backend=SPEC)"
        )


def check_state_dirs(workdir: str | Path, runs_dir: str | Path | None = None) -> None:
    """Refuse a working directory that is a file or lies under one (RunError) and a work tree
    whose state folders are symbolic links (UnsafePathError).

    Checked before the run creates anything, because the engine resolves its run directory
    (a linked ``.freshness`` would move the whole run outside the work tree).
    """
    from freshness_magic.pathsafety import check_state_path, workdir_problem

    base = Path(workdir)
    if problem := workdir_problem(base):
        raise RunError(f"working directory {workdir}: {problem}")
    check_state_path(base / ".orchestrator" / "evidence")
    check_state_path(Path(runs_dir) if runs_dir is not None else base / ".freshness" / "runs")


def clean_stale_temp_files(run_dir: Path, workdir: str | Path) -> None:
    """Remove temporary files a crash left in the run directory and the evidence folder."""
    from freshness_magic.atomicio import remove_stale_temp_files

    remove_stale_temp_files(run_dir)
    # Other runs may share the evidence folder: only files old enough to be no one's write.
    remove_stale_temp_files(Path(workdir) / ".orchestrator" / "evidence", min_age=600.0)


def _load(pipeline: object) -> Graph:
    """A Graph as is; a Path, or a string without ``{``, is a file; DOT text, pydot and graphviz
    objects are loaded (anything else: :class:`PipelineSourceError`)."""
    from freshness_magic.engine.pipeline import load_pipeline, load_pipeline_file

    if isinstance(pipeline, Graph):
        return pipeline
    if isinstance(pipeline, Path) or (isinstance(pipeline, str) and "{" not in pipeline):
        return load_pipeline_file(pipeline)
    return load_pipeline(pipeline)


def builtin_registry(backend: Any = None, interviewer: Any = None) -> HandlerRegistry:
    """The built-in handlers with ``backend`` (a spec string, a callable, None: simulated)
    resolved for codergen and ``interviewer`` answering gates (None: gates wait)."""
    from freshness_magic.backends import is_simulated, resolve_backend
    from freshness_magic.engine.handlers.builtin import default_registry

    resolved = resolve_backend(backend)
    chosen: Any = None if is_simulated(resolved) else resolved
    return default_registry(backend=chosen, interviewer=interviewer)


def _refuse_ignored_interviewer(kwargs: dict[str, Any]) -> None:
    """RunError for an ``interviewer`` next to a ``registry``: the registry's gate handler has
    its own (a ``backend`` next to one is only remembered for resume: the notebook's way)."""
    if kwargs.get("registry") is not None and kwargs.get("interviewer") is not None:
        raise RunError(
            "interviewer= would be ignored: the registry= given with it has its own gate "
            "handler; build the registry with it instead (default_registry(interviewer=...), "
            "then .register() your handlers)"
        )


def _refuse_outside_paths(graph: Graph, workdir: str | Path) -> None:
    """UnsafePathError, before the run starts (validated or not), for a path the pipeline names
    outside the work tree (a prompt file, a manager's child pipeline or working directory), at
    its line and column: the rules of :mod:`freshness_magic.pathlint`. ``source_files``
    entries are refused by the run's own validation; the handlers refuse again as they run."""
    from freshness_magic.engine.validation import Validator, has_errors
    from freshness_magic.errors import UnsafePathError
    from freshness_magic.pathlint import path_rules

    found = Validator(rules=path_rules(workdir)).validate(graph)
    if has_errors(found):
        raise UnsafePathError(found[0].format(graph.path or graph.name))


def _check_and_warn(
    graph: Graph, workdir: str | Path, registry: HandlerRegistry | None, allow_outside: object
) -> None:
    """Refuse a pipeline with errors (ValidationError, the warnings with them) and issue each
    warning as a :class:`PipelineWarning` from the caller's line."""
    from freshness_magic.engine.handlers.builtin import default_registry
    from freshness_magic.engine.validation import Severity
    from freshness_magic.lint import session_validator

    types = (registry or default_registry()).types()
    validator = session_validator(known_types=types, workdir=workdir, allow_outside=allow_outside)
    for diagnostic in validator.validate_or_raise(graph):
        if diagnostic.severity is Severity.WARNING:
            warnings.warn(diagnostic.format(graph.path), PipelineWarning, stacklevel=3)


def _with_registry(kwargs: dict[str, Any]) -> dict[str, Any]:
    """``kwargs`` with ``backend``/``interviewer`` turned into a built-in handler registry."""
    backend = kwargs.pop("backend", None)
    interviewer = kwargs.pop("interviewer", None)
    if kwargs.get("registry") is None and (backend is not None or interviewer is not None):
        kwargs["registry"] = builtin_registry(backend, interviewer)
    return kwargs


def _check_graph_executor(graph: Graph, spec: str) -> None:
    """A ClusterError naming the pipeline's ``executor`` attribute and where it is written, for
    a spec the cluster layer does not know or one that names a scheduler's address."""
    from freshness_magic.cluster import parse_executor
    from freshness_magic.engine.validation.core import graph_at
    from freshness_magic.errors import ClusterError

    line, column = graph_at(graph, "executor")
    where = f"{graph.path or graph.name}:{line}:{column}" if line else graph.path or graph.name
    try:
        parsed = parse_executor(spec)
    except ClusterError as exc:
        raise ClusterError(f"{where}: the pipeline's executor attribute: {exc}") from None
    if parsed.address:
        from freshness_magic.cluster.lint import ADDRESS_FIX

        raise ClusterError(
            f"{where}: the pipeline's executor attribute names a scheduler's address "
            f"({spec}); where work is sent is yours to choose, never a pipeline's: {ADDRESS_FIX}"
        )


def _open_executor(
    graph: Graph, workdir: str | Path, executor: ExecutorChoice
) -> tuple[Cluster | None, bool]:
    """The cluster ``executor`` names (else the graph's ``executor`` attribute), its workers
    checked to see ``workdir``, and whether it was started here (then it closes with the run)."""
    from freshness_magic.cluster import open_cluster

    if executor is None:
        executor = graph.attrs.get("executor", "")
        _check_graph_executor(graph, executor)
    if isinstance(executor, concurrent.futures.Executor):
        return PlainExecutor(executor), False
    if not isinstance(executor, str):
        executor.check_workdir(Path(workdir))
        return executor, False
    cluster = open_cluster(executor)
    if cluster is None:
        return None, False
    try:
        cluster.check_workdir(Path(workdir))
    except BaseException:
        cluster.close()
        raise
    return cluster, True


def open_run(
    pipeline: Graph | str | Path | object,
    *,
    workdir: str | Path = ".",
    executor: ExecutorChoice = None,
    extensions: list[RunExtension] | None = None,
    extension_options: dict[str, Any] | None = None,
    evidence_validator: EvidenceValidator | None = None,
    warn: bool = True,
    **kwargs: Any,
) -> Run:
    """A new run of ``pipeline`` in ``workdir`` with the default extensions (unless given).

    Unless ``warn`` is False (the CLI and the notebook validate and print on their own), the
    pipeline is checked with every rule :func:`validate` has: errors refuse it (ValidationError,
    with its warnings), and each warning is issued as a :class:`PipelineWarning`.

    ``pipeline`` is a Graph, a path, DOT text, a ``pydot.Dot`` or a ``graphviz.Digraph``/``Source``.

    ``evidence_validator`` replaces the default work-evidence validator (tests inject fakes).
    ``backend`` is a spec string (``openai:gpt-4o-mini``, see ``freshness_magic.backends``), a
    callable or None (simulated); a spec string is remembered in the run directory for resume.
    ``backend`` and ``interviewer`` (human gates) configure the built-in handler registry when
    no ``registry`` is given. ``executor`` says where tool commands run: a spec (``"dask"``,
    ``"dask://HOST:PORT"``, ``"local"``), a :class:`~freshness_magic.cluster.Cluster`, or any
    ``concurrent.futures.Executor`` on this machine; None takes the graph's ``executor``
    attribute. Other ``kwargs`` go to :class:`Run`
    (``runs_dir``, ``run_id``, ``registry``, ``clock``, ``sleep``, ...).
    """
    _refuse_ignored_interviewer(kwargs)
    graph = _load(pipeline)
    check_state_dirs(workdir, kwargs.get("runs_dir"))  # before warnings about files under it
    if warn:
        allow = (extension_options or {}).get("freshness_allow_outside", False)
        _check_and_warn(graph, workdir, kwargs.get("registry"), allow)
    _refuse_outside_paths(graph, workdir)
    spec = _resolved_backend(kwargs)
    _check_models(graph, kwargs.get("backend"))
    kwargs = _with_registry(kwargs)
    if extensions is None:
        options = dict(extension_options or {})
        if evidence_validator is not None:
            options["evidence_validator"] = evidence_validator
        extensions = default_extensions(workdir, **options)
    specs = {"backend": spec, "executor": executor if isinstance(executor, str) else None}
    remember = {option: text for option, text in specs.items() if text is not None}
    if remember:
        extensions = [_RememberSpecs(remember), *extensions]  # first: before a long baseline
    cluster, owned = _open_executor(graph, workdir, executor)
    dispatch = cluster.dispatch if cluster is not None else None
    try:
        run = Run(graph, workdir=workdir, extensions=extensions, dispatch=dispatch, **kwargs)
    except BaseException:
        if owned and cluster is not None:
            cluster.close()
        raise
    if owned and cluster is not None:
        run.close_with(cluster.close)
    clean_stale_temp_files(run.run_dir, run.workdir)
    return run


def resume_run(
    run_dir: str | Path,
    *,
    extensions: list[RunExtension] | None = None,
    extension_options: dict[str, Any] | None = None,
    workdir: str | Path | None = None,
    evidence_validator: EvidenceValidator | None = None,
    executor: ExecutorChoice = None,
    **kwargs: Any,
) -> Run:
    """Restore the run in ``run_dir`` (newest valid checkpoint) with the default extensions.

    Without ``backend`` the run gets the backend it was opened with (when that was a spec), and
    without ``executor`` the executor spec it was opened with (else the pipeline's attribute).
    A ``backend`` spec given here is remembered instead: the run goes on with it, and so does
    the next resume. A file, or a folder that holds runs, is refused with the runs to pick from.
    """
    from freshness_magic.backends.base import ModelBackend
    from freshness_magic.rundirs import checked_run_dir

    checked_run_dir(run_dir)
    _refuse_ignored_interviewer(kwargs)
    given = kwargs.get("backend")
    if given is None:
        kwargs["backend"] = remembered(run_dir, "backend")
        _refuse_lost_credentials(kwargs["backend"])
    spec = _resolved_backend(kwargs)
    backend = kwargs.get("backend")
    kwargs = _with_registry(kwargs)
    if evidence_validator is not None:
        extension_options = {**(extension_options or {}), "evidence_validator": evidence_validator}
    if extensions is None:
        from freshness_magic.engine.lifecycle import stored_workdir
        from freshness_magic.engine.persistence import follow_restarts

        base = workdir if workdir is not None else stored_workdir(follow_restarts(Path(run_dir)))
        extensions = default_extensions(base, **(extension_options or {}))
    run = Run.resume(run_dir, extensions=extensions, workdir=workdir, **kwargs)
    try:
        _refuse_pipeline_endpoints(run.graph, backend)
        if isinstance(backend, ModelBackend):
            backend.check_credentials(run.graph)
    except BaseException:
        run.close()
        raise
    check_state_dirs(run.workdir, run.run_dir.parent)
    if isinstance(given, str) and spec is not None and spec != remembered(run.run_dir, "backend"):
        from freshness_magic.atomicio import write_json_atomic

        write_json_atomic(run.run_dir / REMEMBERED["backend"], {"backend": spec})
    clean_stale_temp_files(run.run_dir, run.workdir)
    try:
        if executor is None:
            executor = remembered(run.run_dir, "executor")
        cluster, owned = _open_executor(run.graph, run.workdir, executor)
    except BaseException:
        run.close()
        raise
    if cluster is not None:
        run.dispatch = cluster.dispatch
        if owned:
            run.close_with(cluster.close)
    return run


def carry_over(
    run_dir: str | Path, pipeline: Graph | str | Path | object, **kwargs: Any
) -> tuple[Run, CarryPlan]:
    """Resume the run in ``run_dir`` with an edited ``pipeline`` of the same name, keeping the
    run (``Run.carry_over``): unchanged nodes keep their results, edited ones show stale,
    removed ones drop out, added ones are pending.

    The edited pipeline is validated with every rule :func:`validate` has and the plan is made
    from the run's saved state *before* the run is opened: a refused edit (ValidationError,
    RunError) leaves the run directory exactly as it was. ``kwargs`` go to :func:`resume_run`.
    """
    from freshness_magic.engine.carry import plan_carry_over
    from freshness_magic.engine.checkpoint import load_checkpoint
    from freshness_magic.engine.lifecycle import stored_workdir
    from freshness_magic.engine.persistence import follow_restarts, restore_memory, stored_pipeline
    from freshness_magic.lint import session_validator
    from freshness_magic.rundirs import checked_run_dir

    checked_run_dir(run_dir)
    graph = _load(pipeline)
    folder = follow_restarts(Path(run_dir))
    workdir = kwargs.get("workdir") or stored_workdir(folder)
    session_validator(workdir=workdir).validate_or_raise(graph)
    data, used = load_checkpoint(folder)
    old = stored_pipeline(folder, data.get("pipeline") or {}, used)
    if old.name != graph.name:
        raise RunError(
            f"the run in {folder} is of pipeline {old.name!r}, the edited one is {graph.name!r}: "
            "carry a run over only to an edit of its own pipeline (or start a new run)"
        )
    memory, context = restore_memory(data, folder)
    plan_carry_over(old, graph, memory, context)  # RunError: refused before anything is written
    run = resume_run(run_dir, **kwargs)
    try:
        plan = run.carry_over(graph)
    except BaseException:
        run.close()
        raise
    return run, plan
