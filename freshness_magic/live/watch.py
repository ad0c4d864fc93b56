"""A background watcher on a pipeline's input folders, so staleness shows while the kernel idles.

Only the folders the nodes' ``source_files`` patterns can match are watched (the part of each
pattern before its first wildcard), never the whole work directory. A change calls back once per
batch (``watchfiles`` debounces); the callback re-checks freshness and pushes a view update. The
watcher stops with its pipeline (reset, re-load, close) and with the kernel.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from pathlib import Path

from freshness_magic.engine.model import Graph
from freshness_magic.freshness.attrs import source_files

log = logging.getLogger(__name__)
_WILDCARDS = frozenset("*?[{")
_IGNORED = frozenset({".freshness", ".orchestrator", ".git", "__pycache__"})


def _relevant(_change: object, path: str) -> bool:
    """Not the run's own files (run folders, evidence records), git or byte-code."""
    return not any(part in _IGNORED for part in Path(path).parts)


def input_folders(graph: Graph, workdir: Path) -> list[Path]:
    """The existing folders that hold the nodes' inputs, outermost only, inside ``workdir``."""
    found: set[Path] = set()
    for node in graph.nodes.values():
        for pattern in source_files(node):
            parts = Path(pattern).parts
            fixed: list[str] = []
            for part in parts:
                if any(ch in _WILDCARDS for ch in part):
                    break
                fixed.append(part)
            folder = workdir.joinpath(*fixed) if fixed else workdir
            if len(fixed) == len(parts):
                folder = folder.parent
            while not folder.is_dir() and folder != workdir and workdir in folder.parents:
                folder = folder.parent
            if folder.is_dir():
                found.add(folder.resolve())
    return sorted(f for f in found if not any(p in found for p in f.parents))


class InputWatcher:
    """Calls ``on_change(paths)`` from a daemon thread when files under ``folders`` change."""

    def __init__(self, folders: Iterable[Path], on_change: Callable[[set[str]], None]) -> None:
        self.folders = list(folders)
        self.on_change = on_change
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> InputWatcher:
        if self.folders and self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="fm-watch", daemon=True)
            self._thread.start()
        return self

    @property
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def _loop(self) -> None:
        from watchfiles import watch

        try:
            for changes in watch(
                *self.folders,
                watch_filter=_relevant,
                stop_event=self._stop,
                debounce=200,
                step=50,
                rust_timeout=500,
                yield_on_timeout=False,
                ignore_permission_denied=True,
            ):
                if self._stop.is_set():
                    break
                try:
                    self.on_change({path for _kind, path in changes})
                except Exception:
                    log.exception("freshness_magic: re-checking inputs after a change failed")
        except Exception:
            log.exception("freshness_magic: the input watcher stopped")

    def stop(self, timeout: float = 2.0) -> None:
        """Stop watching (returns once the thread ended, or after ``timeout`` seconds)."""
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)
