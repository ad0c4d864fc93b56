"""``resolve_backend``: a spec string, a callable or None -> a codergen backend.

Built-in kinds are in :data:`BUILTIN_KINDS`; any other name is looked up in the entry-point group
``freshness_magic.backends``, whose objects are factories ``factory(argument: str) -> backend``
(``argument`` is what follows ``NAME:`` in the spec, ``""`` when nothing does). The backend a
factory returns may be a plain ``(node, prompt, context)`` callable or a streaming backend.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib import metadata
from typing import Any

from freshness_magic.backends.spec import BackendSpec, parse_spec
from freshness_magic.engine.handlers.codergen import CallableBackend, simulated_backend
from freshness_magic.engine.handlers.llm import StreamingBackend
from freshness_magic.engine.model import Node
from freshness_magic.errors import BackendError

ENTRY_POINT_GROUP = "freshness_magic.backends"
BUILTIN_KINDS: tuple[str, ...] = ("simulated", "openai", "anthropic", "command", "python")


def _build(spec: BackendSpec) -> StreamingBackend:
    """The backend of a parsed spec (its ``base_url`` is used as given: None for a spec made
    from a pipeline's provider and model, so the client's environment decides)."""
    from freshness_magic.backends.base import ModelSettings

    if spec.kind == "simulated":
        from freshness_magic.backends.simulated import SimulatedBackend

        return SimulatedBackend()
    if spec.kind == "openai":
        from freshness_magic.backends.base import require_client
        from freshness_magic.backends.openai_compat import OpenAIBackend

        require_client("openai")
        settings = ModelSettings("openai", spec.model, spec.base_url)
        return OpenAIBackend(settings, providers=_provider_backend)
    if spec.kind == "anthropic":
        from freshness_magic.backends.anthropic_api import AnthropicBackend
        from freshness_magic.backends.base import require_client

        require_client("anthropic")
        settings = ModelSettings("anthropic", spec.model, spec.base_url)
        return AnthropicBackend(settings, providers=_provider_backend)
    if spec.kind == "command":
        from freshness_magic.backends.command import CommandBackend

        return CommandBackend(spec.argument)
    if spec.kind == "python":
        from freshness_magic.backends.python_callable import python_backend

        return python_backend(spec.argument)
    return _from_entry_point(spec)


def _provider_backend(provider: str, llm_model: str) -> StreamingBackend | None:
    """The backend a node's ``llm_provider`` names, from the provider and model alone (so its
    endpoint and key come from the user's environment); None for a built-in that is no model
    API (never built)."""
    from freshness_magic.backends.spec import MODEL_KINDS

    if provider in BUILTIN_KINDS and provider not in MODEL_KINDS:
        return None
    return _build(BackendSpec(provider, llm_model, model=llm_model.strip()))


def _from_entry_point(spec: BackendSpec) -> StreamingBackend:
    from freshness_magic.backends.python_callable import as_backend

    found = [ep for ep in metadata.entry_points(group=ENTRY_POINT_GROUP) if ep.name == spec.kind]
    if not found:
        from freshness_magic.engine.validation.attrs import closest

        near = closest(spec.kind, [*BUILTIN_KINDS, *available_names()])
        meant = f" (did you mean {near!r}?)" if near is not None else ""
        raise BackendError(
            f"unknown backend {spec.kind!r}{meant}; use one of {', '.join(BUILTIN_KINDS)} "
            f"(e.g. openai:gpt-4o-mini), or a name registered in the {ENTRY_POINT_GROUP!r} "
            f"entry-point group ({', '.join(sorted(available_names())) or 'none installed'})"
        )
    try:
        factory = found[0].load()
        backend = factory(spec.argument)
    except Exception as exc:
        raise BackendError(
            f"backend {spec.text()!r} (entry point {found[0].value}): {exc}"
        ) from None
    return as_backend(backend, spec.text())


def available_names() -> list[str]:
    """Names registered in the entry-point group."""
    return [ep.name for ep in metadata.entry_points(group=ENTRY_POINT_GROUP)]


def resolve_backend(spec: str | Callable[..., Any] | StreamingBackend | None) -> StreamingBackend:
    """The backend for ``spec``: None -> simulated; a string is parsed (see ``spec.py``); a
    streaming backend as is; any other callable ``(node, prompt, context)`` is wrapped.

    Every result is also a plain §4.5 callable. Raises :class:`BackendError` (one line).
    """
    if spec is None:
        return _build(BackendSpec("simulated"))
    if isinstance(spec, str):
        return _build(parse_spec(spec))
    if isinstance(spec, StreamingBackend):
        return spec
    if callable(spec):
        if spec is simulated_backend:
            return _build(BackendSpec("simulated"))
        return CallableBackend(spec)
    raise BackendError(
        f"a backend is a spec string or a callable (node, prompt, context), not a "
        f"{type(spec).__name__}"
    )


def is_simulated(backend: object) -> bool:
    """Whether ``backend`` (a resolved backend, a spec, a callable or None) is the simulation."""
    if backend is None or backend is simulated_backend:
        return True
    if isinstance(backend, str):
        return parse_spec(backend).kind == "simulated"
    return getattr(backend, "name", "") == "simulated"


def run_backend(run: Any) -> object:
    """The backend of the codergen handler of ``run``'s registry (None: the simulation)."""
    handler = run.registry.resolve(Node("_", {"type": "codergen"}))
    return getattr(handler, "backend", None)
