"""What a report's ``git status`` vouches for: tracked files it need not look at again.

A report runs one ``git status`` of the whole working directory's tracked files anyway (to
explain its stale files), and git compares every tracked file with its index entry there: the
stat data it keeps, and the content where that is not conclusive (git's racy-clean rule). A
file the status does not list has the content of its index entry, so one whose snapshots all
recorded the blob id that entry holds (:mod:`.gitindex` took it at the capture) has not changed
since them: the report hands back the snapshots' record without a stat here. The stat per file
it saves cost about as much as the status itself (20,000 files). The entries are read from
git's index (:class:`~.gitindex.GitIndex`) while git runs.

Only where git's word is exact, else every file is looked at as before:

- the status runs with :data:`~freshness_magic.vcs.git.EXACT_STATUS` (no file system monitor
  taken at its word, all stat data compared whatever the config says);
- git compares timestamps in whole seconds (as Debian builds it), so an edit that keeps the
  size and puts the mtime back goes unseen within the second of the ctime git recorded: an
  entry is taken only when that ctime lies before the earliest snapshot compared with, less
  the racy window, so any edit since the snapshot shows in a later second (and one before it
  is in the snapshot's record, which must equal the entry's);
- only entries git compares like any other (no assume-unchanged, skip-worktree,
  intent-to-add or unmerged entries), regular files, in folders no attributes file may filter,
  with no config or attributes that could (the rules of :mod:`.gitindex`);
- the index is the one git read: the same file (its stat key) before the status started, when
  read here and after the status ended, and written before the racy window of the check, so
  that a rewrite within one timestamp tick cannot hide;
- most of the files must qualify (up to git's verdict): otherwise the files are looked at at
  once instead of after waiting for git, which then runs beside the look as before.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from freshness_magic.freshness.baseline import BLOB_LAYOUT, Baseline, FileRecord
from freshness_magic.freshness.git import GitStatus, GitTier, PendingStatus
from freshness_magic.freshness.gitindex import GitIndex, index_key
from freshness_magic.freshness.hashing import RACY_WINDOW_NS


class StatusVouch:
    """The whole-tree ``git status`` of a report and what it vouches for (module docstring).

    Made as the status starts (so that git runs while the caller reads or resolves); the
    snapshots the report compares with are named by :meth:`compare_with` before :meth:`settle`.
    """

    def __init__(self, git: GitTier):
        self._git = git
        self._references: dict[str, list[Mapping[str, FileRecord]]] = {}
        self._changed_before = 0
        self._before = index_key(git.top_level)
        # tracked files only: the report asks about untracked or ignored stale files later
        self._pending: PendingStatus | None = git.start_status(exact=True, untracked=False)
        self._status: GitStatus | None = None

    def compare_with(self, references: Mapping[str, Sequence[Baseline]]) -> None:
        """``references``: node id -> each snapshot the report compares that node's files with."""
        self._references = {n: [s.files for s in snaps] for n, snaps in references.items()}
        times = [s.fs_time_ns for snaps in references.values() for s in snaps]
        self._changed_before = min(times) - RACY_WINDOW_NS if times else 0

    def cancel(self) -> None:
        """Stop the status (its result will not be read)."""
        if self._pending is not None:
            self._pending.cancel()
            self._pending = None

    def result(self) -> GitStatus | None:
        """The status (None: git failed); waits for it once."""
        if self._pending is not None:
            self._status = self._pending.result()
            self._pending = None
        return self._status

    def settle(self, resolved: Mapping[str, Sequence[str]], fs_now: int) -> dict[str, FileRecord]:
        """Key -> record of the files of ``resolved`` (node id -> workdir-relative keys) that
        git vouches for: each recorded alike by every snapshot of each node that tracks it."""
        before = self._before
        if before is None or before[3] >= fs_now - RACY_WINDOW_NS:
            return {}
        total = sum(len(keys) for keys in resolved.values())
        alike = self._alike(resolved)
        if len(alike) * 2 < total:
            return {}  # mostly files git cannot vouch for: look at them without waiting
        index = GitIndex.read(self._git.top_level, self._git.prefix, with_head=False)
        if index is None or index.file_key != before:
            return {}
        held = index.holding(alike, self._changed_before)
        if len(held) * 2 < total:
            return {}  # the same, told by the index: no wait for git
        status = self.result()
        if status is None or index_key(self._git.top_level) != before:
            return {}
        for path in status.entries:
            held.pop(path, None)
        return held

    def _alike(self, resolved: Mapping[str, Sequence[str]]) -> dict[str, FileRecord]:
        """The keys every snapshot of each node that tracks them recorded by the same blob id
        (and stat key), with that record."""
        alike: dict[str, FileRecord] | None = None
        for node_id, keys in resolved.items():
            mine = self._node_alike(keys, self._references.get(node_id, ()))
            if alike is None:
                alike = mine
                continue
            differ = {key for key in keys if key not in mine}
            for key, record in mine.items():
                seen = alike.setdefault(key, record)
                if seen is not record and seen[0] != record[0]:
                    differ.add(key)
            for key in differ:
                alike.pop(key, None)
        return alike or {}

    @staticmethod
    def _node_alike(
        keys: Sequence[str], snapshots: Sequence[Mapping[str, FileRecord]]
    ) -> dict[str, FileRecord]:
        """:meth:`_alike` for one node's keys and snapshots (one comprehension per snapshot:
        this runs for every file of a check)."""
        if not snapshots:
            return {}
        size = BLOB_LAYOUT.size
        get = snapshots[0].get
        found = {
            key: record
            for key in keys
            if (record := get(key)) is not None and record[0] is not None and len(record[0]) == size
        }
        for files in snapshots[1:]:
            if files is snapshots[0]:
                continue  # the same records (a completion snapshot that shares its baseline's)
            other = files.get
            found = {
                key: record
                for key, record in found.items()
                if (again := other(key)) is record or (again is not None and again[0] == record[0])
            }
        return found
