"""Manifest files and manifest lists of one table: writing (rolled at the target size), reading.

Manifest files are immutable and uniquely named, so decoded files are cached by path (bounded by
their estimated memory, as Paimon's manifest cache is by bytes); planning after many commits
then only decodes the manifests it has not seen. Manifests are decoded column-wise, many at once
(:mod:`lakehouse.manifest.avro_columns`), and their entries built for the partitions a plan needs
(:mod:`lakehouse.manifest.decoded`).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence

from lakehouse.errors import CorruptFileError
from lakehouse.io.fs import FileIO
from lakehouse.io.pool import map_reads
from lakehouse.manifest import avro, avro_columns, avro_container, binary_row
from lakehouse.manifest.avro_container import Container
from lakehouse.manifest.decoded import DecodedManifest
from lakehouse.manifest.entries import (
    DataFileMeta,
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
CACHE_BYTES = 256 * 2**20
_RECORD_BYTES = 600  # memory of one decoded manifest-list or index-manifest record


class _MetadataCache:
    """A thread-safe LRU of decoded metadata files keyed by path, bounded by their memory."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._items: OrderedDict[str, tuple[object, int]] = OrderedDict()
        self._held = 0
        self._lock = threading.Lock()

    def get(self, key: str):
        with self._lock:
            found = self._items.get(key)
            if found is None:
                return None
            self._items.move_to_end(key)
            return found[0]

    def put(self, key: str, value: DecodedManifest | list) -> None:
        """Add or re-weigh ``value`` (a decoded manifest grows as its entries are built)."""
        size = value.nbytes if isinstance(value, DecodedManifest) else _RECORD_BYTES * len(value)
        with self._lock:
            old = self._items.pop(key, None)
            self._held += size - (old[1] if old else 0)
            self._items[key] = (value, size)
            while self._held > self.capacity and len(self._items) > 1:
                _, (_, dropped) = self._items.popitem(last=False)
                self._held -= dropped

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._held = 0

    def path_holding(self, f: DataFileMeta) -> str | None:
        """The path of the cached manifest whose entries hold ``f`` (None: none cached does)."""
        with self._lock:
            items = list(self._items.items())
        return next((p for p, (v, _) in items if isinstance(v, DecodedManifest) and v.holds(f)), None)


_CACHE = _MetadataCache(CACHE_BYTES)


def damaged_entry(table: str, f: DataFileMeta, problem: object) -> CorruptFileError:
    """The error for a value of ``f``'s manifest entry that does not decode where it is used (a
    key or stats BinaryRow, decoded far from its manifest): it names the manifest, found among
    the cached ones, else the data file."""
    path = _CACHE.path_holding(f)
    where = f"manifest {path}" if path else "its manifest"
    return CorruptFileError(
        f"table {table}: the entry of data file {f.file_name} in {where} is damaged ({problem}); roll the "
        f"table back to a snapshot written before it, or restore the manifest"
    )


def _covering_stats(types: list[DataType], parts: list[list[ColumnStats]]) -> SimpleStats:
    """One SimpleStats covering several: per column the least min, the greatest max and the null
    counts summed."""
    from lakehouse.manifest import stats

    columns = [
        ColumnStats(
            min((p[i].min for p in parts if p[i].min is not None), default=None),
            max((p[i].max for p in parts if p[i].max is not None), default=None),
            sum(p[i].null_count or 0 for p in parts),
            sum(p[i].row_count for p in parts),
        )
        for i in range(len(types))
    ]
    return stats.to_simple_stats(types, [columns])[0]


class ManifestStore:
    """Writes and reads the manifests and manifest lists of one table."""

    def __init__(
        self, io: FileIO, paths: TablePaths, partition_types: list[DataType], options: CoreOptions, table: str
    ) -> None:
        self.io = io
        self.paths = paths
        self.partition_types = partition_types
        self.table = table
        compression = options.required(MANIFEST_COMPRESSION)
        self.codec = avro.avro_codec(compression)
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

    def concat_manifests(self, metas: list[ManifestFileMeta]) -> ManifestFileMeta | None:
        """Manifests that only add files merged into one by copying their encoded records: a merge
        that costs bytes, not entries (none is decoded). None when one was written with another
        Avro schema than this store writes: merge their entries instead."""
        from lakehouse.manifest import stats

        paths = [self.paths.manifest(m.file_name) for m in metas]
        writer = avro.ContainerWriter(avro.MANIFEST_ENTRY_SCHEMA, self.codec)
        read = map_reads(lambda p: self._read_file(p, "manifest"), paths, parallel=not self.io.is_local)
        for path, data in zip(paths, read, strict=True):
            if not writer.append_file(self._parse(path, data, "manifest")):
                return None
        data = writer.finish()
        name = self._manifest_names.next()
        self.io.write_bytes(self.paths.manifest(name), data)
        types = self.partition_types
        decoded = [stats.decode(m.partition_stats, types, m.num_added_files) for m in metas]

        def bound(pick, values):
            return None if any(v is None for v in values) else pick(values)

        return ManifestFileMeta(
            file_name=name,
            file_size=len(data),
            num_added_files=sum(m.num_added_files for m in metas),
            num_deleted_files=0,
            partition_stats=_covering_stats(types, decoded),
            schema_id=max(m.schema_id for m in metas),
            min_bucket=bound(min, [m.min_bucket for m in metas]),
            max_bucket=bound(max, [m.max_bucket for m in metas]),
            min_level=bound(min, [m.min_level for m in metas]),
            max_level=bound(max, [m.max_level for m in metas]),
            min_row_id=bound(min, [m.min_row_id for m in metas]),
            max_row_id=bound(max, [m.max_row_id for m in metas]),
        )

    def _publish(self, entries: list[ManifestEntry], data: bytes, schema_id: int) -> ManifestFileMeta:
        name = self._manifest_names.next()
        path = self.paths.manifest(name)
        self.io.write_bytes(path, data)
        _CACHE.put(path, DecodedManifest.of_entries(list(entries), path))
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
        return self.read_manifests([name])[0]

    def read_manifests(
        self, names: Sequence[str], partitions: Callable[[bytes], bool] | None = None, cache: bool = True
    ) -> list[list[ManifestEntry]]:
        """The entries of each manifest, of the partitions ``partitions`` accepts (default all);
        the manifests not cached are read (in parallel on remote storage) and decoded together,
        and cached unless ``cache`` is False (a walk over history reads each once)."""
        paths = [self.paths.manifest(n) for n in names]
        found = [_CACHE.get(p) for p in paths]
        missing = [p for p, d in zip(paths, found, strict=True) if d is None]
        decoded = dict(zip(missing, self._decode_manifests(missing), strict=True))
        out = []
        for path, d in zip(paths, found, strict=True):
            d = d or decoded[path]
            out.append(d.entries(partitions))
            if cache or path not in decoded:
                _CACHE.put(path, d)  # re-weighed: entries were built
        return out

    def _decode_manifests(self, paths: list[str]) -> list[DecodedManifest]:
        raws = map_reads(lambda p: self._read_file(p, "manifest"), paths, parallel=not self.io.is_local)
        containers = [self._parse(p, raw, "manifest") for p, raw in zip(paths, raws, strict=True)]
        try:
            columns = avro_columns.decode(containers)
        except CorruptFileError:  # records that do not decode: read each file alone, which names it
            columns = [None] * len(containers)
        decoded = [
            DecodedManifest.of_entries(self._decode_records(p, f, "manifest", avro.entry_from), p)
            if c is None
            else DecodedManifest.of_columns(c, p)
            for p, f, c in zip(paths, containers, columns, strict=True)
        ]
        self._check_partitions(paths, decoded)
        return decoded

    def _check_partitions(self, paths: list[str], decoded: list[DecodedManifest]) -> None:
        """Every distinct partition of the manifests decodes: planning and reading decode them
        far from here, where the manifest is no longer known. A few microseconds per distinct
        partition, not per entry."""
        seen: set[bytes] = set()
        for path, manifest in zip(paths, decoded, strict=True):
            for p in manifest.partitions:
                if p not in seen:
                    seen.add(p)
                    try:
                        binary_row.decode_row(binary_row.deserialize(p)[1], self.partition_types)
                    except CorruptFileError as e:
                        raise self._corrupt(path, "manifest", f"a partition does not decode ({e})") from None

    def partition_stats(self, partitions: Iterable[bytes]) -> SimpleStats:
        """Min, max and null counts of the partition values of a manifest's entries."""
        types = self.partition_types
        distinct = {p: None for p in partitions}
        values = [binary_row.decode_row(binary_row.deserialize(p)[1], types) for p in distinct]
        return _covering_stats(types, [[ColumnStats(v, v, int(v is None), 1) for v in row] for row in values])

    # ---- manifest lists ------------------------------------------------------------------

    def data_manifests(self, snapshot: Snapshot) -> list[ManifestFileMeta]:
        """The manifests of ``snapshot``'s data files: its base list, then its delta list."""
        return self.read_list(snapshot.base_manifest_list) + self.read_list(snapshot.delta_manifest_list)

    def live_entries(
        self, manifests: list[ManifestFileMeta], partitions: Callable[[bytes], bool] | None = None
    ) -> list[ManifestEntry]:
        """ADD entries of ``manifests`` that no DELETE among them cancelled, in manifest order
        (``AbstractFileStoreScan``); only of the partitions ``partitions`` accepts, if given (a
        DELETE only ever cancels an ADD of its own partition)."""
        deleted: set[tuple] = set()
        adds: list[ManifestEntry] = []
        for entries in self.read_manifests([m.file_name for m in manifests], partitions):
            for e in entries:
                if e.kind == FileKind.DELETE:
                    deleted.add(e.identifier)
                else:
                    adds.append(e)
        return [e for e in adds if e.identifier not in deleted] if deleted else adds

    def delta_entries(self, snapshot: Snapshot) -> list[ManifestEntry]:
        """The entries of ``snapshot``'s delta, in order: the files its commit added and deleted."""
        names = [m.file_name for m in self.read_list(snapshot.delta_manifest_list)]
        return [e for entries in self.read_manifests(names) for e in entries]

    def added_entries(self, snapshot: Snapshot) -> list[ManifestEntry]:
        """ADD entries of ``snapshot``'s delta: the files its commit added (new data or
        compaction output)."""
        return [e for e in self.delta_entries(snapshot) if e.kind == FileKind.ADD]

    def write_list(self, metas: list[ManifestFileMeta]) -> tuple[str, int]:
        """Write a manifest list; returns its name and size."""
        return self._write_records(
            self._list_names, avro.MANIFEST_LIST_SCHEMA, avro.manifest_meta_record, metas
        )

    def read_list(self, name: str, cache: bool = True) -> list[ManifestFileMeta]:
        return self._read_records(name, "manifest list", self._manifest_meta, cache)

    def _manifest_meta(self, record: dict) -> ManifestFileMeta:
        """A manifest list's record, its partition bounds checked: planning decodes them to prune,
        where the list is no longer known (a few per list)."""
        from lakehouse.manifest import stats

        meta = avro.manifest_meta_from(record)
        stats.decode(meta.partition_stats, self.partition_types, 0)
        return meta

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

    def _read_records(self, name: str, what: str, decode: Callable, cache: bool = True) -> list:
        """Decoded records of an immutable metadata file (cached by path unless ``cache`` is False)."""
        path = self.paths.manifest(name)
        cached = _CACHE.get(path)
        if cached is not None:
            return cached
        container = self._parse(path, self._read_file(path, what), what)
        records = self._decode_records(path, container, what, decode)
        if cache:
            _CACHE.put(path, records)
        return records

    def _read_file(self, path: str, what: str) -> bytes:
        try:
            return self.io.read_bytes(path)
        except FileNotFoundError:
            raise CorruptFileError(
                f"table {self.table}: {what} {path} is missing; the snapshot referencing it cannot be "
                f"read - roll back to an earlier snapshot"
            ) from None

    def _parse(self, path: str, data: bytes, what: str) -> Container:
        try:
            return avro_container.parse(data)
        except CorruptFileError as e:
            raise self._corrupt(path, what, e) from None

    def _decode_records(self, path: str, container: Container, what: str, decode: Callable) -> list:
        try:
            return [decode(r) for r in container.records()]
        except CorruptFileError as e:
            raise self._corrupt(path, what, e) from None
        except (KeyError, ValueError, TypeError, AttributeError) as e:  # records of another shape
            raise self._corrupt(path, what, f"a record does not fit ({type(e).__name__}: {e})") from None

    def _corrupt(self, path: str, what: str, problem: object) -> CorruptFileError:
        return CorruptFileError(
            f"table {self.table}: {what} {path} is corrupt or truncated: {problem}; roll back to an earlier "
            f"snapshot or restore the file"
        )

    def delete(self, names: Iterable[str]) -> None:
        self.io.delete_quietly([self.paths.manifest(n) for n in names])
