"""Freshness lint rules (``freshness_valid``, ``freshness_sources``, ``freshness_unset``,
``source_files_path``, and ``source_files_exist`` when the working directory is known).

The layer that composes a session registers them with its Validator
(:mod:`freshness_magic.lint`; a run gets them through :meth:`FreshnessExtension.lint_rules`);
the engine knows nothing of them.
"""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING

from freshness_magic.engine.model import Graph, Node
from freshness_magic.engine.prompts import prompt_file_name
from freshness_magic.engine.validation import (
    ERROR,
    INFO,
    WARNING,
    Diagnostic,
    LintRule,
    Out,
    ScanRule,
    node_diag,
)
from freshness_magic.engine.validation.core import node_at, position_in_value
from freshness_magic.freshness.attrs import FRESHNESS_MODES, source_files
from freshness_magic.pathsafety import is_glob

if TYPE_CHECKING:
    from pathlib import Path


def _freshness_valid(graph: Graph, node: Node, out: Out) -> None:
    value = node.attrs.get("freshness")
    if value is not None and value not in FRESHNESS_MODES:
        out.append(
            node_diag(
                "freshness_valid",
                ERROR,
                node,
                f"node `{node.id}`: freshness {value!r} is not one of " + "|".join(FRESHNESS_MODES),
                'write freshness="ignore", "warn" or "block"',
                "freshness",
            )
        )


def _freshness_sources(graph: Graph, node: Node, out: Out) -> None:
    mode = node.attrs.get("freshness")
    if mode not in ("warn", "block"):
        return
    if node.attrs.get("source_files", "").replace(",", "").strip():
        return
    if prompt_file_name(node) is not None:  # its prompt file is an input: checked, as it runs
        return
    out.append(
        node_diag(
            "freshness_sources",
            WARNING,
            node,
            f"node `{node.id}` has freshness={mode!r} but no source_files, so there is nothing "
            "to check",
            f'add source_files="path/or/*.glob" to `{node.id}`, or remove freshness',
            "freshness",
        )
    )


def _freshness_unset(graph: Graph, node: Node, out: Out) -> None:
    """``source_files`` without ``freshness``: recorded, never checked nor shown stale (the
    seed's default, ``ignore``), which a reader of the pipeline may not expect."""
    if "freshness" in node.attrs or not source_files(node):
        return
    out.append(
        node_diag(
            "freshness_unset",
            INFO,
            node,
            f"node `{node.id}` has source_files but no freshness, so its inputs are recorded "
            "and never checked or shown stale (freshness defaults to ignore)",
            f'add freshness="warn" (be told) or "block" (hold the node back) to `{node.id}`, '
            'or freshness="ignore" to say it is meant',
            "source_files",
        )
    )


_MAYBE_OUTSIDE = r"\.\.|(?:^|,)\s*[/\\~]|:"  # compiled on first use, as model._DURATION
"""A cheap pre-filter: only entries that may be absolute or use ``..`` are examined."""


def _outside(entry: str) -> str | None:
    """How a ``source_files`` entry leads outside the working directory, or None if it does not."""
    normal = entry.replace("\\", "/")
    if normal.startswith("~"):
        return (
            "starts with `~`, which is not expanded (a home folder is outside the working "
            "directory)"
        )
    if normal.startswith("/") or re.match(r"[A-Za-z]:/", normal):
        return "is absolute"
    if ".." in normal.split("/"):
        return "climbs out of the working directory with `..`"
    return None


def _source_files_path(allowed: bool) -> ScanRule:
    """A ``source_files`` entry outside the working directory is an ERROR (the one path rule
    of a pipeline: see :func:`freshness_magic.pathsafety.pipeline_path_problem`); a WARNING
    when the caller admitted folders outside (``freshness_allow_outside``)."""

    def check(graph: Graph, node: Node, out: Out) -> None:
        raw = node.attrs.get("source_files")
        if not raw or not re.search(_MAYBE_OUTSIDE, raw):
            return
        offset = 0
        for piece in raw.split(","):
            entry = piece.strip()
            index = offset + len(piece) - len(piece.lstrip())
            offset += len(piece) + 1
            problem = _outside(entry) if entry else None
            if problem is None:
                continue
            key = "source_files"
            where = position_in_value(graph, node.attr_positions.get(key), key, index)
            line, column = where if where is not None else node_at(node, key)
            if allowed:
                message = (
                    f"node `{node.id}`: source_files entry {entry!r} {problem}; files outside "
                    "the working directory are read only from the folders you allowed"
                )
            else:
                message = (
                    f"node `{node.id}`: source_files entry {entry!r} is outside the working "
                    f"directory (not allowed): it {problem}"
                )
            out.append(
                Diagnostic(
                    "source_files_path",
                    WARNING if allowed else ERROR,
                    message,
                    node.id,
                    None,
                    line,
                    column,
                    "use a path relative to the working directory",
                )
            )

    return ScanRule("source_files_path", node_check=check)


def _source_files_exist(workdir: str) -> ScanRule:
    """A literal ``source_files`` path (no ``*``, ``?`` or ``[``) that does not exist under
    ``workdir`` is a WARNING: freshness tracks nothing for it, so a typo there silently turns the
    check off. A glob that matches nothing is not reported (the files may come later), nor an
    entry ``source_files_path`` reports (outside the working directory)."""

    def check(graph: Graph, node: Node, out: Out) -> None:
        raw = node.attrs.get("source_files")
        if not raw:
            return
        offset = 0
        for piece in raw.split(","):
            entry = piece.strip()
            index = offset + len(piece) - len(piece.lstrip())
            offset += len(piece) + 1
            if not entry or is_glob(entry) or _outside(entry) is not None:
                continue
            if os.path.lexists(os.path.join(workdir, entry)):
                continue
            out.append(_missing(graph, node, entry, index, workdir))

    return ScanRule("source_files_exist", node_check=check)


def _missing(graph: Graph, node: Node, entry: str, index: int, workdir: str) -> Diagnostic:
    key = "source_files"
    where = position_in_value(graph, node.attr_positions.get(key), key, index)
    line, column = where if where is not None else node_at(node, key)
    return Diagnostic(
        "source_files_exist",
        WARNING,
        f"node `{node.id}`: source_files entry {entry!r} does not exist under the working "
        f"directory {workdir}; freshness has nothing to track for it",
        node.id,
        None,
        line,
        column,
        "fix the path (relative to the working directory), create the file, or write a glob "
        "if the file comes later (a glob matching nothing is not reported)",
    )


def freshness_rules(
    workdir: str | Path | None = None, allow_outside: object = False
) -> list[LintRule]:
    """The freshness attributes' rules, to register with a Validator; with ``workdir`` (where
    the run works), ``source_files_exist`` too. ``allow_outside``
    (the run's ``freshness_allow_outside``) makes an outside ``source_files`` entry a WARNING."""
    rules: list[LintRule] = [
        ScanRule(
            "freshness_valid",
            node_check=_freshness_valid,
            node_attributes=frozenset({"freshness", "source_files"}),
        ),
        ScanRule("freshness_sources", node_check=_freshness_sources),
        ScanRule("freshness_unset", node_check=_freshness_unset),
        _source_files_path(bool(allow_outside)),
    ]
    if workdir is not None:
        rules.append(_source_files_exist(os.path.realpath(workdir)))
    return rules
