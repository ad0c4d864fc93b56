"""Kernel > Interrupt for the work a view's button started on a worker thread.

ipykernel puts Python's SIGINT handler in place only while it handles a message, and ignores the
signal between messages. A click's action runs on a worker thread after its message was handled,
so the notebook's interrupt (the toolbar's square, Kernel > Interrupt) reached nothing while the
view's Run ran. While such an action runs, :class:`InterruptForwarding` puts a handler in place
between messages that does what the view's Stop does; ipykernel saves and restores it around
each message as it does its own, so a cell run meanwhile is interrupted as usual. Outside a
running event loop (terminal IPython, scripts) it does nothing: there the actions run in the
foreground and Ctrl-C reaches them.
"""

from __future__ import annotations

import asyncio
import signal
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any

RETRY_SECONDS = 0.2
"""How often the handler is looked at again when a message was being handled at the end."""


class InterruptForwarding:
    """Forward SIGINT to ``stop`` while :meth:`arm` .. :meth:`disarm` (see the module docstring)."""

    def __init__(self, stop: Callable[[], object]) -> None:
        self._stop = stop
        self._active = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._previous: Any = signal.SIG_IGN
        self._handler = self._on_sigint  # one bound method, so `is` finds it installed

    @property
    def installed(self) -> bool:
        """Whether the forwarding handler is Python's SIGINT handler now."""
        return signal.getsignal(signal.SIGINT) is self._handler

    def arm(self) -> None:
        """Start forwarding once the message being handled is done (call on the kernel's thread)."""
        if threading.current_thread() is not threading.main_thread():
            return
        try:
            self._loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        self._active.set()
        self._loop.call_soon(self._install)

    def disarm(self) -> None:
        """Stop forwarding (any thread); the handler there before is put back between messages."""
        self._active.clear()
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._uninstall)

    def _install(self) -> None:
        if not self._active.is_set() or self.installed:
            return
        self._previous = signal.getsignal(signal.SIGINT)
        signal.signal(signal.SIGINT, self._handler)

    def _uninstall(self) -> None:
        if self._active.is_set():
            return  # armed again meanwhile
        if self.installed:
            signal.signal(signal.SIGINT, self._previous)
        elif signal.getsignal(signal.SIGINT) is signal.default_int_handler and self._loop:
            # A message is being handled: ipykernel puts ours back after it; look again then.
            self._loop.call_later(RETRY_SECONDS, self._uninstall)

    def _on_sigint(self, signum: int, frame: FrameType | None) -> None:
        if self._active.is_set():
            self._stop()
            return
        previous = self._previous
        if callable(previous):
            previous(signum, frame)
        elif previous == signal.SIG_DFL:
            raise KeyboardInterrupt
