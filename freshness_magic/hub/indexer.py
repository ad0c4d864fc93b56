"""The hub's indexer: turn files on disk into store rows, change-log entries and rule triggers.

Reading, hashing and parsing happen outside the write transaction; each update (one sweep, one
watcher batch) is then applied in a single transaction. The sweep is the truth: it compares every
file's stat key with the store (re-hashing files whose stored mtime is inside the racy window of
their indexing time) and reconciles added, removed and modified files. Watcher batches are hints:
the paths they name are always re-hashed, folders are re-walked, and a vanished folder removes
every stored file below it.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from freshness_magic.freshness.hashing import RACY_WINDOW_NS, StatKey, read_hashed
from freshness_magic.hub import rules
from freshness_magic.hub.ignore import IgnoreRules
from freshness_magic.hub.store import (
    FILE_COLUMNS,
    INITIAL_INDEX,
    NO_NODES,
    FileRow,
    WriteBatch,
    get_meta,
    set_meta,
    write_transaction,
)
from freshness_magic.hub.symbols import (
    ModuleInfo,
    Symbol,
    SyntaxProblem,
    is_test_file,
    module_name,
    parse_python,
)
from freshness_magic.pathsafety import WorkTree

LANGUAGES = {
    ".py": "python",
    ".pyi": "python",
    ".md": "markdown",
    ".rst": "rst",
    ".txt": "text",
    ".json": "json",
    ".toml": "toml",
    ".yaml": "yaml",
    ".yml": "yaml",
    ".cfg": "ini",
    ".ini": "ini",
    ".dot": "dot",
    ".gv": "dot",
    ".ipynb": "notebook",
    ".js": "javascript",
    ".ts": "typescript",
    ".html": "html",
    ".css": "css",
    ".sh": "shell",
    ".c": "c",
    ".h": "c",
    ".rs": "rust",
    ".go": "go",
    ".sql": "sql",
}


MAX_PARSE_BYTES = 4 << 20
"""Python files larger than this (generated code, data) get file-level state only."""


def _storable(rel: str) -> bool:
    """Whether a path can be stored as text (names that are not valid UTF-8 are skipped)."""
    try:
        rel.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def language_of(path: str) -> str:
    """The language name the store records, from the file extension (``other`` if unknown)."""
    return LANGUAGES.get(os.path.splitext(path)[1].lower(), "other")


@dataclass(slots=True)
class Scan:
    """One file as read from disk; ``stat is None`` means it is gone (or unreadable)."""

    rel: str
    stat: StatKey | None
    digest: str = ""
    parsed: ModuleInfo | SyntaxProblem | None = None


def _affect(affected: rules.Affected, name: str, kind: str, test: bool) -> None:
    """A refs row of ``name`` changed: its callers, and its tests when the file is a test file
    (whose calls count as mentions) or the row is a mention, may change."""
    if kind == "call":
        affected.call_names.add(name)
    if kind == "mention" or test:
        affected.mention_names.add(name)


def racy(row: FileRow) -> bool:
    return int(row.indexed_at * 1e9) - row.stat.mtime_ns < RACY_WINDOW_NS


class Indexer:
    """Applies sweeps and path updates of the tree at ``root`` to the store on ``conn``."""

    def __init__(self, root: Path, conn: sqlite3.Connection, ignore: IgnoreRules) -> None:
        self.root = root
        self.conn = conn
        self.ignore = ignore
        self.tree = WorkTree(root)
        """Decides which links may be read: none whose real path is outside the tree."""

    # -- reading the tree ---------------------------------------------------------------------

    def walk(self, start: str = "") -> dict[str, os.stat_result]:
        """Every indexable file below ``start`` (tree-relative) with its ``stat``."""
        found: dict[str, os.stat_result] = {}
        stack = [start]
        while stack:
            folder = stack.pop()
            try:
                entries = list(os.scandir(self.root / folder if folder else self.root))
            except OSError:
                continue
            for entry in entries:
                rel = f"{folder}/{entry.name}" if folder else entry.name
                if not _storable(rel):
                    continue
                try:
                    if entry.is_dir(follow_symlinks=False):
                        if not self.ignore.skip_dir(rel):
                            stack.append(rel)
                    elif entry.is_file() and not self.ignore.skip_file(rel):
                        if entry.is_symlink() and self.tree.escapes(entry.path):
                            continue
                        found[rel] = entry.stat()
                except OSError:
                    continue
        return found

    def scan(self, rel: str) -> Scan:
        """Hash (and for Python, parse) one file; the parse is of the exact hashed bytes."""
        path = self.root / rel
        python = language_of(rel) == "python"
        try:
            data, digest, stat = read_hashed(path, MAX_PARSE_BYTES if python else -1)
        except OSError:
            return Scan(rel, None)
        if data is None:
            return Scan(rel, stat, digest)
        parsed = parse_python(
            data,
            module=module_name(rel),
            is_package=rel.endswith("__init__.py"),
            mentions=is_test_file(rel),
        )
        return Scan(rel, stat, digest, parsed)

    # -- public entry points ------------------------------------------------------------------

    def sweep(self) -> int:
        """Reconcile the whole tree with the store; returns the number of change-log rows."""
        self.ignore.reset()
        on_disk = self.walk()
        stored = self._stored()
        todo = []
        for rel, st in on_disk.items():
            row = stored.get(rel)
            if row is None or row.stat != StatKey.of(st) or racy(row):
                todo.append(rel)
        removed = [rel for rel in stored if rel not in on_disk]
        cold = get_meta(self.conn, "indexed") != "1"
        return self._apply(todo, removed, cold=cold, stored=stored)

    def update(self, rels: Iterable[str]) -> int:
        """Re-check the given tree-relative paths (files or folders, present or gone)."""
        files: set[str] = set()
        removed: set[str] = set()
        stored_paths: list[str] | None = None
        for rel in rels:
            if not _storable(rel):
                continue
            full = self.root / rel
            present = full.exists() and not self.tree.escapes(os.fspath(full))
            if present and full.is_dir() and not full.is_symlink():
                if not self.ignore.skip_path(rel, is_dir=True):
                    files.update(self.walk(rel))
            elif present:
                if not self.ignore.skip_path(rel):
                    files.add(rel)
                elif self._has(rel):
                    removed.add(rel)
            if not present or full.is_dir():
                if stored_paths is None:
                    stored_paths = list(self._stored())
                prefix = rel + "/"
                removed.update(
                    p for p in stored_paths if (p == rel or p.startswith(prefix)) and p not in files
                )
        return self._apply(sorted(files), sorted(removed))

    # -- applying -----------------------------------------------------------------------------

    def _apply(
        self,
        todo: list[str],
        removed: list[str],
        *,
        cold: bool = False,
        stored: dict[str, FileRow] | None = None,
    ) -> int:
        """Scan ``todo``, queue and write one update (a sweep when ``stored`` is given)."""
        batch, affected = self._queue(map(self.scan, todo), removed, cold=cold, stored=stored)
        with write_transaction(self.conn):
            count = self._write(batch, affected, bulk=cold and not stored)
            if stored is not None:
                set_meta(self.conn, "indexed", "1")
                set_meta(self.conn, "last_sweep", repr(time.time()))
        return count

    def _stored(self) -> dict[str, FileRow]:
        return {
            row[0]: FileRow.from_row(row)
            for row in self.conn.execute(f"SELECT {FILE_COLUMNS} FROM files")
        }

    def _has(self, rel: str) -> bool:
        return self.conn.execute("SELECT 1 FROM files WHERE path=?", (rel,)).fetchone() is not None

    def _queue(
        self,
        scans: Iterable[Scan],
        removed: Iterable[str],
        *,
        cold: bool = False,
        stored: dict[str, FileRow] | None = None,
    ) -> tuple[WriteBatch, rules.Affected]:
        """Queue every write of one update and collect what the rules must look at.

        ``scans`` is consumed one file at a time (files are scanned as they are queued, so no
        parse result outlives its file). Only reads happen here, outside the write transaction:
        the hub is the store's one writer. ``stored`` is the ``files`` table as the caller
        already read it (a sweep does), so each scan does not look its old row up again.
        """
        affected = rules.Affected(everything=cold)
        batch = WriteBatch()
        for rel in removed:
            self._remove(rel, affected, batch)
        now = time.time()  # before the files are read: their racy window is judged safely
        for scan in scans:
            if stored is not None:
                old = stored.get(scan.rel)
            else:
                row = self.conn.execute(
                    f"SELECT {FILE_COLUMNS} FROM files WHERE path=?", (scan.rel,)
                ).fetchone()
                old = FileRow.from_row(row) if row else None
            if scan.stat is None:
                if old is not None:
                    self._remove(scan.rel, affected, batch)
                continue
            if old is not None and old.hash == scan.digest:
                batch.stats.append((*scan.stat, now, scan.rel))
                continue
            self._store_file(scan, old, now, affected, batch, cold=cold)
        return batch, affected

    def _write(self, batch: WriteBatch, affected: rules.Affected, *, bulk: bool) -> int:
        """Flush ``batch`` and run the rules (inside the write transaction); returns changes.

        ``bulk``: a first index into an empty store. The rules' lists are computed from the
        queued rows and written with them, instead of reading every row back to update it.
        """
        if bulk:
            batch.new_symbols = rules.link_new(batch.new_symbols, batch.files, batch.refs)
            return batch.flush(self.conn, bulk=True)
        count = batch.flush(self.conn)
        rules.apply_rules(self.conn, affected)
        return count

    def _store_file(
        self,
        scan: Scan,
        old: FileRow | None,
        now: float,
        affected: rules.Affected,
        batch: WriteBatch,
        *,
        cold: bool,
    ) -> None:
        rel = scan.rel
        assert scan.stat is not None
        parsed = scan.parsed
        detail = ""
        imports = old.imports if old is not None else "[]"
        syntax: tuple[int | None, int | None, str | None] = (None, None, None)
        if isinstance(parsed, SyntaxProblem):
            syntax = (parsed.line, parsed.column, parsed.message)
            detail = f"syntax error at line {parsed.line}, column {parsed.column}: {parsed.message}"
        elif isinstance(parsed, ModuleInfo):
            imports = json.dumps(list(parsed.imports))
        batch.files.append((rel, *scan.stat, scan.digest, language_of(rel), now, imports, *syntax))
        if old is None and cold:
            detail = INITIAL_INDEX
        batch.log(rel, "file_modified" if old else "file_added", None, detail)
        if isinstance(parsed, ModuleInfo):
            if old is not None and old.imports != imports:
                self._affect_refs(rel, affected)
            self._store_symbols(rel, parsed, affected, batch, known=old is not None, cold=cold)

    def _store_symbols(
        self,
        rel: str,
        info: ModuleInfo,
        affected: rules.Affected,
        batch: WriteBatch,
        *,
        known: bool,
        cold: bool,
    ) -> None:
        """Queue the symbol rows of one file; ``known``: the store had the file before."""
        old = {}
        if known:
            old = {
                row[0]: row
                for row in self.conn.execute(
                    "SELECT qualname, node_id, sig_hash, body_hash, doc_hash FROM symbols "
                    "WHERE path=?",
                    (rel,),
                )
            }
        new: dict[str, Symbol] = {s.qualname: s for s in info.symbols}
        for qualname, row in old.items():
            if qualname not in new:
                batch.delete_symbols.append((row[1],))
                batch.log(rel, "symbol_removed", qualname)
        for qualname, sym in new.items():
            node_id = f"node:{rel}:{qualname}"
            prev = old.get(qualname)
            if prev is None:
                name = qualname.rpartition(".")[2]
                batch.new_symbols.append(
                    (node_id, rel, qualname, name, *sym.columns(), NO_NODES, NO_NODES)
                )
                if not cold:
                    affected.added.add(node_id)
                    batch.log(rel, "symbol_added", qualname, sym.signature)
                continue
            batch.changed_symbols.append((*sym.columns(), node_id))
            if prev[2] != sym.sig_hash:
                affected.signature_changed.add(node_id)
                batch.log(rel, "signature_changed", qualname, sym.signature)
            if prev[3] != sym.body_hash:
                batch.log(rel, "body_changed", qualname)
            if prev[4] != sym.doc_hash:
                affected.docstring_changed.add(node_id)
                batch.log(rel, "docstring_changed", qualname)
        self._store_refs(rel, info, affected, batch, known=known, cold=cold)

    def _store_refs(
        self,
        rel: str,
        info: ModuleInfo,
        affected: rules.Affected,
        batch: WriteBatch,
        *,
        known: bool,
        cold: bool,
    ) -> None:
        """Queue the file's refs rows; names whose callers or tests may change -> ``affected``.

        ``cold``: a first index, whose rules look at every name anyway.
        """
        test = is_test_file(rel)
        rows = rules.ref_rows(rel, info, mentions=test)
        if not known:
            if not cold:
                for name, kind, _, _ in rows:
                    _affect(affected, name, kind, test)
            batch.refs += rows
            return
        new = {(name, kind): nodes for name, kind, _, nodes in rows}
        old = {
            (str(name), str(kind)): str(nodes)
            for name, kind, nodes in self.conn.execute(
                "SELECT name, kind, nodes FROM refs WHERE path=?", (rel,)
            )
        }
        if old == new:
            return
        for key in old.keys() | new.keys():
            if old.get(key) != new.get(key):
                _affect(affected, key[0], key[1], test)
        if old:
            batch.delete_refs.append((rel,))
        batch.refs += rows

    def _affect_refs(self, rel: str, affected: rules.Affected) -> None:
        """Every name ``rel``'s refs rows call or mention -> ``affected`` (its rows will change)."""
        test = is_test_file(rel)
        for name, kind in self.conn.execute(
            "SELECT DISTINCT name, kind FROM refs WHERE path=?", (rel,)
        ).fetchall():
            _affect(affected, str(name), str(kind), test)

    def _remove(self, rel: str, affected: rules.Affected, batch: WriteBatch) -> None:
        if not self._has(rel):
            return
        self._affect_refs(rel, affected)
        for (qualname,) in self.conn.execute(
            "SELECT qualname FROM symbols WHERE path=? ORDER BY line_start", (rel,)
        ).fetchall():
            batch.log(rel, "symbol_removed", qualname)
        batch.delete_paths.append((rel,))
        batch.log(rel, "file_removed")
