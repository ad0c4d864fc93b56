"""The project's exception hierarchy.

Every error a user can cause derives from :class:`FreshnessMagicError` and carries a message that
says what was wrong, where, and what to do. Nothing else is allowed to escape a public API on bad
input; the command line and the magics turn these into one-line messages instead of tracebacks.
"""

from __future__ import annotations

import errno
import os


class FreshnessMagicError(Exception):
    """Base class of every error raised on purpose by freshness_magic."""

    def _render_traceback_(self) -> list[str]:
        """What IPython shows for it: the one-line message, as the magics show theirs, not a
        traceback through the package (a call such as ``review.why("x")`` in a cell)."""
        return [f"{type(self).__name__}: {self}"]


class ParseError(FreshnessMagicError):
    """A DOT source that cannot be parsed; points at the line and column with a caret."""

    def __init__(
        self,
        message: str,
        *,
        line: int,
        column: int,
        source_line: str = "",
        path: str | None = None,
    ) -> None:
        self.message = message
        self.line = line
        self.column = column
        self.source_line = source_line
        self.path = path
        super().__init__(self.render())

    @property
    def location(self) -> str:
        """``path:line:col`` (``<string>`` when the text did not come from a file)."""
        return f"{self.path or '<string>'}:{self.line}:{self.column}"

    def render(self) -> str:
        """The message, then the offending source line with a caret under the column (a long
        line cut to :data:`EXCERPT` characters around it, ``…`` where it was cut)."""
        text = f"{self.location}: {self.message}"
        if self.source_line:
            line = self.source_line.expandtabs(1).rstrip("\n").translate(_PICTURES)
            at = max(self.column - 1, 0)
            start = max(min(at - EXCERPT // 2, len(line) - EXCERPT), 0)
            shown = line[start : start + EXCERPT]
            if start:
                shown, at = "…" + shown, at - start + 1
            if start + EXCERPT < len(line):
                shown += "…"
            text += f"\n    {shown}\n    {' ' * at}^"
        return text


_PICTURES = {code: 0x2400 + code for code in range(0x20)} | {0x7F: 0x2421}
"""Control characters as their Unicode pictures (``␍``, ``␛``): an excerpt shows where one is
without a terminal acting on it."""

EXCERPT = 120
"""Characters of the source line a parse error shows (a one-line file may be megabytes long)."""


class PipelineFileError(FreshnessMagicError):
    """A pipeline file that cannot be read (missing, a directory, no permission, not UTF-8);
    ``line`` and ``column`` say where the text stops being UTF-8, when that is the problem."""

    def __init__(self, message: str, *, line: int | None = None, column: int | None = None):
        super().__init__(message)
        self.line = line
        self.column = column


class PipelineSourceError(FreshnessMagicError):
    """An object given as a pipeline that is none of DOT text, a Graph, pydot or graphviz."""


class ConditionError(FreshnessMagicError):
    """An edge condition that is not in the §10 language; names the token and its column."""

    def __init__(self, message: str, *, column: int, token: str = "", text: str = "") -> None:
        self.message = message
        self.column = column
        self.token = token
        self.text = text
        super().__init__(f"column {column}: {message}")


class StylesheetError(FreshnessMagicError):
    """A ``model_stylesheet`` that does not parse; position is inside the stylesheet text."""

    def __init__(self, message: str, *, line: int, column: int) -> None:
        self.message = message
        self.line = line
        self.column = column
        super().__init__(f"stylesheet line {line}, column {column}: {message}")


class ValidationError(FreshnessMagicError):
    """A pipeline with error-severity diagnostics; the engine refuses to run it."""

    def __init__(self, message: str, diagnostics: list[object] | None = None) -> None:
        self.diagnostics = list(diagnostics or [])
        super().__init__(message)


class RunError(FreshnessMagicError):
    """A run used the wrong way: stepping a finished run, answering a gate that is not waiting."""


class NothingToRetryError(RunError):
    """A retry without a node of a run that did not fail at one; ``problem`` says so, and the
    message adds the Python call that names a node (each front end words its own)."""

    def __init__(self, problem: str) -> None:
        super().__init__(f"{problem} (retry(node_id))")
        self.problem = problem


class GateAnswerError(RunError):
    """An answer that matches none of a waiting gate's choices."""


class CheckpointError(FreshnessMagicError):
    """No usable checkpoint: missing, unreadable or from another pipeline."""


class StoredPipelineError(CheckpointError):
    """The run directory's copy of its pipeline is missing, unreadable or altered; ``problem``
    says which, and the message adds what to do from Python (each front end words its own)."""

    def __init__(self, problem: str, advice: str = "to resume with the original pipeline") -> None:
        super().__init__(f"{problem}; pass graph= {advice}")
        self.problem = problem


class FreshnessError(FreshnessMagicError):
    """Input-freshness detection could not do what was asked (bad baseline, bad node)."""


class EvidenceError(FreshnessMagicError):
    """An evidence record that cannot be written or read safely."""


class GitError(FreshnessMagicError):
    """git is missing, overran its time limit, or refused a command (with git's message)."""


class HubError(FreshnessMagicError):
    """The Node State Hub is not running, not reachable, or its store is unusable."""


class BackendError(FreshnessMagicError):
    """A codergen backend spec that cannot be used (unknown kind, missing extra, no model), or a
    backend call that failed; the message is one line and never contains a credential."""


class ReuseError(FreshnessMagicError):
    """An execution cannot be taken from the reuse index (a kept output file is gone or no
    longer holds its content); the node runs instead."""


class UnsafePathError(FreshnessMagicError):
    """A state file would be written through a symbolic link (or a name that leaves its folder)."""


class StateFileError(FreshnessMagicError, ValueError):
    """A state file (checkpoint, log line, evidence file) that is too large or too deeply nested.

    It is a ``ValueError`` too, so every reader that already treats undecodable JSON as damaged
    (skip the line, fall back to an older checkpoint) treats these files the same way.
    """


class ClusterError(FreshnessMagicError):
    """An executor spec that cannot be used (unknown form, the ``distributed`` extra missing, no
    scheduler at the address) or a cluster whose workers cannot see the work directory."""


class EventKindError(FreshnessMagicError):
    """An event vocabulary that clashes with another (two members stored under one name), or an
    event emitted on a bus that does not know its vocabulary (an extension that emits it without
    listing it in ``event_kinds()``)."""


class NotAFolderError(FreshnessMagicError, FileExistsError):
    """A path where freshness_magic keeps a state folder (``.freshness``, its ``runs``, a working
    directory) is a file, or lies under one; ``path`` names it. Nothing is written to it.

    It is a ``FileExistsError`` too (what creating the folder raised before), so a caller that
    already handles that keeps doing so; the front ends show it as one line.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)
        super().__init__(
            f"{self.path} is a file, not a folder: freshness_magic keeps its state (run "
            "directories, evidence, the hub's store) in a folder there; move the file away (it "
            "is left as it is) or use another working directory"
        )


_OS_ADVICE: dict[int, str] = {
    errno.EACCES: "give your user access to it (ls -ld shows its owner and mode), or work "
    "in a folder you own",
    errno.EPERM: "give your user access to it (ls -ld shows its owner and mode), or work "
    "in a folder you own",
    errno.ENOSPC: "free some space on that disk, then run the command again; what the run "
    "saved before is kept",
    errno.EDQUOT: "free some space within your disk quota, then run the command again",
    errno.EROFS: "it is on a read-only file system: work in a writable folder",
}
"""What to do when the operating system refuses a file, by its errno."""


class FileAccessError(FreshnessMagicError):
    """The operating system refused to read or write a file (permissions, a full disk, a
    read-only mount): what was refused, where (``path``) and what to do, in one line.

    What a run saved before the refusal stays as it was: state files are replaced whole or
    appended with checksummed lines, so a refused write leaves the last good state to resume.
    """

    def __init__(self, error: OSError) -> None:
        self.path = os.fspath(error.filename) if error.filename is not None else None
        reason = (error.strerror or str(error)).lower()
        where = f" ({self.path})" if self.path else ""
        advice = _OS_ADVICE.get(error.errno or 0, "check the path and its folder")
        super().__init__(f"{reason}{where}: {advice}")
