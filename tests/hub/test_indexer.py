"""Indexer, rules and change log against a real tree in tmp_path (no daemon process)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from freshness_magic.freshness.hashing import hash_file
from freshness_magic.hub.ignore import IgnoreRules
from freshness_magic.hub.indexer import Indexer
from freshness_magic.hub.store import connect_writer, decode_node_ids

from .conftest import STDLIB, rows, write


def _changes(ix: Indexer, after: int = 0) -> list[tuple[object, ...]]:
    return rows(ix.conn, "SELECT path, symbol, kind FROM changes WHERE seq>? ORDER BY seq", after)


def _seq(ix: Indexer) -> int:
    return int(ix.conn.execute("SELECT value FROM meta WHERE key='last_seq'").fetchone()[0])


def _symbol(ix: Indexer, node_id: str) -> dict[str, object]:
    cur = ix.conn.execute("SELECT * FROM symbols WHERE node_id=?", (node_id,))
    names = [d[0] for d in cur.description]
    row = cur.fetchone()
    assert row is not None, node_id
    data = dict(zip(names, row, strict=True))
    data["callers"] = list(decode_node_ids(str(data["callers"])))
    data["related_tests"] = list(decode_node_ids(str(data["related_tests"])))
    return data


def test_cold_index_files_symbols_and_rules(indexer: Indexer, project: Path) -> None:
    indexer.sweep()
    files = dict(rows(indexer.conn, "SELECT path, language FROM files"))
    assert files == {
        "src/auth.py": "python",
        "src/app.py": "python",
        "tests/test_auth.py": "python",
        "docs/notes.md": "markdown",
    }
    digest = indexer.conn.execute("SELECT hash FROM files WHERE path='src/auth.py'").fetchone()[0]
    assert digest == hash_file(project / "src/auth.py").digest
    login = _symbol(indexer, "node:src/auth.py:login")
    assert login["signature"] == "def login(user, pw):"
    assert login["callers"] == ["node:src/app.py:main", "node:tests/test_auth.py:test_login"]
    assert login["related_tests"] == ["node:tests/test_auth.py:test_login"]
    assert _symbol(indexer, "node:src/auth.py:helper")["callers"] == ["node:src/auth.py:login"]
    assert rows(indexer.conn, "SELECT count(*) FROM symbols WHERE path='docs/notes.md'") == [(0,)]
    assert {c[2] for c in _changes(indexer)} == {"file_added"}


def test_callers_from_a_file_whose_name_has_a_line_break(indexer: Indexer, project: Path) -> None:
    write(
        project, "src/odd\nname.py", "from src.auth import login\n\n\ndef go():\n    login(1, 2)\n"
    )
    indexer.sweep()
    login = _symbol(indexer, "node:src/auth.py:login")
    assert login["callers"] == [
        "node:src/app.py:main",
        "node:src/odd\nname.py:go",
        "node:tests/test_auth.py:test_login",
    ]
    assert login["related_tests"] == ["node:tests/test_auth.py:test_login"]


def test_signature_change_recomputes_callers_and_flags_docstring(
    indexer: Indexer, project: Path
) -> None:
    indexer.sweep()
    start = _seq(indexer)
    write(project, "src/other.py", "import src.auth\n\n\ndef use():\n    return 1\n")
    indexer.update(["src/other.py"])
    assert "node:src/other.py:use" not in _symbol(indexer, "node:src/auth.py:login")["callers"]
    write(project, "src/other.py", "import src.auth\n\n\ndef use():\n    return login(1, 2, 3)\n")
    write(
        project,
        "src/auth.py",
        'def login(user, pw, otp):\n    """Log a user in."""\n    return helper(user)\n\n\n'
        "def helper(u):\n    return u\n",
    )
    indexer.update(["src/auth.py", "src/other.py"])
    login = _symbol(indexer, "node:src/auth.py:login")
    assert login["signature"] == "def login(user, pw, otp):"
    assert login["docstring_outdated"] == 1
    assert "node:src/other.py:use" in login["callers"]
    kinds = [c for c in _changes(indexer, start) if c[1] == "login"]
    assert kinds == [("src/auth.py", "login", "signature_changed")]
    # the docstring catches up: the flag clears
    write(
        project,
        "src/auth.py",
        'def login(user, pw, otp):\n    """Log a user in with a one-time password."""\n'
        "    return helper(user)\n\n\ndef helper(u):\n    return u\n",
    )
    before = _seq(indexer)
    indexer.update(["src/auth.py"])
    assert _symbol(indexer, "node:src/auth.py:login")["docstring_outdated"] == 0
    assert _changes(indexer, before) == [
        ("src/auth.py", None, "file_modified"),
        ("src/auth.py", "login", "docstring_changed"),
    ]


def test_signature_and_docstring_changed_together_is_not_outdated(
    indexer: Indexer, project: Path
) -> None:
    indexer.sweep()
    write(
        project,
        "src/auth.py",
        'def login(user):\n    """Log in by name."""\n    return helper(user)\n\n\n'
        "def helper(u):\n    return u\n",
    )
    indexer.update(["src/auth.py"])
    assert _symbol(indexer, "node:src/auth.py:login")["docstring_outdated"] == 0


def test_body_change_and_formatting_only_change(indexer: Indexer, project: Path) -> None:
    indexer.sweep()
    start = _seq(indexer)
    write(
        project,
        "src/auth.py",
        'def login(user, pw):\n    """Log a user in."""\n    return helper(user)  # why\n\n\n'
        "def helper(u):\n    return (u)\n",
    )
    indexer.update(["src/auth.py"])
    assert _changes(indexer, start) == [("src/auth.py", None, "file_modified")]
    write(
        project,
        "src/auth.py",
        'def login(user, pw):\n    """Log a user in."""\n    return helper(user)\n\n\n'
        "def helper(u):\n    return u.strip()\n",
    )
    mid = _seq(indexer)
    indexer.update(["src/auth.py"])
    assert _changes(indexer, mid) == [
        ("src/auth.py", None, "file_modified"),
        ("src/auth.py", "helper", "body_changed"),
    ]


def test_new_function_finds_its_tests_and_new_tests_find_functions(
    indexer: Indexer, project: Path
) -> None:
    indexer.sweep()
    start = _seq(indexer)
    with (project / "src/auth.py").open("a") as handle:
        handle.write("\n\ndef logout(user):\n    return None\n")
    write(
        project,
        "tests/test_logout.py",
        "from src import auth\n\n\ndef test_it():\n    assert auth.logout('x') is None\n",
    )
    indexer.update(["src/auth.py", "tests/test_logout.py"])
    logout = _symbol(indexer, "node:src/auth.py:logout")
    assert logout["related_tests"] == ["node:tests/test_logout.py:test_it"]
    assert ("src/auth.py", "logout", "symbol_added") in _changes(indexer, start)
    write(
        project,
        "auth_test.py",
        "import src.auth as a\n\n\nCASES = [a.helper]\n",
    )
    indexer.update(["auth_test.py"])
    assert _symbol(indexer, "node:src/auth.py:helper")["related_tests"] == ["node:auth_test.py"]
    (project / "auth_test.py").unlink()
    indexer.update(["auth_test.py"])
    assert _symbol(indexer, "node:src/auth.py:helper")["related_tests"] == []


def test_rename_and_delete(indexer: Indexer, project: Path) -> None:
    indexer.sweep()
    start = _seq(indexer)
    os.rename(project / "src/auth.py", project / "src/login.py")
    indexer.update(["src/auth.py", "src/login.py"])
    assert rows(indexer.conn, "SELECT count(*) FROM symbols WHERE path='src/auth.py'") == [(0,)]
    assert _symbol(indexer, "node:src/login.py:login")["related_tests"] == []
    changes = _changes(indexer, start)
    assert ("src/auth.py", None, "file_removed") in changes
    assert ("src/auth.py", "login", "symbol_removed") in changes
    assert ("src/login.py", None, "file_added") in changes
    assert ("src/login.py", "login", "symbol_added") in changes
    (project / "docs/notes.md").unlink()
    indexer.update(["docs/notes.md"])
    assert rows(indexer.conn, "SELECT count(*) FROM files WHERE path='docs/notes.md'") == [(0,)]
    # a whole folder that vanishes (watchers report only the folder)
    os.rename(project / "tests", project.parent / "moved_tests")
    indexer.update(["tests"])
    assert rows(indexer.conn, "SELECT count(*) FROM files WHERE path LIKE 'tests/%'") == [(0,)]


def test_syntax_error_keeps_last_good_symbols(indexer: Indexer, project: Path) -> None:
    indexer.sweep()
    write(project, "src/auth.py", "def login(user, pw:\n    return 1\n")
    start = _seq(indexer)
    indexer.update(["src/auth.py"])
    row = rows(
        indexer.conn,
        "SELECT syntax_line, syntax_col, syntax_msg FROM files WHERE path='src/auth.py'",
    )[0]
    assert row[0] == 1 and isinstance(row[1], int) and row[2]
    assert _symbol(indexer, "node:src/auth.py:login")["signature"] == "def login(user, pw):"
    assert _symbol(indexer, "node:src/auth.py:helper")["callers"] == ["node:src/auth.py:login"]
    detail = indexer.conn.execute("SELECT detail FROM changes WHERE seq>?", (start,)).fetchone()
    assert detail[0].startswith("syntax error at line 1")
    write(project, "src/auth.py", "def login(user):\n    return user\n")
    indexer.update(["src/auth.py"])
    assert rows(indexer.conn, "SELECT syntax_line FROM files WHERE path='src/auth.py'") == [(None,)]
    assert _symbol(indexer, "node:src/auth.py:login")["signature"] == "def login(user):"


def test_sweep_is_the_truth(indexer: Indexer, project: Path) -> None:
    """Changes the watcher never reported (overflow) are found by the sweep."""
    indexer.sweep()
    start = _seq(indexer)
    write(project, "src/auth.py", "def login():\n    return 0\n")
    write(project, "src/new.py", "X = 1\n")
    (project / "docs/notes.md").unlink()
    indexer.sweep()
    changes = set(_changes(indexer, start))
    assert ("src/auth.py", "login", "signature_changed") in changes
    assert ("src/auth.py", "helper", "symbol_removed") in changes
    assert ("src/new.py", None, "file_added") in changes
    assert ("docs/notes.md", None, "file_removed") in changes
    again = _seq(indexer)
    indexer.sweep()
    assert _seq(indexer) == again


def test_ignored_and_skipped_paths(indexer: Indexer, project: Path) -> None:
    write(project, ".gitignore", "*.log\nbuild/\n")
    write(project, "run.log", "x")
    write(project, "build/gen.py", "def g():\n    pass\n")
    write(project, "node_modules/m/index.js", "x")
    write(project, "env/pyvenv.cfg", "home = /usr\n")
    write(project, "env/lib/site.py", "def s():\n    pass\n")
    write(project, "src/__pycache__/x.py", "")
    write(project, ".orchestrator/evidence/a.json", "{}")
    indexer.sweep()
    paths = {r[0] for r in rows(indexer.conn, "SELECT path FROM files")}
    assert paths == {
        ".gitignore",
        "src/auth.py",
        "src/app.py",
        "tests/test_auth.py",
        "docs/notes.md",
    }
    indexer.update(["run.log", "build/gen.py", "env/lib/site.py"])
    assert {r[0] for r in rows(indexer.conn, "SELECT path FROM files")} == paths


def test_odd_names_symlinked_folders_and_huge_files(indexer: Indexer, project: Path) -> None:
    from freshness_magic.hub import indexer as indexer_module

    bad = os.fsencode(project / "src") + b"/bad\xff.py"
    with open(bad, "wb") as handle:
        handle.write(b"def x():\n    pass\n")
    os.symlink(project / "src", project / "linked", target_is_directory=True)
    huge = project / "gen.py"
    huge.write_text("X = 1\n" * ((indexer_module.MAX_PARSE_BYTES // 6) + 1))
    indexer.sweep()
    paths = {str(r[0]) for r in rows(indexer.conn, "SELECT path FROM files")}
    assert "gen.py" in paths and not any(p.startswith("linked/") for p in paths)
    assert not any("bad" in p for p in paths)
    assert rows(indexer.conn, "SELECT count(*) FROM symbols WHERE path='gen.py'") == [(0,)]
    indexer.update(["linked", os.fsdecode(b"src/bad\xff.py")])
    assert {str(r[0]) for r in rows(indexer.conn, "SELECT path FROM files")} == paths


def test_a_link_to_a_file_outside_the_tree_is_never_indexed(
    indexer: Indexer, project: Path
) -> None:
    secret = project.parent / "secret.py"
    secret.write_text("def hidden():\n    pass\n")
    os.symlink(secret, project / "src" / "leak.py")
    os.symlink(project / "src" / "auth.py", project / "near.py")
    indexer.sweep()
    paths = {str(r[0]) for r in rows(indexer.conn, "SELECT path FROM files")}
    assert "near.py" in paths and "src/leak.py" not in paths
    assert rows(indexer.conn, "SELECT count(*) FROM symbols WHERE name='hidden'") == [(0,)]
    indexer.update(["src/leak.py"])
    assert "src/leak.py" not in {str(r[0]) for r in rows(indexer.conn, "SELECT path FROM files")}


def test_cold_index_equals_an_index_built_one_batch_at_a_time(tmp_path: Path) -> None:
    """The bulk first index (rows and rules computed before writing) matches the update path."""
    sources = [STDLIB / "json"] + [p for p in [STDLIB / "test" / "test_json"] if p.is_dir()]
    cold, grown = tmp_path / "cold", tmp_path / "grown"
    for source in sources:
        shutil.copytree(source, cold / source.name, ignore=shutil.ignore_patterns("__pycache__"))
    write(
        cold,
        "test_app.py",
        "from json import decoder\n\n\ndef test_it():\n    decoder.JSONDecoder().decode('1')\n",
    )
    grown.mkdir()
    conn = connect_writer(cold)
    Indexer(cold, conn, IgnoreRules(cold)).sweep()
    grown_conn = connect_writer(grown)
    grown_ix = Indexer(grown, grown_conn, IgnoreRules(grown))
    grown_ix.sweep()
    files = sorted(str(p.relative_to(cold)) for p in cold.rglob("*.py"))
    for batch in (files[::3], files[1::3], files[2::3]):  # callers arrive before their callees
        for rel in batch:
            target = grown / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(cold / rel, target)
        grown_ix.update(batch)
    columns = (
        "node_id, kind, signature, sig_hash, body_hash, ast_hash, doc_hash, line_start, "
        "line_end, complexity, callers, related_tests"
    )
    for sql in (
        f"SELECT {columns} FROM symbols ORDER BY node_id",
        "SELECT name, kind, path, nodes FROM refs ORDER BY name, kind, path",
        "SELECT path, hash, imports FROM files ORDER BY path",
    ):
        assert rows(conn, sql) == rows(grown_conn, sql), sql
    linked = rows(conn, "SELECT count(*) FROM symbols WHERE callers != ''")[0][0]
    tested = rows(conn, "SELECT count(*) FROM symbols WHERE related_tests != ''")[0][0]
    assert isinstance(linked, int) and isinstance(tested, int) and linked > 10 and tested > 0
    conn.close()
    grown_conn.close()


def test_a_test_files_calls_count_as_mentions_for_related_tests(
    indexer: Indexer, project: Path
) -> None:
    indexer.sweep()
    login, helper = "node:src/auth.py:login", "node:src/auth.py:helper"
    assert _symbol(indexer, login)["related_tests"] == ["node:tests/test_auth.py:test_login"]
    assert _symbol(indexer, helper)["related_tests"] == []
    mention_rows = rows(indexer.conn, "SELECT name FROM refs WHERE kind='mention'")
    assert ("login",) not in mention_rows  # the test only calls it: its call row says so
    write(
        project,
        "tests/test_auth.py",
        "from src.auth import helper, login\n\n\n"
        "def test_login():\n    assert helper('a') == 'a'\n\n\n"
        "def test_table():\n    assert callable(login)\n",
    )
    indexer.update(["tests/test_auth.py"])
    assert _symbol(indexer, login)["related_tests"] == ["node:tests/test_auth.py:test_table"]
    assert _symbol(indexer, helper)["related_tests"] == ["node:tests/test_auth.py:test_login"]
    (project / "tests/test_auth.py").unlink()
    indexer.update(["tests/test_auth.py"])
    assert _symbol(indexer, login)["related_tests"] == []
    assert _symbol(indexer, helper)["related_tests"] == []
