"""Run a test scenario as an unprivileged user, so permission-denied cases hold as root too."""

from __future__ import annotations

import os
import pickle
import traceback
from collections.abc import Callable

NOBODY = 65534


def unprivileged(fn: Callable[[], object]) -> object:
    """Run ``fn`` in a forked child that gave up root (uid/gid nobody); return its result.

    Root reads files of mode 000, so the permission-denied case needs a real unprivileged
    process; forking keeps the already imported code, which nobody could not load from /root.
    """
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(read_end)
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            outcome: tuple[str, object] = ("ok", fn())
        except BaseException:
            outcome = ("error", traceback.format_exc())
        with os.fdopen(write_end, "wb") as handle:
            pickle.dump(outcome, handle)
        os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as handle:
        data = handle.read()
    os.waitpid(pid, 0)
    status, value = pickle.loads(data)
    assert status == "ok", value
    return value
