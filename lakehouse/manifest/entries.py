"""Metadata records stored in manifests: DataFileMeta, ManifestEntry, ManifestFileMeta, SimpleStats.

Field meanings follow Paimon's spec (``docs/concepts/spec/manifest.md``); BinaryRow-valued fields
hold the serialized form (big-endian arity, then the row bytes).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import IntEnum
from typing import Any

from lakehouse.manifest import binary_row


class FileKind(IntEnum):
    ADD = 0
    DELETE = 1


class FileSource(IntEnum):
    APPEND = 0
    COMPACT = 1


EMPTY_ROW = binary_row.serialize(binary_row.EMPTY_ROW, 0)


@dataclass(frozen=True)
class SimpleStats:
    """Min and max rows (serialized BinaryRows) and per-column null counts (None = unknown)."""

    min_values: bytes
    max_values: bytes
    null_counts: tuple[int | None, ...]


EMPTY_STATS = SimpleStats(EMPTY_ROW, EMPTY_ROW, ())


@dataclass(frozen=True)
class DataFileMeta:
    """One data file: size, rows, key range, stats and LSM level (``org.apache.paimon.io.DataFileMeta``)."""

    file_name: str
    file_size: int
    row_count: int
    min_key: bytes
    max_key: bytes
    key_stats: SimpleStats
    value_stats: SimpleStats
    min_sequence_number: int
    max_sequence_number: int
    schema_id: int
    level: int
    extra_files: tuple[str, ...] = ()
    creation_time: int | None = None  # local wall-clock millis, as Java stores it
    delete_row_count: int | None = 0
    embedded_index: bytes | None = None
    file_source: int | None = FileSource.APPEND
    value_stats_cols: tuple[str, ...] | None = None
    external_path: str | None = None
    first_row_id: int | None = None
    write_cols: tuple[str, ...] | None = None
    write_cols_sequences: tuple[int, ...] | None = None

    @property
    def stats_columns(self) -> tuple[str, ...] | None:
        """The columns its value stats cover, in order: ``_VALUE_STATS_COLS``, else the columns
        the file holds (``_WRITE_COLS``, data evolution), else None - every column of its schema."""
        return self.value_stats_cols if self.value_stats_cols is not None else self.write_cols


# partition, bucket, level, file name, extra files, embedded index, external path
FileIdentifier = tuple[bytes, int, int, str, tuple[str, ...], bytes | None, str | None]


@dataclass(frozen=True)
class ManifestEntry:
    """An ADD or DELETE of a data file in a partition and bucket."""

    kind: FileKind
    partition: bytes
    bucket: int
    total_buckets: int
    file: DataFileMeta

    @property
    def identifier(self) -> FileIdentifier:
        """What makes a DELETE cancel an ADD (``FileEntry.Identifier``)."""
        f = self.file
        return (
            self.partition,
            self.bucket,
            f.level,
            f.file_name,
            f.extra_files,
            f.embedded_index,
            f.external_path,
        )

    def with_kind(self, kind: FileKind) -> ManifestEntry:
        return replace(self, kind=kind)


@dataclass(frozen=True)
class ManifestFileMeta:
    """One manifest file as listed in a manifest list."""

    file_name: str
    file_size: int
    num_added_files: int
    num_deleted_files: int
    partition_stats: SimpleStats
    schema_id: int
    min_bucket: int | None = None
    max_bucket: int | None = None
    min_level: int | None = None
    max_level: int | None = None
    min_row_id: int | None = None
    max_row_id: int | None = None


def merge_entries(entries: list[ManifestEntry]) -> list[ManifestEntry]:
    """Fold ADD/DELETE entries in order: a DELETE cancels its ADD, an unmatched DELETE stays.

    Raises ValueError on a file added twice (``FileEntry.mergeEntries``).
    """
    live: dict[FileIdentifier, ManifestEntry] = {}
    for e in entries:
        key = e.identifier
        if e.kind == FileKind.ADD:
            if key in live:
                raise ValueError(f"file {e.file.file_name} is added twice")
            live[key] = e
        elif key in live:
            del live[key]
        else:
            live[key] = e
    return list(live.values())


@dataclass(frozen=True)
class DeletionVectorMeta:
    """Where one data file's deletion vector sits inside a deletion-vectors index file."""

    data_file: str
    offset: int
    length: int
    cardinality: int | None = None


@dataclass(frozen=True)
class IndexFileMeta:
    """A table index file: ``HASH`` (dynamic buckets) or ``DELETION_VECTORS``."""

    index_type: str
    file_name: str
    file_size: int
    row_count: int
    dv_ranges: tuple[DeletionVectorMeta, ...] | None = None
    external_path: str | None = None
    global_index: dict[str, Any] | None = None  # opaque: carried through, never interpreted


@dataclass(frozen=True)
class IndexManifestEntry:
    """An index file of a (partition, bucket); persisted index manifests hold only ADDs."""

    kind: FileKind
    partition: bytes
    bucket: int
    index_file: IndexFileMeta
