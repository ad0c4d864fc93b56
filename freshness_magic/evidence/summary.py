"""Work summaries: what a node did, built only from its evidence record (and git for details).

This is exactly what the notebook's evidence panel shows: the commits, the files added, modified
and deleted, a description (the evidence summary, or "Node declared expects_no_changes") and the
commit details (author, date, files) read from the repository when it is still there.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from freshness_magic.errors import EvidenceError
from freshness_magic.evidence.record import EvidenceRecord, read_evidence_log
from freshness_magic.evidence.snapshot import (
    CommitInfo,
    FileChanges,
    git_checked,
    git_toplevel,
)

EXPECTS_NO_CHANGES_DESCRIPTION = "Node declared expects_no_changes"


@dataclass(frozen=True)
class CommitDetail:
    """One commit as the evidence panel shows it."""

    id: str
    message: str
    author: str = ""
    date: str = ""
    files: FileChanges = field(default_factory=FileChanges)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "message": self.message,
            "author": self.author,
            "date": self.date,
            "files": self.files.to_dict(),
        }


@dataclass
class WorkSummary:
    """What one execution of a node did."""

    node_id: str
    timestamp: str
    status: str
    method: str
    description: str
    commits: tuple[CommitInfo, ...] = ()
    files: FileChanges = field(default_factory=FileChanges)
    commit_details: tuple[CommitDetail, ...] = ()
    commit: str | None = None
    """The commit the engine made for ``commit=true`` (None when it made none)."""
    problems: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "node_id": self.node_id,
            "timestamp": self.timestamp,
            "status": self.status,
            "method": self.method,
            "description": self.description,
            "commits": [c.to_dict() for c in self.commits],
            "files": self.files.to_dict(),
            "commit_details": [d.to_dict() for d in self.commit_details],
            "commit": self.commit,
            "problems": list(self.problems),
        }

    def render_text(self) -> str:
        """Plain-text form for terminals and ``text/plain`` reprs."""
        lines = [f"{self.node_id} [{self.status or '?'}] {self.description}"]
        if self.method:
            lines.append(f"  evidence: {self.method}")
        for kind in ("added", "modified", "deleted"):
            paths = getattr(self.files, kind)
            if paths:
                lines.append(f"  {kind}: {', '.join(paths)}")
        for detail in self.commit_details:
            subject = detail.message.splitlines()[0] if detail.message else ""
            line = f"  commit {detail.id[:12]} {subject}"
            if detail.author:
                line += f" ({detail.author}, {detail.date})"
            lines.append(line)
        lines.extend(f"  problem: {problem}" for problem in self.problems)
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.render_text()


def _commits(facts: Mapping[str, Any]) -> tuple[CommitInfo, ...]:
    raw = facts.get("commits")
    if not isinstance(raw, list):
        return ()
    return tuple(CommitInfo.from_dict(item) for item in raw if isinstance(item, dict))


def commit_details(
    workdir: str | os.PathLike[str] | None, commits: Iterable[CommitInfo]
) -> tuple[CommitDetail, ...]:
    """Author, date and files of each commit from git; the recorded id and message otherwise."""
    listed = list(commits)
    root = git_toplevel(workdir) if workdir is not None and Path(workdir).is_dir() else None
    details = []
    for commit in listed:
        if root is None:
            details.append(CommitDetail(commit.id, commit.message))
            continue
        try:
            header = git_checked(
                ["show", "-s", "--format=%an <%ae>%x00%aI%x00%B", commit.id, "--"], root
            ).decode("utf-8", "replace")
            names = git_checked(
                [
                    "diff-tree",
                    "--no-commit-id",
                    "--root",
                    "-r",
                    "-z",
                    "--name-status",
                    "--no-renames",
                    commit.id,
                ],
                root,
            )
        except EvidenceError:
            details.append(CommitDetail(commit.id, commit.message))
            continue
        author, date, message = [*header.split("\0", 2), "", ""][:3]
        fields = names.split(b"\0")
        status: dict[str, str] = {}
        for code, raw in zip(fields[0::2], fields[1::2], strict=False):
            if code:
                kind = {b"A": "added", b"D": "deleted"}.get(code[:1], "modified")
                status[os.fsdecode(raw)] = kind
        details.append(
            CommitDetail(
                commit.id,
                message.strip() or commit.message,
                author,
                date,
                FileChanges.from_status(status),
            )
        )
    return tuple(details)


def work_summary(
    record: EvidenceRecord, workdir: str | os.PathLike[str] | None = None
) -> WorkSummary:
    """The work summary of one evidence record (git details when ``workdir`` is a repository)."""
    facts = record.engine
    method = str(facts.get("evidence_method") or "")
    if method == "expects_no_changes":
        description = EXPECTS_NO_CHANGES_DESCRIPTION
    else:
        description = record.summary
    files = facts.get("files")
    commits = _commits(facts)
    problems = facts.get("evidence_problems")
    commit = facts.get("commit")
    return WorkSummary(
        node_id=record.node_id,
        timestamp=record.timestamp,
        status=str(facts.get("status") or ""),
        method=method,
        description=description,
        commits=commits,
        files=FileChanges.from_dict(files) if isinstance(files, dict) else FileChanges(),
        commit_details=commit_details(workdir, commits),
        commit=str(commit) if commit else None,
        problems=[str(p) for p in problems] if isinstance(problems, list) else [],
    )


def run_work_summaries(
    run_dir: str | os.PathLike[str], workdir: str | os.PathLike[str] | None = None
) -> dict[str, WorkSummary]:
    """The latest work summary of each node of a run, in order of first execution."""
    latest: dict[str, EvidenceRecord] = {}
    for record in read_evidence_log(run_dir):
        latest[record.node_id] = record
    return {node_id: work_summary(record, workdir) for node_id, record in latest.items()}
