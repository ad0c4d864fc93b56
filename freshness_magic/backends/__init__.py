"""Codergen backends chosen by a spec string: simulated (default), OpenAI-compatible,
Anthropic, an agent command line, a Python callable, or a named entry point.

``resolve_backend(spec)`` is the one entry; ``describe_backend(backend)`` names one for views
(``simulated``, ``openai:gpt-4o-mini``); ``is_simulated`` says whether a model is called at all;
``run_backend(run)`` is the backend a run's codergen nodes use.
"""

from __future__ import annotations

from freshness_magic.backends.registry import (
    ENTRY_POINT_GROUP,
    is_simulated,
    resolve_backend,
    run_backend,
)
from freshness_magic.backends.simulated import SIMULATED_NOTICE
from freshness_magic.backends.spec import BackendSpec, parse_spec
from freshness_magic.engine.handlers.codergen import describe_backend
from freshness_magic.errors import BackendError

__all__ = [
    "ENTRY_POINT_GROUP",
    "SIMULATED_NOTICE",
    "BackendError",
    "BackendSpec",
    "describe_backend",
    "is_simulated",
    "parse_spec",
    "resolve_backend",
    "run_backend",
]
