"""Where git keeps a work tree's index and config, and whether its settings could filter
content: the conditions under which git's own record of a file's content (its index, its status)
is taken for the file's. Only the file system is read, no git process and no index parsing, so
that a check can look here and start git before loading the rest of the freshness code."""

from __future__ import annotations

import os
from collections.abc import Iterable

_CONFIG_WORDS = (b"autocrlf", b"attributesfile", b"include", b"objectformat", b"worktreeconfig")
_ENVIRONMENT = (
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_COMMON_DIR",
    "GIT_OBJECT_DIRECTORY",
    "GIT_CONFIG",
    "GIT_CONFIG_COUNT",
    "GIT_CONFIG_PARAMETERS",
    "GIT_ATTR_SOURCE",
)


def index_and_config_folder(top: str) -> tuple[str, str] | None:
    """(the index file, the folder of the repository's config) of the work tree at ``top``;
    None when git's environment names other places or ``.git`` is neither a folder nor a link
    file (OSError when ``.git`` cannot be read)."""
    if any(name in os.environ for name in _ENVIRONMENT):
        return None
    folders = _git_folders(os.path.join(top, ".git"))
    if folders is None:
        return None
    git_dir, common_dir = folders
    return os.path.join(git_dir, "index"), common_dir


def index_key(top: str) -> tuple[int, ...] | None:
    """The stat key of the index of the work tree at ``top`` (:func:`file_key`); None when
    git's environment names another index, git's config or attributes may filter content (see
    :mod:`.gitindex`), or it cannot be read. git replaces its index by renaming a new file over
    it, so an unchanged key means the same file (the caller rules out a rewrite within one
    timestamp tick by the racy window)."""
    try:
        found = index_and_config_folder(top)
        if found is None or filters_configured(found[1]):
            return None
        return file_key(os.stat(found[0]))
    except OSError:
        return None


def file_key(st: os.stat_result) -> tuple[int, ...]:
    """A file's device, inode, size, mtime and ctime in ns: another key, another file or a
    rewrite."""
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _user_config() -> str:
    """git's folder in the user's config home (``$XDG_CONFIG_HOME/git``)."""
    xdg = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return os.path.join(xdg, "git")


def _git_folders(dot_git: str) -> tuple[str, str] | None:
    """(git folder, common folder) of a work tree's ``.git``: a folder, or a file naming one
    (``gitdir:``, as in linked worktrees and submodules); None when neither."""
    if os.path.isdir(dot_git):
        return dot_git, dot_git
    with open(dot_git, "rb") as handle:
        line = handle.read(4096).strip()
    if not line.startswith(b"gitdir:"):
        return None
    git_dir = os.path.join(os.path.dirname(dot_git), os.fsdecode(line[7:].strip()))
    try:
        with open(os.path.join(git_dir, "commondir"), "rb") as handle:
            common = os.path.join(git_dir, os.fsdecode(handle.read().strip()))
    except FileNotFoundError:
        common = git_dir
    return os.path.normpath(git_dir), os.path.normpath(common)


def _config_files(git_dir: str) -> Iterable[str]:
    yield os.path.join(git_dir, "config")
    if "GIT_CONFIG_GLOBAL" in os.environ:
        yield os.environ["GIT_CONFIG_GLOBAL"]
    else:
        yield os.path.join(os.path.expanduser("~"), ".gitconfig")
        yield os.path.join(_user_config(), "config")
    if "GIT_CONFIG_NOSYSTEM" not in os.environ:
        yield os.environ.get("GIT_CONFIG_SYSTEM", "/etc/gitconfig")


def filters_configured(git_dir: str) -> bool:
    """Whether a config or attributes file git reads could filter content (the module docstring of
    :mod:`.gitindex`)."""
    for path in (
        os.path.join(git_dir, "info", "attributes"),
        os.path.join(_user_config(), "attributes"),
        "/etc/gitattributes",
    ):
        if os.path.lexists(path):
            return True
    for path in _config_files(git_dir):
        try:
            with open(path, "rb") as handle:
                text = handle.read().lower()
        except FileNotFoundError:
            continue
        if any(word in text for word in _CONFIG_WORDS):
            return True
    return False
