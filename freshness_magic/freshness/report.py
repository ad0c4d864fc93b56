"""The public freshness report: per node a label, per file a label with before/after details.

Used by ``python -m freshness_magic check``, ``status`` and the views of a run. Every object has
``to_dict()`` (JSON) and ``__str__`` (plain text).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from freshness_magic.engine.model import Graph
from freshness_magic.freshness.attrs import inputs_checked
from freshness_magic.freshness.labels import FileLabel, NodeLabel

HASH_PREFIX = 12
MISSING_NOTE = "missing, as at the snapshot"
"""The note of a tracked path absent both at the snapshot and now: fresh, nothing to compare."""


def _prefix(digest: str | None) -> str | None:
    return digest[:HASH_PREFIX] if digest else None


@dataclass(frozen=True)
class FileReport:
    """One file of one node compared with a snapshot."""

    path: str
    label: FileLabel
    old_digest: str | None = None
    new_digest: str | None = None
    old_size: int | None = None
    new_size: int | None = None
    old_mtime_ns: int | None = None
    new_mtime_ns: int | None = None
    method: str = "hash"
    """``hash`` (content compared), ``stat`` (fallback: too large or unreadable), ``none``."""
    note: str = ""
    git_at_snapshot: str | None = None
    """git's status of the file when the snapshot was taken."""
    git_change: str | None = None
    """For stale files in a git work tree: committed, uncommitted, untracked, ignored, ..."""

    @property
    def is_stale(self) -> bool:
        return self.label.is_stale

    @property
    def missing(self) -> bool:
        """Absent at the snapshot and now: fresh, but freshness tracks nothing there."""
        return self.label is FileLabel.FRESH and self.note == MISSING_NOTE

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "label": self.label.value,
            "old_hash": _prefix(self.old_digest),
            "new_hash": _prefix(self.new_digest),
            "old_size": self.old_size,
            "new_size": self.new_size,
            "old_mtime_ns": self.old_mtime_ns,
            "new_mtime_ns": self.new_mtime_ns,
            "method": self.method,
            "note": self.note,
            "git_at_snapshot": self.git_at_snapshot,
            "git_change": self.git_change,
        }

    def __str__(self) -> str:
        if self.missing:
            return f"{'missing':<14} {self.path} (also at the snapshot: nothing to compare)"
        extra = [x for x in (self.git_change, self.note) if x]
        if self.old_digest or self.new_digest:
            extra.insert(
                0, f"{_prefix(self.old_digest) or '-'} -> {_prefix(self.new_digest) or '-'}"
            )
        suffix = f" ({'; '.join(extra)})" if extra else ""
        return f"{self.label.value:<14} {self.path}{suffix}"


def renamed(files: Sequence[FileReport]) -> dict[str, str]:
    """Deleted path -> added path, for each deleted input whose content reappeared, unchanged,
    as a new one (``git mv``, a rename by hand): one change, not a delete and an add."""
    added: dict[str, str] = {}
    for f in files:
        if f.label is FileLabel.STALE_ADDED and f.new_digest:
            added.setdefault(f.new_digest, f.path)
    pairs: dict[str, str] = {}
    for f in files:
        if f.label is FileLabel.STALE_DELETED and f.old_digest in added:
            pairs[f.path] = added.pop(f.old_digest)
    return pairs


@dataclass(frozen=True)
class NodeReport:
    """A node compared with one snapshot (``since`` = ``baseline`` or ``run``)."""

    node_id: str
    label: NodeLabel
    since: str
    snapshot_kind: str
    snapshot_taken_at: float
    files: tuple[FileReport, ...] = ()
    """Every file that is not plainly fresh (stale, unknown, missing, or fresh by stat only)."""
    fresh: tuple[str, ...] = ()
    """Paths whose content is unchanged (kept as paths: there can be 20,000 of them)."""
    head_at_snapshot: str | None = None
    head_now: str | None = None
    git_checked: bool = False
    """Whether git was asked during this check (it is only asked when something is stale)."""

    @property
    def stale_files(self) -> list[str]:
        """Paths whose label is stale_changed, stale_deleted or stale_added."""
        return [f.path for f in self.files if f.label.is_stale]

    @property
    def is_stale(self) -> bool:
        return self.label.is_stale or any(f.label.is_stale for f in self.files)

    @property
    def missing_files(self) -> list[str]:
        """Paths named in ``source_files`` that exist neither at the snapshot nor now."""
        return [f.path for f in self.files if f.missing]

    @property
    def shown_label(self) -> str:
        """The label as text: ``stale_renamed`` when every stale file is one side of a rename
        (its content unchanged under a new path), which the worst-of label calls deleted."""
        stale = self.stale_files
        pairs = renamed(self.files)
        if stale and set(stale) <= pairs.keys() | set(pairs.values()):
            return "stale_renamed"
        return self.label.value

    @property
    def head_moved(self) -> bool | None:
        if not self.git_checked:
            return None
        return self.head_now != self.head_at_snapshot

    def to_dict(self, *, all_files: bool = False) -> dict[str, Any]:
        counts: dict[str, int] = {"fresh": len(self.fresh)} if self.fresh else {}
        for f in self.files:
            counts[f.label.value] = counts.get(f.label.value, 0) + 1
        listed = (
            self.files
            if all_files
            else tuple(f for f in self.files if f.label is not FileLabel.FRESH or f.missing)
        )
        return {
            "node_id": self.node_id,
            "label": self.label.value,
            "since": self.since,
            "snapshot_kind": self.snapshot_kind,
            "snapshot_taken_at": self.snapshot_taken_at,
            "stale_files": self.stale_files,
            "counts": counts,
            "head_at_snapshot": self.head_at_snapshot,
            "head_now": self.head_now,
            "head_moved": self.head_moved,
            "files": [f.to_dict() for f in listed]
            + ([{"path": p, "label": "fresh"} for p in self.fresh] if all_files else []),
        }

    def __str__(self) -> str:
        return "\n".join(
            [f"{self.node_id}: {self.shown_label} (since {self.since})", *self.details()]
        )

    def details(self) -> list[str]:
        """The indented lines under the headline: files not fresh or missing, and HEAD when it
        moved under a stale node (for a fresh one a commit elsewhere says nothing)."""
        moved = renamed(self.files)
        lines = []
        for f in self.files:
            if f.path in moved:
                lines.append(f"  {'renamed':<14} {f.path} -> {moved[f.path]} (same content)")
            elif f.path not in moved.values() and (f.label is not FileLabel.FRESH or f.missing):
                lines.append(f"  {f}")
        if self.head_moved and self.is_stale:
            lines.append(f"  HEAD moved: {self.head_at_snapshot} -> {self.head_now}")
        return lines


@dataclass(frozen=True)
class NodeFreshness:
    """Both views of one node: since its baseline, and (once it ran) since it last completed."""

    node_id: str
    since_baseline: NodeReport
    since_run: NodeReport | None = None

    @property
    def effective(self) -> NodeReport:
        """The view warn/block act on: since the last completion if any, else since baseline."""
        return self.since_run if self.since_run is not None else self.since_baseline

    def to_dict(self, *, all_files: bool = False) -> dict[str, Any]:
        return {
            "node_id": self.node_id,
            "label": self.effective.label.value,
            "stale_since_baseline": self.since_baseline.is_stale,
            "stale_since_run": self.since_run.is_stale if self.since_run is not None else None,
            "since_baseline": self.since_baseline.to_dict(all_files=all_files),
            "since_run": (
                self.since_run.to_dict(all_files=all_files) if self.since_run is not None else None
            ),
        }


@dataclass(frozen=True)
class FreshnessReport:
    """Every tracked node of a run at one moment.

    ``unchecked``: nodes whose inputs are recorded but not checked (``freshness`` ignore, also
    when unset). Their changes are listed, as an audit, but never make them stale.
    """

    workdir: str
    checked_at: float
    nodes: dict[str, NodeFreshness] = field(default_factory=dict)
    git: bool = False
    unchecked: frozenset[str] = frozenset()

    @property
    def stale_nodes(self) -> list[str]:
        return [
            n for n, v in self.nodes.items() if v.effective.is_stale and n not in self.unchecked
        ]

    @property
    def changed_unchecked(self) -> list[str]:
        """The unchecked nodes whose inputs changed (stale, were they checked)."""
        return [n for n, v in self.nodes.items() if v.effective.is_stale and n in self.unchecked]

    @property
    def all_fresh(self) -> bool:
        return not self.stale_nodes

    def with_modes(self, graph: Graph) -> FreshnessReport:
        """This report with ``graph``'s unchecked nodes marked (:func:`.attrs.inputs_checked`)."""
        unchecked = frozenset(
            n for n in self.nodes if n in graph.nodes and not inputs_checked(graph.nodes[n])
        )
        return replace(self, unchecked=unchecked)

    def to_dict(self, *, all_files: bool = False) -> dict[str, Any]:
        return {
            "workdir": self.workdir,
            "checked_at": self.checked_at,
            "git": self.git,
            "all_fresh": self.all_fresh,
            "stale_nodes": self.stale_nodes,
            "unchecked_nodes": sorted(self.unchecked & self.nodes.keys()),
            "nodes": {k: v.to_dict(all_files=all_files) for k, v in self.nodes.items()},
        }

    def __str__(self) -> str:
        if not self.nodes:
            return "no nodes with source_files"
        lines = []
        for entry in self.nodes.values():
            block = self._node_lines(entry)
            if entry.node_id in self.unchecked:
                block[0] += " [not checked: freshness=ignore]"
            lines += block
        lines.append(self._verdict())
        return "\n".join(lines)

    @staticmethod
    def _node_lines(entry: NodeFreshness) -> list[str]:
        base, run = entry.since_baseline, entry.since_run
        base_stale = base.is_stale
        if run is not None and base_stale and not run.is_stale:
            # It ran after these changes: fresh where it counts, the changes still shown.
            return [
                f"{entry.node_id}: fresh (since run); {base.shown_label} since baseline",
                *base.details(),
            ]
        details = base.details()  # made once: a thousand stale files make it cost
        if base_stale and run is not None and run.label == base.label:
            heads = (run.head_moved, run.head_at_snapshot, run.head_now)
            same_lines = run.files == base.files and heads == (
                base.head_moved,
                base.head_at_snapshot,
                base.head_now,
            )
            if same_lines or run.details() == details:  # the same change since both: said once
                return [f"{entry.node_id}: {base.shown_label} (since baseline and run)", *details]
        lines = [f"{base.node_id}: {base.shown_label} (since {base.since})", *details]
        if run is not None and run.is_stale:
            lines += str(run).split("\n")
        return lines

    def _verdict(self) -> str:
        """The last line: which nodes are stale; else whether every file could be checked; and
        the unchecked nodes whose inputs changed."""
        changed = self.changed_unchecked
        also = f"; changed but not checked (freshness=ignore): {', '.join(changed)}"
        if not self.all_fresh:
            return f"stale: {', '.join(self.stale_nodes)}" + (also if changed else "")
        unsure = [
            n
            for n, v in self.nodes.items()
            if v.effective.label is NodeLabel.UNKNOWN and n not in self.unchecked
        ]
        if unsure:
            verdict = "nothing stale; inputs that could not be checked (unknown): "
            verdict += ", ".join(unsure)
        else:
            verdict = "all fresh" if not changed else "nothing stale"
        return verdict + (also if changed else "")
