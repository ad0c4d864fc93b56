"""JSON Schemas (draft 2020-12) of every file a run writes, shipped with the package.

``docs/FORMATS.md`` describes the files; these schemas are the machine-checkable part. Tools that
read a run validate with any JSON Schema library; :func:`load` returns one schema and
:func:`schema_for` says which schema (if any) governs a file of a run directory, so a test can
check every file a real run leaves and fail on a file kind nobody described.
:func:`first_problem` checks a document against one of them: the engine reads a run
directory's state through it, so the schemas are also what a reader accepts.
"""

from __future__ import annotations

import fnmatch
import json
import pkgutil
from typing import Any

from freshness_magic.schemas._check import SchemaError, describe, first_problem

__all__ = [
    "BASE_URI",
    "EVIDENCE_DIR_FILES",
    "REUSE_DIR_FILES",
    "RUN_DIR_FILES",
    "SchemaError",
    "describe",
    "first_problem",
    "load",
    "names",
    "schema_for",
]

BASE_URI = "https://freshness-magic.invalid/schemas/"
"""The ``$id`` prefix of every schema (``.invalid``: a name, never fetched)."""

RUN_DIR_FILES: tuple[tuple[str, str | None], ...] = (
    ("checkpoint.json", "checkpoint.schema.json"),
    ("checkpoints/checkpoint_*.json", "checkpoint.schema.json"),
    ("journal.jsonl", "journal-record.schema.json"),
    ("driver.lock", "driver-lock.schema.json"),
    ("events.jsonl", "event.schema.json"),
    ("evidence.jsonl", "evidence-record.schema.json"),
    ("manifest.json", "manifest.schema.json"),
    ("restarted_as.json", "restart-link.schema.json"),
    ("backend.json", "backend.schema.json"),
    ("executor.json", "executor.schema.json"),
    ("nodes/*/status.json", "node-status.schema.json"),
    ("pipeline.dot", None),
    ("pipeline-*.dot", None),
    ("nodes/*/prompt.md", None),
    ("nodes/*/response.md", None),
    ("nodes/*/stdout*.txt", None),
    ("nodes/*/stderr*.txt", None),
    ("nodes/*/pgid", None),
    ("baselines/*", None),
)
"""Paths inside ``.freshness/runs/<run_id>/`` and their schema (None: free text or bytes, not
JSON).
``.jsonl`` files are validated line by line."""

EVIDENCE_DIR_FILES: tuple[tuple[str, str | None], ...] = (
    (".gitignore", None),
    ("evidence/*.engine.json", "evidence-claim.schema.json"),
    ("evidence/*.running.*", None),
    ("evidence/*.json", "evidence-node.schema.json"),
)
"""Paths inside ``.orchestrator/`` after the engine has recorded a step."""

REUSE_DIR_FILES: tuple[tuple[str, str | None], ...] = (
    ("index/*.jsonl", "reuse-entry.schema.json"),
    ("blobs/*", None),
)
"""Paths inside ``.freshness/reuse/`` (the reuse index) after a run with reuse on."""


def names() -> list[str]:
    """The file names of all shipped schemas."""
    from importlib import resources

    folder = resources.files(__name__)
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".schema.json"))


def load(name: str) -> dict[str, Any]:
    """The schema in ``name`` (for example ``"event.schema.json"``) as a dict."""
    raw = pkgutil.get_data(__name__, name)  # importlib.resources costs a command 10 ms
    if raw is None:
        raise ValueError(f"schema {name} cannot be read from the package")
    data = json.loads(raw.decode("utf-8"))
    if not isinstance(data, dict):
        raise ValueError(f"schema {name} is not a JSON object")
    return data


def schema_for(
    relative_path: str, table: tuple[tuple[str, str | None], ...] = RUN_DIR_FILES
) -> tuple[bool, str | None]:
    """``(known, schema name)`` of a ``/``-separated path relative to the folder of ``table``."""
    for pattern, schema in table:
        if fnmatch.fnmatchcase(relative_path, pattern):
            return True, schema
    return False, None
