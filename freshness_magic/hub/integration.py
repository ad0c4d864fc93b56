"""How the rest of freshness_magic uses the hub, each piece optional and safe without a hub.

* :class:`HubHashSource`: a hash source for the freshness snapshotter. It answers only while a
  hub runs and is caught up, and only for the exact stat key the caller just read.
* :func:`symbol_changes`: symbol-level "why" lines for stale Python files.
* :func:`context_packet_for`: the prompt packet of a ``hub_context=true`` node's ``source_files``.
* :func:`hub_command`: the text behind ``%pipeline hub start|stop|status|query TARGET``.
* :func:`live_refresh`: a background subscription that calls back after every committed update.
"""

from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from freshness_magic.errors import HubError
from freshness_magic.freshness.hashing import StatKey
from freshness_magic.hub.client import Change, ContextPacket, HubClient, Subscription
from freshness_magic.hub.ignore import glob_to_regex
from freshness_magic.hub.store import connect_reader, read_snapshot


class HubHashSource:
    """Stored hashes for the freshness check; checks liveness at most every ``recheck`` seconds.

    ``hits`` and ``misses`` count answers, so callers and tests can see the hub was used.
    """

    def __init__(self, workdir: str | Path, *, recheck: float = 1.0) -> None:
        self.client = HubClient(workdir)
        self.recheck = recheck
        self._checked = float("-inf")
        self._live = False
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def available(self) -> bool:
        """Whether a hub runs and has caught up (cached for ``recheck`` seconds)."""
        now = time.monotonic()
        with self._lock:
            if now - self._checked >= self.recheck:
                self._live = self.client.caught_up()
                self._checked = now
            return self._live

    def file_hash(self, path: str, stat_key: StatKey) -> str | None:
        """The hub's hash of ``path`` (workdir-relative) when it indexed exactly ``stat_key``."""
        if not self.available():
            return None
        digest = self.client.file_hash(path, stat_key, check_running=False)
        if digest is None:
            self.misses += 1
        else:
            self.hits += 1
        return digest

    def close(self) -> None:
        self.client.close()


def symbol_changes(workdir: str | Path, paths: Iterable[str], since_time: float) -> dict[str, str]:
    """For stale Python files, what changed inside them since ``since_time`` (hub running only).

    Returns ``{path: "src/auth.py: login() signature changed; helper() body changed"}``; empty
    when no hub runs. Paths the hub has no record of are left out.
    """
    client = HubClient(workdir)
    try:
        if not client.is_running():
            return {}
        found = {}
        for path in paths:
            if not path.endswith((".py", ".pyi")):
                continue
            try:
                changes = client.changes_since(0, path, since_time=since_time)
            except HubError:
                continue
            if any(c.symbol for c in changes):
                found[path] = client.describe_changes(path, since_time=since_time)
        return found
    finally:
        client.close()


def _pattern_regex(patterns: Sequence[str]) -> re.Pattern[str]:
    parts = []
    for pattern in patterns:
        text = pattern.strip()
        while text.startswith("./"):
            text = text[2:]
        parts.append(glob_to_regex(text.lstrip("/")))
    return re.compile("^(?:" + "|".join(parts or ["(?!)"]) + ")$")


def indexed_paths(workdir: str | Path, patterns: Sequence[str]) -> list[str]:
    """Stored paths matching ``source_files`` globs (``*``, ``?``, ``[..]``, ``**``), sorted."""
    regex = _pattern_regex(patterns)
    conn = connect_reader(workdir)
    try:
        with read_snapshot(conn):
            return sorted(
                path for (path,) in conn.execute("SELECT path FROM files") if regex.match(path)
            )
    finally:
        conn.close()


def context_packet_for(workdir: str | Path, patterns: Sequence[str]) -> ContextPacket | None:
    """The context packet of the files ``patterns`` match, or None when no hub is caught up."""
    client = HubClient(workdir)
    try:
        if not client.caught_up():
            return None
        paths = indexed_paths(workdir, patterns)
        if not paths:
            seq = client.seq()
            return ContextPacket(
                f"## Code context (Node State Hub, change seq {seq})\n"
                f"- no indexed files match {', '.join(patterns)}",
                seq,
            )
        return client.context_packet(paths)
    finally:
        client.close()


def hub_command(
    workdir: str | Path, argv: Sequence[str], *, stop_with_this_process: bool = False
) -> str:
    """``start``, ``stop``, ``status`` or ``query TARGET...``: what the notebook magic prints.

    With ``stop_with_this_process`` a hub that ``start`` launches ends when the calling process
    does (the notebook: a hub never outlives its kernel). Raises :class:`HubError` with a usage
    line for anything else.
    """
    from freshness_magic.hub import daemon  # the hub process's code, only for these commands

    usage = "usage: %pipeline hub start|stop|status|query PATH[:QUALNAME] ..."
    if not argv:
        raise HubError(usage)
    action, rest = argv[0], list(argv[1:])
    if action == "start" and not rest:
        owner = os.getpid() if stop_with_this_process else None
        return daemon.start(workdir, owner_pid=owner).render()
    if action == "stop" and not rest:
        before = daemon.status(workdir)
        daemon.stop(workdir)
        if before.running:
            return f"hub stopped for {before.workdir} (pid {before.pid})"
        return before.render()
    if action == "status" and not rest:
        return daemon.status(workdir).render()
    if action == "query" and rest:
        with HubClient(workdir) as client:
            return "\n".join(state.render() for state in client.get_context(rest))
    raise HubError(usage)


def live_refresh(
    workdir: str | Path,
    on_change: Callable[[int, list[Change]], None],
    *,
    poll: float = 0.1,
) -> Subscription | None:
    """Call ``on_change(seq, changes)`` from a background thread after each committed update.

    Returns the running :class:`Subscription` (``.stop()`` it), or None when no hub runs. With
    the default poll of 0.1 s and the hub's own ~50 ms, a saved file reaches the callback well
    within a second.
    """
    client = HubClient(workdir)
    if not client.is_running():
        client.close()
        return None
    return client.subscribe(on_change, poll=poll)


def report_symbol_lines(report: Any, node_ids: Iterable[str] | None = None) -> list[str]:
    """``node: path: login() signature changed`` lines for the stale nodes of a freshness report.

    ``report`` is a :class:`~freshness_magic.freshness.report.FreshnessReport`; each node's
    effective view (since it ran, else since its baseline) is explained with the hub's change log
    after that snapshot's time. Empty when no hub runs.
    """
    lines: list[str] = []
    wanted = report.stale_nodes if node_ids is None else list(node_ids)
    for node_id in wanted:
        entry = report.nodes.get(node_id)
        if entry is None:
            continue
        view = entry.effective
        if not view.stale_files:
            continue
        found = symbol_changes(report.workdir, view.stale_files, view.snapshot_taken_at)
        lines.extend(f"{node_id}: {found[p]}" for p in view.stale_files if p in found)
    return lines
