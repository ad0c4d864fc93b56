"""hashing.py as freshness uses it: one-read small files, streamed large ones, dir_fd, FIFOs."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from freshness_magic.freshness import hashing
from freshness_magic.freshness.baseline import BLOB_LAYOUT, HASHED_LAYOUT
from freshness_magic.freshness.hashing import (
    HashingError,
    StatKey,
    hash_bytes,
    hash_file,
    hash_file_at,
    read_hashed,
)


@pytest.mark.parametrize(
    "size", [0, 1, 4096, hashing.SMALL_FILE_BYTES, 3 * hashing.CHUNK_BYTES + 7]
)
def test_digest_equals_hash_of_the_bytes(tmp_path: Path, size: int) -> None:
    data = os.urandom(size)
    path = tmp_path / "f.bin"
    path.write_bytes(data)
    result = hash_file(path)
    assert result.digest == hash_bytes(data)
    assert result.stat == StatKey.of(os.stat(path))


@pytest.mark.parametrize("size", [0, 10, 4096, 3 * hashing.CHUNK_BYTES + 7])
def test_read_hashed_returns_the_hashed_bytes_up_to_the_limit(tmp_path: Path, size: int) -> None:
    data = os.urandom(size)
    path = tmp_path / "f.bin"
    path.write_bytes(data)
    content, digest, key = read_hashed(path, max_bytes=4096)
    assert digest == hash_bytes(data) and key == StatKey.of(os.stat(path))
    assert content == (data if size <= 4096 else None)
    with pytest.raises(HashingError):
        read_hashed(tmp_path, max_bytes=4096)


def test_hash_file_at_relative_to_a_folder_descriptor(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("hello")
    fd = os.open(tmp_path, os.O_RDONLY)
    try:
        digest, key = hash_file_at("a.txt", fd)
    finally:
        os.close(fd)
    assert digest == hash_bytes(b"hello") and key.size == 5 and key.is_regular_file


def test_fifo_is_refused_without_waiting_for_a_writer(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe")
    with pytest.raises(HashingError, match="not a regular file"):
        hash_file(tmp_path / "pipe")


def test_folder_is_not_a_regular_file(tmp_path: Path) -> None:
    with pytest.raises(HashingError):
        hash_file(tmp_path)


def test_symlink_not_followed_when_asked(tmp_path: Path) -> None:
    (tmp_path / "t.txt").write_text("t")
    os.symlink(tmp_path / "t.txt", tmp_path / "l.txt")
    assert hash_file(tmp_path / "l.txt").digest == hash_bytes(b"t")
    with pytest.raises(OSError):
        hash_file(tmp_path / "l.txt", follow_symlinks=False)


def test_file_changing_on_every_read_is_reread_then_refused(tmp_path: Path) -> None:
    """Another process rewrites the first byte without pause while the file is read.

    The file is large enough that each read spans several timestamp ticks, so every one of the
    three reads sees the stat key change and the file is refused instead of hashed half-old.
    """
    import subprocess
    import sys
    import time

    path = tmp_path / "busy.bin"
    path.write_bytes(b"\0" * (128 * hashing.CHUNK_BYTES))
    before = path.stat().st_mtime_ns
    code = (
        "import os, sys\n"
        "fd = os.open(sys.argv[1], os.O_WRONLY)\n"
        "while True:\n"
        "    os.pwrite(fd, b'x', 0)\n"
    )
    writer = subprocess.Popen([sys.executable, "-c", code, str(path)])
    try:
        while path.stat().st_mtime_ns == before:  # wait until the writer is writing
            time.sleep(0.01)
        with pytest.raises(HashingError, match="changed while being read 3 times"):
            hash_file(path)
    finally:
        writer.kill()
        writer.wait()


@pytest.mark.parametrize("blob", [False, True])
def test_pack_files_at_packs_each_file_or_its_error_in_order(tmp_path: Path, blob: bool) -> None:
    small, big = os.urandom(4096), os.urandom(hashing.SMALL_FILE_BYTES + 5)
    (tmp_path / "small").write_bytes(small)
    (tmp_path / "big").write_bytes(big)
    (tmp_path / "empty").write_bytes(b"")
    (tmp_path / "folder").mkdir()
    os.mkfifo(tmp_path / "pipe")
    (tmp_path / "link").symlink_to(tmp_path / "small")
    os.utime(tmp_path / "big", ns=(2 * 10**18, 2 * 10**18))
    layout = BLOB_LAYOUT if blob else HASHED_LAYOUT
    names = ["small", "gone", "big", "folder", "empty", "pipe", "link"]
    fd = os.open(tmp_path, os.O_RDONLY)
    try:
        found = hashing.pack_files_at(names, fd, layout, blob=blob)
    finally:
        os.close(fd)
    digest = hashing.blob_id if blob else (lambda data: bytes.fromhex(hash_bytes(data)))
    for name, data in (("small", small), ("big", big), ("empty", b"")):
        st = os.stat(tmp_path / name)
        packed = found.results[names.index(name)]
        assert packed == layout.pack(
            st.st_dev,
            st.st_ino,
            st.st_mode,
            st.st_size,
            st.st_mtime_ns,
            st.st_ctime_ns,
            digest(data),
        )
    errors = {name: found.results[names.index(name)] for name in ("gone", "folder", "pipe", "link")}
    assert isinstance(errors["gone"], FileNotFoundError)
    assert isinstance(errors["folder"], HashingError) and isinstance(errors["pipe"], HashingError)
    assert isinstance(errors["link"], OSError) and errors["link"].errno == errno.ELOOP
    assert found.failed == 4
    assert found.newest_mtime_ns == 2 * 10**18  # the large file (streamed) is the newest
