"""The hub's ``.gitignore`` matcher against real ``git check-ignore`` on tricky patterns."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from freshness_magic.hub.ignore import IgnoreRules
from freshness_magic.hub.indexer import Indexer

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs the git program")

GITIGNORE = "\n".join(
    [
        "weird[]].txt",
        "[!a]x.log",
        "b[a-c-e]z",
        "c[[:digit:]]d",
        "d[[:bogus:]]e",
        "e[x",
        "f\\[g",
        "h[\\]]i",
        "caf?",
        "j[z-a]j",
        "k[[:x]k",
        "m[-]m",
        "n[^n]n",
        "trailing\\",
        "sp\\ ",
        "*.tmp",
        "!keep.tmp",
        "sub/**/deep.txt",
        "/anchored.md",
        "dir[0-9]/",
        "",
    ]
)

NAMES = [
    "weird].txt",
    "weird[]].txt",
    "weird.txt",
    "weirdx.txt",
    "ax.log",
    "bx.log",
    "/x.log",
    "baz",
    "bcz",
    "b-z",
    "bdz",
    "bez",
    "c5d",
    "cxd",
    "d5e",
    "dbe",
    "ex",
    "e[x",
    "f[g",
    "fg",
    "h]i",
    "h\\i",
    "cafe",
    "cafx",
    "café",
    "caf",
    "jzj",
    "jaj",
    "k[k",
    "k:k",
    "kxk",
    "m-m",
    "mxm",
    "nan",
    "nnn",
    "n/n",
    "trailing",
    "trailing\\",
    "sp ",
    "sp",
    "a.tmp",
    "keep.tmp",
    "sub/deep.txt",
    "sub/x/y/deep.txt",
    "other/deep.txt",
    "anchored.md",
    "sub/anchored.md",
    "dir1/file.txt",
    "dirx/file.txt",
    "dir2",
]


def _git(repo: Path, *args: str, stdin: str | None = None) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args],
        input=stdin,
        capture_output=True,
        text=True,
        check=False,
    ).stdout


def test_ignore_rules_agree_with_git_check_ignore(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / ".gitignore").write_text(GITIGNORE, encoding="utf-8")
    files = [name for name in NAMES if not name.startswith("/") and "/n" not in name]
    for name in files:
        path = repo / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x", encoding="utf-8")
    ignored_by_git = set(
        filter(
            None,
            _git(repo, "check-ignore", "--no-index", "--stdin", "-z", stdin="\0".join(files)).split(
                "\0"
            ),
        )
    )
    rules = IgnoreRules(repo)
    ignored_by_hub = {name for name in files if rules.skip_path(name)}
    assert "weird].txt" in ignored_by_git, "the fixture must exercise git's bracket corner"
    assert ignored_by_hub == ignored_by_git
    # The walk (what the hub indexes) equals git's list of untracked, not ignored files.
    listed = set(_git(repo, "ls-files", "--others", "--exclude-standard", "-z").split("\0")) - {""}
    assert set(Indexer(repo, None, rules).walk()) == listed  # type: ignore[arg-type]


def test_an_unparsable_pattern_does_not_stop_the_hub(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    root.mkdir()
    (root / ".gitignore").write_text("weird[]].txt\n[unclosed\nok.py\n", encoding="utf-8")
    for name in ("weird].txt", "[unclosed", "ok.py", "main.py"):
        (root / name).write_text("x = 1\n", encoding="utf-8")
    assert sorted(Indexer(root, None, IgnoreRules(root)).walk()) == [  # type: ignore[arg-type]
        ".gitignore",
        "[unclosed",
        "main.py",
    ]
