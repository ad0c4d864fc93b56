"""``commit=true``: commit a node's changes (and its own evidence file) as one commit.

Only the node's changes are committed: the paths it added, modified or deleted since its before
snapshot, plus its evidence file (force-added, since ``.orchestrator/`` is ignored). Changes the
user had staged for other paths stay staged and out of the commit (``git commit --only``). When
git refuses (a hook, a lock), the index entries of those paths are put back as they were. A file
that was already dirty before the node changed it again is committed whole (the evidence
extension's warning says so). When git has no
identity configured, a fallback ``freshness-magic`` identity is used for this commit only.

The committed evidence file is the one the node wrote. After the step the engine rewrites that
path with its merged record (the commit id cannot be part of the commit), so once committed the
file shows as modified in ``git status`` until the node commits a new one.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from freshness_magic.engine.model import Node
from freshness_magic.errors import EvidenceError
from freshness_magic.evidence.record import evidence_path
from freshness_magic.evidence.snapshot import CommitInfo, WorkChanges, git_checked, run_git

FALLBACK_NAME = "freshness-magic"
FALLBACK_EMAIL = "freshness-magic@localhost"
COMMIT_PREFIX = "[Pipeline]"


def commit_message(node: Node, *, evidence_only: bool) -> str:
    """``[Pipeline] <label>``, with `` (evidence only)`` when only the evidence file changed."""
    label = " ".join(node.label.split()) or node.id
    return f"{COMMIT_PREFIX} {label}" + (" (evidence only)" if evidence_only else "")


def identity_options(root: str | os.PathLike[str]) -> list[str]:
    """``-c user.name=… -c user.email=…`` when git cannot work out an identity by itself."""
    options: list[str] = []
    author = run_git(["var", "GIT_AUTHOR_IDENT"], root)
    committer = run_git(["var", "GIT_COMMITTER_IDENT"], root)
    if author.returncode != 0 or committer.returncode != 0:
        name = run_git(["config", "--get", "user.name"], root).stdout.strip()
        email = run_git(["config", "--get", "user.email"], root).stdout.strip()
        if not name:
            options += ["-c", f"user.name={FALLBACK_NAME}"]
        if not email:
            options += ["-c", f"user.email={FALLBACK_EMAIL}"]
    return options


def _pathspecs(paths: list[str]) -> bytes:
    return b"".join(os.fsencode(path) + b"\0" for path in paths)


def commit_node_changes(
    workdir: str | os.PathLike[str],
    node: Node,
    changes: WorkChanges,
    *,
    include_evidence_file: bool,
) -> CommitInfo | None:
    """Stage and commit the node's changes; returns the commit, or None when nothing changed.

    ``include_evidence_file``: force-add the node's own evidence file (written by the node
    during this execution). Raises EvidenceError when git refuses (hooks, locks, no repository).
    """
    if changes.kind != "git":
        raise EvidenceError(
            f"commit=true on node {node.id!r} needs a git work tree; {workdir} is not in one "
            "(run `git init` there or remove commit=true)"
        )
    root = Path(changes.root)
    existing = [*changes.uncommitted.added, *changes.uncommitted.modified]
    deleted = list(changes.uncommitted.deleted)
    evidence_rel: str | None = None
    if include_evidence_file:
        evidence_file = evidence_path(workdir, node.id)
        if evidence_file.is_file():
            evidence_rel = evidence_file.resolve().relative_to(root.resolve()).as_posix()
    touched = [*existing, *deleted, *([evidence_rel] if evidence_rel else [])]
    index_before = _index_entries(root, touched)
    try:
        return _stage_and_commit(root, node, existing, deleted, evidence_rel)
    except EvidenceError:
        _restore_index(root, touched, index_before)  # as it was: nothing left staged
        raise


def _index_entries(root: Path, paths: list[str]) -> bytes:
    """The index entries of ``paths`` (``git ls-files -s`` lines), to put back after a failure
    (``ls-files`` takes no pathspec file: the paths go on its command line, a batch at a time)."""
    found = b""
    for start in range(0, len(paths), 500):
        batch = paths[start : start + 500]
        found += git_checked(["--literal-pathspecs", "ls-files", "-s", "-z", "--", *batch], root)
    return found


def _restore_index(root: Path, paths: list[str], entries: bytes) -> None:
    """Put the index entries of ``paths`` back as :func:`_index_entries` read them."""
    if not paths:
        return
    with contextlib.suppress(EvidenceError):
        git_checked(
            ["update-index", "-z", "--force-remove", "--stdin"], root, stdin=_pathspecs(paths)
        )
        if entries:
            git_checked(["update-index", "-z", "--index-info"], root, stdin=entries)


def _stage_and_commit(
    root: Path, node: Node, existing: list[str], deleted: list[str], evidence_rel: str | None
) -> CommitInfo | None:
    """Stage the node's paths (and its evidence file) and commit them; see the caller."""
    candidates = [*existing, *deleted]
    if existing:
        git_checked(
            ["--literal-pathspecs", "add", "-A", "--pathspec-from-file=-", "--pathspec-file-nul"],
            root,
            stdin=_pathspecs(existing),
        )
    if deleted:
        git_checked(
            [
                "--literal-pathspecs",
                "rm",
                "-q",
                "--cached",
                "--ignore-unmatch",
                "--pathspec-from-file=-",
                "--pathspec-file-nul",
            ],
            root,
            stdin=_pathspecs(deleted),
        )
    if evidence_rel is not None:
        git_checked(["--literal-pathspecs", "add", "-f", "--", evidence_rel], root)
        candidates.append(evidence_rel)
    if not candidates:
        return None
    staged_out = git_checked(["diff", "--cached", "--name-only", "-z", "--no-renames"], root)
    wanted = set(candidates)
    staged = [p for p in (os.fsdecode(raw) for raw in staged_out.split(b"\0")) if p in wanted]
    if not staged:
        return None
    message = commit_message(node, evidence_only=staged == [evidence_rel])
    git_checked(
        [
            *identity_options(root),
            "--literal-pathspecs",
            "commit",
            "-q",
            "--only",
            "-m",
            message,
            "--pathspec-from-file=-",
            "--pathspec-file-nul",
        ],
        root,
        stdin=_pathspecs(staged),
    )
    head = git_checked(["rev-parse", "HEAD"], root).decode("ascii").strip()
    return CommitInfo(head, message)
