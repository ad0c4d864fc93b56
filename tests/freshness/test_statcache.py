"""The stat cache and git's racy-clean rule."""

from __future__ import annotations

import time
from pathlib import Path

from freshness_magic.freshness.baseline import FileRecord
from freshness_magic.freshness.hashing import RACY_WINDOW_NS, StatKey, hash_bytes
from freshness_magic.freshness.statcache import StatCache, filesystem_now_ns, is_racy

KEY = StatKey(1, 2, 0o100644, 10, 1_000 * RACY_WINDOW_NS, 1_000 * RACY_WINDOW_NS)
DIGEST = hash_bytes(b"d")


def test_unchanged_key_outside_the_racy_window_is_trusted() -> None:
    cache = StatCache()
    record = FileRecord(True, KEY, DIGEST)
    cache.store("a", record, KEY.mtime_ns + RACY_WINDOW_NS + 1)
    assert cache.lookup("a", KEY) is record


def test_entry_with_mtime_inside_the_window_is_always_rehashed() -> None:
    cache = StatCache()
    cache.store("a", FileRecord(True, KEY, DIGEST), KEY.mtime_ns + RACY_WINDOW_NS - 1)
    assert cache.lookup("a", KEY) is None
    assert is_racy(KEY.mtime_ns, KEY.mtime_ns + 1)
    assert is_racy(KEY.mtime_ns + 5, KEY.mtime_ns)  # mtime in the future of the snapshot


def test_any_field_of_the_key_differing_is_a_miss() -> None:
    cache = StatCache()
    cache.store("a", FileRecord(True, KEY, DIGEST), KEY.mtime_ns + 10 * RACY_WINDOW_NS)
    for index in range(len(KEY)):
        changed = list(KEY)
        changed[index] += 1
        assert cache.lookup("a", StatKey(*changed)) is None
    assert cache.lookup("b", KEY) is None


def test_filesystem_now_comes_from_a_file_in_the_state_folder(tmp_path: Path) -> None:
    state = tmp_path / ".freshness"
    before = time.time_ns()
    now = filesystem_now_ns(state)  # not there: the process clock, and no folder made
    assert not state.exists()
    assert abs(now - before) < 60 * 1_000_000_000
    state.mkdir()
    now = filesystem_now_ns(state)
    assert list(state.iterdir()) == []  # the probe file is gone
    assert abs(now - before) < 60 * 1_000_000_000
