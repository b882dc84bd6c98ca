"""Manifest files and manifest lists of one table: writing (rolled at the target size), reading.

Manifest files are immutable and uniquely named, so decoded entries are cached by path; planning
after many commits then only decodes the manifests it has not seen.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable

from lakehouse.errors import CorruptFileError
from lakehouse.io.fs import FileIO
from lakehouse.manifest import avro, binary_row
from lakehouse.manifest.entries import (
    FileKind,
    IndexManifestEntry,
    ManifestEntry,
    ManifestFileMeta,
    SimpleStats,
)
from lakehouse.options import MANIFEST_COMPRESSION, MANIFEST_TARGET_FILE_SIZE, CoreOptions
from lakehouse.paths import FileNamer, TablePaths
from lakehouse.predicate import ColumnStats
from lakehouse.snapshot import Snapshot
from lakehouse.types import DataType

_ROLL_CHECK_RECORDS = 1000  # RollingFileWriter.CHECK_ROLLING_RECORD_CNT


class _RecordCache:
    """A small thread-safe LRU of decoded metadata files, keyed by path."""

    def __init__(self, capacity: int = 2048) -> None:
        self.capacity = capacity
        self._items: OrderedDict[str, list] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: str) -> list | None:
        with self._lock:
            value = self._items.get(key)
            if value is not None:
                self._items.move_to_end(key)
            return value

    def put(self, key: str, value: list) -> None:
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self.capacity:
                self._items.popitem(last=False)


_CACHE = _RecordCache()


class ManifestStore:
    """Writes and reads the manifests and manifest lists of one table."""

    def __init__(
        self, io: FileIO, paths: TablePaths, partition_types: list[DataType], options: CoreOptions, table: str
    ) -> None:
        self.io = io
        self.paths = paths
        self.partition_types = partition_types
        self.table = table
        self.codec = avro.avro_codec(options.get(MANIFEST_COMPRESSION))
        self.target_size = options.memory(MANIFEST_TARGET_FILE_SIZE)
        self._manifest_names = FileNamer("manifest-")
        self._list_names = FileNamer("manifest-list-")
        self._index_names = FileNamer("index-manifest-")

    # ---- manifest files ------------------------------------------------------------------

    def write_manifests(self, entries: list[ManifestEntry], schema_id: int) -> list[ManifestFileMeta]:
        """Write entries to manifest files rolled at ``manifest.target-file-size``."""
        metas: list[ManifestFileMeta] = []
        start = 0
        writer = avro.ContainerWriter(avro.MANIFEST_ENTRY_SCHEMA, self.codec)
        for i, e in enumerate(entries, 1):
            writer.write(avro.entry_record(e))
            if i % _ROLL_CHECK_RECORDS == 0 and writer.flushed_size() >= self.target_size:
                metas.append(self._publish(entries[start:i], writer.finish(), schema_id))
                writer = avro.ContainerWriter(avro.MANIFEST_ENTRY_SCHEMA, self.codec)
                start = i
        if start < len(entries):
            metas.append(self._publish(entries[start:], writer.finish(), schema_id))
        return metas

    def _publish(self, entries: list[ManifestEntry], data: bytes, schema_id: int) -> ManifestFileMeta:
        name = self._manifest_names.next()
        path = self.paths.manifest(name)
        self.io.write_bytes(path, data)
        _CACHE.put(path, list(entries))
        adds = sum(1 for e in entries if e.kind == FileKind.ADD)
        return ManifestFileMeta(
            file_name=name,
            file_size=len(data),
            num_added_files=adds,
            num_deleted_files=len(entries) - adds,
            partition_stats=self.partition_stats(e.partition for e in entries),
            schema_id=max((e.file.schema_id for e in entries), default=schema_id),
            min_bucket=min(e.bucket for e in entries),
            max_bucket=max(e.bucket for e in entries),
            min_level=min(e.file.level for e in entries),
            max_level=max(e.file.level for e in entries),
        )

    def read_manifest(self, name: str) -> list[ManifestEntry]:
        return self._read_records(name, "manifest", avro.entry_from)

    def partition_stats(self, partitions: Iterable[bytes]) -> SimpleStats:
        """Min, max and null counts of the partition values of a manifest's entries."""
        from lakehouse.manifest import stats

        types = self.partition_types
        distinct = {p: None for p in partitions}
        values = [binary_row.decode_row(binary_row.deserialize(p)[1], types) for p in distinct]
        columns = []
        for i in range(len(types)):
            present = [v[i] for v in values if v[i] is not None]
            nulls = len(values) - len(present)
            columns.append(
                ColumnStats(min(present, default=None), max(present, default=None), nulls, len(values))
            )
        return stats.to_simple_stats(types, [columns])[0]

    # ---- manifest lists ------------------------------------------------------------------

    def data_manifests(self, snapshot: Snapshot) -> list[ManifestFileMeta]:
        """The manifests of ``snapshot``'s data files: its base list, then its delta list."""
        return self.read_list(snapshot.base_manifest_list) + self.read_list(snapshot.delta_manifest_list)

    def live_entries(self, manifests: list[ManifestFileMeta]) -> list[ManifestEntry]:
        """ADD entries of ``manifests`` that no DELETE among them cancelled, in manifest order
        (``AbstractFileStoreScan``)."""
        deleted: set[tuple] = set()
        adds: list[ManifestEntry] = []
        for m in manifests:
            for e in self.read_manifest(m.file_name):
                if e.kind == FileKind.DELETE:
                    deleted.add(e.identifier)
                else:
                    adds.append(e)
        return [e for e in adds if e.identifier not in deleted] if deleted else adds

    def added_entries(self, snapshot: Snapshot) -> list[ManifestEntry]:
        """ADD entries of ``snapshot``'s delta: the files its commit added (new data or
        compaction output)."""
        manifests = self.read_list(snapshot.delta_manifest_list)
        return [e for m in manifests for e in self.read_manifest(m.file_name) if e.kind == FileKind.ADD]

    def write_list(self, metas: list[ManifestFileMeta]) -> tuple[str, int]:
        """Write a manifest list; returns its name and size."""
        return self._write_records(
            self._list_names, avro.MANIFEST_LIST_SCHEMA, avro.manifest_meta_record, metas
        )

    def read_list(self, name: str) -> list[ManifestFileMeta]:
        return self._read_records(name, "manifest list", avro.manifest_meta_from)

    # ---- index manifests -----------------------------------------------------------------

    def write_index_manifest(self, entries: list[IndexManifestEntry]) -> str:
        """Write the full list of live index files (ADD entries only) as a new index manifest."""
        name, _ = self._write_records(
            self._index_names, avro.INDEX_MANIFEST_SCHEMA, avro.index_entry_record, entries
        )
        return name

    def read_index_manifest(self, name: str) -> list[IndexManifestEntry]:
        return self._read_records(name, "index manifest", avro.index_entry_from)

    # ---- helpers -------------------------------------------------------------------------

    def _write_records(
        self, names: FileNamer, schema: dict, encode: Callable, items: list
    ) -> tuple[str, int]:
        name = names.next()
        data = avro.write_container(schema, map(encode, items), self.codec)
        path = self.paths.manifest(name)
        self.io.write_bytes(path, data)
        _CACHE.put(path, list(items))
        return name, len(data)

    def _read_records(self, name: str, what: str, decode: Callable) -> list:
        """Decoded records of an immutable metadata file (cached by path)."""
        path = self.paths.manifest(name)
        cached = _CACHE.get(path)
        if cached is not None:
            return cached
        try:
            data = self.io.read_bytes(path)
        except FileNotFoundError:
            raise CorruptFileError(
                f"table {self.table}: {what} {path} is missing; the snapshot referencing it cannot be "
                f"read - roll back to an earlier snapshot"
            ) from None
        try:
            records = [decode(r) for r in avro.read_container(data)]
        except Exception as e:  # fastavro raises many types on corrupt input
            raise CorruptFileError(
                f"table {self.table}: {what} {path} is corrupt or truncated ({type(e).__name__}: {e}); "
                f"roll back to an earlier snapshot or restore the file"
            ) from None
        _CACHE.put(path, records)
        return records

    def delete(self, names: Iterable[str]) -> None:
        self.io.delete_quietly([self.paths.manifest(n) for n in names])
