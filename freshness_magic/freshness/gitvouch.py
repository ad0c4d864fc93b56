"""What a report's view from git vouches for: tracked files it need not look at again (a check
of many files asks for one for the same purpose: ``check.VOUCHED_CHECK_FILES``).

A report asks git anyway (to explain its stale files) for HEAD's tree against the whole working
directory's tracked files, through their index entries (:class:`~.gitstart.TreeStatus`), and
git compares every tracked file with its index entry there: the stat data it keeps, and the
content where that is not conclusive (git's racy-clean rule). A file it does not list has the
content of its index entry, so one whose snapshots all recorded the blob id that entry holds
(:mod:`.gitindex` took it at the capture) has not changed since them: the report hands back the
snapshots' record without a stat here. The stat per file it saves cost about as much as git's
whole answer (20,000 files). The entries are read from git's index
(:class:`~.gitindex.GitIndex`) while git runs. Conversely, a file git lists because its stat is
no longer its entry's, or because it is gone, is read at once, without first comparing its stat
with those records (:class:`~.snapshot.Settled`).

Only where git's word is exact, else every file is looked at as before:

- git runs with :data:`~freshness_magic.vcs.git.EXACT_STATUS` (no file system monitor taken
  at its word, all stat data compared whatever the config says);
- git compares timestamps in whole seconds (as Debian builds it), so an edit that keeps the
  size and puts the mtime back goes unseen within the second of the ctime git recorded: an
  entry is taken only when that ctime lies before the earliest snapshot compared with, less
  the racy window, so any edit since the snapshot shows in a later second (and one before it
  is in the snapshot's record, which must equal the entry's);
- only entries git compares like any other (no assume-unchanged, skip-worktree,
  intent-to-add or unmerged entries), regular files, in folders no attributes file may filter,
  with no config or attributes that could (the rules of :mod:`.gitindex`);
- the index is the one git read: the same file (its stat key) before git started, when read
  here and after git ended, and written before the racy window of the check, so that a
  rewrite within one timestamp tick cannot hide;
- most of the files must qualify (up to git's verdict): otherwise the files are looked at at
  once instead of after waiting for git, which then runs beside the look as before.

The index is not compared with file by file while it holds the very entries a snapshot took its
blob ids from (:class:`~.baseline.IndexMatch`: the same header and entries, byte for byte, by
length and digest): that snapshot's blob records not listed as unmatched are its entries', with
their ctime before the snapshot by the racy window, so the per-file comparison with the index
was done when the snapshot was taken. A node's other snapshots must record those files alike,
as above. This is the common case of a check after a run (no commit, checkout or ``git add``
since, whatever ``git status`` rewrote), and it keeps a check's work per file to dictionary
look-ups.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence

from freshness_magic.freshness.baseline import BLOB_LAYOUT, Baseline, FileRecord, FileView
from freshness_magic.freshness.git import GitStatus, GitTier, PendingTreeStatus
from freshness_magic.freshness.gitfiles import index_key
from freshness_magic.freshness.gitindex import (
    AttributesRule,
    GitIndex,
    current_entries_id,
)
from freshness_magic.freshness.gitstart import TreeStatus
from freshness_magic.freshness.hashing import RACY_WINDOW_NS
from freshness_magic.freshness.snapshot import Settled

NodeRecords = Callable[[Sequence[str], Sequence[Baseline]], "FileView | None"]
"""The records of a node's keys that git may vouch for, given the node's snapshots (None: this
way of telling does not apply to the node)."""


class StatusVouch:
    """git's whole-tree view of a report or a check and what it vouches for (module
    docstring).

    Made as git starts (so that git runs while the caller reads or resolves); the
    snapshots the report compares with are named by :meth:`compare_with` before :meth:`settle`.
    """

    def __init__(
        self, git: GitTier, *, claims_only: bool = False, started: TreeStatus | None = None
    ):
        """``started``: git's view, already started for ``git``'s work tree (else it is
        started here)."""
        self._git = git
        self._claims_only = claims_only
        self._references: dict[str, Sequence[Baseline]] = {}
        self._changed_before = 0
        # tracked files only: the report asks about untracked or ignored stale files later
        status = started if started is not None else TreeStatus.start(git.top_level, git.workdir)
        self._before = status.index_before
        self._pending: PendingTreeStatus | None = PendingTreeStatus(status, git.prefix)
        self._status: GitStatus | None = None
        self._entries: dict[int, tuple[int, str] | None] = {}

    @classmethod
    def on_claims(
        cls, git: GitTier, references: Mapping[str, Sequence[Baseline]]
    ) -> StatusVouch | None:
        """A vouch compared with ``references`` that takes git's word only through a
        snapshot's claim on the index (never reading the index entry by entry), started only
        when one of the snapshots claims the index as it is now; None otherwise."""
        key = index_key(git.top_level)
        if key is None:
            return None
        claims = {
            s.index_match.entries for snaps in references.values() for s in snaps if s.index_match
        }
        now = {end: current_entries_id(git.top_level, end, key) for end, _ in claims}
        if not any(now[end] == (end, digest) for end, digest in claims):
            return None
        vouch = cls(git, claims_only=True)
        if vouch._before == key:  # the same index file: not read and digested again
            vouch._entries.update(now)
        vouch.compare_with(references)
        return vouch

    def compare_with(self, references: Mapping[str, Sequence[Baseline]]) -> None:
        """``references``: node id -> each snapshot the report compares that node's files with."""
        self._references = dict(references)
        times = [s.fs_time_ns for snaps in references.values() for s in snaps]
        self._changed_before = min(times) - RACY_WINDOW_NS if times else 0

    def cancel(self) -> None:
        """Stop git (its answer will not be read)."""
        if self._pending is not None:
            self._pending.cancel()
            self._pending = None

    def result(self) -> GitStatus | None:
        """git's answer (None: git failed), its unsure paths not yet confirmed
        (:meth:`~.git.GitStatus.confirmed`); waits for it once."""
        if self._pending is not None:
            self._status = self._pending.result()
            self._pending = None
        return self._status

    def waited(self) -> GitStatus | None:
        """The status if :meth:`settle` waited for it (git vouched), else None."""
        return self._status if self._pending is None else None

    def settle(
        self,
        resolved: Mapping[str, Sequence[str]],
        fs_now: int,
        folders: Iterable[str] | None = None,
    ) -> Settled:
        """The records of the files of ``resolved`` (node id -> workdir-relative keys) that git
        vouches for, each recorded alike by every snapshot of each node that tracks it; and,
        of those recorded so, the files git lists as changed since their index entry (which
        is their record): another stat or content, or gone. A look reads those without first
        comparing their stat with the record. ``folders``: folders (workdir-relative) holding
        every one of the keys, if known."""
        held = self._held(resolved, fs_now, folders)
        if not held:
            return _NOTHING
        status = self.result()
        if status is None or index_key(self._git.top_level) != self._before:
            return _NOTHING
        edited = status.edited
        listed = [path for path in status.entries if path in held]
        return Settled(held.without(listed), frozenset(path for path in listed if path in edited))

    def _held(
        self, resolved: Mapping[str, Sequence[str]], fs_now: int, folders: Iterable[str] | None
    ) -> FileView | None:
        """The records of the files of ``resolved`` git may vouch for, before its answer;
        None when they are not most of the files."""
        before = self._before
        if before is None or before[3] >= fs_now - RACY_WINDOW_NS:
            return None
        total = sum(len(keys) for keys in resolved.values())
        held = self._alike(resolved, self._node_claimed)
        if held is not None:
            workdir = os.path.normpath(os.path.join(self._git.top_level, self._git.prefix))
            rule = AttributesRule(self._git.top_level, workdir)
            held = held.without(rule.filtered(held.shared, folders))
        if held is None or len(held) * 2 < total:  # no claim, or one on few of the files
            if self._claims_only:
                return None
            held = self._held_by_index(resolved, total)
        if held is None or len(held) * 2 < total:
            return None  # mostly files git cannot vouch for: look at them without waiting
        return held

    def _held_by_index(self, resolved: Mapping[str, Sequence[str]], total: int) -> FileView | None:
        """The records git may vouch for, told by reading the index (no snapshot's claim on
        it): the blob ids of its entries against the records."""
        alike = self._alike(resolved, _node_alike)
        if alike is None or len(alike) * 2 < total:
            return None
        index = GitIndex.read(self._git.top_level, self._git.prefix, with_head=False)
        if index is None or index.file_key != self._before:
            return None
        return _view(index.holding(dict(alike.items()), self._changed_before))

    def _node_claimed(self, keys: Sequence[str], snapshots: Sequence[Baseline]) -> FileView | None:
        """The records of ``keys`` a snapshot's claim on the current index holds, recorded
        alike by the node's other snapshots; None when no snapshot claims this index."""
        for claim in snapshots:
            match = claim.index_match
            if match is not None and self._entries_now(match.entries[0]) == match.entries:
                return _kept_alike(match.held(claim.files, keys), claim, snapshots)
        return None

    def _entries_now(self, end: int) -> tuple[int, str] | None:
        """The current index's entries named as a snapshot's claim names them (read once per
        length), if the index is still the file whose key was taken before git started."""
        if end not in self._entries and self._before is not None:
            self._entries[end] = current_entries_id(self._git.top_level, end, self._before)
        return self._entries.get(end)

    def _alike(
        self, resolved: Mapping[str, Sequence[str]], node_records: NodeRecords
    ) -> FileView | None:
        """The keys ``node_records`` gives for every node that tracks them, recorded by the
        same digest everywhere, with that record; None when it does not apply to a node."""
        first: FileView | None = None
        alike: dict[str, FileRecord] | None = None
        for node_id, keys in resolved.items():
            mine = node_records(keys, self._references.get(node_id, ()))
            if mine is None:
                return None
            if first is None:
                first = mine
                continue
            if alike is None:
                alike = dict(first.items())
            differ = {key for key in keys if key not in mine}
            for key, record in mine.items():
                seen = alike.setdefault(key, record)
                if seen is not record and seen[0] != record[0]:
                    differ.add(key)
            for key in differ:
                alike.pop(key, None)
        if alike is not None:
            return _view(alike)
        return first if first is not None else _view({})


_NOTHING = Settled(FileView({}, {}))
"""Told nothing: every file is looked at."""


def _view(records: dict[str, FileRecord]) -> FileView:
    """``records`` as a view sharing every one of them."""
    return FileView(records, dict.fromkeys(records))


def _node_alike(keys: Sequence[str], snapshots: Sequence[Baseline]) -> FileView:
    """The blob records of ``keys`` every one of a node's snapshots recorded alike (the same
    stat key and blob id)."""
    if not snapshots:
        return _view({})
    size = BLOB_LAYOUT.size
    get = snapshots[0].files.get
    found = {
        key: record
        for key in keys
        if (record := get(key)) is not None and record[0] is not None and len(record[0]) == size
    }
    return _kept_alike(_view(found), snapshots[0], snapshots)


def _kept_alike(found: FileView, taken_from: Baseline, snapshots: Sequence[Baseline]) -> FileView:
    """``found`` (records of ``taken_from``) without the keys another of ``snapshots`` records
    otherwise (one comprehension per snapshot: this runs for every file of a check)."""
    for snapshot in snapshots:
        if snapshot.files is taken_from.files:
            continue  # the same records (a completion snapshot that shares its baseline's)
        other = snapshot.files.get
        found = found.without(
            [
                key
                for key, record in found.items()
                if not (
                    (again := other(key)) is record or (again is not None and again[0] == record[0])
                )
            ]
        )
    return found
