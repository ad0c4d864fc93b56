"""One module per command-line subcommand; each exposes ``register(subparsers)``."""

from __future__ import annotations

import argparse
import os
import sys


def path_arg(text: str) -> str:
    """An argparse ``type`` for a file or folder argument: the text as given, refusing an empty
    one (an unset shell variable, ``--workdir "$DIR"``), which would otherwise mean the current
    folder and run the pipeline's commands there."""
    if not text:
        raise argparse.ArgumentTypeError("is empty (an unset variable?): give a path")
    return text


def invoked_as() -> str:
    """The command line as the user called it, for usage lines and the hints commands print:
    ``python -m freshness_magic`` when run that way (the ``freshness-magic`` script may then
    not be on ``PATH``), else ``freshness-magic``."""
    if os.path.basename(sys.argv[0]) == "__main__.py":
        return "python -m freshness_magic"
    return "freshness-magic"
