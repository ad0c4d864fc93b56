"""MkDocs hooks: the reference pages' generated parts, built from the code so they cannot drift.

A page holds a marker line and gets the generated Markdown in its place:

- ``<!-- generated: cli -->``: every ``freshness-magic`` subcommand, from the CLI's parsers;
- ``<!-- generated: magics -->``: ``%pipeline`` and its subcommands, ``%%pipeline`` and ``%%node``,
  from the magics' parsers;
- ``<!-- generated: schemas -->``: every JSON Schema the package ships, with its fields.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Callable, Iterator
from importlib import resources
from typing import Any

WIDTH = "96"
"""Help is wrapped at this width (argparse reads ``COLUMNS``), the same on every machine."""


def _subparsers(
    parser: argparse.ArgumentParser,
) -> Iterator[tuple[str, str, argparse.ArgumentParser]]:
    """(name, one-line help, parser) of each subcommand, in the order ``--help`` lists them."""
    for action in parser._actions:  # argparse keeps its subcommands only here
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
            for name, sub in action.choices.items():
                yield name, helps.get(name, ""), sub


def _help_block(parser: argparse.ArgumentParser) -> str:
    return f"```text\n{parser.format_help().rstrip()}\n```\n"


def _commands(title: str, parser: argparse.ArgumentParser, level: str = "##") -> str:
    subs = list(_subparsers(parser))
    rows = "\n".join(f"| [`{name}`](#{_anchor(title, name)}) | {text} |" for name, text, _ in subs)
    parts = [f"| command | what it does |\n|---|---|\n{rows}\n", _help_block(parser)]
    for name, _text, sub in subs:
        parts.append(f"{level} `{title} {name}` {{#{_anchor(title, name)}}}\n\n{_help_block(sub)}")
    return "\n".join(parts)


def _anchor(title: str, name: str) -> str:
    return f"{title.strip('%').replace(' ', '-').replace('_', '-')}-{name}"


def cli_reference() -> str:
    """Every subcommand of the command line, from its parser."""
    from freshness_magic import cli

    parser = cli.build_parser()
    parser.prog = "freshness-magic"
    for _name, _text, sub in _subparsers(parser):
        sub.prog = sub.prog.replace(sub.prog.split(" ")[0], "freshness-magic", 1)
    return _commands("freshness-magic", parser)


def magics_reference() -> str:
    """``%pipeline`` with its subcommands, ``%%pipeline`` and ``%%node``, from their parsers."""
    from freshness_magic.notebook import arguments

    line = _commands("%pipeline", arguments.build_pipeline_parser(), level="###")
    cell = _help_block(arguments.build_cell_parser())
    node = _help_block(arguments.build_node_parser())
    return (
        f"## `%pipeline`: drive a loaded pipeline\n\n{line}\n"
        f"## `%%pipeline NAME`: load the cell's DOT {{#cell-pipeline}}\n\n{cell}\n"
        f"## `%%node NODE`: a Python cell as a node's handler {{#cell-node}}\n\n{node}"
    )


def _field_rows(schema: dict[str, Any]) -> str:
    required = set(schema.get("required", ()))
    rows = []
    for name, spec in schema.get("properties", {}).items():
        kind = spec.get("type", "")
        kind = " or ".join(kind) if isinstance(kind, list) else kind
        text = " ".join(str(spec.get("description", "")).split()).replace("|", "\\|")
        mark = "yes" if name in required else ""
        rows.append(f"| `{name}` | {kind} | {mark} | {text} |")
    if not rows:
        return ""
    return "| field | type | required | meaning |\n|---|---|---|---|\n" + "\n".join(rows) + "\n"


def schemas_reference() -> str:
    """Each JSON Schema the package ships: its title, description and top-level fields."""
    folder = resources.files("freshness_magic.schemas")
    parts = []
    for entry in sorted(folder.iterdir(), key=lambda item: item.name):
        if not entry.name.endswith(".schema.json"):
            continue
        schema = json.loads(entry.read_text(encoding="utf-8"))
        title = schema.get("title", entry.name)
        about = " ".join(str(schema.get("description", "")).split())
        parts.append(f"### `{entry.name}`\n\n**{title}.** {about}\n\n{_field_rows(schema)}")
    return "\n".join(parts)


GENERATORS: dict[str, Callable[[], str]] = {
    "<!-- generated: cli -->": cli_reference,
    "<!-- generated: magics -->": magics_reference,
    "<!-- generated: schemas -->": schemas_reference,
}


def on_config(config: Any) -> Any:
    os.environ["COLUMNS"] = WIDTH
    return config


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    for marker, generate in GENERATORS.items():
        if marker in markdown:
            markdown = markdown.replace(marker, generate())
    return markdown
