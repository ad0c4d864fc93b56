"""The one git runner: every git process of freshness and evidence is started here.

Every call runs with ``GIT_OPTIONAL_LOCKS=0`` (a status never takes the index lock a user's own
git command may need), ``LC_ALL=C`` (messages and output we parse stay in one language) and
``GIT_TERMINAL_PROMPT=0`` (git never waits for a password on a terminal). A missing git or a
call that overruns its time limit is a :class:`~freshness_magic.errors.GitError`; callers that
treat git as optional catch it.

Also here: finding the work tree (without starting a process, by looking for ``.git``
upwards), the argument list of the one status call both users make (:mod:`.porcelain` reads
what it prints) and that of a check's tree diff (:mod:`.rawdiff`).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence
from pathlib import Path

from freshness_magic.errors import GitError

GIT_TIMEOUT_S = 120.0
"""The longest any one git call may take."""
MAX_PATHSPECS = 64
"""A status for more paths than this is taken for the whole working directory instead: git
matches every index entry against every pathspec, so 500 paths of a 100,000-file tree took
longer (0.7 s) than the whole tree (0.15 s); 64 stay under a tenth of a second."""


def git_env() -> dict[str, str]:
    """The environment of every git call (see the module docstring)."""
    return dict(os.environ, GIT_OPTIONAL_LOCKS="0", LC_ALL="C", GIT_TERMINAL_PROMPT="0")


def _what(args: Sequence[str]) -> str:
    shown = [a for a in args if not a.startswith("--literal")][:2]
    return "git " + " ".join(shown)


def run(
    args: Sequence[str],
    cwd: str | os.PathLike[str],
    *,
    stdin: bytes | None = None,
    timeout: float = GIT_TIMEOUT_S,
) -> subprocess.CompletedProcess[bytes]:
    """Run ``git args`` in ``cwd`` and return the finished process, whatever its exit code."""
    try:
        return subprocess.run(
            ["git", *args],
            cwd=os.fspath(cwd),
            input=stdin,
            capture_output=True,
            env=git_env(),
            timeout=timeout,
            check=False,
        )
    except FileNotFoundError as exc:
        raise GitError(
            "git is not installed or not on PATH; install git or add it to PATH"
        ) from exc
    except subprocess.TimeoutExpired as exc:
        raise GitError(f"{_what(args)} did not finish within {timeout:.0f}s in {cwd}") from exc


def checked(
    args: Sequence[str], cwd: str | os.PathLike[str], *, stdin: bytes | None = None
) -> bytes:
    """Run git and return stdout; a non-zero exit is a GitError carrying git's own message."""
    result = run(args, cwd, stdin=stdin)
    if result.returncode != 0:
        message = result.stderr.decode("utf-8", "replace").strip() or f"exit {result.returncode}"
        if len(message) > 1000:
            message = "…" + message[-1000:]
        raise GitError(f"{_what(args)} failed in {cwd}: {message}")
    return result.stdout


class Pending:
    """A git call started in the background (it runs on another core meanwhile)."""

    def __init__(self, process: subprocess.Popen[bytes] | None):
        self._process = process

    def cancel(self) -> None:
        """Stop the call (its result will not be read)."""
        if self._process is not None and self._process.poll() is None:
            self._process.kill()
            self._process.communicate()

    def output(self, timeout: float = GIT_TIMEOUT_S) -> bytes | None:
        """stdout of a successful call; None when git could not start, failed or overran."""
        if self._process is None:
            return None
        try:
            out, _ = self._process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.communicate()
            return None
        return out if self._process.returncode == 0 else None


def start(args: Sequence[str], cwd: str | os.PathLike[str]) -> Pending:
    """Start ``git args`` in the background; a git that cannot start gives an empty Pending."""
    try:
        process = subprocess.Popen(
            ["git", *args],
            cwd=os.fspath(cwd),
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            stdin=subprocess.DEVNULL,
            env=git_env(),
        )
    except OSError:
        return Pending(None)
    return Pending(process)


EXACT_STATUS = (
    "-c",
    "core.fsmonitor=false",
    "-c",
    "core.checkStat=default",
    "-c",
    "core.trustctime=true",
)
"""Settings that make a status or a tree diff look at every tracked file itself: no file system
monitor's word taken for it, and all of the stat data git keeps compared (ctime too), whatever
the user's config says."""

ONE_THREAD = ("-c", "core.preloadIndex=false")
"""git stats the tracked files on one thread: for a status or a tree diff started well before it
is needed, beside this process's own work, which git's preload threads (up to 20, whatever the
cores) would otherwise crowd off its core (``freshness-magic check`` of 20,000 files on 2 cores
ends about 15 ms sooner). One waited for soon after it starts is faster with those threads."""


def status_args(
    paths: Sequence[str] | None = None,
    *,
    branch: bool = False,
    ignored: bool = False,
    exact: bool = False,
    untracked: bool = True,
    one_thread: bool = False,
) -> list[str]:
    """Arguments of ``git status --porcelain=v2 -z`` for ``paths`` (relative; None: all).

    Untracked files are listed one by one and renames as a deletion plus an addition; paths are
    literal (no pathspec magic). Above :data:`MAX_PATHSPECS` paths the whole folder is asked.
    ``exact``: with :data:`EXACT_STATUS`, so that a file the status does not list is one git
    compared with its index entry (a check takes its word for such files). ``untracked=False``:
    tracked files only (no untracked or ignored ones, so git lists no folder: about half of
    its time in a tree of 20,000 files). ``one_thread``: with :data:`ONE_THREAD`.
    """
    args = [*EXACT_STATUS] if exact else []
    if one_thread:
        args += ONE_THREAD
    args += ["--literal-pathspecs", "status", "--porcelain=v2", "-z"]
    if branch:
        args.append("--branch")
    args += ["--untracked-files=all" if untracked else "--untracked-files=no", "--no-renames"]
    if ignored and untracked:
        args.append("--ignored=matching")
    args.append("--")
    relative = [p for p in paths if not os.path.isabs(p)] if paths is not None else []
    if paths is not None and relative and len(relative) <= MAX_PATHSPECS:
        args += relative
    else:
        args.append(".")
    return args


def tree_diff_args(*, one_thread: bool = False) -> list[str]:
    """Arguments of ``git diff-index --raw -z HEAD`` of the working directory, exact (see
    :data:`EXACT_STATUS`): HEAD's tree against the tracked files through their index entries.
    git reads no file whose stat differs from its entry (it lists it with no destination id):
    about a third less time than the exact status at 20,000 files with 1,000 edited, which
    that status reads and a check reads again anyway. :mod:`.rawdiff` reads the output.
    ``one_thread``: with :data:`ONE_THREAD`."""
    return [
        *EXACT_STATUS,
        *(ONE_THREAD if one_thread else ()),
        "--literal-pathspecs",
        "diff-index",
        "--raw",
        "-z",
        "--no-renames",
        "HEAD",
        "--",
        ".",
    ]


HEAD_ARGS = ("rev-parse", "--verify", "--quiet", "HEAD^{commit}")
"""The HEAD commit id, or nothing (exit 1) before the first commit."""


def find_work_tree(workdir: str) -> tuple[str, str] | None:
    """(top level, workdir prefix relative to it with trailing ``/`` or ``''``), or None.

    Looks for ``.git`` upwards from the real path of ``workdir``; starts no process.
    """
    real = os.path.realpath(workdir)
    current = real
    while True:
        if os.path.exists(os.path.join(current, ".git")):
            prefix = os.path.relpath(real, current).replace(os.sep, "/")
            return current, "" if prefix == "." else prefix + "/"
        parent = os.path.dirname(current)
        if parent == current:
            return None
        current = parent


def toplevel(workdir: str | os.PathLike[str]) -> Path | None:
    """The work tree containing ``workdir`` as git reports it; None outside git (or no git)."""
    try:
        result = run(["rev-parse", "--is-inside-work-tree", "--show-toplevel"], workdir)
    except GitError:
        return None
    lines = result.stdout.decode("utf-8", "surrogateescape").splitlines()
    if result.returncode != 0 or len(lines) < 2 or lines[0].strip() != "true":
        return None
    return Path(lines[1].strip())


def head(root: str | os.PathLike[str]) -> str | None:
    """The HEAD commit id; None in a repository without commits."""
    result = run(HEAD_ARGS, root)
    if result.returncode != 0:
        return None
    return result.stdout.decode("ascii").strip() or None


def head_and_tree(root: str | os.PathLike[str]) -> tuple[str, str] | None:
    """HEAD's commit id and its root tree id (hex), from one ``git rev-parse``; None before the
    first commit, outside a repository or without git."""
    try:
        result = run(["rev-parse", "--quiet", "HEAD^{commit}", "HEAD^{tree}"], root)
    except GitError:
        return None
    lines = result.stdout.decode("ascii", "replace").split()
    if result.returncode != 0 or len(lines) != 2:
        return None
    return lines[0], lines[1]
