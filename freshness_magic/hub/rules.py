"""The hub's deterministic if-this-then-that rules, applied inside the indexer's transaction.

* Always (in :mod:`freshness_magic.hub.indexer`): extract signatures and imports of every Python
  file; non-Python files get file-level state only.
* A signature changed -> recompute the symbol's callers, and set ``docstring_outdated`` when its
  docstring did not change in the same update (a later docstring change clears the flag).
* A function (or class, method) is new -> find its tests and its callers.
* The set of calls in a file changed (or its imports did) -> recompute the callers of every symbol
  with one of those names; the same for test files' mentions and related tests.

Name resolution is by bare name, so it is a deliberate over-approximation: a symbol ``f`` in
``pkg/mod.py`` is called by every symbol that calls ``f(...)`` or ``x.f(...)`` in the same file, or
in a file that imports ``pkg.mod`` (or any dotted tail of it, e.g. ``mod``, since the hub does not
know the import roots). Dynamic calls (``getattr``, aliases ``g = f``) are not seen. A test file
is ``test_*.py`` / ``*_test.py``; it is related to ``f`` when it imports the module and calls or
mentions ``f`` anywhere. Lists are capped at :data:`MAX_LIST` entries (sorted: a stable cap).
"""

from __future__ import annotations

import json
import sqlite3
from collections import defaultdict
from collections.abc import Iterable, KeysView, Set
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any

from freshness_magic.hub.store import FILE_IMPORTS, encode_node_ids
from freshness_magic.hub.symbols import ModuleInfo, Symbol, is_test_file, module_suffixes

MAX_LIST = 100


@dataclass(slots=True)
class Affected:
    """What one update changed, i.e. the triggers of the rules."""

    added: set[str] = field(default_factory=set)
    signature_changed: set[str] = field(default_factory=set)
    docstring_changed: set[str] = field(default_factory=set)
    call_names: set[str] = field(default_factory=set)
    mention_names: set[str] = field(default_factory=set)
    everything: bool = False


class _Resolver:
    """Cached views of ``files.imports`` and ``refs`` for one rules pass.

    With ``preload`` (a full re-index) everything is read once and an importers index (module
    name -> files importing it) answers visibility; otherwise rows are fetched per name.
    """

    def __init__(self, conn: sqlite3.Connection | None, preload: bool) -> None:
        self.conn = conn
        self._preloaded = preload
        self._importers: dict[str, set[str]] = defaultdict(set)
        self._sites: dict[tuple[str, str], dict[str, str]] = {}
        self._visible: dict[str, frozenset[str]] = {}
        self._imports: dict[str, frozenset[str]] = {}
        self._nodes: dict[tuple[str, str], list[str]] = {}
        if preload and conn is not None:
            self._load(
                conn.execute("SELECT path, imports FROM files"),
                conn.execute(
                    "SELECT name, kind, path, nodes FROM refs "
                    "WHERE name IN (SELECT name FROM symbols)"
                ),
            )

    @classmethod
    def of_rows(
        cls,
        imports: Iterable[tuple[str, str]],
        refs: Iterable[tuple[str, str, str, str]],
        names: Set[str],
    ) -> _Resolver:
        """A preloaded resolver over rows not written yet: (path, imports), refs rows.

        Only the refs of ``names`` (the names symbols have) are kept, as a preload keeps them.
        """
        resolver = cls(None, preload=True)
        resolver._load(imports, (row for row in refs if row[0] in names))
        return resolver

    def _load(
        self, imports: Iterable[tuple[str, str]], refs: Iterable[tuple[str, str, str, str]]
    ) -> None:
        for path, imported_json in imports:
            if imported_json != "[]":
                for imported in json.loads(imported_json):
                    self._importers[imported].add(path)
        self._sites = _grouped(refs)

    def named(self) -> set[str]:
        """The names some loaded refs row calls or mentions (of a preloaded resolver)."""
        return {name for name, _ in self._sites}

    def sites(self, name: str, kind: str) -> dict[str, str]:
        """Tree paths -> packed qualnames (:func:`join_nodes`) that call or mention ``name``.

        A test file's calls are mentions too (its ``mention`` rows hold only the rest).
        """
        key = (name, kind)
        found = self._sites.get(key)
        if found is None:
            found = {}
            if not self._preloaded and self.conn is not None:
                rows = self.conn.execute(
                    "SELECT name, kind, path, nodes FROM refs WHERE name=?", (name,)
                )
                fetched = _grouped(rows)
                for other in ("call", "mention"):
                    self._sites[(name, other)] = fetched.get((name, other), {})
                found = self._sites[key]
            else:
                self._sites[key] = found
        return found

    def node_ids(self, path: str, nodes: str) -> list[str]:
        """:func:`node_ids`, once per refs row in a rules pass (a row serves many symbols)."""
        key = (path, nodes)
        found = self._nodes.get(key)
        if found is None:
            found = self._nodes[key] = node_ids(path, nodes)
        return found

    def importers(self, def_path: str, among: KeysView[str]) -> Set[str]:
        """Those of the paths ``among`` that import the module at ``def_path``.

        A file imports it when it imports any dotted tail of its module name.
        """
        if self._preloaded:
            found = self._visible.get(def_path)
            if found is None:
                collected: set[str] = set()
                for suffix in module_suffixes(def_path):
                    collected |= self._importers.get(suffix, set())
                found = self._visible[def_path] = frozenset(collected)
            return among & found  # iterates the smaller of the two
        suffixes = module_suffixes(def_path)
        return frozenset(path for path in among if not self._imports_of(path).isdisjoint(suffixes))

    def _imports_of(self, path: str) -> frozenset[str]:
        found = self._imports.get(path)
        if found is None:
            assert self.conn is not None  # a resolver without a connection is preloaded
            row = self.conn.execute("SELECT imports FROM files WHERE path=?", (path,)).fetchone()
            found = self._imports[path] = frozenset(json.loads(row[0])) if row else frozenset()
        return found


def join_nodes(qualnames: Iterable[str]) -> str:
    """How ``refs.nodes`` packs the qualnames of one file ("" is the module's own code)."""
    return "\n".join(sorted(set(qualnames)))


def ref_rows(path: str, info: ModuleInfo, *, mentions: bool) -> list[tuple[str, str, str, str]]:
    """The ``refs`` rows of the Python file at ``path``: (name, kind, path, packed qualnames).

    A row per name the file calls, and with ``mentions`` (test files) per name some of its code
    mentions without calling: the rules count a test file's calls as mentions too
    (:meth:`_Resolver.sites`), so they are not stored twice.
    """
    rows: list[tuple[str, str, str, str]] = []
    kinds = (
        ("call", info.module_calls, attrgetter("calls")),
        ("mention", info.module_mentions - info.module_calls, _mentioned_only),
    )
    for kind, module_names, names_of in kinds if mentions else kinds[:1]:
        sites: defaultdict[str, list[str]] = defaultdict(list)
        for name in module_names:
            sites[name].append("")
        for symbol in info.symbols:
            qualname = symbol.qualname
            for name in names_of(symbol):
                sites[name].append(qualname)
        for name, found in sites.items():
            rows.append((name, kind, path, found[0] if len(found) == 1 else join_nodes(found)))
    return rows


def _grouped(refs: Iterable[tuple[str, str, str, str]]) -> dict[tuple[str, str], dict[str, str]]:
    """refs rows as (name, kind) -> {path: packed qualnames}; a test file's calls also count
    as its mentions (merged into its ``mention`` row of the name, see :func:`ref_rows`)."""
    grouped: dict[tuple[str, str], dict[str, str]] = defaultdict(dict)
    for name, kind, path, nodes in refs:
        sites = grouped[(name, kind)]
        known = sites.get(path)
        sites[path] = nodes if known is None else _merged(known, nodes)
        if kind == "call" and is_test_file(path):
            mentioned = grouped[(name, "mention")]
            known = mentioned.get(path)
            mentioned[path] = nodes if known is None else _merged(known, nodes)
    return dict(grouped)


def _mentioned_only(symbol: Symbol) -> frozenset[str]:
    return symbol.mentions - symbol.calls


def _merged(first: str, second: str) -> str:
    """Two packed qualname lists of one file as one."""
    return join_nodes((*first.split("\n"), *second.split("\n")))


def node_ids(path: str, nodes: str) -> list[str]:
    """The node ids of a ``refs.nodes`` value of ``path``."""
    return [f"node:{path}:{q}" if q else f"node:{path}" for q in nodes.split("\n")]


def callers_of(resolver: _Resolver, node_id: str, path: str, name: str) -> list[str]:
    sites = resolver.sites(name, "call")
    if not sites:
        return []
    found: set[str] = set()
    for site_path in resolver.importers(path, sites.keys()):
        found.update(resolver.node_ids(site_path, sites[site_path]))
    if path in sites:
        found.update(resolver.node_ids(path, sites[path]))
    found.discard(node_id)
    return sorted(found)[:MAX_LIST]


def tests_of(resolver: _Resolver, path: str, name: str) -> list[str]:
    sites = resolver.sites(name, "mention")
    if not sites:
        return []
    found: set[str] = set()
    for site_path in resolver.importers(path, sites.keys()):
        if site_path != path:
            found.update(resolver.node_ids(site_path, sites[site_path]))
    return sorted(found)[:MAX_LIST]


def link_new(
    symbols: list[tuple[Any, ...]],
    files: Iterable[tuple[Any, ...]],
    refs: list[tuple[str, str, str, str]],
) -> list[tuple[Any, ...]]:
    """The ``new_symbols`` rows of a first index with their callers and related tests filled.

    ``symbols`` rows end with the two lists empty, as the indexer queues them.

    The same lists :func:`apply_rules` computes with ``everything`` set, taken from the rows
    before they are written: a first index writes each symbol row once instead of reading
    every row back and updating it.
    """
    resolver = _Resolver.of_rows(
        ((row[0], row[FILE_IMPORTS]) for row in files), refs, {row[3] for row in symbols}
    )
    named = resolver.named()
    linked = []
    for row in symbols:
        node_id, path, _, name = row[:4]
        if name not in named:  # nothing calls or mentions the name: the lists stay empty
            linked.append(row)
            continue
        callers = encode_node_ids(callers_of(resolver, node_id, path, name))
        linked.append((*row[:-2], callers, encode_node_ids(tests_of(resolver, path, name))))
    return linked


def apply_rules(conn: sqlite3.Connection, affected: Affected) -> None:
    """Run every rule whose trigger is in ``affected`` (inside the caller's transaction).

    Only rows whose lists actually change are written.
    """
    for node_id in affected.signature_changed:
        outdated = 0 if node_id in affected.docstring_changed else 1
        conn.execute("UPDATE symbols SET docstring_outdated=? WHERE node_id=?", (outdated, node_id))
    for node_id in affected.docstring_changed - affected.signature_changed:
        conn.execute("UPDATE symbols SET docstring_outdated=0 WHERE node_id=?", (node_id,))

    resolver = _Resolver(conn, preload=affected.everything)
    if affected.everything:
        rows = conn.execute(f"SELECT {_ROW} FROM symbols").fetchall()
        caller_rows = test_rows = rows
    else:
        caller_rows = _select(
            conn, affected.added | affected.signature_changed, affected.call_names
        )
        test_rows = _select(conn, affected.added, affected.mention_names)
    updates = []
    for node_id, path, name, callers, _tests in caller_rows:
        value = encode_node_ids(callers_of(resolver, node_id, path, name))
        if value != callers:
            updates.append((value, node_id))
    conn.executemany("UPDATE symbols SET callers=? WHERE node_id=?", updates)
    updates = []
    for node_id, path, name, _callers, tests in test_rows:
        value = encode_node_ids(tests_of(resolver, path, name))
        if value != tests:
            updates.append((value, node_id))
    conn.executemany("UPDATE symbols SET related_tests=? WHERE node_id=?", updates)


_ROW = "node_id, path, name, callers, related_tests"


def _select(
    conn: sqlite3.Connection, node_ids: set[str], names: set[str]
) -> list[tuple[str, str, str, str, str]]:
    rows: dict[str, tuple[str, str, str, str, str]] = {}
    for node_id in node_ids:
        for row in conn.execute(f"SELECT {_ROW} FROM symbols WHERE node_id=?", (node_id,)):
            rows[row[0]] = row
    for name in names:
        for row in conn.execute(f"SELECT {_ROW} FROM symbols WHERE name=?", (name,)):
            rows[row[0]] = row
    return list(rows.values())
