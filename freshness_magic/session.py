"""The one place that wires a :class:`~freshness_magic.engine.run.Run` with the default extensions.

The CLI and the notebook open and resume runs through :func:`open_run` and :func:`resume_run`, so
freshness and evidence join every run the same way. The engine itself never imports them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from freshness_magic.engine.extensions import RunExtension
from freshness_magic.engine.model import Graph
from freshness_magic.engine.run import Run
from freshness_magic.evidence.validator import EvidenceValidator


def default_extensions(workdir: str | Path, **options: Any) -> list[RunExtension]:
    """The extensions every session run gets (freshness, evidence, hub), set by ``options``."""
    from freshness_magic.evidence.extension import EvidenceExtension
    from freshness_magic.freshness.extension import FreshnessExtension
    from freshness_magic.hub.extension import HubContextExtension

    extensions: list[RunExtension] = [
        FreshnessExtension(
            options.get("hash_size_limit"),
            allow_outside=options.get("freshness_allow_outside", False),
        )
    ]
    # Evidence goes last: its after_execute must see the outcome the other extensions settled on.
    extensions.append(EvidenceExtension(validator=options.get("evidence_validator")))
    # The hub comes after evidence: it appends its context packet to the prompt suffix that
    # evidence sets, and it never changes an outcome.
    extensions.append(HubContextExtension())
    return extensions


def _load(pipeline: object) -> Graph:
    """A Graph as is; a Path, or a string without ``{``, is a file; DOT text, pydot and graphviz
    objects are loaded (anything else: :class:`PipelineSourceError`)."""
    from freshness_magic.engine.pipeline import load_pipeline, load_pipeline_file

    if isinstance(pipeline, Graph):
        return pipeline
    if isinstance(pipeline, Path) or (isinstance(pipeline, str) and "{" not in pipeline):
        return load_pipeline_file(pipeline)
    return load_pipeline(pipeline)


def open_run(
    pipeline: Graph | str | Path | object,
    *,
    workdir: str | Path = ".",
    extensions: list[RunExtension] | None = None,
    extension_options: dict[str, Any] | None = None,
    evidence_validator: EvidenceValidator | None = None,
    **kwargs: Any,
) -> Run:
    """A new run of ``pipeline`` in ``workdir`` with the default extensions (unless given).

    ``pipeline`` is a Graph, a path, DOT text, a ``pydot.Dot`` or a ``graphviz.Digraph``/``Source``.

    ``evidence_validator`` replaces the default work-evidence validator (tests inject fakes).
    ``kwargs`` go to :class:`Run` (``runs_dir``, ``run_id``, ``registry``, ``backend``,
    ``interviewer``, ``clock``, ``sleep``, ...).
    """
    graph = _load(pipeline)
    if extensions is None:
        options = dict(extension_options or {})
        if evidence_validator is not None:
            options["evidence_validator"] = evidence_validator
        extensions = default_extensions(workdir, **options)
    return Run(graph, workdir=workdir, extensions=extensions, **kwargs)


def resume_run(
    run_dir: str | Path,
    *,
    extensions: list[RunExtension] | None = None,
    extension_options: dict[str, Any] | None = None,
    workdir: str | Path | None = None,
    evidence_validator: EvidenceValidator | None = None,
    **kwargs: Any,
) -> Run:
    """Restore the run in ``run_dir`` (newest valid checkpoint) with the default extensions."""
    if evidence_validator is not None:
        extension_options = {**(extension_options or {}), "evidence_validator": evidence_validator}
    if extensions is None:
        from freshness_magic.engine.checkpoint import load_checkpoint
        from freshness_magic.engine.run import follow_restarts

        data, _ = load_checkpoint(follow_restarts(Path(run_dir)))
        base = workdir if workdir is not None else data.get("workdir", ".")
        extensions = default_extensions(base, **(extension_options or {}))
    return Run.resume(run_dir, extensions=extensions, workdir=workdir, **kwargs)
