"""Which files snapshots reference: the one walker behind expiration, rollback, tag deletion and
orphan-file cleanup.

Branches share the table's data, manifest and index files, so every cleanup of one branch also
keeps what the other branches' snapshots and tags reference (:func:`other_branches_files`);
Paimon's own expiration does not, and relies on the tag a branch was created from.

A snapshot references its manifest lists (base, delta, changelog), the manifests they list, its
index manifest and the index files in it, its statistics file, the data files live in it (with
the files kept next to them, such as file indexes) and the changelog files of its changelog
manifests.

Files are immutable and uniquely named, and a file that leaves a snapshot's view never comes
back (a level upgrade keeps the file live). So among consecutive snapshots ``a < ... < b``, a
file referenced by two of them is referenced by every snapshot in between; this gives

- the union of the data files live in ``a..b`` = live(a) plus the ADDs of the deltas of
  ``a+1..b`` (:meth:`References.of_removed`), read without decoding ``b - a`` full file lists;
- "referenced by a removed snapshot and by a kept one" = "referenced by the kept boundary
  snapshot", so cleanup only protects the boundary snapshot and the tags (as Paimon's
  ``FileDeletionBase`` skipping sets do).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from lakehouse.errors import CorruptFileError
from lakehouse.io.fs import FileIO, join
from lakehouse.io.pool import map_reads
from lakehouse.manifest.entries import FileKind, ManifestEntry, ManifestFileMeta
from lakehouse.snapshot import Snapshot

if TYPE_CHECKING:
    from lakehouse.store.table_store import TableStore

STATISTICS_DIR = "statistics"


@dataclass
class FileRefs:
    """Absolute paths of referenced files, by role; cleanup deletes them in the reverse order of
    references (:func:`delete_files`)."""

    data: set[str] = field(default_factory=set)  # data files and the files next to them
    changelog: set[str] = field(default_factory=set)
    index: set[str] = field(default_factory=set)  # hash index, deletion vectors
    manifests: set[str] = field(default_factory=set)  # manifests the lists name
    lists: set[str] = field(default_factory=set)  # manifest lists, index manifests, statistics

    def update(self, other: FileRefs) -> FileRefs:
        for kind in _KINDS:
            getattr(self, kind).update(getattr(other, kind))
        return self

    def minus(self, other: FileRefs) -> FileRefs:
        """These references without ``other``'s (a file may appear in either role)."""
        keep = other.all()
        return FileRefs(**{kind: getattr(self, kind) - keep for kind in _KINDS})

    def all(self) -> set[str]:
        return self.data | self.changelog | self.index | self.manifests | self.lists

    def content(self) -> FileRefs:
        """The data, changelog and index files: what the metadata files lead to."""
        return FileRefs(set(self.data), set(self.changelog), set(self.index))

    def metadata(self) -> FileRefs:
        """Only the metadata files (manifest lists, manifests, index manifests, statistics)."""
        return FileRefs(manifests=set(self.manifests), lists=set(self.lists))

    def chunks(self, size: int) -> list[FileRefs]:
        """These references in pieces of at most ``size`` files, each kind's paths in sorted order,
        the kinds in the order :func:`delete_files` deletes them."""
        pieces: list[FileRefs] = []
        for kind in _DELETION_ORDER:
            paths = sorted(getattr(self, kind))
            for start in range(0, len(paths), size):
                pieces.append(FileRefs(**{kind: set(paths[start : start + size])}))
        return pieces


_KINDS = ("data", "changelog", "index", "manifests", "lists")
_DELETION_ORDER = ("lists", "manifests", "changelog", "index", "data")


class References:
    """Walks snapshots of one table; bucket directories and index manifests are resolved once."""

    def __init__(self, table: TableStore) -> None:
        self.table = table
        self.store = table.manifests()
        self._bucket_paths: dict[tuple[bytes, int], str] = {}
        self._index_manifests: dict[str, set[str]] = {}

    # ---- one snapshot ----------------------------------------------------------------------

    def of(self, snapshot: Snapshot, changelog: bool = True) -> FileRefs:
        """Every file ``snapshot`` references; raises ``CorruptFileError`` if its metadata is gone.

        ``changelog=False`` leaves out changelog files and lists: tags do not keep them (Paimon).
        """
        return self._step(snapshot, True, changelog)

    # ---- many snapshots --------------------------------------------------------------------

    def of_removed(self, snapshots: Sequence[Snapshot], changelog: bool = True) -> FileRefs:
        """Every file any of ``snapshots`` (ascending ids) references, tolerating a snapshot whose
        metadata is gone (an expiration running meanwhile, or Paimon's own killed half way: it
        deletes files before snapshot files): it is skipped and the walk restarts from the full
        file list of the next readable one."""
        refs = FileRefs()
        previous: Snapshot | None = None
        for snap in snapshots:
            chained = previous is not None and previous.id + 1 == snap.id
            try:
                refs.update(self._step(snap, not chained, changelog))
                previous = snap
            except CorruptFileError:
                previous = None
        return refs

    def _step(self, snap: Snapshot, first: bool, changelog: bool) -> FileRefs:
        """Files of ``snap``; data files all live ones when ``first``, else only its delta's ADDs
        (the previous snapshot of the walk covers the rest). The lists and delta manifests of a
        walk are read once each: they stay out of the manifest cache."""
        lists = {name: self.store.read_list(name, cache=False) for name in self._list_names(snap, changelog)}
        data = self.table.live_entries(snap) if first else self._adds(lists[snap.delta_manifest_list])
        changelog_list = snap.changelog_manifest_list
        changelogs = lists.get(changelog_list, []) if changelog_list is not None else []
        return FileRefs(
            data=self._paths(data),
            changelog=self._paths(self._adds(changelogs)),
            index=set(self._index_files(snap)),
            manifests={self.table.paths.manifest(m.file_name) for listed in lists.values() for m in listed},
            lists=self._lists(snap, changelog),
        )

    # ---- pieces ----------------------------------------------------------------------------

    def _lists(self, snap: Snapshot, changelog: bool) -> set[str]:
        """The files ``snap`` names: manifest lists, index manifest, statistics."""
        out = {self.table.paths.manifest(name) for name in self._list_names(snap, changelog)}
        if snap.index_manifest:
            out.add(self.table.paths.manifest(snap.index_manifest))
        if snap.statistics:
            out.add(join(self.table.paths.root, STATISTICS_DIR, snap.statistics))
        return out

    @staticmethod
    def _list_names(snap: Snapshot, changelog: bool) -> list[str]:
        lists = [snap.base_manifest_list, snap.delta_manifest_list]
        if changelog and snap.changelog_manifest_list:
            lists.append(snap.changelog_manifest_list)
        return lists

    def _index_files(self, snap: Snapshot) -> set[str]:
        name = snap.index_manifest
        if not name:
            return set()
        found = self._index_manifests.get(name)
        if found is None:
            paths = self.table.paths
            found = self._index_manifests[name] = {
                paths.index_file(e.index_file.file_name, e.index_file.external_path)
                for e in self.store.read_index_manifest(name)
            }
        return found

    def _adds(self, manifests: list[ManifestFileMeta]) -> list[ManifestEntry]:
        """The ADD entries of ``manifests``."""
        read = self.store.read_manifests([m.file_name for m in manifests], cache=False)
        return [e for entries in read for e in entries if e.kind == FileKind.ADD]

    def _paths(self, entries: Iterable[ManifestEntry]) -> set[str]:
        out: set[str] = set()
        paths = self.table.paths
        for e in entries:
            key = (e.partition, e.bucket)
            bucket_path = self._bucket_paths.get(key)
            if bucket_path is None:
                bucket_path = self._bucket_paths[key] = self.table.bucket_path(e.partition, e.bucket)
            out.update(paths.data_files(bucket_path, e.file))
        return out


def referenced_files(table: TableStore) -> FileRefs:
    """Every file some snapshot or tag of ``table``'s branch references."""
    snapshots = table.snapshots
    refs = References(table)
    existing = [snapshots.snapshot(sid) for sid in snapshots.snapshot_ids()]
    used = refs.of_removed(existing)  # tolerant: an expiration may be removing the oldest ones
    for tagged in {s.id: s for s in snapshots.tags().values()}.values():
        used.update(refs.of_removed([tagged], changelog=False))
    return used


def other_branches_files(table: TableStore) -> FileRefs:
    """Every file the snapshots and tags of ``table``'s other branches reference (``main``
    included when ``table`` is on a branch): branches share data, manifest and index files, so a
    cleanup on one branch keeps these."""
    used = FileRefs()
    for other in table.other_branches():
        used.update(referenced_files(other))
    return used


@dataclass(frozen=True)
class Deleted:
    """How many files a cleanup removed, by kind."""

    data_files: int = 0
    changelog_files: int = 0
    index_files: int = 0
    metadata_files: int = 0

    @property
    def total(self) -> int:
        return self.data_files + self.changelog_files + self.index_files + self.metadata_files

    def __add__(self, other: Deleted) -> Deleted:
        return Deleted(
            self.data_files + other.data_files,
            self.changelog_files + other.changelog_files,
            self.index_files + other.index_files,
            self.metadata_files + other.metadata_files,
        )


def delete_files(io: FileIO, refs: FileRefs) -> Deleted:
    """Delete ``refs`` top down: manifest lists (with index manifests and statistics), manifests,
    then changelog, index and data files, so that no file outlives a file naming it. Callers
    delete the snapshot or tag files first: from then on every file here is unreferenced, and
    whatever a cleanup killed half way leaves is an orphan that ``remove_orphan_files`` finds;
    so pieces of ``refs.content().chunks()`` may also go in any order, in any process."""
    metadata = delete_paths(io, refs.lists) + delete_paths(io, refs.manifests)
    changelog = delete_paths(io, refs.changelog)
    index = delete_paths(io, refs.index)
    data = delete_paths(io, refs.data)
    return Deleted(data, changelog, index, metadata)


def delete_paths(io: FileIO, paths: Iterable[str]) -> int:
    """Delete files in parallel; how many existed. On a local disk too: an unlink of a written
    file waits on the filesystem (its journal, discards: about 1 ms on a VM disk), which threads
    overlap, as they overlap an object store's round trips."""
    return sum(map_reads(io.delete, sorted(paths)))
