"""One module per command-line subcommand; each exposes ``register(subparsers)``."""

from __future__ import annotations

import os
import sys


def invoked_as() -> str:
    """The command line as the user called it, for usage lines and the hints commands print:
    ``python -m freshness_magic`` when run that way (the ``freshness-magic`` script may then
    not be on ``PATH``), else ``freshness-magic``."""
    if os.path.basename(sys.argv[0]) == "__main__.py":
        return "python -m freshness_magic"
    return "freshness-magic"
