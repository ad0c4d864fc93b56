"""Baselines: what a node's source files looked like at one moment, serialisable for checkpoints.

A :class:`Baseline` is taken for every node at run start (kind ``baseline``), again when a node
completes (kind ``run``) and when a change is accepted (kind ``accepted``). Per file it records
whether the file existed, its size and stat key, its content hash (xxh3_128, or git's blob id
for a clean tracked file whose stat matched git's index) and, in a git work
tree, git's status of the file (kept per snapshot for the files that were not clean); per
snapshot the filesystem time (for the racy rule) and HEAD.
"""

from __future__ import annotations

import binascii
import os
import struct
from collections.abc import (
    Collection,
    ItemsView,
    Iterable,
    Iterator,
    KeysView,
    Mapping,
    ValuesView,
)
from dataclasses import dataclass, field
from itertools import repeat
from operator import itemgetter
from typing import TYPE_CHECKING, Any

from freshness_magic.errors import FreshnessError
from freshness_magic.freshness.hashing import BLOB_ID_BYTES, StatKey
from freshness_magic.freshness.resolve import Unresolved

if TYPE_CHECKING:
    from freshness_magic.freshness.filestore import FileStore

HASH, STAT, NONE = "hash", "stat", "none"
"""How a file was fingerprinted: content hash, stat only (too large or unreadable), nothing."""


STAT_LAYOUT = struct.Struct("<QQQQqq")
"""How a record packs its stat key: dev, ino, mode, size, mtime_ns, ctime_ns (48 bytes)."""
HASHED_LAYOUT = struct.Struct("<QQQQqq16s")
"""A hashed file's packed stat key followed by its 16-byte digest."""
BLOB_LAYOUT = struct.Struct(f"<QQQQqq{BLOB_ID_BYTES}s")
"""A packed stat key followed by a git blob id."""
_DIGEST_BYTES = (16, BLOB_ID_BYTES)
"""An xxh3_128 digest, or the git blob id of a clean tracked file (:mod:`.gitindex`)."""
_MTIME, _MTIME_AT = struct.Struct("<q"), 32
_SIZE, _SIZE_AT = struct.Struct("<Q"), 24
_HASHED = (True, HASH, "", True)
"""The (existed, method, note, regular) of a hashed file: one tuple all such records share."""


class FileRecord(tuple):
    """One file at one moment. ``digest`` is None when only the stat (or nothing) is known.

    Built like a named tuple, ``FileRecord(existed, stat=None, digest=None, method=HASH,
    note="", regular=True)``, and read through the same attribute names, but stored compact: a
    snapshot keeps one record per file (100,000 of them), so a record is a pair of one bytes
    object (the stat key packed by :data:`STAT_LAYOUT`, then the digest's 16 bytes; None
    without a stat) and the (existed, method, note, regular) tuple every hashed file shares.
    That is a third of the memory of a record holding a stat key tuple and a hex digest.
    """

    __slots__ = ()

    def __new__(
        cls,
        existed: bool,
        stat: StatKey | None = None,
        digest: str | None = None,
        method: str = HASH,
        note: str = "",
        regular: bool = True,
    ) -> FileRecord:
        packed = None
        if stat is not None:
            try:
                packed = STAT_LAYOUT.pack(*stat)
            except struct.error as exc:
                raise ValueError(f"not a stat key: {stat!r} ({exc})") from None
            if digest is not None:
                raw = bytes.fromhex(digest)
                if len(raw) not in _DIGEST_BYTES:
                    raise ValueError(f"not a digest: {digest!r}")
                packed += raw
        info = (existed, method, note, regular)
        return tuple.__new__(cls, (packed, _HASHED if info == _HASHED else info))

    @classmethod
    def hashed(cls, packed: bytes) -> FileRecord:
        """The record of a hashed regular file from its packed stat key and raw digest."""
        return tuple.__new__(cls, (packed, _HASHED))

    @classmethod
    def of_stat(cls, st: os.stat_result, digest: bytes) -> FileRecord:
        """The record of a regular file hashed at ``st`` (``digest``: xxh3_128 or blob id)."""
        return cls.hashed(
            STAT_LAYOUT.pack(
                st.st_dev, st.st_ino, st.st_mode, st.st_size, st.st_mtime_ns, st.st_ctime_ns
            )
            + digest
        )

    def __getnewargs__(self) -> tuple[Any, ...]:
        return (self.existed, self.stat, self.digest, self.method, self.note, self.regular)

    def __repr__(self) -> str:
        return (
            f"FileRecord(existed={self.existed!r}, stat={self.stat!r}, digest={self.digest!r}, "
            f"method={self.method!r}, note={self.note!r}, regular={self.regular!r})"
        )

    @property
    def stat(self) -> StatKey | None:
        packed = self[0]
        if packed is None:
            return None
        return tuple.__new__(StatKey, STAT_LAYOUT.unpack_from(packed))

    @property
    def digest(self) -> str | None:
        packed = self[0]
        if packed is None or len(packed) == STAT_LAYOUT.size:
            return None
        return packed[STAT_LAYOUT.size :].hex()

    @property
    def blob(self) -> bool:
        """Whether the digest is a git blob id (from git's index) rather than xxh3_128."""
        packed = self[0]
        return packed is not None and len(packed) == STAT_LAYOUT.size + BLOB_ID_BYTES

    @property
    def existed(self) -> bool:
        return self[1][0]

    @property
    def method(self) -> str:
        return self[1][1]

    @property
    def note(self) -> str:
        return self[1][2]

    @property
    def regular(self) -> bool:
        return self[1][3]

    @property
    def size(self) -> int | None:
        packed = self[0]
        return None if packed is None else _SIZE.unpack_from(packed, _SIZE_AT)[0]

    @property
    def mtime_ns(self) -> int | None:
        packed = self[0]
        return None if packed is None else _MTIME.unpack_from(packed, _MTIME_AT)[0]

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"existed": self.existed}
        stat = self.stat
        if stat is not None:
            data["stat"] = list(stat)
        if self.digest is not None:
            data["digest"] = self.digest
        if self.method != HASH:
            data["method"] = self.method
        if self.note:
            data["note"] = self.note
        if not self.regular:
            data["regular"] = False
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> FileRecord:
        raw_stat = data.get("stat")
        stat = StatKey(*(int(v) for v in raw_stat)) if raw_stat is not None else None
        return cls(
            existed=bool(data["existed"]),
            stat=stat,
            digest=data.get("digest"),
            method=str(data.get("method", HASH)),
            note=str(data.get("note", "")),
            regular=bool(data.get("regular", True)),
        )


def _hashed(packed: Iterable[bytes]) -> Iterator[FileRecord]:
    """:meth:`FileRecord.hashed` of each packed stat key and digest, lazily (see below)."""
    return map(tuple.__new__, repeat(FileRecord), zip(packed, repeat(_HASHED)))


def hashed_records(packed: list[bytes]) -> list[FileRecord]:
    """:meth:`FileRecord.hashed` of each packed stat key and digest, built without a Python
    call per record (a first snapshot builds 100,000; ``map`` over two iterables calls
    ``tuple.__new__`` directly, at a third of the cost of a ``partial``)."""
    return list(_hashed(packed))


class FileView(Mapping[str, FileRecord]):
    """The records of the ``shared`` keys as ``files`` (another snapshot's) holds them, the very
    objects, neither made nor copied here; and the ``own`` records of other keys (looked at
    again).

    What a check of many files makes of git's word (``gitvouch``): the files git vouches for
    keep their snapshot's records, so the comparison with that snapshot passes over them by
    their keys (``check.compare``), and a record nobody asks for is never made
    (:class:`PackedFiles`).
    """

    __slots__ = ("files", "own", "shared")

    def __init__(
        self,
        files: Mapping[str, FileRecord],
        shared: dict[str, None],
        own: dict[str, FileRecord] | None = None,
    ):
        self.files = files
        self.shared = shared
        """The keys whose record is ``files``' (in order; none of ``own``'s)."""
        self.own = own if own is not None else {}

    def __getitem__(self, key: str) -> FileRecord:
        record = self.own.get(key)
        if record is not None:
            return record
        if key in self.shared:
            return self.files[key]
        raise KeyError(key)

    def get(self, key: str, default: Any = None) -> Any:
        record = self.own.get(key)
        if record is not None:
            return record
        return self.files[key] if key in self.shared else default

    def __contains__(self, key: object) -> bool:
        return key in self.shared or key in self.own

    def __iter__(self) -> Iterator[str]:
        yield from self.shared
        yield from self.own

    def __len__(self) -> int:
        return len(self.shared) + len(self.own)

    def without(self, keys: Collection[str]) -> FileView:
        """This view but for ``keys`` (shared or own); itself when there are none."""
        if not keys:
            return self
        shared, own = dict(self.shared), dict(self.own)
        for key in keys:
            shared.pop(key, None)
            own.pop(key, None)
        return FileView(self.files, shared, own)

    def with_own(self, own: dict[str, FileRecord]) -> FileView:
        """This view with ``own`` records of keys it does not share."""
        return FileView(self.files, self.shared, {**self.own, **own})


@dataclass(frozen=True)
class IndexMatch:
    """The git index a snapshot took blob ids from, as a claim a later check can use without
    comparing with the index file by file: its header and entries, named by their length and
    digest (``gitindex.entries_id``), and the snapshot's files whose record is *not* their
    entry's (no blob id from the index: their stat did not match their entry, or they are not
    tracked; or their ctime lies within the racy window before the snapshot). While the index
    holds the same entries, every other record still holds its entry's blob id, and the entry's
    ctime lies before the snapshot by the racy window."""

    entries: tuple[int, str]
    unmatched: frozenset[str] = frozenset()

    @classmethod
    def of(
        cls, entries: tuple[int, str], files: Mapping[str, FileRecord], unmatched: Iterable[str]
    ) -> IndexMatch | None:
        """The claim of ``files`` on the index ``entries`` but for ``unmatched`` (only those of
        ``files`` are kept); None when they are most of ``files``: a check would not take such
        a claim, and the checkpoint would list most of the tree."""
        kept = frozenset(unmatched) & files.keys()
        if len(kept) * 2 > len(files):
            return None
        return cls(entries, kept)

    def held(self, files: Mapping[str, FileRecord], keys: Iterable[str]) -> FileView:
        """The records of the ``keys`` whose record in ``files`` (the claiming snapshot's) is
        its index entry's (told by the keys alone: no record is made or copied)."""
        unmatched, known = self.unmatched, files.keys()
        return FileView(files, {key: None for key in keys if key not in unmatched and key in known})

    def carried(
        self, claimed: Mapping[str, FileRecord], files: Mapping[str, FileRecord]
    ) -> IndexMatch | None:
        """The claim for a later snapshot ``files`` of the same index entries, made from this
        claim on the snapshot ``claimed``: a record handed back unchanged (the very object)
        still holds its entry's blob id, whose ctime lies before the earlier snapshot; any
        other record is unmatched. None when most of ``files`` would be."""
        get = claimed.get
        changed = {key for key, record in files.items() if get(key) is not record}
        return IndexMatch.of(self.entries, files, self.unmatched | changed)

    def to_dict(self) -> dict[str, Any]:
        end, digest = self.entries
        return {"entries_end": end, "entries_id": digest, "unmatched": sorted(self.unmatched)}

    @classmethod
    def from_dict(cls, data: Any) -> IndexMatch | None:
        """The claim of a snapshot's dict (None: none); ValueError when malformed."""
        if data is None:
            return None
        end, digest = data["entries_end"], data["entries_id"]
        if type(end) is not int or not isinstance(digest, str):
            raise ValueError("a recorded git index has no entries' length and digest")
        return cls((end, digest), frozenset(str(path) for path in data["unmatched"]))


@dataclass
class Baseline:
    """A node's source files at one moment (see the module docstring for the kinds)."""

    node_id: str
    entries: tuple[str, ...]
    kind: str
    taken_at: float
    """Wall-clock seconds since the epoch."""
    fs_time_ns: int
    """The filesystem's own time when the snapshot started (racy-clean rule)."""
    files: Mapping[str, FileRecord] = field(default_factory=dict)
    """Key -> record; never changed once taken (snapshots share records, and whole mappings)."""
    literal: frozenset[str] = frozenset()
    unresolved: list[Unresolved] = field(default_factory=list)
    head: str | None = None
    git: bool = False
    """Whether the working directory was in a git work tree with git usable."""
    git_states: dict[str, str] = field(default_factory=dict)
    """git's status of the files that were not clean at the snapshot (see ``git_state``)."""
    folders: dict[str, tuple[int, ...]] | None = None
    """The folders the entries were resolved from, each with its key and the filesystem time
    it was listed at (``Resolver.folder_keys``): another process takes ``files``' keys as the
    entries' resolution while none of them changed, instead of listing them. None: unknown
    (a folder holding links, or a snapshot written before folders were recorded)."""
    index_match: IndexMatch | None = None
    """The git index the snapshot took blob ids from (None: it read no index)."""
    _encoded: list[tuple[Baseline | None, str, bool, dict[str, Any]]] = field(
        default_factory=list, repr=False, compare=False
    )
    """Memo of :meth:`to_dict` for the last two (base, with a store) asked (baselines never
    change once taken)."""

    def git_state(self, path: str) -> str | None:
        """git's status of ``path`` at the snapshot; None outside a work tree."""
        if not self.git or path.startswith("/"):  # a key outside the workdir is absolute
            return None
        return self.git_states.get(path, "clean")

    def to_dict(
        self, base: Baseline | None = None, base_id: str = "", store: FileStore | None = None
    ) -> dict[str, Any]:
        """A JSON-able dict; with ``base`` (the baseline of node ``base_id``) only the files
        that differ from it are listed (``files_from``). Memoised per base, so a checkpoint's
        unchanged baselines are the same objects from step to step.

        A node's completion snapshot mostly repeats its baseline, and nodes tracking the same
        entries share their files: written whole, a 20,000-file tree cost each step 3 MB of
        journal. A delta larger than half of the files is not worth it; the files are written
        whole then: packed into one block kept in ``store`` (``files_stored``) when they are
        many, else inline (``files_packed``).
        """
        for memo_base, memo_id, memo_stored, encoded in self._encoded:
            if memo_base is base and memo_id == base_id and memo_stored == (store is not None):
                stored = encoded.get("files_stored")
                if stored is None or store is None or store.holds(stored["block"]):
                    return encoded
        data: dict[str, Any] = {
            "node_id": self.node_id,
            "entries": list(self.entries),
            "kind": self.kind,
            "taken_at": self.taken_at,
            "fs_time_ns": self.fs_time_ns,
        }
        delta = _files_delta(self.files, base.files) if base is not None else None
        if delta is not None:
            data["files_from"] = base_id
            data["files_changed"], data["files_removed"] = delta
        else:
            data.update(_whole_files(self.files, store))
        data.update(
            literal=sorted(self.literal),
            unresolved=[{"entry": u.entry, "reason": u.reason} for u in self.unresolved],
            head=self.head,
            git=self.git,
            git_states=dict(self.git_states),
        )
        if self.folders is not None:
            data["folders"] = {folder: list(key) for folder, key in self.folders.items()}
        if self.index_match is not None:
            data["git_index"] = self.index_match.to_dict()
        self._encoded[:] = [*self._encoded[-1:], (base, base_id, store is not None, data)]
        return data

    @classmethod
    def from_dict(
        cls,
        data: dict[str, Any],
        bases: Mapping[str, Baseline] | None = None,
        store: FileStore | None = None,
    ) -> Baseline:
        """Rebuild a baseline from :meth:`to_dict` output; FreshnessError when malformed.

        ``bases``: the baselines (by node) a ``files_from`` delta may name; the rebuilt
        baseline shares the records of the files it has in common with its base. ``store``:
        where its packed files are kept (``files_stored``).
        """
        try:
            return cls(
                node_id=str(data["node_id"]),
                entries=tuple(str(e) for e in data.get("entries", ())),
                kind=str(data.get("kind", "baseline")),
                taken_at=float(data.get("taken_at", 0.0)),
                fs_time_ns=int(data.get("fs_time_ns", 0)),
                files=_files_of(data, bases or {}, store),
                literal=frozenset(str(p) for p in data.get("literal", ())),
                unresolved=[
                    Unresolved(str(u["entry"]), str(u["reason"]))
                    for u in data.get("unresolved", ())
                ],
                head=data.get("head"),
                git=bool(data.get("git", False)),
                git_states={str(k): str(v) for k, v in dict(data.get("git_states", {})).items()},
                folders=_folders_of(data.get("folders")),
                index_match=IndexMatch.from_dict(data.get("git_index")),
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            node = data.get("node_id", "?") if isinstance(data, dict) else "?"
            raise FreshnessError(
                f"checkpointed baseline of node {node!r} is malformed ({exc!r}); "
                "re-capture it with accept_changes or start a new run"
            ) from exc


_FOLDER_KEY_INTS = 6
"""A recorded folder: dev, inode, mtime, ctime and size, then the time it was listed at."""


def _folders_of(data: Any) -> dict[str, tuple[int, ...]] | None:
    """The recorded folders of a snapshot's dict (:attr:`Baseline.folders`); ValueError when
    they are not folder -> six integers."""
    if data is None:
        return None
    folders = {str(folder): tuple(key) for folder, key in dict(data).items()}
    if any(len(key) != _FOLDER_KEY_INTS for key in folders.values()) or {
        type(value) for key in folders.values() for value in key
    } - {int}:
        raise ValueError("a recorded folder has no key of six integers")
    return folders


def _files_delta(
    files: Mapping[str, FileRecord], base: Mapping[str, FileRecord]
) -> tuple[dict[str, Any], list[str]] | None:
    """(changed or added records, removed paths) of ``files`` against ``base``; None when the
    delta would list more than half of ``files``.

    Records the stat cache handed back unchanged are the very same objects, so most files are
    passed over by an identity test at comprehension speed (20,000 files: about 1 ms).
    """
    if files is base:
        return {}, []
    limit = len(files) // 2
    get = base.get
    differing = [path for path, rec in files.items() if get(path) is not rec]
    changed: dict[str, Any] = {}
    for path in differing:
        rec = files[path]
        if get(path) != rec:
            changed[path] = rec.to_dict()
            if len(changed) > limit:
                return None
    removed = sorted(base.keys() - files.keys())
    if len(changed) + len(removed) > limit:
        return None
    return changed, removed


_KIND_BYTES = {"x": STAT_LAYOUT.size + 16, "b": STAT_LAYOUT.size + BLOB_ID_BYTES}
"""A packed record's kind letter and its bytes: a hashed regular file with an xxh3_128 digest
(``x``) or a blob id (``b``); any other record (``o``) is listed as a dict in ``others``."""
_KIND_OF = {size: kind for kind, size in _KIND_BYTES.items()}
BLOCK_MAGIC = b"freshness-magic files 1\n"
"""How a packed block of a snapshot's files begins (:func:`pack_block`)."""
_BLOCK_HEADER = struct.Struct("<II")
"""After the magic: the number of files and the bytes of their paths."""


def _columns(files: Mapping[str, FileRecord]) -> tuple[str, bytes, list[dict[str, Any]]]:
    """A snapshot's files in columns: one kind letter per file, the packed records of the ``x``
    and ``b`` files in order, and the record dicts of the ``o`` files in order."""
    kinds: list[str] = []
    chunks: list[bytes] = []
    others: list[dict[str, Any]] = []
    for rec in files.values():
        packed, info = rec
        kind = _KIND_OF.get(len(packed)) if packed is not None and info is _HASHED else None
        if kind is None:
            kinds.append("o")
            others.append(rec.to_dict())
        else:
            kinds.append(kind)
            chunks.append(packed)
    return "".join(kinds), b"".join(chunks), others


def pack_files(files: Mapping[str, FileRecord]) -> dict[str, Any]:
    """A whole snapshot's files, columnar and inline: ``paths`` in order, one ``kinds`` letter
    per file, ``records`` (base64 of the packed stat keys and digests of the ``x`` and ``b``
    files, in order) and ``others`` (the record dicts of the ``o`` files, in order)."""
    kinds, records, others = _columns(files)
    return {
        "paths": list(files),
        "kinds": kinds,
        "records": binascii.b2a_base64(records, newline=False).decode("ascii"),
        "others": others,
    }


def pack_block(files: Mapping[str, FileRecord]) -> tuple[bytes, list[dict[str, Any]]]:
    """A whole snapshot's files as one block of bytes (:data:`BLOCK_MAGIC`, the number of files
    and the bytes of their paths as two little-endian 32-bit integers, the paths in UTF-8
    separated by NUL, one kind letter per file, the packed records of the ``x`` and ``b`` files)
    and the record dicts of the ``o`` files (:func:`pack_files`' columns)."""
    kinds, records, others = _columns(files)
    paths = "\0".join(files).encode("utf-8", "surrogatepass")
    header = _BLOCK_HEADER.pack(len(files), len(paths))
    return b"".join((BLOCK_MAGIC, header, paths, kinds.encode("ascii"), records)), others


STORED_FROM_FILES = 1_000
"""A whole snapshot of this many files or more is kept as a block beside the checkpoint: a
block costs a file and two fsyncs when it is written, which fewer files cost less inline."""


def _whole_files(files: Mapping[str, FileRecord], store: FileStore | None) -> dict[str, Any]:
    """The fields of a snapshot that lists its files whole: ``files_stored`` (the name of their
    block in ``store``, and the other records) when it has :data:`STORED_FROM_FILES` files or
    more; otherwise, without a store or when the block cannot be written, ``files_packed``."""
    if store is not None and len(files) >= STORED_FROM_FILES:
        block, others = pack_block(files)
        try:
            return {"files_stored": {"block": store.put(block), "others": others}}
        except OSError as exc:
            import logging  # only here: a check does not load it

            logging.getLogger(__name__).warning(
                "%s: snapshot kept in the checkpoint instead (%s)", store.folder, exc
            )
    return {"files_packed": pack_files(files)}


def unpack_files(data: Mapping[str, Any]) -> Mapping[str, FileRecord]:
    """The records :func:`pack_files` wrote; ValueError (or KeyError, TypeError) when the
    columns do not fit together."""
    paths = [str(path) for path in data["paths"]]
    # strict: only the base64 alphabet (base64.b64decode's validation is a regex, 3x slower)
    raw = binascii.a2b_base64(str(data["records"]), strict_mode=True)
    return _records(paths, str(data["kinds"]), raw, list(data["others"]))


def unpack_block(block: bytes, others: list[Any]) -> Mapping[str, FileRecord]:
    """The records :func:`pack_block` packed; ValueError when the block is not one, or its
    parts do not fit together."""
    at = len(BLOCK_MAGIC) + _BLOCK_HEADER.size
    if not block.startswith(BLOCK_MAGIC) or len(block) < at:
        raise ValueError("not a block of packed files")
    count, size = _BLOCK_HEADER.unpack_from(block, len(BLOCK_MAGIC))
    paths = block[at : at + size].decode("utf-8", "surrogatepass").split("\0") if count else []
    kinds = block[at + size : at + size + count].decode("ascii")
    return _records(paths, kinds, block[at + size + count :], list(others))


class PackedFiles(Mapping[str, FileRecord]):
    """A whole snapshot's files read from a block of packed records of one size, each record
    made when first asked for and kept (every look at a file gets the very same object, as
    from a dict).

    A check of 20,000 files asks for the records of the few git does not vouch for, and
    compares the rest by their keys alone (:class:`FileView`): making every record up
    front was half of reading a checkpoint. Iterating the records makes them all at once.
    """

    __slots__ = ("_at", "_made", "_raw", "_size", "_whole")

    def __init__(self, paths: list[str], raw: bytes, size: int):
        self._at = dict(zip(paths, range(0, len(paths) * size, size), strict=True))
        """Key -> where its record starts in ``_raw`` (a key listed twice: its last record)."""
        self._raw = raw
        self._size = size
        self._made: dict[str, FileRecord] = {}
        self._whole = False

    def __getitem__(self, key: str) -> FileRecord:
        made = self._made.get(key)
        if made is None:
            at = self._at[key]
            made = self._made[key] = FileRecord.hashed(self._raw[at : at + self._size])
        return made

    def get(self, key: str, default: Any = None) -> Any:
        made = self._made.get(key)
        if made is not None:
            return made
        return self[key] if key in self._at else default

    def __contains__(self, key: object) -> bool:
        return key in self._at

    def __iter__(self) -> Iterator[str]:
        return iter(self._at)

    def __len__(self) -> int:
        return len(self._at)

    def keys(self) -> KeysView[str]:
        return self._at.keys()

    def items(self) -> ItemsView[str, FileRecord]:
        return self.records().items()

    def values(self) -> ValuesView[FileRecord]:
        return self.records().values()

    def records(self) -> dict[str, FileRecord]:
        """Every key -> its record, in order; those not made yet are made now, at C speed."""
        if not self._whole:
            size, raw = self._size, self._raw
            if len(self._at) * size == len(raw):  # no key listed twice: the records in order
                cut: Iterable[bytes] = map(itemgetter(0), struct.iter_unpack(f"{size}s", raw))
            else:
                cut = (raw[at : at + size] for at in self._at.values())
            records = dict(zip(self._at, _hashed(cut), strict=True))
            records.update(self._made)  # the records already handed out stay the same objects
            self._made = records
            self._whole = True
        return self._made


def _records(
    paths: list[str], kinds: str, raw: bytes, others: list[Any]
) -> Mapping[str, FileRecord]:
    """Path -> record of the columns (every file of one kind, the common case: made when first
    asked for, :class:`PackedFiles`); ValueError when they do not fit together."""
    if len(kinds) != len(paths):
        raise ValueError(f"{len(paths)} paths but {len(kinds)} kinds")
    size = _KIND_BYTES.get(kinds[:1])
    if size is not None and not others and kinds == kinds[0] * len(kinds):
        if len(raw) != size * len(paths):
            raise ValueError("records and kinds do not fit together")
        return PackedFiles(paths, raw, size)
    files: dict[str, FileRecord] = {}
    new = tuple.__new__
    at = other = 0
    for path, kind in zip(paths, kinds, strict=True):
        size = _KIND_BYTES.get(kind)
        if size is None:
            if kind != "o" or other == len(others):
                raise ValueError(f"record kind {kind!r} has no record")
            files[path] = FileRecord.from_dict(others[other])
            other += 1
            continue
        files[path] = new(FileRecord, (raw[at : at + size], _HASHED))
        at += size
    if at != len(raw) or other != len(others):
        raise ValueError("records and kinds do not fit together")
    return files


def _files_of(
    data: dict[str, Any], bases: Mapping[str, Baseline], store: FileStore | None
) -> Mapping[str, FileRecord]:
    """The file records of a baseline's dict, whole (a block in ``store``, packed inline, or by
    path in versions before 4) or as a delta of one of ``bases``."""
    if "files_stored" in data:
        stored = dict(data["files_stored"])
        if store is None:
            raise ValueError("its files are kept in the run directory, which was not given")
        return unpack_block(store.read(stored["block"]), stored["others"])
    if "files_packed" in data:
        return unpack_files(data["files_packed"])
    if "files_from" not in data:
        return {str(path): FileRecord.from_dict(rec) for path, rec in dict(data["files"]).items()}
    base_id = str(data["files_from"])
    base = bases.get(base_id)
    if base is None:
        raise KeyError(f"files_from names {base_id!r}, which has no baseline")
    removed, changed = data.get("files_removed", ()), dict(data.get("files_changed", {}))
    if not removed and not changed:
        return base.files  # the same files: shared (a snapshot's files never change once taken)
    files = dict(base.files.items())
    for path in removed:
        files.pop(str(path), None)
    for path, rec in changed.items():
        files[str(path)] = FileRecord.from_dict(rec)
    return files
