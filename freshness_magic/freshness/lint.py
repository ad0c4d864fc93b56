"""Freshness lint rules (``freshness_valid``, ``freshness_sources``, ``source_files_path``).

The layer that composes a session registers them with its Validator
(:mod:`freshness_magic.lint`; a run gets them through :meth:`FreshnessExtension.lint_rules`);
the engine knows nothing of them.
"""

from __future__ import annotations

import re

from freshness_magic.engine.model import Graph, Node
from freshness_magic.engine.validation import ERROR, WARNING, LintRule, Out, ScanRule, node_diag
from freshness_magic.freshness.attrs import FRESHNESS_MODES, source_files


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


_MAYBE_OUTSIDE = r"\.\.|(?:^|,)\s*[/\\~]|:"  # compiled on first use, as model._DURATION
"""A cheap pre-filter: only entries that may be absolute or use ``..`` are examined."""


def _source_files_path(graph: Graph, node: Node, out: Out) -> None:
    raw = node.attrs.get("source_files")
    if not raw or not re.search(_MAYBE_OUTSIDE, raw):
        return
    for entry in source_files(node):
        normal = entry.replace("\\", "/")
        if normal.startswith("~"):
            problem = (
                "starts with `~`, which is not expanded (a home folder is outside the working "
                "directory)"
            )
        elif normal.startswith("/") or re.match(r"[A-Za-z]:/", normal):
            problem = "is absolute"
        elif ".." in normal.split("/"):
            problem = "climbs out of the working directory with `..`"
        else:
            continue
        out.append(
            node_diag(
                "source_files_path",
                WARNING,
                node,
                f"node `{node.id}`: source_files entry {entry!r} {problem}; files outside "
                "the working directory are reported as unknown",
                "use a path relative to the working directory",
                "source_files",
            )
        )


def freshness_rules() -> list[LintRule]:
    """The freshness attributes' rules, to register with a Validator."""
    return [
        ScanRule("freshness_valid", node_check=_freshness_valid),
        ScanRule("freshness_sources", node_check=_freshness_sources),
        ScanRule("source_files_path", node_check=_source_files_path),
    ]
