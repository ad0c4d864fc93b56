"""Waiting for a condition in tests: poll until it holds, give up with a message.

A guard against hanging forever, not a timing assertion: the bound is generous and the failure
says which condition never came true.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest


def wait_until(
    condition: Callable[[], object],
    what: str,
    *,
    timeout: float = 30.0,
    pause: Callable[[], object] | None = None,
) -> None:
    """Return once ``condition()`` is true; ``pause()`` (default: a short sleep) between tries."""
    give_up = time.monotonic() + timeout
    while not condition():
        remaining = give_up - time.monotonic()
        if remaining <= 0:
            pytest.fail(f"gave up after {timeout:g} s waiting for: {what}")
        if pause is None:
            time.sleep(0.02)
        else:
            pause()
