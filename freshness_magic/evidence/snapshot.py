"""A "before" picture of the work tree, and what changed since (work-evidence validation).

In a git work tree the snapshot is HEAD plus ``git status --porcelain=v2 -z`` with a content hash
of every dirty file, so a file that was already dirty and is modified again still counts as a
change, and changes that existed before the node ran do not. Outside git it is a content snapshot
of the working directory (tool folders such as ``.git``, virtual environments, ``node_modules``
and caches are skipped). Hashes come from :mod:`freshness_magic.freshness.hashing`.

The engine's own folders (``.orchestrator/`` and ``.freshness/``) never count as changes. The
node's own evidence file is fingerprinted separately so the validator can tell a file the node
wrote during this execution from one left by an earlier execution.

Paths are POSIX-style and relative to the git top-level folder (git) or to the working directory
(content snapshot).
"""

from __future__ import annotations

import os
import stat as stat_module
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from freshness_magic.errors import EvidenceError, GitError
from freshness_magic.evidence.record import evidence_path
from freshness_magic.freshness.hashing import RACY_WINDOW_NS, StatKey, hash_bytes, hash_file
from freshness_magic.freshness.skipped import SKIPPED_DIRS, is_venv
from freshness_magic.pathsafety import STATE_DIR_NAMES
from freshness_magic.vcs import git as vcs
from freshness_magic.vcs.porcelain import porcelain_records

if TYPE_CHECKING:
    import subprocess

SnapshotKind = Literal["git", "content"]


@dataclass(frozen=True)
class FileState:
    """One path of a snapshot: git status code (``?``/``XY``, ``""`` outside git) and content."""

    status: str
    digest: str | None
    """Content hash; None when the path does not exist (deleted)."""
    stat: tuple[int, ...] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"status": self.status, "digest": self.digest, "stat": self.stat}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> FileState:
        raw_stat = data.get("stat")
        return cls(
            str(data.get("status", "")),
            data.get("digest"),
            tuple(int(v) for v in raw_stat) if raw_stat is not None else None,
        )


@dataclass
class WorkTreeSnapshot:
    """The state of the work tree at one moment (see the module docstring)."""

    workdir: str
    kind: SnapshotKind
    root: str
    """Git top-level folder, or the working directory for a content snapshot."""
    head: str | None = None
    """HEAD commit id; None outside git or in a repository without commits."""
    entries: dict[str, FileState] = field(default_factory=dict)
    """Git: the dirty paths. Content: every file."""
    node_id: str | None = None
    evidence_digest: str | None = None
    """Content hash of the node's evidence file (None when absent)."""
    taken_ns: int = 0
    excluded: tuple[str, ...] = ()
    """Root-relative folders left out besides the engine's own (e.g. a run directory)."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "workdir": self.workdir,
            "kind": self.kind,
            "root": self.root,
            "head": self.head,
            "entries": {path: state.to_dict() for path, state in self.entries.items()},
            "node_id": self.node_id,
            "evidence_digest": self.evidence_digest,
            "taken_ns": self.taken_ns,
            "excluded": list(self.excluded),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> WorkTreeSnapshot:
        kind = data.get("kind")
        if kind not in ("git", "content"):
            raise EvidenceError(f"snapshot kind {kind!r} is neither 'git' nor 'content'")
        return cls(
            workdir=str(data["workdir"]),
            kind=kind,
            root=str(data["root"]),
            head=data.get("head"),
            entries={
                str(path): FileState.from_dict(state)
                for path, state in dict(data.get("entries", {})).items()
            },
            node_id=data.get("node_id"),
            evidence_digest=data.get("evidence_digest"),
            taken_ns=int(data.get("taken_ns", 0)),
            excluded=tuple(str(p) for p in data.get("excluded", ()) or ()),
        )


@dataclass(frozen=True)
class CommitInfo:
    """A commit made while a node ran (by the node or by the engine for ``commit=true``)."""

    id: str
    message: str

    @property
    def subject(self) -> str:
        return self.message.splitlines()[0] if self.message else ""

    def to_dict(self) -> dict[str, str]:
        return {"id": self.id, "message": self.message}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CommitInfo:
        return cls(str(data.get("id", "")), str(data.get("message", "")))


@dataclass(frozen=True)
class FileChanges:
    """Paths added, modified and deleted (sorted)."""

    added: tuple[str, ...] = ()
    modified: tuple[str, ...] = ()
    deleted: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.added or self.modified or self.deleted)

    @property
    def paths(self) -> tuple[str, ...]:
        return tuple(sorted({*self.added, *self.modified, *self.deleted}))

    def merged(self, other: FileChanges) -> FileChanges:
        """Both sets of changes; a path keeps the status it has in ``other`` (the later one)."""
        status: dict[str, str] = {}
        for changes in (self, other):
            for kind in ("added", "modified", "deleted"):
                for path in getattr(changes, kind):
                    status[path] = kind
        return FileChanges.from_status(status)

    @classmethod
    def from_status(cls, status: Mapping[str, str]) -> FileChanges:
        def pick(kind: str) -> tuple[str, ...]:
            return tuple(sorted(path for path, value in status.items() if value == kind))

        return cls(pick("added"), pick("modified"), pick("deleted"))

    def to_dict(self) -> dict[str, list[str]]:
        return {
            "added": list(self.added),
            "modified": list(self.modified),
            "deleted": list(self.deleted),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> FileChanges:
        def seq(key: str) -> tuple[str, ...]:
            return tuple(sorted(str(p) for p in data.get(key, []) or []))

        return cls(seq("added"), seq("modified"), seq("deleted"))


@dataclass(frozen=True)
class WorkChanges:
    """What changed between a before snapshot and now."""

    kind: SnapshotKind
    root: str
    uncommitted: FileChanges = FileChanges()
    """Changes in the work tree that were not there before (not committed)."""
    committed: FileChanges = FileChanges()
    """Files changed by the commits made since (git only)."""
    head_before: str | None = None
    head_after: str | None = None
    commits: tuple[CommitInfo, ...] = ()
    """Commits made since, oldest first (git only)."""
    evidence_file_changed: bool = False
    """The node's evidence file was created or rewritten since the snapshot."""

    @property
    def head_moved(self) -> bool:
        return self.head_before != self.head_after

    @property
    def files(self) -> FileChanges:
        """Committed then uncommitted changes, as one set."""
        return self.committed.merged(self.uncommitted)

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "uncommitted": self.uncommitted.to_dict(),
            "committed": self.committed.to_dict(),
            "head_before": self.head_before,
            "head_after": self.head_after,
            "commits": [c.to_dict() for c in self.commits],
            "evidence_file_changed": self.evidence_file_changed,
        }


def is_engine_path(path: str, excluded: Iterable[str] = ()) -> bool:
    """Whether a relative POSIX path lies in the engine's own folders (never a user change)."""
    if any(part in STATE_DIR_NAMES for part in path.split("/")):
        return True
    return any(path == prefix or path.startswith(prefix + "/") for prefix in excluded)


def _relative_excludes(root: Path, exclude: Iterable[str | os.PathLike[str]]) -> tuple[str, ...]:
    """The folders in ``exclude`` that lie inside ``root``, as root-relative POSIX paths."""
    resolved_root = root.resolve()
    found = []
    for item in exclude:
        try:
            rel = Path(item).resolve().relative_to(resolved_root).as_posix()
        except ValueError:
            continue
        if rel and rel != ".":
            found.append(rel)
    return tuple(sorted(set(found)))


def run_git(
    args: Sequence[str], cwd: str | os.PathLike[str], *, stdin: bytes | None = None
) -> subprocess.CompletedProcess[bytes]:
    """:func:`vcs.git.run` with its errors as EvidenceError."""
    try:
        return vcs.run(args, cwd, stdin=stdin)
    except GitError as exc:
        raise EvidenceError(str(exc)) from exc


def git_checked(
    args: Sequence[str], cwd: str | os.PathLike[str], *, stdin: bytes | None = None
) -> bytes:
    """:func:`vcs.git.checked` with its errors (git's message on failure) as EvidenceError."""
    try:
        return vcs.checked(args, cwd, stdin=stdin)
    except GitError as exc:
        raise EvidenceError(str(exc)) from exc


git_toplevel = vcs.toplevel


def git_head(root: str | os.PathLike[str]) -> str | None:
    """The HEAD commit id; None in a repository without commits."""
    try:
        return vcs.head(root)
    except GitError as exc:
        raise EvidenceError(str(exc)) from exc


def _digest(path: Path) -> tuple[str | None, tuple[int, ...] | None]:
    """Content hash and stat key of a path (symlinks by their target text); None if absent."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None, None
    except OSError as exc:
        return f"unreadable:{exc.errno}", None
    if stat_module.S_ISLNK(st.st_mode):
        try:
            target = os.readlink(path)
        except OSError as exc:
            return f"unreadable:{exc.errno}", None
        return "link:" + hash_bytes(os.fsencode(target)), tuple(StatKey.of(st))
    if stat_module.S_ISDIR(st.st_mode):
        return "dir", None
    if not stat_module.S_ISREG(st.st_mode):
        return f"special:{stat_module.S_IFMT(st.st_mode)}", None
    try:
        hashed = hash_file(path, follow_symlinks=False)
    except FileNotFoundError:
        return None, None
    except OSError as exc:
        return f"unreadable:{exc.errno}", None
    return hashed.digest, tuple(hashed.stat)


def _status_codes(output: bytes) -> dict[str, str]:
    """Path -> status code (``?`` untracked, else the ``XY`` pair)."""
    return {record.path: record.xy for record in porcelain_records(output)[1]}


def _git_snapshot(workdir: Path, root: Path, excluded: tuple[str, ...]) -> WorkTreeSnapshot:
    output = git_checked(
        ["status", "--porcelain=v2", "-z", "--untracked-files=all", "--no-renames"], root
    )
    entries: dict[str, FileState] = {}
    for path, code in _status_codes(output).items():
        if is_engine_path(path, excluded):
            continue
        digest, stat_key = _digest(root / path)
        entries[path] = FileState(code, digest, stat_key)
    return WorkTreeSnapshot(
        workdir=os.fspath(workdir),
        kind="git",
        root=os.fspath(root),
        head=git_head(root),
        entries=entries,
        excluded=excluded,
    )


def _walk_files(root: Path, excluded: tuple[str, ...]) -> Iterable[tuple[str, Path]]:
    """Relative POSIX path and absolute path of every file, skipping tool and engine folders."""
    pending: list[tuple[str, Path]] = [("", root)]
    while pending:
        prefix, folder = pending.pop()
        try:
            with os.scandir(folder) as iterator:
                items = list(iterator)
        except OSError:
            continue
        for item in items:
            rel = f"{prefix}{item.name}"
            try:
                is_dir = item.is_dir(follow_symlinks=False)
            except OSError:
                is_dir = False
            if is_dir:
                if item.name in SKIPPED_DIRS or is_engine_path(rel, excluded):
                    continue
                path = Path(item.path)
                if is_venv(path):
                    continue
                pending.append((rel + "/", path))
            else:
                yield rel, Path(item.path)


def _content_snapshot(
    workdir: Path, previous: WorkTreeSnapshot | None, excluded: tuple[str, ...]
) -> WorkTreeSnapshot:
    reusable = previous.entries if previous is not None and previous.kind == "content" else {}
    racy_after = (previous.taken_ns if previous else 0) - RACY_WINDOW_NS
    taken = time.time_ns()
    entries: dict[str, FileState] = {}
    for rel, path in _walk_files(workdir, excluded):
        old = reusable.get(rel)
        if old is not None and old.stat is not None:
            try:
                now = tuple(StatKey.of(os.lstat(path)))
            except OSError:
                now = None
            if now == old.stat and StatKey(*now).mtime_ns < racy_after:
                entries[rel] = old
                continue
        digest, stat_key = _digest(path)
        if digest is not None:
            entries[rel] = FileState("", digest, stat_key)
    return WorkTreeSnapshot(
        workdir=os.fspath(workdir),
        kind="content",
        root=os.fspath(workdir),
        entries=entries,
        taken_ns=taken,
        excluded=excluded,
    )


def evidence_digest(workdir: str | os.PathLike[str], node_id: str) -> str | None:
    """Content hash of the node's evidence file, None when there is none."""
    digest, _ = _digest(evidence_path(workdir, node_id))
    return digest


def take_snapshot(
    workdir: str | os.PathLike[str],
    node_id: str | None = None,
    *,
    previous: WorkTreeSnapshot | None = None,
    exclude: Iterable[str | os.PathLike[str]] = (),
) -> WorkTreeSnapshot:
    """Snapshot the work tree containing ``workdir`` (git when it is one, else content).

    ``previous`` lets a content snapshot reuse hashes of files whose stat did not change;
    ``exclude`` names folders that never count as changes (the run directory, when it is
    configured outside ``.freshness/``).
    """
    folder = Path(workdir).resolve()
    if not folder.is_dir():
        raise EvidenceError(f"working directory {folder} does not exist or is not a folder")
    root = git_toplevel(folder)
    taken = time.time_ns()
    if root is not None:
        snapshot = _git_snapshot(folder, root, _relative_excludes(root, exclude))
        snapshot.taken_ns = taken
    else:
        snapshot = _content_snapshot(folder, previous, _relative_excludes(folder, exclude))
    if node_id is not None:
        snapshot.node_id = node_id
        snapshot.evidence_digest = evidence_digest(folder, node_id)
    return snapshot


def _empty_tree(root: str) -> str:
    """The id of the empty tree in this repository's hash format (sha1 or sha256)."""
    output = git_checked(["hash-object", "-t", "tree", "--stdin"], root, stdin=b"")
    return output.decode("ascii").strip()


def commits_between(root: str, before: str | None, after: str | None) -> tuple[CommitInfo, ...]:
    """Commits reachable from ``after`` but not from ``before``, oldest first."""
    if after is None:
        return ()
    spec = f"{before}..{after}" if before else after
    output = git_checked(["log", "-z", "--reverse", "--format=%H%n%B", spec], root)
    commits = []
    for chunk in output.split(b"\0"):
        text = chunk.decode("utf-8", "replace").strip("\n")
        if not text:
            continue
        commit_id, _, message = text.partition("\n")
        commits.append(CommitInfo(commit_id.strip(), message.strip()))
    return tuple(commits)


def files_between(
    root: str, before: str | None, after: str | None, excluded: tuple[str, ...] = ()
) -> FileChanges:
    """Files added, modified and deleted between two commits (engine folders left out)."""
    if after is None or before == after:
        return FileChanges()
    output = git_checked(
        ["diff", "--name-status", "-z", "--no-renames", before or _empty_tree(root), after], root
    )
    fields = output.split(b"\0")
    status: dict[str, str] = {}
    for code, raw_path in zip(fields[0::2], fields[1::2], strict=False):
        path = raw_path.decode("utf-8", "surrogateescape")
        if not code or is_engine_path(path, excluded):
            continue
        letter = code[:1]
        status[path] = {b"A": "added", b"D": "deleted"}.get(letter, "modified")
    return FileChanges.from_status(status)


def _classify_new(code: str) -> str:
    """A path dirty now but clean before: what its git status code says happened."""
    if code == "?" or "A" in code:
        return "added"
    if "D" in code:
        return "deleted"
    return "modified"


def _uncommitted(before: WorkTreeSnapshot, after: WorkTreeSnapshot) -> FileChanges:
    status: dict[str, str] = {}
    for path, now in after.entries.items():
        old = before.entries.get(path)
        if old is None:
            if before.kind == "git":
                status[path] = _classify_new(now.status)
            else:
                status[path] = "added"
        elif old.digest != now.digest:
            if now.digest is None:
                status[path] = "deleted"
            elif old.digest is None:
                status[path] = "added"
            else:
                status[path] = "modified"
    for path, old in before.entries.items():
        if path in after.entries:
            continue
        if before.kind == "content":
            status[path] = "deleted"
            continue
        digest, _ = _digest(Path(after.root) / path)
        if digest == old.digest:
            continue
        if digest is None:
            status[path] = "deleted"
        elif old.digest is None:
            status[path] = "added"
        else:
            status[path] = "modified"
    return FileChanges.from_status(status)


def diff_snapshots(before: WorkTreeSnapshot, after: WorkTreeSnapshot) -> WorkChanges:
    """What changed from ``before`` to ``after`` (both of the same work tree)."""
    if before.kind != after.kind or before.root != after.root:
        raise EvidenceError(
            f"cannot compare a {before.kind} snapshot of {before.root} with a {after.kind} "
            f"snapshot of {after.root}; the working directory changed between them"
        )
    uncommitted = _uncommitted(before, after)
    commits: tuple[CommitInfo, ...] = ()
    committed = FileChanges()
    if after.kind == "git" and before.head != after.head:
        commits = commits_between(after.root, before.head, after.head)
        committed = files_between(after.root, before.head, after.head, before.excluded)
        clean_now = set(before.entries) - set(after.entries)
        if clean_now & set(committed.paths):
            uncommitted = FileChanges(
                *(
                    tuple(p for p in group if p not in clean_now or p not in committed.paths)
                    for group in (uncommitted.added, uncommitted.modified, uncommitted.deleted)
                )
            )
    return WorkChanges(
        kind=after.kind,
        root=after.root,
        uncommitted=uncommitted,
        committed=committed,
        head_before=before.head,
        head_after=after.head,
        commits=commits,
        evidence_file_changed=(
            after.node_id is not None and before.evidence_digest != after.evidence_digest
        ),
    )


def changes_since(before: WorkTreeSnapshot) -> WorkChanges:
    """Take a new snapshot of the same work tree and diff it against ``before``."""
    after = take_snapshot(
        before.workdir,
        before.node_id,
        previous=before,
        exclude=[Path(before.root) / prefix for prefix in before.excluded],
    )
    return diff_snapshots(before, after)
