"""The git tier: HEAD and git's view of the files, relative to the working directory.

The work tree is found by looking for ``.git`` upwards from the working directory (no process
is started for that). A snapshot runs ``git status --porcelain=v2 -z --branch`` once (never once
per file), in the background while files are hashed, for the snapshot's files by name when they
are few (:data:`~freshness_magic.vcs.git.MAX_PATHSPECS`; a step's snapshot: 30 ms instead of
200 ms for the whole of a 100,000-file tree), unless git's index can tell (a first
capture while the index holds HEAD's tree, :mod:`.gitindex`: then git is asked only about the
files the index cannot tell about, if any); a check asks only about its stale paths. HEAD comes
from the ``# branch.oid`` header. A report's view of the whole tree is a tree diff of HEAD and
HEAD's id (:class:`~.gitstart.TreeStatus`, read by :class:`PendingTreeStatus`).
:mod:`freshness_magic.vcs.git` runs the processes.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from freshness_magic.vcs import git as vcs
from freshness_magic.vcs.git import find_work_tree
from freshness_magic.vcs.porcelain import porcelain_records
from freshness_magic.vcs.rawdiff import RawDiffRecord, raw_diff_records

if TYPE_CHECKING:
    from freshness_magic.freshness.gitstart import TreeStatus


@dataclass(frozen=True)
class GitStatus:
    """HEAD (None before the first commit) and git's view of each non-clean path.

    ``entries`` maps working-directory-relative POSIX paths to one of ``modified``, ``added``,
    ``deleted``, ``renamed``, ``unmerged``, ``untracked``, ``ignored``; a path not listed is
    clean (tracked and equal to HEAD) or outside what was asked.
    """

    head: str | None
    entries: dict[str, str] = field(default_factory=dict)
    edited: frozenset[str] = frozenset()
    """The listed tracked paths whose file git found changed since its index entry (other
    content or mode, a stat that differs, or gone): a look reads them at once."""
    unsure: dict[str, str | None] = field(default_factory=dict)
    """Listed paths git listed only because their stat differs from their index entry (a tree
    diff does not read them), each with HEAD's blob id (None: not in HEAD): see
    :meth:`confirmed`."""

    def state(self, path: str) -> str:
        return self.entries.get(path, "clean")

    def confirmed(self, blob_of: Callable[[str], str | None]) -> GitStatus:
        """This status as ``git status`` would list its unsure paths, given ``blob_of`` (a
        path's blob id as read now; None: not known): one whose file is not HEAD's is modified;
        one whose file is HEAD's, or is not known, is left unlisted, so that a report asks git
        about it if it is stale (whether it is listed depends on its index entry)."""
        if not self.unsure:
            return self
        entries = dict(self.entries)
        for path, in_head in self.unsure.items():
            now = blob_of(path)
            if now is None or now == in_head:
                del entries[path]
        return GitStatus(self.head, entries, self.edited)


def _classify(xy: str) -> str:
    if "D" in xy:
        return "deleted"
    if xy[0] == "A":
        return "added"
    return "modified"


_KIND_STATE = {"2": "renamed", "u": "unmerged", "?": "untracked", "!": "ignored"}


def _inside(path: str, prefix: str) -> str | None:
    """``path`` (relative to the work tree's top) relative to the working directory at
    ``prefix``; None when it lies outside that directory."""
    if not prefix:
        return path
    return path[len(prefix) :] if path.startswith(prefix) else None


def parse_porcelain_v2(output: bytes, prefix: str) -> GitStatus:
    """Parse ``git status --porcelain=v2 -z --branch`` output; paths made workdir-relative."""
    head, records = porcelain_records(output)
    entries: dict[str, str] = {}
    edited: list[str] = []
    for record in records:
        path = _inside(record.path, prefix)
        if path is None:
            continue
        entries[path] = _KIND_STATE.get(record.kind) or _classify(record.xy)
        if record.kind in "12" and record.xy[1] in "MD":
            edited.append(path)
    return GitStatus(head, entries, frozenset(edited))


_LETTER_STATE = {"D": "deleted", "A": "added", "U": "unmerged"}


def tree_diff_status(records: Sequence[RawDiffRecord], head: str, prefix: str) -> GitStatus:
    """The status a tree diff of HEAD (``head``) against the tracked files tells
    (:func:`~freshness_magic.vcs.git.tree_diff_args`); paths made workdir-relative."""
    entries: dict[str, str] = {}
    edited: list[str] = []
    unsure: dict[str, str | None] = {}
    for record in records:
        path = _inside(record.path, prefix)
        if path is None:
            continue
        state = _LETTER_STATE.get(record.letter, "modified")
        entries[path] = state
        if record.dst is None:  # git did not read the file: its stat is not its entry's
            edited.append(path)
            if state == "modified":
                unsure[path] = record.src
    return GitStatus(head or None, entries, frozenset(edited), unsure)


class PendingStatus:
    """A ``git status`` started in the background (runs on another core while we hash)."""

    def __init__(self, pending: vcs.Pending, prefix: str):
        self._pending = pending
        self._prefix = prefix

    def cancel(self) -> None:
        """Stop the background git (the snapshot failed and will not read its result)."""
        self._pending.cancel()

    def result(self) -> GitStatus | None:
        """The parsed status, or None when git is unavailable or failed."""
        out = self._pending.output()
        return parse_porcelain_v2(out, self._prefix) if out is not None else None


class PendingTreeStatus:
    """A :class:`~.gitstart.TreeStatus` started in the background, read as a :class:`GitStatus`
    (its tree diff's listing; see :attr:`GitStatus.unsure`). Before the first commit (no HEAD
    to compare with) the exact ``git status`` of the tracked files runs instead, when the
    answer is asked for.

    HEAD's id is asked for beside the diff: a commit made in those milliseconds may name the
    other commit than the diff's, which changes only the words a stale file's change is told
    in (committed or not), never what is stale or what git vouches for (the index decides)."""

    def __init__(self, tree: TreeStatus, prefix: str):
        self._tree = tree
        self._prefix = prefix

    def cancel(self) -> None:
        """Stop git (the answer will not be read)."""
        self._tree.cancel()

    def result(self) -> GitStatus | None:
        """The parsed answer, or None when git is unavailable or failed."""
        out, head = self._tree.diff.output(), self._tree.head.output()
        if out is not None and head is not None:
            try:
                return tree_diff_status(
                    raw_diff_records(out), head.decode("ascii").strip(), self._prefix
                )
            except (UnicodeDecodeError, ValueError):
                pass
        args = vcs.status_args(branch=True, exact=True, untracked=False)
        return PendingStatus(vcs.start(args, self._tree.workdir), self._prefix).result()


class GitTier:
    """Git's view of one working directory; ``available`` is False outside a work tree."""

    def __init__(self, workdir: str | os.PathLike[str], enabled: bool = True):
        self.workdir = os.path.abspath(os.fspath(workdir))
        found = find_work_tree(self.workdir) if enabled else None
        self.available = found is not None
        self.top_level, self.prefix = found if found else ("", "")

    def start_status(
        self, paths: Sequence[str] | None = None, *, ignored: bool = False
    ) -> PendingStatus:
        """Start one ``git status`` for ``paths`` (workdir-relative) or the whole workdir
        (``ignored``: see :func:`~freshness_magic.vcs.git.status_args`); the exact status of
        the tracked files a report takes git's word from is :class:`~.gitstart.TreeStatus`."""
        if not self.available:
            return PendingStatus(vcs.Pending(None), "")
        args = vcs.status_args(paths, branch=True, ignored=ignored)
        return PendingStatus(vcs.start(args, self.workdir), self.prefix)

    def status(
        self, paths: Sequence[str] | None = None, *, ignored: bool = False
    ) -> GitStatus | None:
        return self.start_status(paths, ignored=ignored).result()


def change_kind(path: str, head_at_snapshot: str | None, now: GitStatus) -> str:
    """How git sees a change since a snapshot: committed, uncommitted, untracked, ignored.

    ``matches_head``: the file changed since the snapshot but git sees no difference to HEAD
    and HEAD did not move (for example it was modified at the snapshot and reverted since).
    """
    state = now.entries.get(path)
    if state in ("untracked", "ignored"):
        return state
    if state is not None:
        return "uncommitted"
    if now.head != head_at_snapshot:
        return "committed"
    return "matches_head"
