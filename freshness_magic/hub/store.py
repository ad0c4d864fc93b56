"""The hub's SQLite store: one writer (the hub process), any number of read-only readers.

The database lives at ``<workdir>/.freshness/hub.sqlite`` in WAL mode, so readers never block the
writer and always see the last committed state. The hub applies every update (one watcher batch,
one sweep) in a single ``BEGIN IMMEDIATE`` transaction: a process killed at any instant leaves the
previous consistent state, never a file row without its symbols or a change without its rows.

Tables:

* ``files``: one row per indexed file (stat key, xxh3_128 hash, size, language, module imports,
  last syntax error).
* ``symbols``: one row per Python function/class/method, keyed ``node:{path}:{qualname}``.
* ``refs``: one row per (name, kind, file): the qualnames of the file's symbols that call the name
  (all Python files) or mention it without calling it (test files only; the rules count a test
  file's calls as mentions), ``""`` for module-level code; the input of the callers and
  related-tests rules. One row per name and file, not per symbol: a cold index of the standard
  library writes ~118k rows instead of ~500k.
* ``changes``: the change log, one row per change with a growing ``seq``.
* ``meta``: ``last_seq``, ``caught_up``, ``last_sweep``, ``pid``, ``schema``, ``indexed``.

The store is a cache of the tree: a store written by another :data:`SCHEMA_VERSION` has its
``files``, ``symbols`` and ``refs`` dropped and is rebuilt by the next sweep (the change log and
its sequence numbers are kept, so clients' ``since_seq`` stays meaningful).
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from freshness_magic.atomicio import ensure_ignored_dir
from freshness_magic.errors import HubError
from freshness_magic.freshness.hashing import StatKey
from freshness_magic.hub.lock import state_dir

INITIAL_INDEX = "initial index"
"""The ``detail`` of the ``file_added`` changes a first sweep of the tree records."""

SCHEMA_VERSION = "5"
"""2: symbol hashes over type-coded tokens; refs grouped per file; symbols indexed by line.
3: ``refs`` is a rowid table with two indexes (a bulk load appends and indexes afterwards).
4: a test file's ``mention`` rows leave out the qualnames its ``call`` rows of the name hold.
5: a symbol's ``callers`` and ``related_tests`` are node-id lists (:func:`encode_node_ids`)."""
DB_NAME = "hub.sqlite"
BUSY_TIMEOUT_MS = 5000
PAGE_BYTES = 16384

_SCHEMA = """
CREATE TABLE IF NOT EXISTS files (
    path TEXT PRIMARY KEY,
    dev INTEGER NOT NULL, ino INTEGER NOT NULL, mode INTEGER NOT NULL,
    size INTEGER NOT NULL, mtime_ns INTEGER NOT NULL, ctime_ns INTEGER NOT NULL,
    hash TEXT NOT NULL,
    language TEXT NOT NULL,
    indexed_at REAL NOT NULL,
    imports TEXT NOT NULL DEFAULT '[]',
    syntax_line INTEGER, syntax_col INTEGER, syntax_msg TEXT
);
CREATE TABLE IF NOT EXISTS symbols (
    node_id TEXT PRIMARY KEY,
    path TEXT NOT NULL,
    qualname TEXT NOT NULL,
    name TEXT NOT NULL,
    kind TEXT NOT NULL,
    signature TEXT NOT NULL,
    sig_hash TEXT NOT NULL,
    body_hash TEXT NOT NULL,
    ast_hash TEXT NOT NULL,
    doc_hash TEXT NOT NULL,
    line_start INTEGER NOT NULL,
    line_end INTEGER NOT NULL,
    complexity INTEGER NOT NULL,
    related_tests TEXT NOT NULL DEFAULT '',
    callers TEXT NOT NULL DEFAULT '',
    docstring_outdated INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS refs (
    name TEXT NOT NULL,
    kind TEXT NOT NULL,
    path TEXT NOT NULL,
    nodes TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS changes (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    time REAL NOT NULL,
    path TEXT NOT NULL,
    symbol TEXT,
    kind TEXT NOT NULL,
    detail TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS changes_path ON changes(path, seq);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""

_INDEXES = {
    "symbols_path_line": "symbols(path, line_start)",
    "symbols_name": "symbols(name)",
    "refs_name": "refs(name, kind)",
    "refs_path": "refs(path)",
}
"""The secondary indexes of the cache tables; a bulk load drops them and builds them after."""


def db_path(workdir: str | Path) -> Path:
    return state_dir(workdir) / DB_NAME


@dataclass(frozen=True, slots=True)
class FileRow:
    """A ``files`` row as the indexer and the client use it."""

    path: str
    stat: StatKey
    hash: str
    language: str
    indexed_at: float
    imports: str
    syntax_line: int | None
    syntax_col: int | None
    syntax_msg: str | None

    @classmethod
    def from_row(cls, row: Any) -> FileRow:
        (
            path,
            dev,
            ino,
            mode,
            size,
            mtime,
            ctime,
            digest,
            language,
            indexed_at,
            imports,
            s_line,
            s_col,
            s_msg,
        ) = tuple(row)
        return cls(
            str(path),
            StatKey(int(dev), int(ino), int(mode), int(size), int(mtime), int(ctime)),
            str(digest),
            str(language),
            float(indexed_at),
            str(imports),
            None if s_line is None else int(s_line),
            None if s_col is None else int(s_col),
            None if s_msg is None else str(s_msg),
        )


FILE_COLUMNS = (
    "path, dev, ino, mode, size, mtime_ns, ctime_ns, hash, language, indexed_at, imports, "
    "syntax_line, syntax_col, syntax_msg"
)
FILE_IMPORTS = FILE_COLUMNS.split(", ").index("imports")
"""Where ``imports`` is in a ``files`` row."""


_CACHE_TABLES = ("files", "symbols", "refs")


def connect_writer(workdir: str | Path) -> sqlite3.Connection:
    """Open (creating if needed) the store for the one writer; WAL, busy timeout, schema.

    The state folder gets its ``.gitignore`` even when the hub is the only user of it.
    """
    path = db_path(workdir)
    ensure_ignored_dir(path.parent)
    try:
        conn = sqlite3.connect(path, isolation_level=None, timeout=BUSY_TIMEOUT_MS / 1000)
        conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        # Only a new store takes it (before WAL): 16 KiB pages made a cold index's inserts and
        # commit a quarter cheaper than 4 KiB ones (bench_hub.py); an old store keeps its size.
        conn.execute(f"PRAGMA page_size={PAGE_BYTES}")
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("PRAGMA cache_size=-32768")
        _drop_other_version(conn)
        conn.executescript(_SCHEMA)
        _create_indexes(conn)
        conn.execute(
            "INSERT OR IGNORE INTO meta(key, value) VALUES ('schema', ?), ('last_seq', '0'), "
            "('caught_up', '0'), ('last_sweep', '0')",
            (SCHEMA_VERSION,),
        )
    except sqlite3.DatabaseError as exc:
        raise HubError(
            f"{path}: the hub store cannot be opened ({exc}); stop the hub, delete this file "
            "and start it again to rebuild the index"
        ) from exc
    return conn


def _drop_other_version(conn: sqlite3.Connection) -> None:
    """Drop the cache tables of a store written by another schema version (see module doc)."""
    has_meta = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type='table' AND name='meta'"
    ).fetchone()
    if not has_meta:
        return
    row = conn.execute("SELECT value FROM meta WHERE key='schema'").fetchone()
    if row is not None and row[0] == SCHEMA_VERSION:
        return
    with write_transaction(conn):
        for table in _CACHE_TABLES:
            conn.execute(f"DROP TABLE IF EXISTS {table}")
        conn.execute("DELETE FROM meta WHERE key IN ('indexed', 'caught_up')")
        set_meta(conn, "schema", SCHEMA_VERSION)


def _create_indexes(conn: sqlite3.Connection) -> None:
    for name, target in _INDEXES.items():
        conn.execute(f"CREATE INDEX IF NOT EXISTS {name} ON {target}")


def connect_reader(workdir: str | Path) -> sqlite3.Connection:
    """Open the store read-only; raises :class:`HubError` when there is no store yet."""
    path = db_path(workdir)
    if not path.exists():
        raise HubError(f"no hub store at {path}")
    try:
        conn = sqlite3.connect(
            f"file:{path}?mode=ro",
            uri=True,
            isolation_level=None,
            timeout=BUSY_TIMEOUT_MS / 1000,
            check_same_thread=False,
        )
        conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        conn.execute("PRAGMA query_only=1")
    except sqlite3.DatabaseError as exc:
        raise HubError(f"{path}: the hub store cannot be read ({exc})") from exc
    return conn


@contextmanager
def write_transaction(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """``BEGIN IMMEDIATE`` ... ``COMMIT``; any exception rolls the whole update back."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


@contextmanager
def read_snapshot(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """A read transaction: every query inside sees the same committed state."""
    conn.execute("BEGIN")
    try:
        yield conn
    finally:
        conn.execute("COMMIT")


def get_meta(conn: sqlite3.Connection, key: str, default: str = "") -> str:
    row = conn.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
    return default if row is None else str(row[0])


def set_meta(conn: sqlite3.Connection, key: str, value: str) -> None:
    conn.execute(
        "INSERT INTO meta(key, value) VALUES (?, ?) "
        "ON CONFLICT(key) DO UPDATE SET value=excluded.value",
        (key, value),
    )


_SYMBOL_VALUES = (
    "kind, signature, sig_hash, body_hash, ast_hash, doc_hash, line_start, line_end, complexity"
)


@dataclass(slots=True)
class WriteBatch:
    """The rows of one update, written with one ``executemany`` per statement kind.

    The indexer reads what it needs first and queues every write here; :meth:`flush` then runs
    all deletes before all inserts (each path's rows are deleted or replaced as a whole, so the
    order between paths does not matter), and appends the change log in the order it was
    queued. A cold index of the standard library is ~60k symbol rows and ~150k refs rows: one
    statement per row cost seconds, one prepared statement per kind costs a fraction.

    ``new_symbols`` rows end with the symbol's ``callers`` and ``related_tests``
    (:func:`encode_node_ids`): a first index fills them before writing
    (:func:`freshness_magic.hub.rules.link_new`), an update writes them empty and lets the
    rules update the rows.
    """

    delete_paths: list[tuple[str]] = field(default_factory=list)
    delete_symbols: list[tuple[str]] = field(default_factory=list)
    delete_refs: list[tuple[str]] = field(default_factory=list)
    files: list[tuple[Any, ...]] = field(default_factory=list)
    stats: list[tuple[Any, ...]] = field(default_factory=list)
    new_symbols: list[tuple[Any, ...]] = field(default_factory=list)
    changed_symbols: list[tuple[Any, ...]] = field(default_factory=list)
    refs: list[tuple[str, str, str, str]] = field(default_factory=list)
    changes: list[tuple[float, str, str | None, str, str]] = field(default_factory=list)

    def log(self, path: str, kind: str, symbol: str | None = None, detail: str = "") -> None:
        self.changes.append((time.time(), path, symbol, kind, detail))

    def flush(self, conn: sqlite3.Connection, *, bulk: bool = False) -> int:
        """Write everything queued (inside the caller's transaction); returns change rows.

        ``bulk``: a first index into empty tables. The secondary indexes are dropped and built
        again after the inserts: one sort per index instead of a B-tree insert per row.
        """
        if bulk:
            for name in _INDEXES:
                conn.execute(f"DROP INDEX IF EXISTS {name}")
        run = conn.executemany
        run("DELETE FROM symbols WHERE node_id=?", self.delete_symbols)
        run("DELETE FROM symbols WHERE path=?", self.delete_paths)
        run("DELETE FROM refs WHERE path=?", self.delete_paths + self.delete_refs)
        run("DELETE FROM files WHERE path=?", self.delete_paths)
        run(f"INSERT OR REPLACE INTO files({FILE_COLUMNS}) VALUES ({_marks(14)})", self.files)
        run(
            "UPDATE files SET dev=?, ino=?, mode=?, size=?, mtime_ns=?, ctime_ns=?, "
            "indexed_at=? WHERE path=?",
            self.stats,
        )
        run(
            f"INSERT OR REPLACE INTO symbols(node_id, path, qualname, name, {_SYMBOL_VALUES}, "
            f"callers, related_tests) VALUES ({_marks(15)})",
            self.new_symbols,
        )
        run(
            "UPDATE symbols SET kind=?, signature=?, sig_hash=?, body_hash=?, ast_hash=?, "
            "doc_hash=?, line_start=?, line_end=?, complexity=? WHERE node_id=?",
            self.changed_symbols,
        )
        run("INSERT INTO refs(name, kind, path, nodes) VALUES (?, ?, ?, ?)", self.refs)
        if bulk:
            _create_indexes(conn)
        if self.changes:
            run(
                "INSERT INTO changes(time, path, symbol, kind, detail) VALUES (?, ?, ?, ?, ?)",
                self.changes,
            )
            last = conn.execute("SELECT max(seq) FROM changes").fetchone()[0]
            set_meta(conn, "last_seq", str(last))
        return len(self.changes)


NO_NODES = ""
"""A stored empty node-id list (most symbols' callers and related tests)."""


def encode_node_ids(node_ids: list[str]) -> str:
    """A node-id list as the ``symbols`` table stores it: the ids one per line.

    A path with a line break in it (legal, if rare) makes the list a JSON array instead; node
    ids start with ``node:``, so a stored ``[`` can only open one. Queries decode thousands of
    these per call (:func:`decode_node_ids`), and splitting lines costs a fraction of JSON.
    """
    if not node_ids:
        return NO_NODES
    text = "\n".join(node_ids)
    return text if text.count("\n") < len(node_ids) else json.dumps(node_ids)


def decode_node_ids(stored: str) -> tuple[str, ...]:
    """The node ids :func:`encode_node_ids` stored."""
    if not stored:
        return ()
    if stored[0] == "[":
        return tuple(json.loads(stored))
    return tuple(stored.split("\n"))


def _marks(count: int) -> str:
    return ", ".join("?" * count)
