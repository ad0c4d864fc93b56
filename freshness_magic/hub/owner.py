"""The process a hub lives for: a notebook kernel passes its pid, and the hub ends after it.

Liveness is checked by pid and, where ``/proc`` tells, by the process's start time, so a pid
reused by an unrelated process does not keep a hub alive; a zombie (ended, not yet reaped by
its parent) counts as ended. Without ``/proc`` only the pid is checked.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, slots=True)
class Owner:
    """The process whose end stops the hub: its pid and, where ``/proc`` tells, start time."""

    pid: int
    started: str | None

    @classmethod
    def of(cls, pid: int) -> Owner:
        return cls(pid, _proc_stat(pid)[1])

    def alive(self) -> bool:
        """Running (not a zombie) and still the same process (the pid was not reused)."""
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            pass
        state, started = _proc_stat(self.pid)
        if state in ("Z", "X"):
            return False
        return self.started is None or started is None or started == self.started


def _proc_stat(pid: int) -> tuple[str | None, str | None]:
    """(state, start time in clock ticks) from ``/proc/PID/stat``; (None, None) without it."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None, None
    fields = text[text.rfind(")") + 2 :].split()
    if len(fields) < 20:
        return None, None
    return fields[0], fields[19]
