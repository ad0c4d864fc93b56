"""The run directory's packed snapshot files: ``<run_dir>/baselines/<digest>``.

A whole snapshot of 20,000 files is about 2 MB once packed; inside the checkpoint's JSON it made
every reader parse, check and base64-decode those megabytes (a third of a ``freshness-magic
check``). The checkpoint names the packed block by the xxh3_128 of its bytes instead, and the
block is kept here, written once, before the journal record that names it, and never changed:
a run's later checkpoints and its history name the same file while the files are the same. A
reader checks the bytes against the name, so a damaged or replaced file is refused, not read.
A file left by a process killed before its record was written names nothing and harms nothing.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import xxhash

from freshness_magic.atomicio import fsync_dir, write_before_record
from freshness_magic.errors import FreshnessError
from freshness_magic.pathsafety import make_state_dir, read_state

FOLDER = "baselines"
_NAME = re.compile(r"[0-9a-f]{32}")


class FileStore:
    """The packed snapshot files of the run in ``run_dir``."""

    def __init__(self, run_dir: str | os.PathLike[str]) -> None:
        self.folder = Path(run_dir) / FOLDER

    def holds(self, name: str) -> bool:
        """Whether the block ``name`` is on disk (its bytes are checked when read)."""
        return os.path.exists(self.folder / name)

    def put(self, block: bytes) -> str:
        """Keep ``block`` (already there: kept as it is); its name. OSError when it cannot be
        written."""
        name = xxhash.xxh3_128_hexdigest(block)
        if not self.holds(name):
            if not self.folder.is_dir():
                make_state_dir(self.folder)
                fsync_dir(self.folder.parent, always=True)
            write_before_record(self.folder / name, block)
        return name

    def read(self, name: str) -> bytes:
        """The block ``name``; FreshnessError when the name is not one this store gives, or the
        file is missing, unreadable or not the bytes it is named by."""
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            raise FreshnessError(
                f"a checkpointed snapshot names {name!r} as its files, which is not a name "
                "this run gives them; the checkpoint is damaged: start a new run"
            )
        path = self.folder / name
        try:
            block = read_state(path)
        except OSError as exc:
            why = "is missing" if isinstance(exc, FileNotFoundError) else f"cannot be read ({exc})"
            raise FreshnessError(
                f"the run's recorded input files are kept in {path}, which {why}; restore it "
                "(it was removed from the run directory?), or start a new run"
            ) from None
        if xxhash.xxh3_128_hexdigest(block) != name:
            raise FreshnessError(
                f"{path} does not hold the run's recorded input files it is named for (damaged "
                "or replaced); restore it from a copy of the run directory, or start a new run"
            )
        return block
