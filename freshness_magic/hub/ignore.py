"""Which paths the hub indexes: ``.gitignore`` rules plus folders that are never source.

A small matcher for the ``.gitignore`` syntax (``*``, ``?``, ``[...]``, ``**``, leading ``/``
anchoring, trailing ``/`` for folders, ``!`` negation, ``\\`` escapes, last match wins) applied
per folder, as git does: ``a/.gitignore`` rules apply below ``a/``. ``.git/info/exclude`` applies
from the root. A path inside an ignored folder is ignored (git cannot re-include it either).
Not covered: the user's global ``core.excludesFile``, and git's rule that tracked files are never
ignored; an ignored but tracked file is not indexed by the hub.
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


def glob_to_regex(glob: str) -> str:
    """A regex body for one gitignore-style glob (``**`` crosses folders, ``*`` does not)."""
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
            close = glob.find("]", i + 2 if glob[i + 1 : i + 2] in ("!", "^") else i + 1)
            if close < 0:
                out.append(re.escape(ch))
            else:
                body = glob[i + 1 : close]
                if body[:1] in ("!", "^"):
                    body = "^" + body[1:]
                out.append("[" + body.replace("\\", "\\\\") + "]")
                i = close
        elif ch == "\\" and i + 1 < n:
            i += 1
            out.append(re.escape(glob[i]))
        else:
            out.append(re.escape(ch))
        i += 1
    return "".join(out)


def parse_gitignore(text: str) -> list[_Pattern]:
    """Compile the lines of one ``.gitignore`` (paths are matched relative to its folder)."""
    patterns = []
    for raw in text.splitlines():
        line = raw.rstrip("\r")
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
        line = line.rstrip("/")
        if not line:
            continue
        anchored = "/" in line
        line = line.lstrip("/")
        body = glob_to_regex(line)
        regex = ("^" if anchored else "^(?:.*/)?") + body + "$"
        patterns.append(_Pattern(re.compile(regex), negate, dir_only))
    return patterns


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
                    text = source.read_text(encoding="utf-8", errors="replace")
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
        ignored = False
        for depth in range(len(parts)):
            folder = "/".join(parts[:depth])
            sub = "/".join(parts[depth:])
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
