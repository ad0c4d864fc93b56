"""``python:MODULE:FUNCTION``: any callable ``(node, prompt, context) -> str | Outcome``.

An object that already streams (has ``generate``, see ``engine/handlers/llm.py``) is used as is.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

from freshness_magic.engine.handlers.codergen import CallableBackend
from freshness_magic.engine.handlers.llm import StreamingBackend
from freshness_magic.errors import BackendError


def load_callable(target: str) -> Any:
    """Import ``MODULE:ATTR`` (``ATTR`` may be dotted); BackendError says what failed."""
    module_name, sep, attr = target.partition(":")
    if not sep or not module_name or not attr:
        raise BackendError(
            f"python backend {target!r}: write python:MODULE:FUNCTION "
            "(e.g. python:mypkg.llm:answer)"
        )
    try:
        obj: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise BackendError(
            f"python backend {target!r}: cannot import {module_name!r}: {exc}{_path_hint(exc)}"
        ) from None
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise BackendError(
                f"python backend {target!r}: module {module_name!r} has no {attr!r}"
            ) from None
    return obj


def as_backend(obj: Any, label: str) -> StreamingBackend:
    """A streaming backend as is; a plain callable wrapped; anything else is an error."""
    if isinstance(obj, StreamingBackend):
        return obj
    if not callable(obj):
        raise BackendError(f"backend {label!r} is a {type(obj).__name__}, not a callable")
    return CallableBackend(obj, label=label)


def python_backend(target: str) -> StreamingBackend:
    return as_backend(load_callable(target), f"python:{target}")


def _path_hint(error: ImportError) -> str:
    """When the missing module is in the current folder, which the ``freshness-magic`` script
    does not import from (``python -m`` does): how to let it."""
    top = (getattr(error, "name", None) or "").partition(".")[0]
    if top and (Path(f"{top}.py").is_file() or Path(top, "__init__.py").is_file()):
        return (
            f" ({top} is in the current folder, which is not on Python's path here: run with "
            "PYTHONPATH=.)"
        )
    return ""
