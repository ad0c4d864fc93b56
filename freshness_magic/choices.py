"""An argparse parser whose ``invalid choice`` names the likely choice: the CLI's and the magics'
parsers both build on it, so a misspelt command gets the same hint in a shell and a notebook."""

from __future__ import annotations

import argparse
from typing import Any


class HintingParser(argparse.ArgumentParser):
    """argparse, with ``invalid choice: 'valdate' (did you mean 'validate'? choose from ...)``
    (both names when two are equally near)."""

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        choices = action.choices
        if choices is None or value in choices or not isinstance(value, str):
            super()._check_value(action, value)
            return
        from freshness_magic.engine.validation.attrs import invalid_choice  # on a mistake only

        message = invalid_choice(value, choices)
        if message is None:
            super()._check_value(action, value)
            return
        raise argparse.ArgumentError(action, message)
