"""What the CLI's and the magics' parsers share: a parser whose ``invalid choice`` names the
likely choice (so a misspelt command gets the same hint in a shell and a notebook), and the
argparse types of their arguments."""

from __future__ import annotations

import argparse
from typing import Any


def path_arg(text: str) -> str:
    """An argparse ``type`` for a file or folder argument: the text as given, refusing an empty
    one (an unset shell variable, ``--workdir "$DIR"``), which would otherwise mean the current
    folder and run the pipeline's commands there."""
    if not text:
        raise argparse.ArgumentTypeError("is empty (an unset variable?): give a path")
    return text


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

    def parse_args(self, args: Any = None, namespace: Any = None) -> Any:
        """As argparse's, with ``unrecognized arguments: --wrokdir (did you mean --workdir?)``."""
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            hint = self._option_hint(extras, parsed)
            named = " ".join(arg if arg.strip() else repr(arg) for arg in extras)
            _chosen(self, parsed).error(f"unrecognized arguments: {named}{hint}")
        return parsed

    def _option_hint(self, extras: list[str], parsed: argparse.Namespace) -> str:
        """The near option of the command given (none for an option another command has)."""
        from freshness_magic.engine.validation.attrs import closest  # on a mistake only

        given = next((arg.split("=", 1)[0] for arg in extras if arg.startswith("--")), None)
        if given is None or given in _option_strings(self, None):
            return ""
        near = closest(given, _option_strings(self, parsed), cutoff=0.75)
        return f" (did you mean {near}?)" if near is not None else ""


def _option_strings(parser: argparse.ArgumentParser, parsed: argparse.Namespace | None) -> set[str]:
    """The long options of ``parser`` and of its subcommand that ``parsed`` names (of all its
    subcommands when ``parsed`` is None or names none)."""
    found: set[str] = set()
    for action in parser._actions:
        found.update(s for s in action.option_strings if s.startswith("--"))
        if isinstance(action, argparse._SubParsersAction):
            chosen = getattr(parsed, action.dest, None) if parsed is not None else None
            subs = [action.choices[chosen]] if chosen in action.choices else action.choices.values()
            for sub in set(subs):
                found |= _option_strings(sub, parsed if chosen else None)
    return found


def _chosen(parser: argparse.ArgumentParser, parsed: argparse.Namespace) -> argparse.ArgumentParser:
    """The (sub)command parser ``parsed`` ran: its usage is the one to show for its mistakes."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            chosen = getattr(parsed, action.dest, None)
            if chosen in action.choices:
                return _chosen(action.choices[chosen], parsed)
    return parser
