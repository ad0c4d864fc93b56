"""The run context (spec §5.1): a thread-safe key-value store shared by the stages of a run."""

from __future__ import annotations

import copy
import threading
from collections.abc import Iterator, Mapping
from typing import Any


class Context(Mapping[str, Any]):
    """Keys are flat dotted strings (``graph.goal``, ``tool.output``); values are JSON-able."""

    def __init__(self, values: Mapping[str, Any] | None = None, logs: list[str] | None = None):
        self._values: dict[str, Any] = dict(values or {})
        self._logs: list[str] = list(logs or [])
        self._lock = threading.RLock()

    def __getitem__(self, key: str) -> Any:
        with self._lock:
            return self._values[key]

    def __iter__(self) -> Iterator[str]:
        with self._lock:
            return iter(list(self._values))

    def __len__(self) -> int:
        with self._lock:
            return len(self._values)

    def __setitem__(self, key: str, value: Any) -> None:
        self.set(key, value)

    def __delitem__(self, key: str) -> None:
        self.delete(key)

    def set(self, key: str, value: Any) -> None:
        with self._lock:
            self._values[key] = value

    def delete(self, key: str) -> None:
        """Remove ``key`` if present (used for keys that must be unset, e.g. no stale files)."""
        with self._lock:
            self._values.pop(key, None)

    def get_string(self, key: str, default: str = "") -> str:
        value = self.get(key)
        return default if value is None else str(value)

    def apply_updates(self, updates: Mapping[str, Any]) -> None:
        with self._lock:
            self._values.update(updates)

    def append_log(self, entry: str) -> None:
        with self._lock:
            self._logs.append(entry)

    @property
    def logs(self) -> list[str]:
        with self._lock:
            return list(self._logs)

    def snapshot(self) -> dict[str, Any]:
        """A copy of all values that later changes to the context do not affect."""
        with self._lock:
            return copy.deepcopy(self._values)

    def clone(self) -> Context:
        """An isolated copy for a parallel branch (§3.8)."""
        with self._lock:
            return Context(copy.deepcopy(self._values), list(self._logs))

    def __repr__(self) -> str:
        return f"Context({len(self)} keys)"
