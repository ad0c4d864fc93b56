"""Path safety: the one place that decides which paths of state and inputs may be used.

Two halves, one rule: nothing is reached through a symbolic link that leads where it should not.

- **State** (:mod:`.state`): every writer of ``.freshness/`` and ``.orchestrator/`` (atomicio,
  the run directory, evidence, tool output) checks that no component from the state folder down
  is a link and opens files with ``O_NOFOLLOW``, and the readers of the run's own files
  (snapshots, journal, events and evidence logs, the stored pipeline) open them the same way;
  verified folders are remembered per run (:class:`StateDirs`) and re-checked with one
  ``lstat``. Names that become path components
  (node ids) are checked with :func:`check_component`.
- **Inputs** (:mod:`.tree`, :mod:`.globs`): entries are resolved to real paths; what lies outside
  the work tree (by its entry or through a link) is refused with the reason and labelled
  ``unknown``; a glob never follows a symlinked folder out of the tree nor around a loop, a run
  of ``**`` counts once, and a folder it cannot list is reported ``unknown`` with the error.
  Freshness resolves ``source_files`` with these, and the hub indexes no link leading outside.
"""

from freshness_magic.pathsafety.globs import (
    DirKey,
    FolderMemo,
    Listing,
    Walker,
    collapse,
    is_glob,
)
from freshness_magic.pathsafety.state import (
    SAFE_COMPONENT_RE,
    STATE_DIR_NAMES,
    StateDirs,
    check_component,
    check_state_path,
    make_state_dir,
    open_for_read,
    open_for_write,
    open_state,
    read_state,
    refuse_link,
    remembering,
    state_file,
    workdir_problem,
)
from freshness_magic.pathsafety.tree import (
    OUTSIDE_ENTRY,
    OUTSIDE_LINK,
    TILDE,
    UNREADABLE,
    WHOLE_TREE,
    Located,
    Refused,
    WorkTree,
)

__all__ = [
    "OUTSIDE_ENTRY",
    "OUTSIDE_LINK",
    "SAFE_COMPONENT_RE",
    "STATE_DIR_NAMES",
    "TILDE",
    "UNREADABLE",
    "WHOLE_TREE",
    "DirKey",
    "FolderMemo",
    "Listing",
    "Located",
    "Refused",
    "StateDirs",
    "Walker",
    "WorkTree",
    "check_component",
    "check_state_path",
    "collapse",
    "is_glob",
    "make_state_dir",
    "open_for_read",
    "open_for_write",
    "open_state",
    "read_state",
    "refuse_link",
    "remembering",
    "state_file",
    "workdir_problem",
]
