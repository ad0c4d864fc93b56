"""freshness_magic: Attractor DOT pipelines in Jupyter, with input freshness and work evidence.

``freshness_magic.Pipeline(source, workdir=..., name=...)`` loads a pipeline and drives it from
any Python (a script, marimo, a notebook) with the actions of the ``%pipeline`` magics; it is
imported on first use, so ``import freshness_magic`` (and the CLI's start-up) stays light.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from freshness_magic.notebook.pipeline import Pipeline

__version__ = "0.1.0"
__all__ = ["Pipeline", "__version__", "load_ipython_extension", "unload_ipython_extension"]


def __getattr__(name: str) -> Any:
    """``Pipeline`` on first use (the notebook layer's pipeline object)."""
    if name == "Pipeline":
        from freshness_magic.notebook.pipeline import Pipeline

        return Pipeline
    raise AttributeError(f"module 'freshness_magic' has no attribute {name!r}")


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext freshness_magic``: register the magics, hooks and options."""
    from freshness_magic.notebook.extension import load

    load(ipython)


def unload_ipython_extension(ipython: Any) -> None:
    """``%unload_ext freshness_magic``: remove the magics and hooks again."""
    from freshness_magic.notebook.extension import unload

    unload(ipython)
