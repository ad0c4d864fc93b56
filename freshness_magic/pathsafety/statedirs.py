"""The state folders a run verified, remembered so that a step's writes re-check each with one
``lstat`` (:func:`~.state.remembering` installs them; apart from :mod:`.state` so that a reader of
state files loads no ``dataclasses``)."""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field


@dataclass
class StateDirs:
    """The state folders verified during one run, each re-checked later with one ``lstat``.

    A folder is remembered by (device, inode) once every component from its state folder down was
    found a real folder. One ``lstat`` of its path giving the same (device, inode) shows the path
    still leads to that very folder: a component replaced by a link leads elsewhere (another
    inode). A verified folder moved away and linked back is not seen, but then writes still land
    in the folder we checked, never in one somebody else chose. ``walked`` and ``confirmed``
    count the two kinds of ``lstat`` (the cost the cache saves).
    """

    verified: dict[str, tuple[int, int]] = field(default_factory=dict)
    walked: int = 0
    """Components lstat'ed by a walk (first use of a folder, or a failed confirmation)."""
    confirmed: int = 0
    """Remembered folders confirmed (or refuted) by one lstat."""

    def confirm(self, folder: str) -> bool:
        """Whether ``folder`` is remembered and its path still leads to the same real folder."""
        known = self.verified.get(folder)
        if known is None:
            return False
        self.confirmed += 1
        try:
            info = os.lstat(folder)
        except OSError:
            info = None
        if info is not None and stat.S_ISDIR(info.st_mode) and (info.st_dev, info.st_ino) == known:
            return True
        self.verified.pop(folder, None)
        return False
