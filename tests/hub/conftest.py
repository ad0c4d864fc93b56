"""Shared fixtures for hub tests: a project tree in tmp_path and a hub that is always stopped."""

from __future__ import annotations

import os
import sqlite3
import sysconfig
from collections.abc import Iterator
from pathlib import Path

import pytest

from freshness_magic.hub import daemon
from freshness_magic.hub.ignore import IgnoreRules
from freshness_magic.hub.indexer import Indexer
from freshness_magic.hub.store import connect_writer

STDLIB = Path(sysconfig.get_paths()["stdlib"])


def write(root: Path, rel: str, text: str) -> Path:
    """Save like an editor does (temp file renamed over), so no reader sees half a file."""
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
    return path


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    write(
        root,
        "src/auth.py",
        'def login(user, pw):\n    """Log a user in."""\n    return helper(user)\n\n\n'
        "def helper(u):\n    return u\n",
    )
    write(
        root,
        "src/app.py",
        "from src import auth\n\n\ndef main():\n    return auth.login('a', 'b')\n",
    )
    write(
        root,
        "tests/test_auth.py",
        "from src.auth import login\n\n\ndef test_login():\n    assert login('a', 'b') == 'a'\n",
    )
    write(root, "docs/notes.md", "# Notes\n")
    return root


@pytest.fixture
def indexer(project: Path) -> Iterator[Indexer]:
    conn = connect_writer(project)
    yield Indexer(project, conn, IgnoreRules(project))
    conn.close()


@pytest.fixture
def hub_dir(project: Path) -> Iterator[Path]:
    """The project folder; any hub started on it is stopped when the test ends."""
    yield project
    daemon.stop(project)


def rows(conn: sqlite3.Connection, sql: str, *args: object) -> list[tuple[object, ...]]:
    return [tuple(r) for r in conn.execute(sql, args).fetchall()]
