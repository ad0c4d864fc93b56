"""Loading and unloading the notebook extension (``%load_ext`` / ``%unload_ext``).

The magics instance lives in the shell's magics registry (no module state); unloading removes
the magics, the ``post_execute`` hook, the input transformer (``%%pipeline --help`` alone in a
cell) and the completers it added and stops the background watchers, and nothing else: the
loaded pipelines stay in the user namespace, so
``%reload_ext freshness_magic`` keeps them (their watchers start again on load). The watchers
also stop when the kernel exits.
"""

from __future__ import annotations

import atexit
import contextlib
from typing import Any

from freshness_magic.notebook.arguments import help_without_body
from freshness_magic.notebook.magics import PipelineMagics

_COMPLETE_KEYS = ("%pipeline", "%%pipeline", "%%node")
_MAGICS = (("line", "pipeline"), ("cell", "pipeline"), ("cell", "node"))


class TargetedMagic:
    """The ``%pipeline`` magic as registered: it calls the bound method, and its help
    (``%pipeline?``) ends with which loaded pipeline a line without ``--name`` acts on now.
    IPython reads every other attribute (no variable expansion...) from the method."""

    def __init__(self, method: Any, magics: PipelineMagics) -> None:
        self._method = method
        self._magics = magics

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._method(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._method, name)

    def getdoc(self) -> str:
        """What IPython's ``?`` shows: the magic's help, then the pipeline it acts on now."""
        return f"{self._method.__doc__}\n{self._magics.target_note()}"


def instance(ipython: Any) -> PipelineMagics | None:
    """The loaded :class:`PipelineMagics` of this shell, if any."""
    found = ipython.magics_manager.registry.get(PipelineMagics.__name__)
    return found if isinstance(found, PipelineMagics) else None


def load(ipython: Any) -> PipelineMagics:
    """Register the magics, the post-execute refresh and tab completion (idempotent)."""
    existing = instance(ipython)
    if existing is not None:
        return existing
    magics = PipelineMagics(shell=ipython, parent=ipython)
    from freshness_magic.notebook.hubcmd import NotebookHub

    magics.hub_handler = NotebookHub()
    ipython.register_magics(magics)
    table = ipython.magics_manager.magics
    for kind in ("line", "cell"):
        table[kind]["pipeline"] = TargetedMagic(table[kind]["pipeline"], magics)
    ipython.configurables.append(magics)
    ipython.events.register("post_execute", magics.post_execute)
    if help_without_body not in ipython.input_transformers_cleanup:
        ipython.input_transformers_cleanup.append(help_without_body)
    atexit.register(magics.close)
    for pipeline in magics.pipelines().values():
        pipeline.live.start_watching()

    def complete(_self: Any, event: Any) -> list[str]:
        return magics.complete(event.line, event.symbol)

    for key in _COMPLETE_KEYS:
        ipython.set_hook("complete_command", complete, str_key=key)
    return magics


def unload(ipython: Any) -> None:
    """Remove everything :func:`load` added."""
    magics = instance(ipython)
    if magics is None:
        return
    atexit.unregister(magics.close)
    with contextlib.suppress(ValueError):
        ipython.events.unregister("post_execute", magics.post_execute)
    with contextlib.suppress(ValueError):
        ipython.input_transformers_cleanup.remove(help_without_body)
    magics.close()
    table = ipython.magics_manager.magics
    for kind, name in _MAGICS:
        table[kind].pop(name, None)
    ipython.magics_manager.registry.pop(PipelineMagics.__name__, None)
    if magics in ipython.configurables:
        ipython.configurables.remove(magics)
    dispatcher = ipython.strdispatchers.get("complete_command")
    if dispatcher is not None:
        for key in _COMPLETE_KEYS:
            dispatcher.strs.pop(key, None)
