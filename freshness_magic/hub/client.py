"""Reading the hub: node states, verified file hashes, change descriptions, prompt context packets.

:class:`HubClient` reads the store through a read-only SQLite connection and never opens the
source files, so answers are as fresh as the hub's last committed update. Callers that need a
guarantee check :meth:`HubClient.caught_up`; :meth:`HubClient.file_hash` additionally only answers
when the caller's own ``stat`` of the file equals what the hub indexed. When no hub runs,
:class:`HubNotRunning` says so and how to start one; callers then hash files themselves.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import NamedTuple

from freshness_magic.errors import HubError
from freshness_magic.freshness.hashing import RACY_WINDOW_NS, StatKey
from freshness_magic.hub.lock import lock_held
from freshness_magic.hub.store import (
    FILE_COLUMNS,
    INITIAL_INDEX,
    FileRow,
    connect_reader,
    db_path,
    decode_node_ids,
    get_meta,
    read_snapshot,
)


class HubNotRunning(HubError):
    """No hub process serves this working directory. ``problem`` says so; the message adds
    ``start``, the command that starts one (Python's command line unless told): each front end
    words its own (``freshness-magic hub start``, ``%pipeline hub start``) with
    :meth:`start_with`."""

    def __init__(
        self,
        workdir: str | Path,
        start: str = "python -m freshness_magic hub start",
        also: str = "",
    ) -> None:
        self.workdir = str(workdir)
        self.problem = f"no hub running for {workdir}"
        super().__init__(f"{self.problem}; start it with `{start}`{also}")

    def start_with(self, start: str, also: str = "") -> HubNotRunning:
        """The same error, saying ``start`` (the caller's own spelling) as the way to start,
        then ``also`` (another way)."""
        return HubNotRunning(self.workdir, start, also)


_CHANGE_WORDS = {
    "file_added": "added",
    "file_removed": "removed",
    "file_modified": "modified",
    "symbol_added": "added",
    "symbol_removed": "removed",
    "signature_changed": "signature changed",
    "body_changed": "body changed",
    "docstring_changed": "docstring changed",
}


class SymbolState(NamedTuple):
    """One function/class/method as the hub last indexed it.

    A named tuple: a file query makes one per symbol (hundreds for a large module), straight
    from the stored row.
    """

    node_id: str
    qualname: str
    kind: str
    signature: str
    ast_hash: str
    docstring_hash: str
    line_start: int
    line_end: int
    complexity: int
    related_tests: tuple[str, ...]
    callers: tuple[str, ...]
    """Code that calls the symbol's name, in its file or in files importing it: matched by
    name, not resolved (``d.get(k)`` counts as a call of a method ``get``)."""
    docstring_outdated: bool


@dataclass(frozen=True, slots=True)
class SyntaxErrorInfo:
    line: int
    column: int
    message: str


@dataclass(frozen=True, slots=True)
class NodeState:
    """A file (``node:{path}``) or one symbol in it (``node:{path}:{qualname}``).

    ``exists`` is false when the hub has no such file or symbol; ``symbols`` holds every symbol
    of a file target and the one symbol of a ``path:qualname`` target.
    """

    node_id: str
    path: str
    qualname: str | None
    exists: bool
    content_hash: str = ""
    size: int = 0
    language: str = ""
    indexed_at: float = 0.0
    stat: StatKey | None = None
    imports: tuple[str, ...] = ()
    syntax_error: SyntaxErrorInfo | None = None
    symbols: tuple[SymbolState, ...] = ()
    seq: int = 0

    @property
    def symbol(self) -> SymbolState | None:
        return self.symbols[0] if self.qualname and self.symbols else None

    def to_dict(self) -> dict[str, object]:
        data = asdict(self)
        data["stat"] = self.stat._asdict() if self.stat else None
        data["symbols"] = [symbol._asdict() for symbol in self.symbols]
        return data

    def render(self) -> str:
        """Plain text for ``hub query`` and the notebook."""
        if not self.exists:
            if self.qualname and self.content_hash:  # the file is indexed, the symbol is not
                return (
                    f"{self.node_id}: {self.path} has no symbol {self.qualname!r} (hub query "
                    f"{self.path} lists its symbols)"
                )
            return f"{self.node_id}: not indexed (missing, ignored, or not yet seen by the hub)"
        lines = [
            f"{self.node_id}  [{self.language}, {self.size} bytes, hash {self.content_hash[:12]}, "
            f"seq {self.seq}]"
        ]
        if self.syntax_error:
            err = self.syntax_error
            lines.append(
                f"  syntax error at line {err.line}, column {err.column}: {err.message} "
                "(symbols below are from the last version that parsed)"
            )
        if self.imports and not self.qualname:
            lines.append("  imports: " + ", ".join(self.imports))
        for sym in self.symbols:
            flags = " [docstring outdated]" if sym.docstring_outdated else ""
            lines.append(
                f"  {sym.qualname} ({sym.kind}, lines {sym.line_start}-{sym.line_end}, "
                f"complexity {sym.complexity}){flags}"
            )
            lines.append(f"    {_one_line(sym.signature)}")
            if sym.callers:
                lines.append(
                    f"    callers by name (calls of {sym.qualname.rsplit('.', 1)[-1]!r} here "
                    "or in files that import this one): "
                    + ", ".join(_short(c) for c in sym.callers)
                )
            if sym.related_tests:
                lines.append("    tests: " + ", ".join(_short(t) for t in sym.related_tests))
        return "\n".join(lines)


@dataclass(frozen=True, slots=True)
class Change:
    seq: int
    time: float
    path: str
    symbol: str | None
    kind: str
    detail: str


@dataclass(frozen=True, slots=True)
class ContextPacket:
    """The compact text a ``hub_context=true`` node gets, and the store seq it was read at."""

    text: str
    seq: int
    paths: tuple[str, ...] = field(default_factory=tuple)


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _short(node_id: str) -> str:
    return node_id[5:] if node_id.startswith("node:") else node_id


class HubClient:
    """Read-only access to the hub store of ``workdir`` (safe to share between threads)."""

    def __init__(self, workdir: str | Path = ".") -> None:
        self.root = Path(workdir).resolve()
        self._conn: sqlite3.Connection | None = None
        self._lock = threading.Lock()

    # -- liveness -------------------------------------------------------------------------

    def is_running(self) -> bool:
        """Whether a hub process holds this working directory's lock."""
        return lock_held(self.root)

    def caught_up(self) -> bool:
        """Running, and its start-up (or overflow) sweep is committed."""
        if not self.is_running():
            return False
        with self._lock:
            try:
                return get_meta(self._reader(), "caught_up") == "1"
            except (HubError, sqlite3.Error):
                return False

    def require_running(self) -> None:
        if not self.is_running():
            raise HubNotRunning(self.root)

    def _reader(self) -> sqlite3.Connection:
        if self._conn is None:
            if not db_path(self.root).exists():
                raise HubNotRunning(self.root)
            self._conn = connect_reader(self.root)
        return self._conn

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def __enter__(self) -> HubClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def _reading(self) -> Iterator[sqlite3.Connection]:
        """The reader under the client's lock; SQLite errors become :class:`HubError`."""
        with self._lock:
            try:
                yield self._reader()
            except sqlite3.Error as exc:
                raise HubError(
                    f"the hub store of {self.root} cannot be read ({exc}); if the hub is "
                    "starting, wait until `python -m freshness_magic hub start` returns"
                ) from exc

    def seq(self) -> int:
        """The store's last change-log sequence number."""
        self.require_running()
        with self._reading() as conn:
            return int(get_meta(conn, "last_seq", "0"))

    # -- node states ----------------------------------------------------------------------

    def _rel(self, path: str) -> str:
        candidate = Path(path)
        if candidate.is_absolute():
            try:
                return candidate.resolve().relative_to(self.root).as_posix()
            except ValueError as exc:
                raise self._outside(path) from exc
        rel = Path(os.path.normpath(path)).as_posix()
        if rel == ".." or rel.startswith("../"):
            raise self._outside(path)
        return rel

    def _outside(self, path: str) -> HubError:
        return HubError(
            f"{path}: outside the hub's working directory {self.root}; give a path inside it "
            "(relative to it, or absolute)"
        )

    def _split(self, target: str) -> tuple[str, str | None]:
        text = target[5:] if target.startswith("node:") else target
        path, sep, qualname = text.partition(":")
        if not sep or (len(path) == 1 and path.isalpha()):  # no qualname, or a drive letter
            return self._rel(text), None
        if not path:
            raise HubError(f"{target}: names no file; write PATH or PATH:QUALNAME")
        return self._rel(path), qualname or None

    def get_context(self, targets: Iterable[str]) -> list[NodeState]:
        """Node states for ``path`` or ``path:qualname`` targets, from one store snapshot."""
        self.require_running()
        wanted = [self._split(t) for t in targets]
        with self._reading() as conn, read_snapshot(conn):
            seq = int(get_meta(conn, "last_seq", "0"))
            return [self._state(conn, path, qualname, seq) for path, qualname in wanted]

    def _state(
        self, conn: sqlite3.Connection, path: str, qualname: str | None, seq: int
    ) -> NodeState:
        node_id = f"node:{path}" + (f":{qualname}" if qualname else "")
        row = conn.execute(f"SELECT {FILE_COLUMNS} FROM files WHERE path=?", (path,)).fetchone()
        if row is None:
            return NodeState(node_id, path, qualname, False, seq=seq)
        file = FileRow.from_row(row)
        sql = (
            "SELECT node_id, qualname, kind, signature, ast_hash, doc_hash, line_start, line_end, "
            "complexity, related_tests, callers, docstring_outdated FROM symbols "
        )
        if qualname:
            rows = conn.execute(sql + "WHERE node_id=?", (node_id,)).fetchall()
        else:
            rows = conn.execute(sql + "WHERE path=? ORDER BY line_start", (path,)).fetchall()
        make = SymbolState._make
        symbols = tuple(
            make((*r[:9], decode_node_ids(r[9]), decode_node_ids(r[10]), r[11] == 1)) for r in rows
        )
        syntax = (
            SyntaxErrorInfo(file.syntax_line, file.syntax_col or 0, file.syntax_msg or "")
            if file.syntax_line is not None
            else None
        )
        return NodeState(
            node_id,
            path,
            qualname,
            exists=bool(symbols) or not qualname,
            content_hash=file.hash,
            size=file.stat.size,
            language=file.language,
            indexed_at=file.indexed_at,
            stat=file.stat,
            imports=tuple(json.loads(file.imports)),
            syntax_error=syntax,
            symbols=symbols,
            seq=seq,
        )

    # -- freshness integration ------------------------------------------------------------

    def file_hash(self, path: str, stat_key: StatKey, *, check_running: bool = True) -> str | None:
        """The stored hash of ``path`` if the hub is caught up and indexed exactly ``stat_key``.

        Returns None (hash it yourself) when no hub runs, it is catching up, the stat keys
        differ, or the stored mtime is inside the racy window of its indexing time.
        ``check_running=False`` skips the lock probe (for callers that just made it).
        """
        if check_running and not self.is_running():
            return None
        try:
            rel = self._rel(path)
        except HubError:
            return None
        with self._lock:
            try:
                conn = self._reader()
                with read_snapshot(conn):
                    if get_meta(conn, "caught_up") != "1":
                        return None
                    row = conn.execute(
                        f"SELECT {FILE_COLUMNS} FROM files WHERE path=?", (rel,)
                    ).fetchone()
            except (sqlite3.Error, HubError):
                return None
        if row is None:
            return None
        file = FileRow.from_row(row)
        if file.stat != stat_key:
            return None
        if int(file.indexed_at * 1e9) - file.stat.mtime_ns < RACY_WINDOW_NS:
            return None
        return file.hash

    def changes_since(
        self, since_seq: int, path: str | None = None, *, since_time: float | None = None
    ) -> list[Change]:
        """Change-log rows after ``since_seq`` (and ``since_time``; one path if given), in order."""
        self.require_running()
        sql = "SELECT seq, time, path, symbol, kind, detail FROM changes WHERE seq>?"
        args: list[object] = [since_seq]
        if path is not None:
            sql += " AND path=?"
            args.append(self._rel(path))
        if since_time is not None:
            sql += " AND time>?"
            args.append(since_time)
        with self._reading() as conn:
            rows = conn.execute(sql + " ORDER BY seq", args).fetchall()
        return [Change(*row) for row in rows]

    def describe_changes(
        self, path: str, since_seq: int = 0, *, since_time: float | None = None
    ) -> str:
        """One line: ``src/auth.py: login() signature changed; helper() body changed``.

        Covers the changes after ``since_seq`` and, when given, after ``since_time`` (epoch
        seconds, e.g. when a freshness baseline was taken).
        """
        rel = self._rel(path)
        changes = self.changes_since(since_seq, rel, since_time=since_time)
        if not changes:
            since = f"seq {since_seq}" if since_time is None else "then"
            return f"{rel}: no changes recorded since {since}"
        phrases: list[str] = []
        file_phrase = ""
        first_seen = False
        for change in changes:
            if change.symbol is None:
                if change.kind == "file_added" and change.detail == INITIAL_INDEX:
                    first_seen = True
                    continue
                if change.kind != "file_modified" or not file_phrase:
                    file_phrase = _CHANGE_WORDS[change.kind]
                if change.detail.startswith("syntax error"):
                    file_phrase = f"modified ({change.detail})"
                continue
            phrase = f"{change.symbol}() {_CHANGE_WORDS[change.kind]}"
            if phrase not in phrases:
                phrases.append(phrase)
        note = " (first indexed by the hub after that point; earlier changes not seen)"
        if file_phrase in ("added", "removed"):
            return f"{rel}: {file_phrase}"
        if not phrases:
            if first_seen and not file_phrase:
                return f"{rel}: no changes seen by the hub{note}"
            return f"{rel}: {file_phrase or 'modified'}" + (note if first_seen else "")
        return f"{rel}: " + "; ".join(phrases) + (note if first_seen else "")

    # -- prompts --------------------------------------------------------------------------

    def context_packet(self, paths: Iterable[str]) -> ContextPacket:
        """Signatures, related tests, complexity and flags of ``paths``, with the store seq."""
        states = self.get_context(list(paths))
        seq = states[0].seq if states else self.seq()
        lines = [f"## Code context (Node State Hub, change seq {seq})"]
        for state in states:
            if not state.exists:
                lines.append(f"- {state.path}: not indexed")
                continue
            head = f"- {state.path} ({state.language}, {state.size} bytes)"
            if state.syntax_error:
                err = state.syntax_error
                head += f" SYNTAX ERROR line {err.line} col {err.column}: {err.message}"
            lines.append(head)
            for sym in state.symbols:
                flags = []
                if sym.docstring_outdated:
                    flags.append("docstring outdated")
                if sym.complexity >= 10:
                    flags.append("complex")
                tests = ", ".join(_short(t) for t in sym.related_tests[:5]) or "none found"
                extra = f" [{'; '.join(flags)}]" if flags else ""
                lines.append(
                    f"  - `{_one_line(sym.signature)}` (L{sym.line_start}-{sym.line_end}, "
                    f"cc {sym.complexity}, {len(sym.callers)} callers by name, "
                    f"tests: {tests}){extra}"
                )
        return ContextPacket("\n".join(lines), seq, tuple(s.path for s in states))

    # -- live updates ---------------------------------------------------------------------

    def wait_for_change(self, since_seq: int, timeout: float, *, poll: float = 0.05) -> int:
        """Block until the store's seq passes ``since_seq`` or ``timeout`` ends; returns the seq."""
        deadline = time.monotonic() + timeout
        while True:
            current = self.seq()
            if current > since_seq or time.monotonic() >= deadline:
                return current
            time.sleep(poll)

    def subscribe(
        self, callback: Callable[[int, list[Change]], None], *, poll: float = 0.1
    ) -> Subscription:
        """Call ``callback(seq, changes)`` from a background thread after every committed update.

        The thread stops when the hub stops or :meth:`Subscription.stop` is called; exceptions
        raised by the callback are swallowed so a broken listener never kills the thread.
        """
        sub = Subscription(self, callback, poll)
        sub.start()
        return sub


class Subscription(threading.Thread):
    """A polling thread created by :meth:`HubClient.subscribe`."""

    def __init__(
        self, client: HubClient, callback: Callable[[int, list[Change]], None], poll: float
    ) -> None:
        super().__init__(daemon=True, name="hub-subscription")
        self.client = client
        self.callback = callback
        self.poll = poll
        self._stop_event = threading.Event()

    def stop(self) -> None:
        self._stop_event.set()
        if self is not threading.current_thread():
            self.join(5)

    def run(self) -> None:
        try:
            seq = self.client.seq()
        except HubError:
            return
        while not self._stop_event.wait(self.poll):
            try:
                current = self.client.seq()
                if current > seq:
                    changes = self.client.changes_since(seq)
                    seq = current
                    try:
                        self.callback(current, changes)
                    except Exception:  # a listener must not end the subscription
                        continue
            except HubError:
                return
