"""Content ids git already holds: a clean tracked file's blob id is taken from git's index.

A first capture of a work tree would read every file, yet git has read them too: its index keeps,
per tracked file, the stat data git saw and the blob id of the content. When a file's stat
matches its entry (mtime and ctime to the nanosecond, inode, size) and the entry is not racily
clean by git's own rule (its mtime is before the index was written), the blob id names the
file's content, so the capture stats such a file instead of reading it. Build tools that hash
repositories do the same.

A blob id names the content after git's clean filters (line endings, LFS, ``ident``, encodings),
so the index is used only where no filter can apply: no attributes file git would read (the
index, the files' folders and their parents, ``info/attributes``, the global and system files)
and no ``core.autocrlf``, ``core.attributesFile`` or ``include`` in any git config. Anything
else unusual (``GIT_DIR`` and friends or config in the environment, a split or sparse index,
another object format, an unknown index version) means no index at all, and every file is
hashed as before. A ``.git`` file (a linked worktree, a submodule) is followed to its folder.

When the index also holds exactly HEAD's tree (the root tree id git caches in the index, which
stays valid from a commit, checkout or reset until an entry changes, equals the tree of HEAD's
commit as one ``git rev-parse`` tells: git reads its own refs and objects, whatever their
store), a file that matches its entry is clean in git's eyes, and one hashed to another blob id
is modified: a first capture then needs no ``git status`` for its tracked files
(:meth:`GitIndex.states`). git is still asked about untracked files (only git reads the ignore
rules), links, mode changes and entries git flags. git compares whole seconds unless built
otherwise; this compares nanoseconds, so a same-size rewrite within a second is seen here even
where git misses it.

A record's digest is then 20 bytes (a blob id) instead of 16 (xxh3_128); a check hashes a file
whose stat changed the same way (:func:`.hashing.blob_id`), so it compares like with like.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Collection, Iterable, Mapping

from freshness_magic.freshness.baseline import BLOB_LAYOUT, STAT_LAYOUT, FileRecord
from freshness_magic.freshness.gitfiles import file_key, filters_configured, index_and_config_folder
from freshness_magic.freshness.hashing import BLOB_ID_BYTES, hash_bytes
from freshness_magic.vcs.git import head_and_tree

_HEADER = struct.Struct(">4sII")
_ENTRY = struct.Struct(">IIIIxxxxIIxxxxxxxxI20sH")
"""ctime s, ns, mtime s, ns, (dev), ino, mode, (uid, gid), size, blob id, flags."""
_FLAGS = struct.Struct(">H")
_CTIME_MODE_BLOB_FLAGS = struct.Struct(">II16xI12x20sH")
"""An entry's ctime (seconds, ns), mode, blob id and flags."""
_FLAGS_AT = 60
_ENTRY_BYTES = 62
_EXTENDED, _UNTRUSTED_FLAGS, _NAME_MASK = 0x4000, 0xF000, 0x0FFF
"""Assume-valid, extended (skip-worktree, intent-to-add) and merge stages are never trusted."""
_REGULAR, _FORMAT_MASK, _EXECUTABLE = 0o100000, 0o170000, 0o100
_SECOND = 1_000_000_000
_REFUSED_EXTENSIONS = (b"link", b"sdir")
"""A split index (entries live in a shared file) and a sparse one (folders for files)."""
ATTRIBUTES = ".gitattributes"
INDEX_BYTES_PER_FILE = 1400
"""Reading a small file costs about as much as parsing this many bytes of index (7 µs against
5 ns a byte, measured with 4 KiB files): the index is read only for a look at more unknown
files than its size divided by this, so a capture of a few files in a large tree stays cheap."""


class GitIndex:
    """The entries of one index, looked up by workdir-relative path (see the module doc)."""

    def __init__(
        self,
        data: bytes,
        offsets: dict[bytes, int],
        written_ns: int,
        top: str,
        prefix: str,
        head: str | None = None,
    ):
        self.head = head
        """HEAD's commit when the index holds exactly HEAD's tree (git keeps the root's tree id
        in the index while no entry changed since a commit, checkout or reset): a file that
        matches its entry is then clean in git's eyes. None: git is asked (:meth:`states`)."""
        self.matched: set[str] = set()
        """The keys whose stat matched their entry (:meth:`blob` gave their blob id)."""
        self.claim_before_ns: int | None = None
        """Matched keys whose ctime is not before this are also :attr:`recent`."""
        self.recent: set[str] = set()
        """The matched keys with a ctime not before :attr:`claim_before_ns`: a snapshot claims
        the other matched keys (:class:`~.baseline.IndexMatch`)."""
        self._data = data
        self._offsets = offsets
        self._written_ns = written_ns
        self._top = top
        self._workdir = os.path.normpath(os.path.join(top, prefix))
        self._prefix = os.fsencode(prefix)
        self._attributes = AttributesRule(top, self._workdir)
        self.file_key: tuple[int, ...] | None = None
        """The stat key of the index file read (see :func:`~.gitfiles.index_key`)."""
        self._entries_end = 0

    @classmethod
    def read(
        cls,
        top: str,
        prefix: str,
        files: int | None = None,
        *,
        with_head: bool = True,
        claim_before_ns: int | None = None,
    ) -> GitIndex | None:
        """The index of the work tree at ``top`` (``prefix``: the workdir within it), or None
        when it cannot be trusted or read, or costs more than hashing ``files`` files would
        (see :data:`INDEX_BYTES_PER_FILE`; None: read it anyway). ``with_head``: ask git
        whether the index holds HEAD's tree (:attr:`head`); ``claim_before_ns``: see
        :attr:`recent`."""
        try:
            found = index_and_config_folder(top)
            if found is None:
                return None
            path, common_dir = found
            with open(path, "rb") as handle:
                st = os.fstat(handle.fileno())
                if files is not None and files * INDEX_BYTES_PER_FILE < st.st_size:
                    return None
                if filters_configured(common_dir):
                    return None
                written_ns = st.st_mtime_ns
                data = handle.read()
        except OSError:
            return None
        parsed = _entries(data)
        if parsed is None:
            return None
        offsets, root_tree, entries_end = parsed
        listed = b"\0" + b"\0".join(offsets) + b"\0"  # one search, not one per entry
        if b"\0.gitattributes\0" in listed or b"/.gitattributes\0" in listed:
            return None
        head = None
        if root_tree is not None and with_head:
            found = head_and_tree(top)  # git reads its refs and objects, whatever their store
            if found is not None and found[1] == root_tree.hex():
                head = found[0]
        index = cls(data, offsets, written_ns, top, prefix, head)
        index.file_key = file_key(st)
        index.claim_before_ns = claim_before_ns
        index._entries_end = entries_end
        # Attributes over the whole workdir: no blob id is usable, so none is taken at all.
        return index if index.folder_usable("") else None

    def entries_id(self) -> tuple[int, str]:
        """Its header and entries, named as a snapshot's claim names them (:func:`entries_id`;
        made only for a claim: it digests the whole index)."""
        return entries_id(self._data, self._entries_end)

    def __len__(self) -> int:
        return len(self._offsets)

    def folder_usable(self, folder: str) -> bool:
        """Whether blob ids may be taken for the files of ``folder`` (a snapshot's group:
        workdir-relative, or absolute outside the workdir, which the index never covers): False
        too when an attributes file in it or above may apply."""
        return self._attributes.free(folder)

    def blob(self, key: str, size: int, mtime_ns: int, ctime_ns: int, ino: int) -> bytes | None:
        """The blob id of the workdir-relative ``key`` if its entry matches this stat data
        exactly and is not racily clean; None: read the file."""
        offset = self._offsets.get(self._prefix + key.encode("utf-8", "surrogateescape"))
        if offset is None:
            return None
        cs, cns, ms, mns, e_ino, mode, e_size, blob, flags = _ENTRY.unpack_from(self._data, offset)
        if (
            flags & _UNTRUSTED_FLAGS
            or mode & _FORMAT_MASK != _REGULAR
            or e_size == 0  # an empty file, or an entry git smudged to be checked again
            or e_size != size & 0xFFFFFFFF
            or ms * _SECOND + mns != mtime_ns
            or cs * _SECOND + cns != ctime_ns
            or e_ino != ino & 0xFFFFFFFF
            or mtime_ns >= self._written_ns
        ):
            return None
        self.matched.add(key)
        if self.claim_before_ns is not None and ctime_ns >= self.claim_before_ns:
            self.recent.add(key)
        return blob

    def holding(
        self, records: Mapping[str, FileRecord], changed_before_ns: int
    ) -> dict[str, FileRecord]:
        """The blob records (workdir-relative key -> record) whose blob id this index holds
        for the key, in an entry git compares with the file like any other (no flags, a
        regular file, no attributes file that may apply) and whose ctime lies before
        ``changed_before_ns``. git compares timestamps in whole seconds, so it may miss an
        edit within the second of the ctime it recorded; a caller that knows the file is
        unchanged up to ``changed_before_ns`` (its snapshot) passes that time less the racy
        window: any later edit then gives a ctime in a later second than the entry's."""
        data, entry_of = self._data, _CTIME_MODE_BLOB_FLAGS.unpack_from
        before_s, before_ns = divmod(changed_before_ns, _SECOND)
        blob_size = BLOB_LAYOUT.size
        held: dict[str, FileRecord] = {}
        if not records:
            return held
        # the keys as the index spells them, encoded in one call (no path holds a NUL)
        spelled = "\0".join(records).encode("utf-8", "surrogateescape").split(b"\0")
        if self._prefix:
            spelled = [self._prefix + name for name in spelled]
        for (key, record), offset in zip(
            records.items(), map(self._offsets.get, spelled), strict=True
        ):
            packed = record[0]
            if offset is None or packed is None or len(packed) != blob_size:
                continue
            cs, cns, mode, blob, flags = entry_of(data, offset)
            if (
                not flags & _UNTRUSTED_FLAGS
                and mode & _FORMAT_MASK == _REGULAR
                and (cs < before_s or (cs == before_s and cns < before_ns))
                and packed.endswith(blob)  # the record's digest: the blob id after its stat key
            ):
                held[key] = record
        return self._attributes.unfiltered(held)

    def states(self, records: Mapping[str, FileRecord]) -> tuple[dict[str, str], list[str]]:
        """git's status of the files of a snapshot taken through this index, as far as it can
        be told here, only while :attr:`head` is set: (the states of the files git would list,
        the keys only git can tell). A file whose stat matched its entry is clean; one hashed to
        another blob id is ``modified``; a missing tracked file is ``deleted``. Untracked or
        ignored files, links, mode changes, flagged entries and files hashed another way are
        for git.
        """
        assert self.head is not None, "without HEAD's tree in the index, git tells the states"
        states: dict[str, str] = {}
        ask: list[str] = []
        matched = self.matched
        for key, record in records.items():
            if key in matched or key.startswith("/"):
                continue
            offset = self._offsets.get(self._prefix + key.encode("utf-8", "surrogateescape"))
            if offset is None:
                if record.existed:
                    ask.append(key)  # untracked or ignored: git reads the ignore rules
                continue
            entry = _ENTRY.unpack_from(self._data, offset)
            mode, blob, flags = entry[5], entry[7], entry[8]
            packed = record[0]
            if flags & _UNTRUSTED_FLAGS or mode & _FORMAT_MASK != _REGULAR:
                ask.append(key)
            elif not record.existed:
                states[key] = "deleted"
            elif (
                packed is None
                or len(packed) != BLOB_LAYOUT.size
                or not self.folder_usable(key.rpartition("/")[0])
                or (BLOB_LAYOUT.unpack_from(packed)[2] ^ mode) & _EXECUTABLE
            ):
                ask.append(key)
            elif packed[STAT_LAYOUT.size :] != blob:
                states[key] = "modified"
        return states, ask


def _entries(data: bytes) -> tuple[dict[bytes, int], bytes | None, int] | None:
    """(path -> entry offset, the cached root tree id or None, where the entries end) of an
    index file; None for a format not read here."""
    if len(data) < _HEADER.size + BLOB_ID_BYTES:
        return None
    signature, version, count = _HEADER.unpack_from(data)
    if signature != b"DIRC" or version not in (2, 3, 4):
        return None
    offsets: dict[bytes, int] = {}
    try:
        end = _read_v4(data, count, offsets) if version == 4 else _read_v2(data, count, offsets)
        extensions = _extensions(data, end) if end is not None else None
    except (struct.error, IndexError, ValueError):
        return None
    if extensions is None or end is None:
        return None
    return offsets, extensions.get(b"TREE"), end


def entries_id(data: bytes, end: int) -> tuple[int, str]:
    """The header and entries of index ``data`` (which end at ``end``), named by their length
    and digest: equal names, equal entries, whatever git rewrote after them (its cache tree,
    untracked cache) or when (a rewrite that only resolved racily clean entries)."""
    return end, hash_bytes(data[:end])


def current_entries_id(top: str, end: int, key: tuple[int, ...]) -> tuple[int, str] | None:
    """:func:`entries_id` of the work tree's index at ``top`` taking its entries to end at
    ``end``, if its stat key is ``key`` and its extensions after ``end`` are whole and
    keep every entry in it (no split or sparse index); None otherwise."""
    try:
        found = index_and_config_folder(top)
        if found is None:
            return None
        with open(found[0], "rb") as handle:
            if file_key(os.fstat(handle.fileno())) != key:
                return None
            data = handle.read()
    except OSError:
        return None
    try:
        if _extensions(data, end) is None:
            return None
    except (struct.error, IndexError, ValueError):
        return None
    return entries_id(data, end)


def _read_v2(data: bytes, count: int, offsets: dict[bytes, int]) -> int | None:
    """Versions 2 and 3: whole paths, each entry padded to a multiple of 8 bytes."""
    flags_at, find = _FLAGS.unpack_from, data.find
    offset = _HEADER.size
    for _ in range(count):
        flags = flags_at(data, offset + _FLAGS_AT)[0]
        start = offset + _ENTRY_BYTES + (2 if flags & _EXTENDED else 0)
        length = flags & _NAME_MASK
        end = start + length if length < _NAME_MASK else find(b"\0", start)
        if end < 0 or data[end] != 0:
            return None
        offsets[data[start:end]] = offset
        offset += (end - offset + 8) & ~7
    return offset


def _read_v4(data: bytes, count: int, offsets: dict[bytes, int]) -> int | None:
    """Version 4: each path drops a number of bytes from the previous one and adds a suffix."""
    flags_at, find = _FLAGS.unpack_from, data.find
    offset, previous = _HEADER.size, b""
    for _ in range(count):
        flags = flags_at(data, offset + _FLAGS_AT)[0]
        at = offset + _ENTRY_BYTES + (2 if flags & _EXTENDED else 0)
        byte = data[at]
        drop = byte & 0x7F
        while byte & 0x80:
            at += 1
            byte = data[at]
            drop = ((drop + 1) << 7) | (byte & 0x7F)
        end = find(b"\0", at + 1)
        if end < 0 or drop > len(previous):
            return None
        previous = previous[: len(previous) - drop] + data[at + 1 : end]
        offsets[previous] = offset
        offset = end + 1
    return offset


def _extensions(data: bytes, offset: int) -> dict[bytes, bytes | None] | None:
    """The extensions after the entries (the cache tree's: its root tree id when valid); None
    when one makes the entries incomplete (see ``_REFUSED_EXTENSIONS``) or they are damaged."""
    end = len(data) - BLOB_ID_BYTES
    found: dict[bytes, bytes | None] = {}
    while offset + 8 <= end:
        signature, size = data[offset : offset + 4], int.from_bytes(data[offset + 4 : offset + 8])
        if signature in _REFUSED_EXTENSIONS:
            return None
        found[signature] = _root_tree(data, offset + 8) if signature == b"TREE" else None
        offset += 8 + size
    return found if offset == end else None


def _root_tree(data: bytes, at: int) -> bytes | None:
    """The root's tree id in a cache tree extension at ``at``: its first entry is the root's
    (an empty path, its entry count, -1 when git marked it invalid, and its subtree count on one
    line, then the id); None when the root is invalid."""
    if data[at] != 0:
        return None
    line_end = data.index(b"\n", at)
    entries = data[at + 1 : line_end].split(b" ")[0]
    if entries.startswith(b"-"):
        return None
    return data[line_end + 1 : line_end + 1 + BLOB_ID_BYTES]


def index_entries(top: str) -> int | None:
    """How many entries the index of the work tree at ``top`` holds, from its header; None
    when git's environment names another index or it cannot be read."""
    try:
        found = index_and_config_folder(top)
        if found is None:
            return None
        with open(found[0], "rb") as handle:
            header = handle.read(_HEADER.size)
    except OSError:
        return None
    if len(header) < _HEADER.size:
        return None
    signature, _version, count = _HEADER.unpack(header)
    return int(count) if signature == b"DIRC" else None


class AttributesRule:
    """Which folders of a workdir no attributes file applies to (none in them or above up to
    the work tree's top), each folder looked at once."""

    def __init__(self, top: str, workdir: str):
        self._top = top
        self._workdir = os.path.normpath(workdir)
        self._known: dict[str, bool] = {}

    def unfiltered(self, records: dict[str, FileRecord]) -> dict[str, FileRecord]:
        """``records`` (workdir-relative key -> record) without the files of folders an
        attributes file may apply to."""
        drop = self.filtered(records)
        return {k: r for k, r in records.items() if k not in drop} if drop else records

    def filtered(self, keys: Collection[str], folders: Iterable[str] | None = None) -> set[str]:
        """The workdir-relative ``keys`` in folders an attributes file may apply to.
        ``folders``: workdir-relative folders known to hold every one of the keys (and maybe
        others): the keys are looked at one by one only when one of those may be filtered."""
        if folders is not None and all(map(self.free, folders)):
            return set()
        folders = {key.rpartition("/")[0] for key in keys}
        filtered = {folder for folder in folders if not self.free(folder)}
        if not filtered:
            return set()
        return {key for key in keys if key.rpartition("/")[0] in filtered}

    def free(self, folder: str) -> bool:
        """Whether no attributes file may apply to the files of the workdir-relative
        ``folder`` ('' is the workdir; an absolute one is outside: False)."""
        if folder.startswith("/"):
            return False
        known = self._known.get(folder)
        if known is None:
            here = os.path.join(self._workdir, folder) if folder else self._workdir
            if folder:
                above = self.free(os.path.dirname(folder))
            else:
                above = _no_attributes_above(self._top, here)
            known = above and not os.path.lexists(os.path.join(here, ATTRIBUTES))
            self._known[folder] = known
        return known


def _no_attributes_above(top: str, workdir: str) -> bool:
    """True when no attributes file lies in the folders from ``top`` down to the parent of
    ``workdir`` (a folder inside the work tree at ``top``)."""
    current = workdir
    while current != top and current.startswith(top):
        current = os.path.dirname(current)
        if os.path.lexists(os.path.join(current, ATTRIBUTES)):
            return False
    return True
