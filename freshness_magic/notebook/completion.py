"""Tab completion of ``%pipeline``, ``%%pipeline`` and ``%%node`` lines."""

from __future__ import annotations

from typing import TYPE_CHECKING

from IPython.core.error import UsageError

from freshness_magic.notebook.arguments import FLAGS, SUBCOMMANDS, name_from

if TYPE_CHECKING:
    from freshness_magic.notebook.magics import PipelineMagics


def complete_line(magics: PipelineMagics, line: str, symbol: str) -> list[str]:
    """Completions for a magic line: subcommands, flags, node ids, pipeline names."""
    words = line.split()
    if line.endswith(" "):
        words.append("")
    if not words:
        return []
    magic = words[0].lstrip("%")
    args = words[1:]
    if magic == "node":
        return _complete_nodes(magics, args, symbol)
    if len(args) <= 1:
        return [c for c in SUBCOMMANDS if c.startswith(symbol)]
    sub = args[0]
    flags = FLAGS.get(sub, ["--name"])
    if symbol.startswith("-"):
        return [f for f in [*flags, "--help"] if f.startswith(symbol)]
    previous = args[-2] if len(args) >= 2 else ""
    if previous == "--name" or sub == "show":
        return [n for n in magics.pipelines() if n.startswith(symbol)]
    if sub == "load" or sub in ("list", "status", "step", "reset", "hub", "stop"):
        return []
    try:
        pipeline = magics.get(name_from(args))
    except UsageError:
        return []
    if previous == "--choice":
        gate = pipeline.view.pending_gate()
        return [c.key for c in gate.choices if c.key.startswith(symbol)] if gate else []
    return [n for n in pipeline.graph.nodes if n.startswith(symbol)]


def _complete_nodes(magics: PipelineMagics, args: list[str], symbol: str) -> list[str]:
    previous = args[-2] if len(args) >= 2 else ""
    if previous == "--name":
        return [n for n in magics.pipelines() if n.startswith(symbol)]
    if symbol.startswith("-"):
        return [f for f in ("--name", "--help") if f.startswith(symbol)]
    try:
        pipeline = magics.get(name_from(args))
    except UsageError:
        return []
    return [n for n in pipeline.graph.nodes if n.startswith(symbol)]
