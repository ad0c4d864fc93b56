"""Codergen backends chosen by a spec string: simulated (default), OpenAI-compatible,
Anthropic, an agent command line, a Python callable, or a named entry point.

``resolve_backend(spec)`` is the one entry; ``describe_backend(backend)`` names one for views
(``simulated``, ``openai:gpt-4o-mini``); ``is_simulated`` says whether a model is called at all;
``run_backend(run)`` is the backend a run's codergen nodes use.

The names are imported when first used, so ``validate`` (whose ``llm_provider`` rule lives in
:mod:`.lint`) does not load the engine's handlers to start.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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

_HOMES = {
    "ENTRY_POINT_GROUP": "freshness_magic.backends.registry",
    "is_simulated": "freshness_magic.backends.registry",
    "resolve_backend": "freshness_magic.backends.registry",
    "run_backend": "freshness_magic.backends.registry",
    "SIMULATED_NOTICE": "freshness_magic.backends.simulated",
    "BackendSpec": "freshness_magic.backends.spec",
    "parse_spec": "freshness_magic.backends.spec",
    "describe_backend": "freshness_magic.engine.handlers.codergen",
    "BackendError": "freshness_magic.errors",
}

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


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value
