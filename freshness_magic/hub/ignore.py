"""Which paths the hub indexes: ``.gitignore`` rules plus folders that are never source.

A small matcher for the ``.gitignore`` syntax (``*``, ``?``, ``[...]``, ``**``, leading ``/``
anchoring, trailing ``/`` for folders, ``!`` negation, ``\\`` escapes, last match wins) applied
per folder, as git does. Patterns follow git's wildmatch on bytes, including its odd corners
(``weird[]].txt`` matches ``weird].txt``; an unclosed ``[`` makes the line match nothing) and
are checked against ``git check-ignore`` in the tests. ``a/.gitignore`` rules apply below
``a/``; ``.git/info/exclude`` applies from the root. A path inside an ignored folder is ignored
(git cannot re-include it either). Not covered: the user's global ``core.excludesFile``, and
git's rule that tracked files are never ignored; an ignored but tracked file is not indexed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from freshness_magic.freshness.skipped import SKIPPED_DIRS, is_venv


@dataclass(frozen=True, slots=True)
class _Pattern:
    regex: re.Pattern[str]
    negate: bool
    dir_only: bool


_NEVER = "(?!)"
"""A regex body that matches nothing: what git makes of a pattern it cannot parse."""

_CLASSES = {
    "alnum": "a-zA-Z0-9",
    "alpha": "a-zA-Z",
    "blank": " \\t",
    "cntrl": "\\x00-\\x1f\\x7f",
    "digit": "0-9",
    "graph": "!-~",
    "lower": "a-z",
    "print": " -~",
    "punct": "!-/:-@\\[-`{-~",
    "space": " \\t\\n\\r\\x0b\\x0c",
    "upper": "A-Z",
    "xdigit": "0-9a-fA-F",
}
"""POSIX classes inside brackets, ASCII only (git's own ctype tables)."""


def glob_to_regex(glob: str) -> str:
    """A regex body for one gitignore-style glob (``**`` crosses folders, ``*`` does not).

    Follows git's wildmatch: a pattern git would abort on (an unclosed ``[``, an unknown
    ``[:class:]``, a trailing unescaped backslash) matches nothing instead of failing.
    """
    out = []
    i = 0
    n = len(glob)
    while i < n:
        ch = glob[i]
        if ch == "*":
            if glob.startswith("**", i):
                before_ok = i == 0 or glob[i - 1] == "/"
                after = glob[i + 2 : i + 3]
                if before_ok and after == "/":
                    out.append("(?:.*/)?")
                    i += 3
                    continue
                if before_ok and after == "":
                    out.append(".*")
                    i += 2
                    continue
            out.append("[^/]*")
        elif ch == "?":
            out.append("[^/]")
        elif ch == "[":
            bracket, i = _bracket(glob, i)
            if bracket is None:
                return _NEVER
            out.append(bracket)
            continue
        elif ch == "\\":
            if i + 1 >= n:
                return _NEVER
            i += 1
            out.append(re.escape(glob[i]))
        else:
            out.append(re.escape(ch))
        i += 1
    return "".join(out)


def _bracket(glob: str, start: int) -> tuple[str | None, int]:
    """The bracket expression at ``glob[start] == "["``: (regex, index after its ``]``).

    git's rules: ``!`` or ``^`` first negates; the first member may be ``]``; ``a-z`` is a
    range (a reversed one matches nothing), ``-`` first or last is literal; ``\\`` escapes;
    ``[:name:]`` is a class and ``[:`` without ``:]`` is a literal ``[``; ``/`` never matches.
    None when the expression is unclosed or names an unknown class (git then matches nothing).
    """
    n = len(glob)
    j = start + 1
    negate = j < n and glob[j] in "!^"
    if negate:
        j += 1
    members: list[str] = []
    prev: str | None = None
    first = True
    while True:
        if j >= n:
            return None, n
        ch = glob[j]
        if ch == "]" and not first:
            break
        first = False
        if ch == "\\":
            j += 1
            if j >= n:
                return None, n
            prev = glob[j]
            members.append(re.escape(prev))
        elif ch == "-" and prev is not None and j + 1 < n and glob[j + 1] != "]":
            j += 1
            high = glob[j]
            if high == "\\":
                j += 1
                if j >= n:
                    return None, n
                high = glob[j]
            if prev <= high:
                members.append(re.escape(prev) + "-" + re.escape(high))
            prev = None
        elif ch == "[" and glob[j + 1 : j + 2] == ":":
            close = glob.find("]", j + 2)
            if close < 0:
                return None, n
            if close - (j + 2) < 1 or glob[close - 1] != ":":
                prev = "["
                members.append(re.escape("["))
            else:
                members_class = _CLASSES.get(glob[j + 2 : close - 1])
                if members_class is None:
                    return None, n
                members.append(members_class)
                prev = None
                j = close
        else:
            prev = ch
            members.append(re.escape(ch))
        j += 1
    body = "".join(members)
    return ("[^/" + body + "]" if negate else "(?!/)[" + body + "]"), j + 1


def parse_gitignore(text: str) -> list[_Pattern]:
    """Compile the lines of one ``.gitignore`` (paths are matched relative to its folder).

    ``text`` is the file's bytes decoded as Latin-1 and paths are matched the same way (see
    :func:`byte_text`): git matches bytes, so ``?`` is one byte and ``[é]`` two candidates.
    """
    patterns = []
    text = text.removeprefix(_UTF8_BOM)
    for raw in text.split("\n"):
        line = raw.removesuffix("\r")
        if not line or line.startswith("#"):
            continue
        stripped = line.rstrip(" ")
        if stripped.endswith("\\") and len(line) > len(stripped):
            stripped += " "
        line = stripped
        negate = line.startswith("!")
        if negate or line.startswith(("\\!", "\\#")):
            line = line[1:]
        dir_only = line.endswith("/")
        line = line.removesuffix("/")
        if not line:
            continue
        anchored = "/" in line
        line = line.removeprefix("/")
        body = glob_to_regex(line)
        regex = ("^" if anchored else "^(?:.*/)?") + body + "$"
        patterns.append(_Pattern(re.compile(regex), negate, dir_only))
    return patterns


_UTF8_BOM = "\xef\xbb\xbf"


def byte_text(path: str) -> str:
    """A path as the Latin-1 text of its UTF-8 bytes: one character per byte, as git sees it."""
    return path.encode("utf-8", "surrogateescape").decode("latin-1")


class IgnoreRules:
    """Decides, for tree-relative POSIX paths, whether the hub skips them.

    ``.gitignore`` files are read once and cached; :meth:`reset` drops the cache (the hub calls it
    before every full sweep and when a ``.gitignore`` changes).
    """

    def __init__(self, root: Path) -> None:
        self.root = root
        self._cache: dict[str, list[_Pattern]] = {}
        self._venv: dict[str, bool] = {}

    def reset(self) -> None:
        self._cache.clear()
        self._venv.clear()

    def _patterns(self, folder: str) -> list[_Pattern]:
        cached = self._cache.get(folder)
        if cached is None:
            base = self.root / folder if folder else self.root
            cached = []
            sources = [base / ".gitignore"]
            if not folder:
                sources.insert(0, self.root / ".git" / "info" / "exclude")
            for source in sources:
                try:
                    text = source.read_bytes().decode("latin-1")
                except OSError:
                    continue
                cached.extend(parse_gitignore(text))
            self._cache[folder] = cached
        return cached

    def is_venv(self, folder: str) -> bool:
        known = self._venv.get(folder)
        if known is None:
            known = is_venv(self.root / folder)
            self._venv[folder] = known
        return known

    def _matches(self, rel: str, is_dir: bool) -> bool:
        """Whether ``rel`` itself is ignored by the ``.gitignore`` files of its ancestors."""
        parts = rel.split("/")
        matched = byte_text(rel).split("/")
        ignored = False
        for depth in range(len(parts)):
            folder = "/".join(parts[:depth])
            sub = "/".join(matched[depth:])
            for pattern in self._patterns(folder):
                if pattern.dir_only and not is_dir:
                    continue
                if pattern.regex.match(sub):
                    ignored = not pattern.negate
        return ignored

    def skip_dir(self, rel: str) -> bool:
        """Whether the walk should not enter folder ``rel`` (its parents already passed)."""
        name = rel.rsplit("/", 1)[-1]
        if name in SKIPPED_DIRS or self.is_venv(rel):
            return True
        return self._matches(rel, True)

    def skip_file(self, rel: str) -> bool:
        """Whether file ``rel`` is skipped, given that its parents already passed."""
        return self._matches(rel, False)

    def skip_path(self, rel: str, *, is_dir: bool = False) -> bool:
        """Full check for a path from a watcher event: every ancestor folder, then the path."""
        parts = rel.split("/")
        for depth in range(1, len(parts)):
            if self.skip_dir("/".join(parts[:depth])):
                return True
        return self.skip_dir(rel) if is_dir else self.skip_file(rel)
