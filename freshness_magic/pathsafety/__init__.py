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
- **Pipeline paths** (:func:`pipeline_path_problem`): the one rule for a path a pipeline
  names (a prompt file, a ``source_files`` entry): in the work tree, by entry and real path;
  ``validate`` and the run both ask it.

:func:`is_glob` lives here and the rest loads on first use: the ``source_files`` lint rule asks
only whether an entry is a glob, and every CLI command's start-up pays for what it imports.
"""

from __future__ import annotations

import importlib
import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from freshness_magic.pathsafety.globs import (
        DirKey,
        FolderMemo,
        Listing,
        Walker,
        collapse,
    )
    from freshness_magic.pathsafety.state import (
        SAFE_COMPONENT_RE,
        STATE_DIR_NAMES,
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
    from freshness_magic.pathsafety.statedirs import StateDirs
    from freshness_magic.pathsafety.tree import (
        OUTSIDE_ENTRY,
        OUTSIDE_LINK,
        TILDE,
        UNREADABLE,
        WHOLE_TREE,
        Located,
        Refused,
        WorkTree,
        pipeline_path_problem,
    )

_MAGIC = re.compile(r"[*?[]")


def is_glob(entry: str) -> bool:
    """Whether ``entry`` contains glob syntax (``*``, ``?``, ``[``)."""
    return _MAGIC.search(entry) is not None


_WHERE = {
    "DirKey": "globs",
    "FolderMemo": "globs",
    "Listing": "globs",
    "Walker": "globs",
    "collapse": "globs",
    "SAFE_COMPONENT_RE": "state",
    "STATE_DIR_NAMES": "state",
    "StateDirs": "statedirs",
    "check_component": "state",
    "check_state_path": "state",
    "make_state_dir": "state",
    "open_for_read": "state",
    "open_for_write": "state",
    "open_state": "state",
    "read_state": "state",
    "refuse_link": "state",
    "remembering": "state",
    "state_file": "state",
    "workdir_problem": "state",
    "OUTSIDE_ENTRY": "tree",
    "OUTSIDE_LINK": "tree",
    "TILDE": "tree",
    "UNREADABLE": "tree",
    "WHOLE_TREE": "tree",
    "Located": "tree",
    "Refused": "tree",
    "WorkTree": "tree",
    "pipeline_path_problem": "tree",
}


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__


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
    "pipeline_path_problem",
    "read_state",
    "refuse_link",
    "remembering",
    "state_file",
    "workdir_problem",
]
