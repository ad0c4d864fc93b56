"""Comparing snapshots and the tracker that owns a run's baselines.

:class:`FreshnessTracker` captures baselines for nodes (node id -> ``source_files`` entries),
takes a completion snapshot when a node finishes, checks nodes against their effective snapshot
(the completion snapshot once a node has run, else its baseline), produces the public report,
accepts changes, and round-trips through a checkpoint dict. The check always compares with the
snapshot, never with git's HEAD; git only explains stale files (one call per check, only when
something is stale, asking about those paths only). A check before a node explains at most
:data:`MAX_EXPLAINED` stale files (the first, sorted; the others keep ``git_change`` None): more
paths would make git slower than the check itself. A check of many files (most of a large work
tree: :data:`VOUCHED_CHECK_FILES`) takes git's word for the tracked files its whole-tree view
(:class:`~.gitstart.TreeStatus`) finds unchanged, as the full report does. The full report
explains every stale file: it starts git's view of the whole working directory's tracked files
before looking at the files, so git runs on the other core meanwhile, and asks ``git status``
by name about the stale files that view does not list (untracked, ignored, unchanged against
the index, or listed on their stat alone with the content HEAD has).
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeGuard

from freshness_magic.errors import FreshnessError
from freshness_magic.freshness.baseline import (
    HASH,
    NONE,
    STAT,
    STAT_LAYOUT,
    Baseline,
    FileRecord,
    FileView,
)
from freshness_magic.freshness.git import GitStatus, GitTier, change_kind
from freshness_magic.freshness.gitindex import index_entries
from freshness_magic.freshness.gitstart import TreeStatus
from freshness_magic.freshness.gitvouch import StatusVouch
from freshness_magic.freshness.labels import FileLabel, aggregate
from freshness_magic.freshness.report import (
    MISSING_NOTE,
    FileReport,
    FreshnessReport,
    NodeFreshness,
    NodeReport,
)
from freshness_magic.freshness.resolve import Resolver
from freshness_magic.freshness.snapshot import HashSource, ResolveHook, Settle, Snapshotter
from freshness_magic.vcs.git import MAX_PATHSPECS

if TYPE_CHECKING:
    from freshness_magic.freshness.filestore import FileStore

STATE_VERSION = 5
"""The tracker's checkpoint state: baselines by node, then completion snapshots by node. Since
version 2 a baseline may list only its differences from another node's whole baseline, and a
completion snapshot only its differences from its node's baseline (``files_from``); since
version 3 a digest may be git's blob id (:mod:`.gitindex`), which older readers would take for a
changed file; since version 4 a whole snapshot's files are packed in columns
(``files_packed``, :func:`.baseline.pack_files`) instead of one JSON object per file; since
version 5 those columns are one block of bytes in the run directory (``files_stored``,
:mod:`.filestore`), named by its digest."""
READABLE_VERSIONS = (1, 2, 3, 4, STATE_VERSION)
VOUCHED_CHECK_FILES = 10_000
"""A check whose nodes' snapshots hold this many files, and at least half as many as git's
index has entries, takes git's word for tracked files (:class:`StatusVouch`) while a snapshot
claims the index as it is now: git's whole-tree view then costs less, on the other core,
than a stat per file here (20,000 files: about 35 ms of git against 65 ms of stats; git
stats in C, on several threads). Without a claim the index would have to be compared with
entry by entry, which costs about what the stats save, so every file is looked at."""
MAX_EXPLAINED = 16
"""Stale files a check before a node asks git about (see the module docstring). git matches every
index entry against every path asked: on 100,000 files 16 paths took 46 ms and 64 took 113 ms,
against 41 ms for one."""


def _same_stat(old: FileRecord, new: FileRecord) -> bool:
    if old.stat is None or new.stat is None:
        return False
    o, n = old.stat, new.stat
    return (o.dev, o.ino, o.mode, o.size, o.mtime_ns) == (n.dev, n.ino, n.mode, n.size, n.mtime_ns)


def _same_files(one: Baseline, other: Baseline) -> bool:
    """Whether comparing the same files with ``one`` and with ``other`` gives the same labels
    and details: the same records, literal paths, HEAD and git states (a node that ran without
    its inputs changing: its completion snapshot read back from a checkpoint shares its
    baseline's records, so the run's comparison is the baseline's)."""
    return (
        (one.files is other.files or one.files == other.files)
        and one.literal == other.literal
        and (one.git, one.head, one.git_states) == (other.git, other.head, other.git_states)
    )


def compare_file(
    path: str,
    old: FileRecord | None,
    new: FileRecord | None,
    git_at_snapshot: str | None = None,
    explain: Callable[[str], str] | None = None,
) -> FileReport:
    """Label one file: ``old`` from the snapshot, ``new`` from now (None: not matched);
    ``explain`` tells git's view of a stale file's change (``FileReport.git_change``)."""
    label, method, note = _label(old, new)
    git_change = None
    if explain is not None and label.is_stale and not path.startswith("/"):
        git_change = explain(path)
    return FileReport(
        path,
        label,
        old_digest=old.digest if old is not None else None,
        new_digest=new.digest if new is not None else None,
        old_size=old.size if old is not None else None,
        new_size=new.size if new is not None else None,
        old_mtime_ns=old.mtime_ns if old is not None else None,
        new_mtime_ns=new.mtime_ns if new is not None else None,
        method=method,
        note=note,
        git_at_snapshot=git_at_snapshot,
        git_change=git_change,
    )


def _label(old: FileRecord | None, new: FileRecord | None) -> tuple[FileLabel, str, str]:
    """(label, method, note) of a file: ``old`` from the snapshot, ``new`` from now."""
    before = old is not None and old.existed
    after = new is not None and new.existed
    if not before and not after:
        return FileLabel.FRESH, NONE, MISSING_NOTE
    if before and not after:
        return FileLabel.STALE_DELETED, NONE, ""
    if not before:
        return FileLabel.STALE_ADDED, NONE, ""
    assert old is not None and new is not None
    if not new.regular or new.method == NONE:
        return FileLabel.UNKNOWN, NONE, new.note
    old_digest, new_digest = _raw_digest(old), _raw_digest(new)
    if old_digest is not None and new_digest is not None:
        label = FileLabel.FRESH if old_digest == new_digest else FileLabel.STALE_CHANGED
        return label, HASH, ""
    note = new.note or old.note or "compared by stat"
    if not _same_stat(old, new):
        return FileLabel.STALE_CHANGED, STAT, note
    if new_digest is None and new.note.startswith("unreadable"):
        return FileLabel.UNKNOWN, STAT, f"{note}; stat unchanged, content not verifiable"
    return FileLabel.FRESH, STAT, note


_STAT_BYTES = STAT_LAYOUT.size


def _raw_digest(record: FileRecord | None) -> bytes | None:
    """The digest bytes of ``record`` (None: none), without making its hex text."""
    packed = record[0] if record is not None else None
    if packed is None or len(packed) == _STAT_BYTES:
        return None
    return packed[_STAT_BYTES:]


def _shares(
    current: Mapping[str, FileRecord], files: Mapping[str, FileRecord]
) -> TypeGuard[FileView]:
    """Whether ``current`` is a view sharing the records of ``files`` (the reference's)."""
    return isinstance(current, FileView) and current.files is files


def _differing(
    ref_files: Mapping[str, FileRecord], cur_files: Mapping[str, FileRecord]
) -> list[str]:
    """The reference's paths whose current record is not the very same object (or is none).

    The common case first: the stat cache handed back the very same records, compared at C
    speed; and where git vouched for most files (:class:`FileView` sharing the reference's
    records), only the records looked at again and the paths the view lacks."""
    if not _shares(cur_files, ref_files):
        cur_get = cur_files.get
        return [path for path, old in ref_files.items() if cur_get(path) is not old]
    own, shared, ref_get = cur_files.own, cur_files.shared, ref_files.get
    differing = [
        path for path, new in own.items() if (old := ref_get(path)) is not None and old is not new
    ]
    if len(shared) + sum(1 for path in own if path in ref_files) < len(ref_files):
        differing += [path for path in ref_files if path not in shared and path not in own]
    return differing


Relook = Callable[[str, bool], FileRecord | None]
"""The file at a key now, digested as a git blob id (True) or as xxh3_128; None: not readable."""


def compare(
    reference: Baseline,
    current: Baseline,
    since: str,
    relook: Relook | None = None,
    status: GitStatus | None = None,
    memo: dict[str, tuple[Any, ...]] | None = None,
) -> NodeReport:
    """Label every file of a node; unresolved entries (outside the workdir) are ``unknown``.

    Files whose record is unchanged (the stat cache hands back the same record, or the digests
    match) only have their path listed in ``fresh``; everything else gets a :class:`FileReport`.
    A file whose digest is not of the reference's kind (a blob id from git's index against a
    hash, or the other way) is digested again like the reference by ``relook``. With git's
    ``status`` of the working directory every stale file gets git's view of its change.
    ``memo`` (shared by the comparisons of one report) hands back the file report made for the
    same records in another comparison (a node's baseline and completion snapshot mostly hold
    the same records).
    """
    files: list[FileReport] = []
    explain = None
    if status is not None:
        head = reference.head

        def explain(path: str) -> str:
            return change_kind(path, head, status)

    ref_files, cur_files = reference.files, current.files
    cur_get = cur_files.get
    differing = _differing(ref_files, cur_files)
    if not differing:
        fresh = list(ref_files)
    else:
        skip = set(differing)
        fresh = [path for path in ref_files if path not in skip]
        for path in differing:
            old = ref_files[path]
            new = cur_get(path)
            # the raw digests (after the packed stat key): equal exactly when the hex ones are
            old_digest = _raw_digest(old)
            new_digest = _raw_digest(new)
            if (
                relook is not None
                and new is not None
                and new_digest is not None
                and old_digest is not None
                and len(new_digest) != len(old_digest)  # a blob id against an xxh3_128 digest
            ):
                new = relook(path, old.blob) or new
                new_digest = _raw_digest(new)
            if (
                new is not None
                and old_digest is not None
                and old_digest == new_digest
                and old.existed
                and new.existed
                and new.regular
            ):
                fresh.append(path)
            elif not old.existed and (new is None or not new.existed):
                continue  # missing then and now: a literal path is reported below
            else:
                state = reference.git_state(path)
                hit = memo.get(path) if memo is not None else None
                if hit is not None and hit[:4] == (old, new, state, reference.head):
                    files.append(hit[4])
                    continue
                made = compare_file(path, old, new, state, explain)
                if memo is not None:
                    memo[path] = (old, new, state, reference.head, made)
                files.append(made)
        if len(fresh) > len(ref_files) - len(skip):
            fresh.sort()  # re-verified files were appended after the untouched ones
    still_matched = len(ref_files) - sum(1 for p in differing if p not in cur_files)
    if len(cur_files) > still_matched:  # some current paths are new matches
        candidates = cur_files.own if _shares(cur_files, ref_files) else cur_files
        for path in candidates:
            if path not in ref_files:
                new = cur_get(path)
                files.append(compare_file(path, None, new, reference.git_state(path), explain))
    missing = [
        path
        for path in reference.literal
        if not getattr(ref_files.get(path), "existed", True)
        and not getattr(cur_get(path), "existed", False)
    ]
    if missing:  # a path named in source_files that is not there: fresh, but say so
        gone = set(missing)
        fresh = [path for path in fresh if path not in gone]
        files += (compare_file(path, ref_files[path], cur_get(path)) for path in missing)
    for unresolved in current.unresolved:
        files.append(
            FileReport(unresolved.entry, FileLabel.UNKNOWN, method=NONE, note=unresolved.reason)
        )
    files.sort(key=lambda f: f.path)
    labels = [f.label for f in files]
    if fresh:
        labels.append(FileLabel.FRESH)
    return NodeReport(
        node_id=reference.node_id,
        label=aggregate(labels),
        since=since,
        snapshot_kind=reference.kind,
        snapshot_taken_at=reference.taken_at,
        files=tuple(files),
        fresh=tuple(fresh),
        head_at_snapshot=reference.head,
        head_now=status.head if status is not None else None,
        git_checked=status is not None,
    )


def _with_git(report: NodeReport, status: GitStatus, asked: set[str] | None) -> NodeReport:
    """``report`` with git's view of its stale files (of those in ``asked``; None: all)."""
    files = tuple(
        dataclasses.replace(f, git_change=change_kind(f.path, report.head_at_snapshot, status))
        if f.label.is_stale and not f.path.startswith("/") and (asked is None or f.path in asked)
        else f
        for f in report.files
    )
    return dataclasses.replace(report, files=files, head_now=status.head, git_checked=True)


def _unexplained(report: NodeReport, paths: set[str]) -> NodeReport:
    """``report`` with no git explanation for its files in ``paths`` (git could not tell)."""
    files = tuple(
        dataclasses.replace(f, git_change=None) if f.path in paths else f for f in report.files
    )
    return dataclasses.replace(report, files=files)


def _blobs_now(current: Mapping[str, Baseline]) -> Callable[[str], str | None]:
    """A path's blob id as the look that took ``current`` read it (None: it read none)."""

    def blob_of(path: str) -> str | None:
        for snapshot in current.values():
            record = snapshot.files.get(path)
            if record is not None:
                return record.digest if record.blob else None
        return None

    return blob_of


class FreshnessTracker:
    """Baselines, completion snapshots and checks for the nodes of one run in ``workdir``.

    ``hash_size_limit``: files larger than this many bytes are compared by stat only (default:
    no limit). ``allow_outside``: True, or folders outside ``workdir`` whose files may be
    tracked; otherwise such entries are ``unknown``. ``after_resolve`` is called between
    resolving and hashing in every snapshot. ``hash_source`` (the Node State Hub) supplies
    digests it holds for an unchanged stat key, so those files are not read.
    """

    def __init__(
        self,
        workdir: str | os.PathLike[str],
        hash_size_limit: int | None = None,
        *,
        allow_outside: bool | Iterable[str] = False,
        git: bool = True,
        state_dir: str | os.PathLike[str] | None = None,
        after_resolve: ResolveHook | None = None,
        hash_source: HashSource | None = None,
    ):
        self.workdir = os.path.abspath(os.fspath(workdir))
        self.resolver = Resolver(self.workdir, allow_outside)
        self.git = GitTier(self.workdir, enabled=git)
        folder = os.fspath(state_dir) if state_dir else os.path.join(self.workdir, ".freshness")
        self.snapshotter = Snapshotter(
            self.resolver,
            self.git,
            folder,
            hash_size_limit=hash_size_limit,
            after_resolve=after_resolve,
            hash_source=hash_source,
        )
        self.baselines: dict[str, Baseline] = {}
        self.run_snapshots: dict[str, Baseline] = {}
        self._status_vouch: StatusVouch | None = None

    # -- snapshots -------------------------------------------------------------------------

    def capture(
        self, nodes: Mapping[str, Sequence[str]], kind: str = "baseline"
    ) -> dict[str, Baseline]:
        """Take and keep baselines for ``nodes`` (node id -> entries); returns them."""
        if not nodes:
            return {}
        taken = self.snapshotter.take(nodes, kind)
        self.baselines.update(taken)
        return taken

    def snapshot_run(self, node_id: str) -> Baseline:
        """The completion snapshot of ``node_id`` ("stale since run" is measured from it)."""
        entries = self._entries(node_id)
        taken = self.snapshotter.take({node_id: entries}, "run")[node_id]
        self.run_snapshots[node_id] = taken
        return taken

    def _entries(self, node_id: str) -> tuple[str, ...]:
        baseline = self.baselines.get(node_id)
        if baseline is None:
            raise FreshnessError(
                f"node {node_id!r} has no freshness baseline; capture one before checking it"
            )
        return baseline.entries

    # -- checks ----------------------------------------------------------------------------

    def _snapshots(self, node_id: str) -> list[Baseline]:
        """The snapshots a report compares ``node_id``'s files with: baseline, then run."""
        found = [self.baselines[node_id]]
        run = self.run_snapshots.get(node_id)
        return found if run is None else [*found, run]

    def _current(
        self, node_ids: Sequence[str], settle: Settle | None = None
    ) -> dict[str, Baseline]:
        nodes = {n: self._entries(n) for n in node_ids}
        if not nodes:
            return {}
        return self.snapshotter.take(nodes, "current", with_git=False, settle=settle)

    def check(self, node_id: str) -> NodeReport:
        """Compare ``node_id`` with its effective snapshot; git explains stale files."""
        return self.check_many([node_id])[node_id]

    def check_many(self, node_ids: Sequence[str]) -> dict[str, NodeReport]:
        """Like :meth:`check` for several nodes: one pass over the files, at most one git call
        to explain stale files (and, for many files, git's view vouching for them)."""
        vouch = self._check_vouch(node_ids)
        try:
            current = self._current(node_ids, vouch.settle if vouch is not None else None)
        finally:
            if vouch is not None:
                vouch.cancel()  # an answer not waited for is not needed
        known = vouch.waited() if vouch is not None else None
        if known is not None:
            known = known.confirmed(_blobs_now(current))
        reports: dict[str, NodeReport] = {}
        for node_id in node_ids:
            ref = self.run_snapshots.get(node_id)
            since = "run" if ref is not None else "baseline"
            reports[node_id] = compare(
                ref or self.baselines[node_id], current[node_id], since, self.snapshotter.relook
            )
        return self._explain(reports, known)

    def _check_vouch(self, node_ids: Sequence[str]) -> StatusVouch | None:
        """git's view vouching for a check's files, started, when they are many and most of
        the work tree's (see :data:`VOUCHED_CHECK_FILES`) and a snapshot claims git's index as
        it is now; None: every file is looked at."""
        if not self.git.available:
            return None
        files = sum(len(self.baselines[n].files) for n in node_ids if n in self.baselines)
        if files < VOUCHED_CHECK_FILES:
            return None
        entries = index_entries(self.git.top_level)
        if entries is None or entries > 2 * files:
            return None
        return StatusVouch.on_claims(self.git, {n: self._snapshots(n) for n in node_ids})

    def report(self, node_ids: Sequence[str] | None = None) -> FreshnessReport:
        """The public report: every node since its baseline and, once it ran, since its run.

        The report explains every stale file, so git's view of the whole working directory's
        tracked files is asked at once and runs on the other core while the folders are listed;
        the files it vouches for are not looked at again (:class:`StatusVouch`), and the others
        are compared with the snapshot by themselves (:class:`~.baseline.FileView`).
        """
        ids = list(self.baselines) if node_ids is None else list(node_ids)
        vouch, self._status_vouch = self._status_vouch, None
        if vouch is None and self.git.available:
            vouch = StatusVouch(self.git)
        try:
            if vouch is not None:
                vouch.compare_with({n: self._snapshots(n) for n in ids})
            current = self._current(ids, vouch.settle if vouch is not None else None)
        except BaseException:
            if vouch is not None:
                vouch.cancel()
            raise
        status = vouch.result() if vouch is not None else None
        if status is not None:
            status = status.confirmed(_blobs_now(current))
        relook = self.snapshotter.relook
        nodes = {}
        memo: dict[str, tuple[Any, ...]] = {}
        for node_id in ids:
            now = current[node_id]
            baseline = self.baselines[node_id]
            run = self.run_snapshots.get(node_id)
            since_baseline = compare(baseline, now, "baseline", relook, status, memo)
            since_run = None
            if run is not None and _same_files(baseline, run):
                since_run = dataclasses.replace(
                    since_baseline,
                    since="run",
                    snapshot_kind=run.kind,
                    snapshot_taken_at=run.taken_at,
                )
            elif run is not None:
                since_run = compare(run, now, "run", relook, status, memo)
            nodes[node_id] = NodeFreshness(node_id, since_baseline, since_run)
        if status is not None:
            nodes = self._explain_unlisted(nodes, status)
        return FreshnessReport(self.workdir, time.time(), nodes, git=self.git.available)

    def _explain_unlisted(
        self, nodes: dict[str, NodeFreshness], status: GitStatus
    ) -> dict[str, NodeFreshness]:
        """``nodes`` with git's word on the stale files the report's view from git did not list.

        That view lists tracked files only (listing untracked and ignored ones walks every
        folder: about half of git's time), so a stale file it does not list is either tracked
        and unchanged against the index, or untracked or ignored: git is asked about those
        paths (by name up to :data:`~freshness_magic.vcs.git.MAX_PATHSPECS`), and their
        explanation is git's answer, or none when git failed.
        """
        unlisted = sorted(
            {
                f.path
                for entry in nodes.values()
                for report in (entry.since_baseline, entry.since_run)
                if report is not None
                for f in report.files
                if f.label.is_stale and not f.path.startswith("/") and f.path not in status.entries
            }
        )
        if not unlisted:
            return nodes
        asked = set(unlisted)
        more = self.git.status(unlisted, ignored=True)
        if more is None:

            def explain(report: NodeReport) -> NodeReport:
                return _unexplained(report, asked)

        else:
            entries = dict(status.entries)
            entries.update((p, state) for p, state in more.entries.items() if p in asked)
            merged = GitStatus(status.head, entries)

            def explain(report: NodeReport) -> NodeReport:
                return _with_git(report, merged, asked)

        return {
            n: dataclasses.replace(
                entry,
                since_baseline=explain(entry.since_baseline),
                since_run=explain(entry.since_run) if entry.since_run is not None else None,
            )
            for n, entry in nodes.items()
        }

    def start_report(self, started: TreeStatus | None = None) -> None:
        """Start git's view for the next :meth:`report` now, so that git runs while the
        caller does other work first (loading a checkpoint's baselines);
        :meth:`cancel_report` stops it when no report follows. ``started``: that view,
        already started for this tracker's work tree (stopped if it is not used)."""
        if self._status_vouch is None and self.git.available:
            self._status_vouch = StatusVouch(self.git, started=started)
        elif started is not None:
            started.cancel()

    def cancel_report(self) -> None:
        """Stop git's view :meth:`start_report` started."""
        vouch, self._status_vouch = self._status_vouch, None
        if vouch is not None:
            vouch.cancel()

    def _explain(
        self, reports: dict[str, NodeReport], known: GitStatus | None = None
    ) -> dict[str, NodeReport]:
        """``reports`` with git's view of at most :data:`MAX_EXPLAINED` stale files, from the
        ``known`` status of the tracked files when it lists them all (else git is asked)."""
        if not self.git.available:
            return reports
        stale = sorted({p for r in reports.values() for p in r.stale_files})[:MAX_EXPLAINED]
        if not stale:
            return reports
        if known is not None and all(path in known.entries for path in stale):
            return {k: _with_git(r, known, set(stale)) for k, r in reports.items()}
        status = self.git.status(stale, ignored=True)
        if status is None:
            return reports
        asked = set(stale) if len(stale) <= MAX_PATHSPECS else None
        return {k: _with_git(r, status, asked) for k, r in reports.items()}

    # -- accepting changes -----------------------------------------------------------------

    def accept(self, node_ids: Iterable[str]) -> dict[str, list[str]]:
        """Re-capture the baselines of ``node_ids``; returns each node's files that had changed.

        The new snapshot becomes the node's baseline and, if it already ran, also its completion
        snapshot, so the next check of the node is fresh until the files change again.
        """
        ids = list(dict.fromkeys(node_ids))
        if not ids:
            return {}
        nodes = {n: self._entries(n) for n in ids}
        before = {n: self.run_snapshots.get(n) or self.baselines[n] for n in ids}
        taken = self.snapshotter.take(nodes, "accepted")
        changed: dict[str, list[str]] = {}
        for node_id in ids:
            self._claim_index(node_id, taken[node_id])
            report = compare(before[node_id], taken[node_id], "accept", self.snapshotter.relook)
            changed[node_id] = [f.path for f in report.files if f.label.is_stale]
            self.baselines[node_id] = taken[node_id]
            if node_id in self.run_snapshots:
                self.run_snapshots[node_id] = taken[node_id]
        return changed

    def _claim_index(self, node_id: str, taken: Baseline) -> None:
        """Give an accepted snapshot a claim on git's index, so that accepting changes keeps a
        check's use of git's word: with many files read from the index as it is now (an
        accept often follows a checkout or a commit), else carried from the node's earlier
        snapshot for the records handed back unchanged (:meth:`IndexMatch.carried`)."""
        if taken.index_match is not None:
            return
        if len(taken.files) >= VOUCHED_CHECK_FILES:
            taken.index_match = self.snapshotter.index_claim(taken)
            return
        for snapshot in self._snapshots(node_id):
            if snapshot.index_match is not None:
                taken.index_match = snapshot.index_match.carried(snapshot.files, taken.files)
                return

    # -- checkpoint ------------------------------------------------------------------------

    def to_dict(self, store: FileStore | None = None) -> dict[str, Any]:
        """The tracker's state for a checkpoint (see :data:`STATE_VERSION` for its shape); the
        whole snapshots' files are kept in ``store`` (without one: inline)."""
        baselines: dict[str, Any] = {}
        anchors: dict[tuple[str, ...], tuple[str, Baseline]] = {}
        for node_id, baseline in self.baselines.items():
            anchor = anchors.setdefault(baseline.entries, (node_id, baseline))
            if anchor[0] == node_id:
                baselines[node_id] = baseline.to_dict(store=store)
            else:
                baselines[node_id] = baseline.to_dict(anchor[1], anchor[0], store)
        return {
            "version": STATE_VERSION,
            "baselines": baselines,
            "run_snapshots": {
                k: b.to_dict(self.baselines.get(k), k, store) for k, b in self.run_snapshots.items()
            },
        }

    def load(self, state: Mapping[str, Any], store: FileStore | None = None) -> None:
        """Restore baselines from :meth:`to_dict` output and seed the stat cache from them;
        ``store``: the run directory's, where the whole snapshots' files may be kept."""
        if not isinstance(state, Mapping) or state.get("version") not in READABLE_VERSIONS:
            raise FreshnessError(
                "checkpointed freshness state has an unknown format "
                f"(version {state.get('version') if isinstance(state, Mapping) else None!r}, "
                f"expected {STATE_VERSION}); start a new run"
            )
        saved = {str(k): v for k, v in dict(state.get("baselines", {})).items()}
        deltas = {k for k, v in saved.items() if isinstance(v, dict) and "files_from" in v}
        whole = {k: Baseline.from_dict(v, None, store) for k, v in saved.items() if k not in deltas}
        self.baselines = {
            k: Baseline.from_dict(v, whole, store) if k in deltas else whole[k]
            for k, v in saved.items()
        }
        self.run_snapshots = {
            str(k): Baseline.from_dict(v, self.baselines, store)
            for k, v in dict(state.get("run_snapshots", {})).items()
        }
        latest: dict[tuple[str, ...], Baseline] = {}
        for baseline in (*self.baselines.values(), *self.run_snapshots.values()):
            self.snapshotter.seed(baseline)
            seen = latest.get(baseline.entries)
            if baseline.folders is not None and (
                seen is None or baseline.fs_time_ns >= seen.fs_time_ns
            ):
                latest[baseline.entries] = baseline
        for entries, snapshot in latest.items():  # its key list, while its folders are unchanged
            self.resolver.remember(
                entries,
                snapshot.folders or {},
                snapshot.files,
                snapshot.literal,
                snapshot.unresolved,
            )
