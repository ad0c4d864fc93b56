"""HEAD's commit and its root tree, read from a repository's own files (no git process).

A first capture that reads git's index can tell each file's git status itself when the index
holds exactly HEAD's tree (:mod:`.gitindex`); this module names HEAD's commit and that commit's
tree. It follows ``HEAD`` through loose and packed refs, and reads the commit object whether it
is loose or whole in a pack. Anything it does not read (a ref store other than files, a commit
stored as a delta, an object in an alternate store, a damaged file) gives None, and the caller
asks git instead.
"""

from __future__ import annotations

import bisect
import mmap
import os
import re
import zlib

_HEX = re.compile(rb"[0-9a-f]{40}")
_SYMREF = b"ref: "
_MAX_SYMREFS = 5
_IDX_MAGIC = b"\377tOc\0\0\0\2"
_FANOUT_AT, _NAMES_AT = 8, 8 + 256 * 4
_OID_BYTES = 20
_COMMIT_TYPE, _LARGE_OFFSET = 1, 0x80000000
_COMMIT_HEAD_BYTES = 64
"""``tree <40 hex>\\n`` opens every commit object: the first bytes are enough."""


def head_commit(git_dir: str, common_dir: str) -> str | None:
    """HEAD's commit id (40 hex); None when HEAD is unborn or not read here."""
    try:
        value = _read_text(os.path.join(git_dir, "HEAD"))
        for _ in range(_MAX_SYMREFS):
            if not value.startswith(_SYMREF):
                return value.decode() if _HEX.fullmatch(value) else None
            ref = value[len(_SYMREF) :].strip()
            if not ref.startswith(b"refs/") or b".." in ref:
                return None
            target = _ref_value(common_dir, ref)
            if target is None:
                return None
            value = target
    except (OSError, UnicodeDecodeError):
        return None
    return None


def commit_tree(common_dir: str, commit: str) -> bytes | None:
    """The root tree id (20 bytes) of ``commit``; None when its object is not read here."""
    objects = os.path.join(common_dir, "objects")
    try:
        head = _loose_start(objects, commit)
        if head is None:
            head = _packed_start(objects, bytes.fromhex(commit))
    except (OSError, ValueError, IndexError, zlib.error):  # damaged: git is asked instead
        return None
    if head is None:
        return None
    match = re.match(rb"commit \d+\0tree ([0-9a-f]{40})\n", head)
    return bytes.fromhex(match.group(1).decode()) if match else None


def _read_text(path: str) -> bytes:
    with open(path, "rb") as handle:
        return handle.read(4096).strip()


def _ref_value(common_dir: str, ref: bytes) -> bytes | None:
    """A ref's loose file (in the common folder; ``HEAD`` itself is per worktree) or its line
    in ``packed-refs``."""
    try:
        return _read_text(os.path.join(common_dir, os.fsdecode(ref)))
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
        pass
    try:
        with open(os.path.join(common_dir, "packed-refs"), "rb") as handle:
            for line in handle:
                oid, _, name = line.rstrip(b"\n").partition(b" ")
                if name == ref:
                    return oid
    except FileNotFoundError:
        return None
    return None


def _loose_start(objects: str, commit: str) -> bytes | None:
    """The first bytes of a loose object, inflated; None when it is not loose."""
    try:
        with open(os.path.join(objects, commit[:2], commit[2:]), "rb") as handle:
            data = handle.read()
    except FileNotFoundError:
        return None
    return zlib.decompressobj().decompress(data, _COMMIT_HEAD_BYTES + 32)


def _packed_start(objects: str, oid: bytes) -> bytes | None:
    """The first bytes of a commit stored whole in a pack, with its header as a loose object
    has it; None when no pack holds it whole."""
    folder = os.path.join(objects, "pack")
    try:
        names = sorted(n for n in os.listdir(folder) if n.endswith(".idx"))
    except FileNotFoundError:
        return None
    for name in names:
        # mapped, not read: a large repository's pack index has tens of megabytes
        with (
            open(os.path.join(folder, name), "rb") as handle,
            mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as idx,
        ):
            offset = _pack_offset(idx, oid)
        if offset is None:
            continue
        with open(os.path.join(folder, name[:-4] + ".pack"), "rb") as handle:
            handle.seek(offset)
            data = handle.read(4096)
        byte = data[0]
        kind, size, shift, at = (byte >> 4) & 7, byte & 15, 4, 1
        while byte & 0x80:
            byte = data[at]
            size |= (byte & 0x7F) << shift
            shift += 7
            at += 1
        if kind != _COMMIT_TYPE:
            return None  # a delta: git reads it
        body = zlib.decompressobj().decompress(data[at:], _COMMIT_HEAD_BYTES)
        return b"commit %d\0" % size + body
    return None


def _pack_offset(idx: mmap.mmap, oid: bytes) -> int | None:
    """Where a version 2 pack index places ``oid`` in its pack; None when it is not there."""
    if idx[: len(_IDX_MAGIC)] != _IDX_MAGIC:
        return None
    first = oid[0]
    low = int.from_bytes(idx[_FANOUT_AT + 4 * (first - 1) : _FANOUT_AT + 4 * first]) if first else 0
    high = int.from_bytes(idx[_FANOUT_AT + 4 * first : _FANOUT_AT + 4 * first + 4])
    count = int.from_bytes(idx[_FANOUT_AT + 255 * 4 : _NAMES_AT])
    names = _OidList(idx, count)
    position = bisect.bisect_left(names, oid, low, high)
    if position >= high or names[position] != oid:
        return None
    offsets_at = _NAMES_AT + count * (_OID_BYTES + 4)
    offset = int.from_bytes(idx[offsets_at + 4 * position : offsets_at + 4 * position + 4])
    if offset & _LARGE_OFFSET:
        large_at = offsets_at + 4 * count + 8 * (offset & ~_LARGE_OFFSET)
        offset = int.from_bytes(idx[large_at : large_at + 8])
    return offset


class _OidList:
    """The sorted object ids of a pack index, as a sequence ``bisect`` can search."""

    def __init__(self, idx: mmap.mmap, count: int):
        self._idx = idx
        self._count = count

    def __len__(self) -> int:
        return self._count

    def __getitem__(self, position: int) -> bytes:
        at = _NAMES_AT + position * _OID_BYTES
        return self._idx[at : at + _OID_BYTES]
