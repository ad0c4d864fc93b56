"""Process checks shared by the tests that kill tools and workers."""

from __future__ import annotations

import os


def group_alive(pgid: int) -> bool:
    """Whether any process of group ``pgid`` still exists."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True
