"""What a write takes from the table's schema and options, parsed once: the data-file layout,
the merge engine, the changelog producer, buffering and compaction settings."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa

from lakehouse.fileindex import options as fileindex_options
from lakehouse.fileindex.build import FileIndexBuilder
from lakehouse.format import parquet
from lakehouse.manifest import stats
from lakehouse.mergetree.changelog import ChangelogProducer, changelog_layout
from lakehouse.mergetree.engine import MergeEngine
from lakehouse.options import (
    DATA_FILE_PREFIX,
    DATA_FILE_THIN_MODE,
    DELETION_VECTORS_BITMAP64,
    DELETION_VECTORS_ENABLED,
    FILE_COMPRESSION,
    FILE_COMPRESSION_ZSTD_LEVEL,
    SORT_SPILL_BUFFER_SIZE,
    WRITE_BUFFER_MAX_DISK_SIZE,
    WRITE_BUFFER_SPILLABLE,
    WRITE_MAX_WRITERS_TO_SPILL,
    WRITE_ONLY,
    ChangelogProducerKind,
    CoreOptions,
    parse_memory_size,
)
from lakehouse.paths import FileNamer
from lakehouse.schema import TableSchema, check_writable, check_writable_keys
from lakehouse.store.data_writer import FileLayout
from lakehouse.types import DataField, DataType

if TYPE_CHECKING:
    from lakehouse.store.table_store import TableStore


@dataclass(frozen=True)
class SpillSettings:
    """How a write buffer and merges use local disk: ``write-buffer-spillable``,
    ``write-buffer-spill.max-disk-size``, ``sort-spill-threshold`` (runs merged at once) and
    ``sort-spill-buffer-size`` (what such a merge holds)."""

    spillable: bool
    max_disk: int
    threshold: int
    buffer_size: int

    @classmethod
    def of(cls, options: CoreOptions) -> SpillSettings:
        max_disk = options.get(WRITE_BUFFER_MAX_DISK_SIZE)
        return cls(
            spillable=options.get_bool(WRITE_BUFFER_SPILLABLE),
            max_disk=parse_memory_size(max_disk, WRITE_BUFFER_MAX_DISK_SIZE) if max_disk else 2**63 - 1,
            threshold=options.sort_spill_threshold,
            buffer_size=options.memory(SORT_SPILL_BUFFER_SIZE),
        )


@dataclass(frozen=True)
class WriteSettings:
    """A table's write configuration; ``overwrite``: the write replaces data (no changelog)."""

    schema: TableSchema
    names: FileNamer
    overwrite: bool
    primary_key: list[str]  # trimmed (without partition keys); [] for append tables
    key_fields: list[DataField]
    bucket_count: int
    bucket_types: list[DataType]
    engine: MergeEngine | None  # primary-key tables
    changelog: ChangelogProducer | None  # primary-key tables, not when overwriting (Paimon)
    layout: FileLayout
    changelog_layout: FileLayout
    buffer_size: int
    spill: SpillSettings
    max_open_writers: int  # append writers kept open between flushes (write-max-writers-to-spill)
    write_only: bool
    stop_trigger: int
    deletion_vectors: bool
    bitmap64: bool

    @classmethod
    def of(cls, table: TableStore, names: FileNamer, overwrite: bool = False) -> WriteSettings:
        """The settings of a write of ``table``; refuses tables this engine must not write."""
        schema = table.schema
        options = schema.core_options
        check_writable(schema, table.name)
        keyed = bool(schema.primary_keys)
        if keyed:
            check_writable_keys(schema, table.name)
        primary_key = list(schema.trimmed_primary_keys) if keyed else []
        key_fields = schema.fields_named(primary_key)
        value_fields = list(schema.fields)
        thin = options.get_bool(DATA_FILE_THIN_MODE)
        compression, prefix = options.required(FILE_COMPRESSION), options.required(DATA_FILE_PREFIX)
        layout = FileLayout(
            io=table.io,
            schema_id=schema.id,
            file_schema=_file_schema(value_fields, key_fields if keyed else None, thin),
            value_fields=value_fields,
            value_modes=stats.value_modes(value_fields, options),
            key_fields=key_fields,
            target_size=options.target_file_size(keyed),
            parquet=parquet.ParquetOptions(compression, options.get_int(FILE_COMPRESSION_ZSTD_LEVEL)),
            prefix=prefix,
            indexes=FileIndexBuilder.from_options(
                schema.options, {f.name: f.type for f in value_fields}, table.name
            )
            or None,
            index_threshold=fileindex_options.in_manifest_threshold(schema.options),
            names=names,
        )
        return cls(
            schema=schema,
            names=names,
            overwrite=overwrite,
            primary_key=primary_key,
            key_fields=key_fields,
            bucket_count=options.bucket,
            bucket_types=[f.type for f in schema.fields_named(schema.bucket_keys)],
            engine=MergeEngine(schema, table.name) if keyed else None,
            changelog=ChangelogProducer.of(schema, table.name) if keyed and not overwrite else None,
            layout=layout,
            changelog_layout=changelog_layout(layout, options),
            buffer_size=options.write_buffer_size,
            spill=SpillSettings.of(options),
            max_open_writers=options.get_int(WRITE_MAX_WRITERS_TO_SPILL),
            write_only=options.get_bool(WRITE_ONLY),
            stop_trigger=options.stop_trigger,
            deletion_vectors=keyed and options.get_bool(DELETION_VECTORS_ENABLED),
            bitmap64=options.get_bool(DELETION_VECTORS_BITMAP64),
        )

    def produces(self, kind: ChangelogProducerKind) -> bool:
        """Whether this write's changelog producer is ``kind``."""
        return self.changelog is not None and self.changelog.kind == kind


def _file_schema(value_fields: list[DataField], key_fields: list[DataField] | None, thin: bool) -> pa.Schema:
    """Columns of a data file: the values, and for primary-key tables the key copies (unless
    ``data-file.thin-mode``) and the system columns first."""
    fields = [parquet.data_field(f) for f in value_fields]
    if key_fields is None:
        return pa.schema(fields)
    keys = [] if thin else [parquet.key_field(f) for f in key_fields]
    return pa.schema([*keys, *parquet.SYSTEM_FIELDS, *fields])
