"""Per-file and per-node freshness labels and their worst-case aggregation."""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum


class FileLabel(StrEnum):
    """What happened to one source file since the snapshot it is compared with."""

    FRESH = "fresh"
    STALE_CHANGED = "stale_changed"
    STALE_DELETED = "stale_deleted"
    STALE_ADDED = "stale_added"
    """A new match of a glob, or a listed path that did not exist at the snapshot."""
    UNKNOWN = "unknown"
    """Unreadable, vanished while read, outside the working directory, or not a regular file."""

    @property
    def is_stale(self) -> bool:
        return self in (FileLabel.STALE_CHANGED, FileLabel.STALE_DELETED, FileLabel.STALE_ADDED)


class NodeLabel(StrEnum):
    """A node's label: the worst of its files' labels, or ``no_refs`` when it has none."""

    FRESH = "fresh"
    STALE_CHANGED = "stale_changed"
    STALE_DELETED = "stale_deleted"
    STALE_ADDED = "stale_added"
    UNKNOWN = "unknown"
    NO_REFS = "no_refs"

    @property
    def is_stale(self) -> bool:
        return self in (NodeLabel.STALE_CHANGED, NodeLabel.STALE_DELETED, NodeLabel.STALE_ADDED)


SEVERITY: dict[FileLabel, int] = {
    FileLabel.FRESH: 0,
    FileLabel.UNKNOWN: 1,
    FileLabel.STALE_ADDED: 2,
    FileLabel.STALE_CHANGED: 3,
    FileLabel.STALE_DELETED: 4,
}
"""deleted > changed > added > unknown > fresh."""


def aggregate(labels: Iterable[FileLabel]) -> NodeLabel:
    """The worst label of ``labels``; ``no_refs`` for none."""
    worst: FileLabel | None = None
    for label in labels:
        if worst is None or SEVERITY[label] > SEVERITY[worst]:
            worst = label
    return NodeLabel.NO_REFS if worst is None else NodeLabel(worst.value)
