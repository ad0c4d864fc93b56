"""Starting git's exact view of a work tree's tracked files, with no more loaded than starting
it needs.

A check of a large tree waits for this view (about 40 ms at 20,000 files) and has about as
much work of its own meanwhile: the sooner git starts, the sooner the check ends. This module
needs only :mod:`~freshness_magic.vcs.git`, :mod:`.gitfiles` and the run directory's manifest,
not ``dataclasses`` (about 9 ms to load) nor the code that reads the answer and compares files;
so :class:`TreeStatus` is a named tuple.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import NamedTuple

from freshness_magic.engine.runread import manifest_workdir
from freshness_magic.freshness.gitfiles import index_key
from freshness_magic.vcs import git as vcs


class TreeStatus(NamedTuple):
    """git's exact view of a work tree's tracked files, started in the background: the tree
    diff of HEAD against them (:func:`~freshness_magic.vcs.git.tree_diff_args`) and HEAD's
    id, with the stat key the index had just before they started (:func:`~.gitfiles.index_key`):
    git's word on a file not listed is taken only while the index is still that file.
    ``freshness.git.PendingTreeStatus`` reads the answer."""

    workdir: str
    """The working directory it was started in (absolute): paths are relative to it."""
    index_before: tuple[int, ...] | None
    diff: vcs.Pending
    head: vcs.Pending

    @classmethod
    def start(cls, top: str, workdir: str, *, one_thread: bool = False) -> TreeStatus:
        """Start the view of the work tree at ``top`` from ``workdir`` (absolute);
        ``one_thread``: see :data:`~freshness_magic.vcs.git.ONE_THREAD`."""
        before = index_key(top)
        diff = vcs.start(vcs.tree_diff_args(one_thread=one_thread), workdir)
        return cls(workdir, before, diff, vcs.start(vcs.HEAD_ARGS, workdir))

    def cancel(self) -> None:
        """Stop git (the answer will not be read)."""
        self.diff.cancel()
        self.head.cancel()


def start_for_run(run_dir: Path) -> TreeStatus | None:
    """The view of the working directory the run's manifest names, on one thread beside this
    process (it has long enough: started before the run's checkpoint is read); None when the
    manifest names no existing folder or it is not in a work tree."""
    workdir = manifest_workdir(run_dir)
    if workdir is None or not os.path.isdir(workdir):
        return None
    workdir = os.path.abspath(workdir)
    found = vcs.find_work_tree(workdir)
    return TreeStatus.start(found[0], workdir, one_thread=True) if found is not None else None
