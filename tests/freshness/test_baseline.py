"""FileRecord: built and read like a named tuple, stored compact; checkpoint round trips."""

from __future__ import annotations

import json
import pickle
import struct
from typing import Any

import pytest

from freshness_magic.errors import FreshnessError
from freshness_magic.freshness.baseline import (
    BLOCK_MAGIC,
    HASH,
    HASHED_LAYOUT,
    NONE,
    STAT,
    Baseline,
    FileRecord,
    FileView,
    IndexMatch,
    PackedFiles,
    pack_block,
    unpack_block,
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


def by_path(baseline: Baseline) -> dict[str, Any]:
    """``baseline`` as state versions before 4 wrote it: one JSON object per file."""
    data = dict(baseline.to_dict())
    del data["files_packed"]
    data["files"] = {path: rec.to_dict() for path, rec in baseline.files.items()}
    return data


def test_a_checkpointed_digest_that_is_not_hex_is_a_malformed_baseline() -> None:
    data = by_path(Baseline("n", ("a",), "baseline", 0.0, 0, {"a": FileRecord(True, KEY, DIGEST)}))
    data["files"]["a"]["digest"] = "not hex"
    with pytest.raises(FreshnessError, match="malformed"):
        Baseline.from_dict(data)


def test_a_checkpointed_stat_key_out_of_range_is_a_malformed_baseline() -> None:
    data = by_path(Baseline("n", ("a",), "baseline", 0.0, 0, {"a": FileRecord(True, KEY, DIGEST)}))
    data["files"]["a"]["stat"][1] = -1
    with pytest.raises(FreshnessError, match="malformed"):
        Baseline.from_dict(data)


@pytest.mark.parametrize("key", [[1, 2, 3], [1, 2, 3, 4, 5, "6"], "1 2 3 4 5 6", None])
def test_a_recorded_folder_without_six_integers_is_a_malformed_baseline(key: Any) -> None:
    folders = {"/w": [1, 2, 3, 4, 5, 6]}
    data = Baseline("n", ("**",), "baseline", 0.0, 0, {}, folders=folders).to_dict()
    assert Baseline.from_dict(data).folders == {"/w": (1, 2, 3, 4, 5, 6)}
    data["folders"] = {"/w": key}
    with pytest.raises(FreshnessError, match="malformed"):
        Baseline.from_dict(data)


@pytest.mark.parametrize(
    "claim",
    [
        {"entries_end": "12", "entries_id": "ab", "unmatched": []},
        {"entries_end": 12, "entries_id": None, "unmatched": []},
        {"entries_end": 12, "entries_id": "ab"},
        ["entries_end", 12],
    ],
)
def test_a_recorded_git_index_claim_round_trips_and_a_malformed_one_is_refused(claim: Any) -> None:
    match = IndexMatch((12, "ab"), frozenset({"x.txt"}))
    data = Baseline("n", ("**",), "baseline", 0.0, 0, {}, index_match=match).to_dict()
    assert Baseline.from_dict(data).index_match == match
    data["git_index"] = claim
    with pytest.raises(FreshnessError, match="malformed"):
        Baseline.from_dict(data)


MIXED = {
    "a.txt": FileRecord(True, KEY, DIGEST),
    "b.bin": FileRecord(True, KEY, "ab" * 20),  # a git blob id
    "gone.txt": FileRecord(existed=False, method=NONE),
    "big.iso": FileRecord(True, KEY, None, STAT, "too large to hash", True),
    "fifo": FileRecord(True, KEY, None, NONE, "is a FIFO", False),
    "c.txt": FileRecord(True, KEY._replace(size=11), DIGEST),
}


def test_a_whole_snapshot_is_written_in_columns_and_reads_back_in_order() -> None:
    baseline = Baseline("n", ("**",), "baseline", 1.5, 7, dict(MIXED), head="f" * 40, git=True)
    data = json.loads(json.dumps(baseline.to_dict()))
    packed = data["files_packed"]
    assert "files" not in data and packed["paths"] == list(MIXED)
    assert packed["kinds"] == "xbooox" and len(packed["others"]) == 3
    again = Baseline.from_dict(data)
    assert again == baseline and list(again.files) == list(MIXED)


def test_a_version_3_snapshot_with_one_object_per_file_still_reads() -> None:
    baseline = Baseline("n", ("**",), "baseline", 1.5, 7, dict(MIXED))
    assert Baseline.from_dict(json.loads(json.dumps(by_path(baseline)))) == baseline


@pytest.mark.parametrize(
    "damage",
    [
        lambda p: p.update(kinds=p["kinds"][:-1]),  # a kind missing
        lambda p: p.update(kinds="q" + p["kinds"][1:]),  # an unknown kind
        lambda p: p.update(records=p["records"][:-8]),  # records cut short
        lambda p: p.update(records="not base64!"),
        lambda p: p.update(others=p["others"][:-1]),  # a record missing
        lambda p: p.update(others=[*p["others"], {"existed": True}]),  # one too many
        lambda p: p.pop("paths"),
    ],
)
def test_damaged_columns_are_a_malformed_baseline(damage: Any) -> None:
    data = Baseline("n", ("**",), "baseline", 1.5, 7, dict(MIXED)).to_dict()
    data = json.loads(json.dumps(data))
    damage(data["files_packed"])
    with pytest.raises(FreshnessError, match="baseline of node 'n' is malformed"):
        Baseline.from_dict(data)


def uniform(count: int) -> dict[str, FileRecord]:
    """``count`` hashed records of one kind (a snapshot a block packs without others)."""
    return {
        f"d{i % 3}/f{i:03d}.txt": FileRecord(True, KEY._replace(ino=i), hash_bytes(b"%d" % i))
        for i in range(count)
    }


def test_packed_files_read_as_the_dict_of_their_records() -> None:
    files = uniform(50)
    packed = unpack_block(*pack_block(files))
    assert isinstance(packed, PackedFiles)  # one kind: made when asked for
    first = "d1/f001.txt"
    assert packed[first] == files[first] and packed.get(first) == files[first]
    assert packed.get("nowhere") is None and packed.get("nowhere", 7) == 7
    with pytest.raises(KeyError):
        packed["nowhere"]
    assert first in packed and "nowhere" not in packed and len(packed) == 50
    assert list(packed) == list(files) and packed.keys() == files.keys()
    assert packed.keys() - {first} == files.keys() - {first}
    assert list(packed.items()) == list(files.items()) and list(packed.values()) == list(
        files.values()
    )
    assert packed == files and files == packed and dict(packed.items()) == files
    assert pickle.loads(pickle.dumps(packed)) == files


def test_packed_files_hand_out_each_record_as_one_object() -> None:
    packed = unpack_block(*pack_block(uniform(20)))
    asked = packed["d2/f002.txt"]
    assert packed.get("d2/f002.txt") is asked
    whole = dict(packed.items())  # every record made now: the one handed out stays
    assert whole["d2/f002.txt"] is asked and packed["d0/f003.txt"] is whole["d0/f003.txt"]


def test_a_block_listing_a_path_twice_reads_as_a_dict_built_from_it() -> None:
    twice = [
        ("a.txt", FileRecord(True, KEY, "ab" * 16)),
        ("b.txt", FileRecord(True, KEY, "cd" * 16)),
    ]
    twice.append(("a.txt", FileRecord(True, KEY._replace(size=1), "ef" * 16)))
    paths = "\0".join(path for path, _ in twice).encode()
    block = b"".join(
        (BLOCK_MAGIC, struct.pack("<II", 3, len(paths)), paths, b"xxx", *(r[0] for _, r in twice))
    )
    packed = unpack_block(block, [])
    assert packed == dict(twice) and list(packed) == ["a.txt", "b.txt"]
    assert unpack_block(block, [])["a.txt"] == twice[2][1]


def test_a_file_view_reads_as_the_dict_it_stands_for() -> None:
    files = uniform(9)
    keys = list(files)
    own = {keys[0]: FileRecord(False, method=NONE), "new.txt": FileRecord(True, KEY, DIGEST)}
    view = FileView(files, dict.fromkeys(keys[1:6]), own)
    expected = {**{key: files[key] for key in keys[1:6]}, **own}
    assert view == expected and dict(view.items()) == expected and len(view) == 7
    assert list(view) == [*keys[1:6], keys[0], "new.txt"]
    assert view[keys[2]] is files[keys[2]] and view.get(keys[0]) is own[keys[0]]
    assert keys[7] not in view and view.get(keys[7]) is None
    with pytest.raises(KeyError):
        view[keys[7]]
    smaller = view.without([keys[1], "new.txt", "never.txt"])
    assert smaller == {k: v for k, v in expected.items() if k not in (keys[1], "new.txt")}
    assert view == expected  # a view is never changed
    more = FileView(files, dict.fromkeys(keys[1:3])).with_own({keys[8]: files[keys[8]]})
    assert more == {key: files[key] for key in (keys[1], keys[2], keys[8])}
