"""FileRecord: built and read like a named tuple, stored compact; checkpoint round trips."""

from __future__ import annotations

import pickle

import pytest

from freshness_magic.errors import FreshnessError
from freshness_magic.freshness.baseline import (
    HASH,
    HASHED_LAYOUT,
    NONE,
    STAT,
    Baseline,
    FileRecord,
)
from freshness_magic.freshness.hashing import StatKey, hash_bytes

KEY = StatKey(1, 2, 0o100644, 10, 5_000, 6_000)
DIGEST = hash_bytes(b"content")


@pytest.mark.parametrize(
    "record",
    [
        FileRecord(True, KEY, DIGEST),
        FileRecord(True, KEY, None, STAT, "too large to hash", True),
        FileRecord(True, KEY, None, NONE, "is a FIFO", False),
        FileRecord(existed=False, method=NONE),
    ],
)
def test_a_record_reads_back_what_it_was_built_with_and_round_trips(record: FileRecord) -> None:
    fields = (record.existed, record.stat, record.digest, record.method, record.note)
    assert FileRecord(*fields, record.regular) == record
    assert FileRecord.from_dict(record.to_dict()) == record
    assert pickle.loads(pickle.dumps(record)) == record
    assert record.size == (KEY.size if record.stat else None)
    assert record.mtime_ns == (KEY.mtime_ns if record.stat else None)
    assert "FileRecord(existed=" in repr(record)


def test_hashed_record_matches_the_general_constructor() -> None:
    built = FileRecord.hashed(HASHED_LAYOUT.pack(*KEY, bytes.fromhex(DIGEST)))
    assert built == FileRecord(True, KEY, DIGEST)
    assert (built.existed, built.stat, built.digest, built.method, built.note, built.regular) == (
        True,
        KEY,
        DIGEST,
        HASH,
        "",
        True,
    )


def test_a_checkpointed_digest_that_is_not_hex_is_a_malformed_baseline() -> None:
    data = Baseline("n", ("a",), "baseline", 0.0, 0, {"a": FileRecord(True, KEY, DIGEST)}).to_dict()
    data["files"]["a"]["digest"] = "not hex"
    with pytest.raises(FreshnessError, match="malformed"):
        Baseline.from_dict(data)


def test_a_checkpointed_stat_key_out_of_range_is_a_malformed_baseline() -> None:
    data = Baseline("n", ("a",), "baseline", 0.0, 0, {"a": FileRecord(True, KEY, DIGEST)}).to_dict()
    data["files"]["a"]["stat"][1] = -1
    with pytest.raises(FreshnessError, match="malformed"):
        Baseline.from_dict(data)
