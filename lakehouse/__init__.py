"""Lakehouse: a Python storage engine for Apache Paimon tables.

This package's names are the public API, typed (``py.typed``) and kept stable; everything else
under ``lakehouse`` is the engine's own. Integrations - the PySpark data source
(:mod:`lakehouse.spark`), the Dagster library (``dagster_lakehouse``) - are built on these names
and :mod:`lakehouse.errors` only, as any other engine or job can be:

- catalog and tables: :class:`Catalog`, :class:`Table`, :class:`SystemTable`, :func:`table_at`;
- reads in Paimon's shape: ``table.new_read_builder()`` -> :class:`ReadBuilder` -> ``new_scan()``
  :class:`TableScan` -> :class:`Plan` of :class:`Split` -> ``new_read()`` :class:`TableRead`
  (whole, or a batch at a time; :class:`RawFile` for other engines' readers), filters built with
  :func:`col`; streams through :class:`StreamScan`;
- writes in Paimon's shape: ``table.new_batch_write_builder()`` -> ``new_write()``
  :class:`TableWrite` -> ``prepare_commit()`` :class:`CommitMessage` -> ``new_commit()``
  ``commit`` / ``abort``; streams through :class:`StreamWriteBuilder` (commit identifiers);
  writes spread over processes through :class:`WriteJob` and :class:`RowRouter` (its
  :attr:`~RowRouter.formula` for engines that route rows themselves);
- maintenance as :class:`MaintenanceJob` (start, units, run, finish) and its reports;
- metadata records: :class:`TableSchema` and its types, :class:`Snapshot`, :class:`ManifestEntry`.
"""

from lakehouse import errors
from lakehouse.append.sort_keys import SortStrategy
from lakehouse.bucket.mode import BucketMode
from lakehouse.catalog import Catalog, define_table, table_at
from lakehouse.commit.table_commit import Overwrite, TableCommit
from lakehouse.deletionvectors.index_file import DeletionFile
from lakehouse.iceberg.metadata import IcebergSync
from lakehouse.io.fs import storage_options
from lakehouse.manifest.binary_row import Slot
from lakehouse.manifest.entries import DataFileMeta, FileKind, ManifestEntry
from lakehouse.murmur import murmur_hash
from lakehouse.ops.branches import Branch, FastForward
from lakehouse.ops.compaction import Compaction
from lakehouse.ops.expire import Expiration
from lakehouse.ops.file_index import IndexReport, IndexRewrite
from lakehouse.ops.lsm_shape import BucketShape
from lakehouse.ops.manifest_compaction import ManifestCompaction
from lakehouse.ops.orphans import OrphanFiles
from lakehouse.ops.partition_expire import PartitionExpiration
from lakehouse.ops.rollback import Rollback
from lakehouse.options import TOKEN as TOKEN
from lakehouse.options import TOKEN_ENV as TOKEN_ENV
from lakehouse.options import WAREHOUSE_ENV as WAREHOUSE_ENV
from lakehouse.options import (
    ChangelogProducerKind,
    IcebergStorage,
    MergeEngineKind,
    StartupMode,
    is_known_option,
    option_names,
)
from lakehouse.predicate import And, Leaf, Not, Op, Or, Predicate, col
from lakehouse.read.raw_files import RawFile
from lakehouse.read.scan import Plan, Split
from lakehouse.read.stream import StreamLimits, StreamPosition, StreamUnit
from lakehouse.read.table_read import TableRead
from lakehouse.rowkind import ROW_KIND, RowKind
from lakehouse.schema import TableSchema
from lakehouse.schema_change import (
    AddColumn,
    DropColumn,
    RemoveOption,
    RenameColumn,
    SchemaChange,
    SetOption,
    UpdateColumnType,
)
from lakehouse.snapshot import CommitKind, Snapshot
from lakehouse.store.references import Deleted
from lakehouse.store.tags import Tag
from lakehouse.system import SystemTable, is_system_name
from lakehouse.table.evolution import SchemaMerge, fill_missing, plan_merge, with_columns
from lakehouse.table.jobs import (
    CompactionJob,
    ExpirationJob,
    IndexRewriteJob,
    MaintenanceJob,
    OrphanCleanupJob,
    Rewritten,
)
from lakehouse.table.read_builder import ReadBuilder, TableScan
from lakehouse.table.stream_scan import StreamScan
from lakehouse.table.table import Table
from lakehouse.table.write_builder import (
    BatchTableCommit,
    BatchWriteBuilder,
    StreamTableCommit,
    StreamWriteBuilder,
)
from lakehouse.table.write_job import TaskResult, WriteJob, WriteOrigin, WriteTask
from lakehouse.types import (
    BINARY_ROOTS,
    INTEGER_ROOTS,
    STRING_ROOTS,
    TIMESTAMP_ROOTS,
    ArrayType,
    AtomicType,
    DataField,
    DataType,
    MapType,
    MultisetType,
    RowType,
    from_arrow_field,
    parse_type,
    to_arrow,
    type_param,
)
from lakehouse.write.message import CommitMessage
from lakehouse.write.router import ChannelFormula, FixedBucketFormula, HashedField, RowRouter
from lakehouse.write.table_write import TableWrite

__all__ = [
    "TOKEN_ENV",
    "WAREHOUSE_ENV",
    "UpdateColumnType",
    "SetOption",
    "SchemaChange",
    "RenameColumn",
    "RemoveOption",
    "DropColumn",
    "AddColumn",
    "TOKEN",
    "BINARY_ROOTS",
    "INTEGER_ROOTS",
    "ROW_KIND",
    "STRING_ROOTS",
    "TIMESTAMP_ROOTS",
    "And",
    "ArrayType",
    "AtomicType",
    "BatchTableCommit",
    "BatchWriteBuilder",
    "Branch",
    "BucketMode",
    "BucketShape",
    "Catalog",
    "ChangelogProducerKind",
    "CommitKind",
    "CommitMessage",
    "Compaction",
    "CompactionJob",
    "DataField",
    "DataFileMeta",
    "DataType",
    "Deleted",
    "DeletionFile",
    "Expiration",
    "ExpirationJob",
    "FastForward",
    "FileKind",
    "IcebergStorage",
    "IcebergSync",
    "IndexReport",
    "IndexRewrite",
    "IndexRewriteJob",
    "Leaf",
    "MaintenanceJob",
    "ManifestCompaction",
    "ManifestEntry",
    "MapType",
    "MergeEngineKind",
    "MultisetType",
    "Not",
    "Op",
    "Or",
    "OrphanCleanupJob",
    "OrphanFiles",
    "Overwrite",
    "PartitionExpiration",
    "Plan",
    "Predicate",
    "RawFile",
    "ReadBuilder",
    "Rewritten",
    "Rollback",
    "RowKind",
    "RowRouter",
    "ChannelFormula",
    "FixedBucketFormula",
    "HashedField",
    "Slot",
    "RowType",
    "SchemaMerge",
    "Snapshot",
    "SortStrategy",
    "Split",
    "StartupMode",
    "StreamLimits",
    "StreamPosition",
    "StreamScan",
    "StreamTableCommit",
    "StreamUnit",
    "StreamWriteBuilder",
    "SystemTable",
    "Table",
    "TableCommit",
    "TableRead",
    "TableScan",
    "TableSchema",
    "TableWrite",
    "Tag",
    "TaskResult",
    "WriteJob",
    "WriteOrigin",
    "WriteTask",
    "col",
    "define_table",
    "errors",
    "fill_missing",
    "from_arrow_field",
    "is_known_option",
    "is_system_name",
    "murmur_hash",
    "option_names",
    "parse_type",
    "plan_merge",
    "storage_options",
    "table_at",
    "to_arrow",
    "type_param",
    "with_columns",
]
