"""freshness_magic: Attractor DOT pipelines in Jupyter, with input freshness and work evidence."""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext freshness_magic``: register the magics, hooks and options."""
    from freshness_magic.notebook.extension import load

    load(ipython)


def unload_ipython_extension(ipython: Any) -> None:
    """``%unload_ext freshness_magic``: remove the magics and hooks again."""
    from freshness_magic.notebook.extension import unload

    unload(ipython)
