"""``commit=true``: commit a node's changes (and its own evidence file) as one commit.

Only the node's changes are committed: the paths it added, modified or deleted since its before
snapshot, plus its evidence file (force-added, since ``.orchestrator/`` is ignored). Changes the
user had staged for other paths stay staged and out of the commit (``git commit --only``). A file
that was already dirty before the node changed it again is committed whole (the evidence
extension's warning says so). When git has no
identity configured, a fallback ``freshness-magic`` identity is used for this commit only.

The committed evidence file is the one the node wrote. After the step the engine rewrites that
path with its merged record (the commit id cannot be part of the commit), so once committed the
file shows as modified in ``git status`` until the node commits a new one.
"""

from __future__ import annotations

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
    evidence_rel: str | None = None
    if include_evidence_file:
        evidence_file = evidence_path(workdir, node.id)
        if evidence_file.is_file():
            evidence_rel = evidence_file.resolve().relative_to(root.resolve()).as_posix()
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
