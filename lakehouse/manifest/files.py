"""Manifest files and manifest lists of one table: writing (rolled at the target size), reading.

Manifest files are immutable and uniquely named, so decoded entries are cached by path; planning
after many commits then only decodes the manifests it has not seen.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable

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
from lakehouse.options import CoreOptions
from lakehouse.paths import FileNamer, TablePaths
from lakehouse.predicate import ColumnStats
from lakehouse.types import DataType

_ROLL_CHECK_RECORDS = 1000  # RollingFileWriter.CHECK_ROLLING_RECORD_CNT


class _EntryCache:
    """A small thread-safe LRU of decoded manifest files, keyed by path."""

    def __init__(self, capacity: int = 2048) -> None:
        self.capacity = capacity
        self._items: OrderedDict[str, list[ManifestEntry]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: str) -> list[ManifestEntry] | None:
        with self._lock:
            value = self._items.get(key)
            if value is not None:
                self._items.move_to_end(key)
            return value

    def put(self, key: str, value: list[ManifestEntry]) -> None:
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self.capacity:
                self._items.popitem(last=False)


_CACHE = _EntryCache()


class ManifestStore:
    """Writes and reads the manifests and manifest lists of one table."""

    def __init__(
        self, io: FileIO, paths: TablePaths, partition_types: list[DataType], options: CoreOptions, table: str
    ) -> None:
        self.io = io
        self.paths = paths
        self.partition_types = partition_types
        self.table = table
        self.codec = avro.avro_codec(options.get("manifest.compression"))
        self.target_size = options.memory("manifest.target-file-size")
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
        path = self.paths.manifest(name)
        cached = _CACHE.get(path)
        if cached is not None:
            return cached
        data = self._read(path, "manifest")
        try:
            entries = [avro.entry_from(r) for r in avro.read_container(data)]
        except Exception as e:  # fastavro raises many types on corrupt input
            raise self._corrupt(path, "manifest", e) from None
        _CACHE.put(path, entries)
        return entries

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

    def write_list(self, metas: list[ManifestFileMeta]) -> tuple[str, int]:
        """Write a manifest list; returns its name and size."""
        name = self._list_names.next()
        data = avro.write_container(
            avro.MANIFEST_LIST_SCHEMA, map(avro.manifest_meta_record, metas), self.codec
        )
        self.io.write_bytes(self.paths.manifest(name), data)
        return name, len(data)

    def read_list(self, name: str) -> list[ManifestFileMeta]:
        path = self.paths.manifest(name)
        data = self._read(path, "manifest list")
        try:
            return [avro.manifest_meta_from(r) for r in avro.read_container(data)]
        except Exception as e:
            raise self._corrupt(path, "manifest list", e) from None

    # ---- index manifests -----------------------------------------------------------------

    def write_index_manifest(self, entries: list[IndexManifestEntry]) -> str:
        """Write the full list of live index files (ADD entries only) as a new index manifest."""
        name = self._index_names.next()
        data = avro.write_container(
            avro.INDEX_MANIFEST_SCHEMA, map(avro.index_entry_record, entries), self.codec
        )
        self.io.write_bytes(self.paths.manifest(name), data)
        return name

    def read_index_manifest(self, name: str) -> list[IndexManifestEntry]:
        path = self.paths.manifest(name)
        data = self._read(path, "index manifest")
        try:
            return [avro.index_entry_from(r) for r in avro.read_container(data)]
        except Exception as e:
            raise self._corrupt(path, "index manifest", e) from None

    # ---- helpers -------------------------------------------------------------------------

    def _read(self, path: str, what: str) -> bytes:
        try:
            return self.io.read_bytes(path)
        except FileNotFoundError:
            raise CorruptFileError(
                f"table {self.table}: {what} {path} is missing; the snapshot referencing it cannot be "
                f"read - roll back to an earlier snapshot"
            ) from None

    def _corrupt(self, path: str, what: str, cause: Exception) -> CorruptFileError:
        return CorruptFileError(
            f"table {self.table}: {what} {path} is corrupt or truncated ({type(cause).__name__}: {cause}); "
            f"roll back to an earlier snapshot or restore the file"
        )

    def delete(self, names: Iterable[str]) -> None:
        self.io.delete_quietly([self.paths.manifest(n) for n in names])
