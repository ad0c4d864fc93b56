"""The pipeline engine's public API: everything a script needs to load, check and run a pipeline.

Nothing in this package imports IPython, ipywidgets, freshness, evidence or the notebook; a run is
drivable from a plain script. Import from here, not from the modules (they move)::

    from freshness_magic.engine import Run, load_pipeline_file, validate

    graph = load_pipeline_file("review.dot")
    result = Run(graph, workdir=".").run()
    print(result.summary())

Names (loaded on first use, so ``import freshness_magic.engine`` stays cheap):

- loading and parsing: ``load_pipeline``, ``load_pipeline_file``, ``parse_dot``, ``Graph``,
  ``Node``, ``Edge``;
- validation and diagnostics: ``validate``, ``validate_or_raise``, ``Validator``, ``Diagnostic``,
  ``Severity``, ``LintRule``, ``FunctionRule``, ``ScanRule``;
- conditions: ``parse_condition``, ``evaluate_condition``, ``explain_condition``;
- runs and their states: ``Run``, ``RunState``, ``StepResult``, ``RunResult``, ``DeadEnd``,
  ``EdgeStep``, events (``Event``, ``EventType``, ``EventBus``, ``EventKinds``);
- outcomes: ``Outcome``, ``StageStatus``, ``Question``, ``Choice``;
- handlers: ``Handler``, ``HandlerRegistry``, ``default_registry``, ``StepEnv``,
  ``CodergenBackend``, ``RunExtension``, ``BaseRunExtension``;
- interviewers: ``Interviewer``, ``Answer``, ``AutoApproveInterviewer``, ``QueueInterviewer``,
  ``ConsoleInterviewer``; context: ``Context``;
- scale-out: ``Dispatch`` (where portable node work runs: any ``concurrent.futures.Executor``);
- errors, all :class:`FreshnessMagicError` with a one-line message: ``ParseError`` (DOT text,
  with line and column), ``PipelineFileError``, ``ConditionError``, ``StylesheetError``,
  ``ValidationError`` (its ``diagnostics``), ``RunError`` and its ``GateAnswerError``,
  ``NothingToRetryError`` and ``RunBusyError`` (another process drives the run),
  ``CheckpointError`` (a run directory that cannot be read).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_WHERE = {
    "load_pipeline": "pipeline",
    "load_pipeline_file": "pipeline",
    "parse_dot": "dot_parser",
    "Graph": "model",
    "Node": "model",
    "Edge": "model",
    "validate": "validation",
    "validate_or_raise": "validation",
    "Validator": "validation",
    "Diagnostic": "validation",
    "Severity": "validation",
    "LintRule": "validation",
    "FunctionRule": "validation",
    "ScanRule": "validation",
    "parse_condition": "conditions",
    "evaluate_condition": "conditions",
    "explain_condition": "condition_explain",
    "Run": "run",
    "RunState": "state",
    "StepResult": "state",
    "RunResult": "state",
    "DeadEnd": "routing",
    "EdgeStep": "edges",
    "Event": "events",
    "EventType": "events",
    "EventBus": "events",
    "EventKinds": "events",
    "Outcome": "outcome",
    "StageStatus": "outcome",
    "Question": "outcome",
    "Choice": "outcome",
    "Handler": "handlers.base",
    "HandlerRegistry": "handlers.base",
    "StepEnv": "handlers.base",
    "CodergenBackend": "handlers.base",
    "default_registry": "handlers.builtin",
    "RunExtension": "extensions",
    "BaseRunExtension": "extensions",
    "Interviewer": "interviewers",
    "Answer": "interviewers",
    "AutoApproveInterviewer": "interviewers",
    "QueueInterviewer": "interviewers",
    "ConsoleInterviewer": "interviewers",
    "Context": "context",
    "Dispatch": "dispatch",
    **dict.fromkeys(
        [
            "FreshnessMagicError",
            "ParseError",
            "PipelineFileError",
            "ConditionError",
            "StylesheetError",
            "ValidationError",
            "RunError",
            "GateAnswerError",
            "NothingToRetryError",
            "CheckpointError",
        ],
        "freshness_magic.errors",
    ),
    "RunBusyError": "runlock",
}
"""Where each name lives: a module of this package, or (``freshness_magic.errors``) a full name."""

__all__ = [
    "Answer",
    "AutoApproveInterviewer",
    "BaseRunExtension",
    "CheckpointError",
    "Choice",
    "CodergenBackend",
    "ConditionError",
    "ConsoleInterviewer",
    "Context",
    "DeadEnd",
    "Diagnostic",
    "Dispatch",
    "Edge",
    "EdgeStep",
    "Event",
    "EventBus",
    "EventKinds",
    "EventType",
    "FreshnessMagicError",
    "FunctionRule",
    "GateAnswerError",
    "Graph",
    "Handler",
    "HandlerRegistry",
    "Interviewer",
    "LintRule",
    "Node",
    "NothingToRetryError",
    "Outcome",
    "ParseError",
    "PipelineFileError",
    "Question",
    "QueueInterviewer",
    "Run",
    "RunBusyError",
    "RunError",
    "RunExtension",
    "RunResult",
    "RunState",
    "ScanRule",
    "Severity",
    "StageStatus",
    "StepEnv",
    "StepResult",
    "StylesheetError",
    "ValidationError",
    "Validator",
    "default_registry",
    "evaluate_condition",
    "explain_condition",
    "load_pipeline",
    "load_pipeline_file",
    "parse_condition",
    "parse_dot",
    "validate",
    "validate_or_raise",
]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    full = module if module.startswith("freshness_magic.") else f"{__name__}.{module}"
    value = getattr(importlib.import_module(full), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__


if TYPE_CHECKING:
    from freshness_magic.engine.condition_explain import explain_condition
    from freshness_magic.engine.conditions import evaluate_condition, parse_condition
    from freshness_magic.engine.context import Context
    from freshness_magic.engine.dispatch import Dispatch
    from freshness_magic.engine.dot_parser import parse_dot
    from freshness_magic.engine.edges import EdgeStep
    from freshness_magic.engine.events import Event, EventBus, EventKinds, EventType
    from freshness_magic.engine.extensions import BaseRunExtension, RunExtension
    from freshness_magic.engine.handlers.base import (
        CodergenBackend,
        Handler,
        HandlerRegistry,
        StepEnv,
    )
    from freshness_magic.engine.handlers.builtin import default_registry
    from freshness_magic.engine.interviewers import (
        Answer,
        AutoApproveInterviewer,
        ConsoleInterviewer,
        Interviewer,
        QueueInterviewer,
    )
    from freshness_magic.engine.model import Edge, Graph, Node
    from freshness_magic.engine.outcome import Choice, Outcome, Question, StageStatus
    from freshness_magic.engine.pipeline import load_pipeline, load_pipeline_file
    from freshness_magic.engine.routing import DeadEnd
    from freshness_magic.engine.run import Run
    from freshness_magic.engine.runlock import RunBusyError
    from freshness_magic.engine.state import RunResult, RunState, StepResult
    from freshness_magic.engine.validation import (
        Diagnostic,
        FunctionRule,
        LintRule,
        ScanRule,
        Severity,
        Validator,
        validate,
        validate_or_raise,
    )
    from freshness_magic.errors import (
        CheckpointError,
        ConditionError,
        FreshnessMagicError,
        GateAnswerError,
        NothingToRetryError,
        ParseError,
        PipelineFileError,
        RunError,
        StylesheetError,
        ValidationError,
    )
