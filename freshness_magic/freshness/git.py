"""The git tier: HEAD and ``git status`` in one call, relative to the working directory.

The work tree is found by looking for ``.git`` upwards from the working directory (no process
is started for that). Each snapshot or check runs ``git status --porcelain=v2 -z --branch``
once — never once per file — with ``GIT_OPTIONAL_LOCKS=0`` so it never takes the index lock
that a user's own git command may need. HEAD comes from the ``# branch.oid`` header.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field

MAX_PATHSPECS = 500
"""Above this many paths the status is taken for the whole working directory instead."""

GIT_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class GitStatus:
    """HEAD (None before the first commit) and git's view of each non-clean path.

    ``entries`` maps working-directory-relative POSIX paths to one of ``modified``, ``added``,
    ``deleted``, ``renamed``, ``unmerged``, ``untracked``, ``ignored``; a path not listed is
    clean (tracked and equal to HEAD) or outside what was asked.
    """

    head: str | None
    entries: dict[str, str] = field(default_factory=dict)

    def state(self, path: str) -> str:
        return self.entries.get(path, "clean")


def find_work_tree(workdir: str) -> tuple[str, str] | None:
    """(top level, workdir prefix relative to it with trailing ``/`` or ``''``), or None."""
    current = os.path.realpath(workdir)
    while True:
        if os.path.exists(os.path.join(current, ".git")):
            real = os.path.realpath(workdir)
            prefix = os.path.relpath(real, current).replace(os.sep, "/")
            return current, "" if prefix == "." else prefix + "/"
        parent = os.path.dirname(current)
        if parent == current:
            return None
        current = parent


def _classify(xy: str) -> str:
    if "D" in xy:
        return "deleted"
    if xy[0] == "A":
        return "added"
    return "modified"


@dataclass(frozen=True, slots=True)
class PorcelainRecord:
    """One path of ``git status --porcelain=v2 -z``: kind (``1 2 u ? !``), ``XY`` and path."""

    kind: str
    xy: str
    path: str


def porcelain_records(output: bytes) -> tuple[str | None, list[PorcelainRecord]]:
    """HEAD from the ``# branch.oid`` header (if asked with ``--branch``) and every record.

    The one parser of git's status format; freshness and evidence both read it from here.
    """
    head: str | None = None
    records: list[PorcelainRecord] = []
    fields = output.split(b"\0")
    index = 0
    while index < len(fields):
        raw = fields[index]
        index += 1
        if not raw:
            continue
        text = raw.decode("utf-8", "surrogateescape")
        kind = text[0]
        if kind == "#":
            parts = text.split(" ")
            if len(parts) >= 3 and parts[1] == "branch.oid":
                head = None if parts[2] == "(initial)" else parts[2]
            continue
        if kind == "1":
            parts = text.split(" ", 8)
            records.append(PorcelainRecord(kind, parts[1], parts[8]))
        elif kind == "2":
            parts = text.split(" ", 9)
            records.append(PorcelainRecord(kind, parts[1], parts[9]))
            index += 1  # the original path follows as its own field
        elif kind == "u":
            parts = text.split(" ", 10)
            records.append(PorcelainRecord(kind, parts[1], parts[10]))
        elif kind in "?!":
            records.append(PorcelainRecord(kind, kind, text[2:]))
    return head, records


_KIND_STATE = {"2": "renamed", "u": "unmerged", "?": "untracked", "!": "ignored"}


def parse_porcelain_v2(output: bytes, prefix: str) -> GitStatus:
    """Parse ``git status --porcelain=v2 -z --branch`` output; paths made workdir-relative."""
    head, records = porcelain_records(output)
    entries: dict[str, str] = {}
    for record in records:
        state = _KIND_STATE.get(record.kind) or _classify(record.xy)
        path = record.path
        if prefix:
            if not path.startswith(prefix):
                continue
            path = path[len(prefix) :]
        entries[path] = state
    return GitStatus(head, entries)


class PendingStatus:
    """A ``git status`` started in the background (runs on another core while we hash)."""

    def __init__(self, process: subprocess.Popen[bytes] | None, prefix: str):
        self._process = process
        self._prefix = prefix

    def cancel(self) -> None:
        """Stop the background git (the snapshot failed and will not read its result)."""
        if self._process is not None and self._process.poll() is None:
            self._process.kill()
            self._process.communicate()

    def result(self) -> GitStatus | None:
        """The parsed status, or None when git is unavailable or failed."""
        if self._process is None:
            return None
        try:
            out, _ = self._process.communicate(timeout=GIT_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.communicate()
            return None
        if self._process.returncode != 0:
            return None
        return parse_porcelain_v2(out, self._prefix)


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
        """Start one ``git status`` for ``paths`` (workdir-relative) or the whole workdir."""
        if not self.available:
            return PendingStatus(None, "")
        argv = [
            "git",
            "--literal-pathspecs",
            "-C",
            self.workdir,
            "status",
            "--porcelain=v2",
            "-z",
            "--branch",
            "--untracked-files=all",
            "--no-renames",
        ]
        if ignored:
            argv.append("--ignored=matching")
        argv.append("--")
        if paths is not None and len(paths) <= MAX_PATHSPECS:
            argv.extend(p for p in paths if not os.path.isabs(p))
            if len(argv) and argv[-1] == "--":
                argv.append(".")
        else:
            argv.append(".")
        env = dict(os.environ, GIT_OPTIONAL_LOCKS="0", LC_ALL="C")
        try:
            process = subprocess.Popen(
                argv,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                stdin=subprocess.DEVNULL,
                env=env,
            )
        except OSError:
            return PendingStatus(None, "")
        return PendingStatus(process, self.prefix)

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
