"""Column-pruned reads: :func:`read` plans a table scan on the driver, has Spark's native Parquet
reader read the files that need no key merge, and the engine the rest.

Spark 4.3 cannot push a projection into a Python data source: a query of 2 columns of a
20-column table read through ``format("paimon")`` decodes all 20 in Python and converts them to
rows. :func:`read` plans with the engine instead (partition, stats and file-index pruning with the
pushable conjuncts of ``where``, :mod:`lakehouse.spark.conditions`) and divides the plan:

- files of raw-convertible splits (append tables, deletion-vector and first-row tables, buckets
  of one file above level 0) are read by ``spark.read.parquet``: only the needed columns, vectorized,
  with Spark's own row-group filtering. Paimon stores every column, partition keys included, under
  its name in each data file; files written under an older schema are read with that schema's
  names and types and mapped to the current columns by field id (renamed, added later: nulls,
  widened: cast). Rows a deletion vector marks are dropped by an anti join on
  ``(_metadata.file_name, _metadata.row_index)`` with the vectors' positions (expanded by tasks);
  primary-key files holding retractions drop their ``-U``/``-D`` rows;
- splits that merge keys, and files Spark's reader would not read as the engine does (TIME,
  timestamps finer than microseconds, types of a newer Paimon, type changes beyond widening,
  other formats, tables outside the local filesystem, whose stores Spark's Hadoop filesystems
  are not set up for), are read by the engine in ``mapInArrow`` tasks, projected to the needed
  columns, in the input partitions the ``paimon`` data source would read them in.

The union is filtered by ``where`` (all of it, by Spark) and projected to ``columns``: the rows of
``spark.read.format("paimon")``, every column nullable, as Spark's file sources read them.

:func:`read_changes` reads what a range of snapshots changed the same way: each changed file (a
changelog file, or a file a commit added) is read as it was written, by Spark where it can, each
row with its kind: a primary-key file's ``_VALUE_KIND`` as ``+I``, ``-U``, ``+U``, ``-D``, an
append file's rows as ``+I``.
Everything is DataFrame operations, so it works over Spark Connect as in a classic session.
"""

from __future__ import annotations

import functools
import pickle
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import ModuleType

import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import types as st

from lakehouse import (
    BINARY_ROOTS,
    INTEGER_ROOTS,
    ROW_KIND,
    STRING_ROOTS,
    TIMESTAMP_ROOTS,
    ArrayType,
    AtomicType,
    DataType,
    MapType,
    MultisetType,
    Plan,
    Predicate,
    RawFile,
    ReadBuilder,
    RowKind,
    RowType,
    Split,
    Table,
    TableSchema,
    is_system_name,
    type_param,
)
from lakehouse.errors import InvalidArgumentError, InvalidOptionError
from lakehouse.spark.conditions import Condition, pruning_predicate, quoted, spark_condition, used_columns
from lakehouse.spark.kinds import functions_for
from lakehouse.spark.options import (
    INCREMENTAL_BETWEEN,
    READ_CHANGELOG,
    SCAN_SNAPSHOT_ID,
    STREAMING_READ_OVERWRITE,
)
from lakehouse.spark.parallelism import default_parallelism
from lakehouse.spark.reader import SplitPartition, read_splits
from lakehouse.spark.routing import hash_partition_keys
from lakehouse.spark.source import open_table
from lakehouse.spark.types import arrow_layout, as_nullable, spark_type

FILE, ROW = "__lakehouse_file", "__lakehouse_row"  # a deleted row: its file's name, its position
ROUTE, TASK = "route", "task"
METADATA = "_metadata"  # Spark's hidden column of file-source rows
DELETED_ROWS = st.StructType([st.StructField(FILE, st.StringType()), st.StructField(ROW, st.LongType())])
TASKS = st.StructType([st.StructField(ROUTE, st.IntegerType()), st.StructField(TASK, st.BinaryType())])
PARQUET_OPTIONS = {
    "recursiveFileLookup": "true",  # no partition discovery from the paths: files hold every column
    "datetimeRebaseMode": "CORRECTED",  # Paimon writes proleptic Gregorian dates and timestamps
    "int96RebaseMode": "CORRECTED",
}
_GLOB = frozenset("*?[]{}\\")  # Spark expands these in paths
_NATIVE_ATOMIC = frozenset(
    ["BOOLEAN", *INTEGER_ROOTS, "FLOAT", "DOUBLE", "DECIMAL", *STRING_ROOTS, *BINARY_ROOTS, "DATE"]
)


def read(
    spark: SparkSession,
    table: str,
    *,
    columns: Sequence[str] | None = None,
    where: Condition | None = None,
    warehouse: str | None = None,
    options: Mapping[str, str] | None = None,
    snapshot_id: int | None = None,
) -> DataFrame:
    """``columns`` (default: all, in table order) of the rows of ``table`` ("db.table" with
    ``warehouse``, or a table path) that match ``where`` (SQL text, an engine predicate such as
    ``col("dt").isin(days)``, or a Spark Column), reading only those columns and the ones ``where``
    uses; SQL text and engine predicates also prune partitions and files when the read is planned.

    ``options``: the data source's read options - storage settings, ``branch``, time travel
    (``scan.snapshot-id``, ``scan.timestamp-millis``, ``scan.tag-name``; ``snapshot_id`` is the
    first). The rows are those of
    ``spark.read.format("paimon")...load(table).where(where).select(*columns)``, of the snapshot
    that was the latest (or the one addressed) when ``read`` planned: every query of the DataFrame
    reads those files. See :mod:`lakehouse.spark.native_read` for how they are read.
    """
    given = {**(options or {}), **({"warehouse": warehouse} if warehouse else {})}
    if snapshot_id is not None:
        given[SCAN_SNAPSHOT_ID] = str(snapshot_id)
    if given.get("warehouse") and is_system_name(table):
        raise InvalidArgumentError(
            f"{table} is a system table; read it with spark.read.format('paimon').load({table!r})"
        )
    target = open_table({**given, "path": table})
    return plan_read(target, columns, where, default_parallelism(spark)).frame(spark)


def read_changes(
    spark: SparkSession,
    table: str,
    start_snapshot_id: int,
    end_snapshot_id: int,
    *,
    warehouse: str | None = None,
    options: Mapping[str, str] | None = None,
    overwrites: bool = False,
) -> DataFrame:
    """The rows snapshots ``start+1 .. end`` of ``table`` changed, each with its kind in a
    ``_row_kind`` column (``+I``, ``-U``, ``+U``, ``-D``), as ``Table.read_changes`` finds them:
    the changed files, by Spark's Parquet reader where it can (see the module), of the range the
    call planned; ``overwrites``: the files overwrites added count as changes
    (``streaming-read-overwrite``)."""
    given = {
        **(options or {}),
        **({"warehouse": warehouse} if warehouse else {}),
        INCREMENTAL_BETWEEN: f"{start_snapshot_id},{end_snapshot_id}",
        READ_CHANGELOG: "true",
        STREAMING_READ_OVERWRITE: str(overwrites).lower(),
    }
    target = open_table({**given, "path": table})
    return plan_read(target, parallelism=default_parallelism(spark), changes=True).frame(spark)


def plan_read(
    table: Table,
    columns: Sequence[str] | None = None,
    where: Condition | None = None,
    parallelism: int | None = None,
    changes: bool = False,
) -> NativeRead:
    """The read of ``columns`` of ``table`` (its handle's options address the snapshot) under
    ``where``, planned: which files Spark reads natively, which input partitions the engine reads
    (sized for ``parallelism``). ``changes``: the handle's options address a range of snapshots
    (``incremental-between``), whose changed files are read with their rows' kinds (with
    ``read.changelog``)."""
    builder = table.new_read_builder()
    kinds = ROW_KIND in builder.read_schema.names
    if not changes and (builder.incremental is not None or kinds):
        raise InvalidOptionError(
            "read.changelog and incremental-between read changes with their row kinds, which "
            "lakehouse.spark.read does not: read them with lakehouse.spark.read_changes"
        )
    schema = builder.schema
    wanted = _wanted(columns, schema, table.name)
    used = used_columns(where, schema.field_names) if where is not None else []
    needed = wanted + [c for c in used if c not in wanted]
    predicate = pruning_predicate(where, schema) if where is not None else None
    builder = builder.with_projection(needed).with_filter(predicate)
    reader = builder.new_read()  # refuses what the engine's reads refuse (data evolution...)
    plan = builder.new_scan().plan()
    native = all(_native_type(schema.field(c).type) for c in needed)
    layouts: dict[int, FileLayout | None] = {}
    groups: dict[tuple[int, bool, bool], tuple[FileLayout, list[RawFile]]] = {}
    engine: list[Split] = []
    for split in plan.splits:
        for part in split.by_file() if native else [split]:
            raw = reader.raw_files(part)
            file = raw[0] if raw else None
            if file is None or not _native_file(file):
                engine.append(part)
                continue
            if file.schema_id not in layouts:
                layouts[file.schema_id] = FileLayout.of(table.schema_by_id(file.schema_id), schema, needed)
            layout = layouts[file.schema_id]
            if layout is None:
                engine.append(part)
                continue
            # a changed file's rows are read as written: its retractions too, with their kinds
            key = (file.schema_id, file.deletion is not None, bool(file.retracted_kinds) and not changes)
            groups.setdefault(key, (layout, []))[1].append(file)
    stored_kinds = kinds and bool(schema.primary_keys)  # an append file's rows are all inserts
    files = [
        FileGroup(layout, tuple(found), retracts, stored_kinds)
        for (_, _, retracts), (layout, found) in groups.items()
    ]
    merged = [SplitPartition(tuple(g)) for g in plan.groups(parallelism, engine)]
    output = st.StructType([st.StructField(c, as_nullable(spark_type(schema.field(c).type))) for c in needed])
    if kinds:
        output = output.add(ROW_KIND, st.StringType(), nullable=False)  # as the data source's
    return NativeRead(
        builder, schema, list(wanted), needed, where, predicate, plan, files, merged, output, parallelism,
        kinds,
    )  # fmt: skip


def _wanted(columns: Sequence[str] | None, schema: TableSchema, table: str) -> list[str]:
    """The columns asked for, checked: known, at least one, no repeats."""
    if columns is None:
        return list(schema.field_names)
    if isinstance(columns, str):
        raise InvalidArgumentError(f"columns of table {table} is a list of names, e.g. [{columns!r}]")
    wanted = list(columns)
    unknown = [c for c in wanted if c not in schema.field_names]
    if unknown or not wanted or len(set(wanted)) < len(wanted):
        raise InvalidArgumentError(
            f"columns of table {table} must name each of its columns at most once, at least one "
            f"(None: all of them); got {wanted}, columns are {schema.field_names}"
        )
    return wanted


def _native_type(dtype: DataType) -> bool:
    """Whether Spark's Parquet reader reads values of ``dtype`` as the engine reads them."""
    if isinstance(dtype, AtomicType):
        if dtype.name in TIMESTAMP_ROOTS:
            return dtype.precision is not None and dtype.precision <= 6  # no nanoseconds in Spark
        return dtype.name in _NATIVE_ATOMIC
    if isinstance(dtype, ArrayType | MultisetType):
        return _native_type(dtype.element)
    if isinstance(dtype, MapType):
        return _native_type(dtype.key) and _native_type(dtype.value)
    if isinstance(dtype, RowType):
        return all(_native_type(f.type) for f in dtype.fields)
    return False  # TIME (Spark's reader wants micro- or nanoseconds), types of a newer Paimon


def _widens(old: DataType, new: DataType) -> bool:
    """Whether a column's type change keeps every value, so Spark's cast equals the engine's."""
    if old.root in INTEGER_ROOTS and new.root in INTEGER_ROOTS:
        return INTEGER_ROOTS.index(old.root) <= INTEGER_ROOTS.index(new.root)
    if (old.root, new.root) == ("FLOAT", "DOUBLE"):
        return True
    if old.root == new.root == "DECIMAL":
        old_scale, new_scale = type_param(old, "scale"), type_param(new, "scale")
        return (
            new_scale >= old_scale
            and type_param(new, "precision") - new_scale >= type_param(old, "precision") - old_scale
        )
    return False


def _native_file(file: RawFile) -> bool:
    """Whether Spark's Parquet reader reads ``file``: a Parquet file of the local filesystem (Spark's
    Hadoop filesystems are not set up for the engine's other stores) at a path Spark would not
    expand as a glob; the engine reads the others (and names a format it does not read)."""
    uri = file.uri or ""
    return file.format == "parquet" and uri.startswith("file://") and not _GLOB & set(uri)


@dataclass(frozen=True)
class FileLayout:
    """How files of one schema version hold the needed columns: the Parquet columns to read (name
    and Spark type in those files) and per needed column where it comes from (``None``: added
    later, null) and the type it is cast to (``None``: as stored)."""

    read: tuple[tuple[str, st.DataType], ...]
    sources: tuple[tuple[str, str | None, st.DataType | None], ...]  # (column, stored as, cast to)

    @classmethod
    def of(cls, written: TableSchema, current: TableSchema, needed: list[str]) -> FileLayout | None:
        """The layout of files written under ``written``, None when Spark cannot read them as the
        engine does (a type change beyond widening, names equal but for case, which Spark's
        case-insensitive Parquet column matching confuses, a column named ``_metadata``)."""
        lowered = [f.name.lower() for f in written.fields]
        if len(set(lowered)) < len(lowered) or METADATA in lowered:
            return None
        by_id = {f.id: f for f in written.fields}
        read: list[tuple[str, st.DataType]] = []
        sources: list[tuple[str, str | None, st.DataType | None]] = []
        for name in needed:
            now = current.field(name)
            old = by_id.get(now.id)
            target = as_nullable(spark_type(now.type))
            if old is None:
                if not _native_type(now.type):
                    return None  # Spark may not even cast a null to it (TIME)
                sources.append((name, None, target))
                continue
            if not _native_type(old.type):
                return None
            stored = as_nullable(spark_type(old.type))
            if stored != target and not _widens(old.type, now.type):
                return None
            read.append((old.name, stored))
            sources.append((name, old.name, None if stored == target else target))
        if not read:  # only columns added later: read any one to count the rows
            first = next((f for f in written.fields if _native_type(f.type)), None)
            if first is None:
                return None
            read.append((first.name, as_nullable(spark_type(first.type))))
        return cls(tuple(read), tuple(sources))


@dataclass(frozen=True)
class FileGroup:
    """Data files one native Parquet scan reads: one layout, whether the rows of their retracted
    kinds are dropped, and whether each row's kind is read from the files (the changed files of
    a primary-key table); the files' deletion vectors drop their rows too."""

    layout: FileLayout
    files: tuple[RawFile, ...]
    retracts: bool
    kinds: bool = False

    @property
    def deleting(self) -> tuple[RawFile, ...]:
        """The files that have a deletion vector."""
        return tuple(f for f in self.files if f.deletion is not None)

    @property
    def uris(self) -> list[str]:
        """Where Spark finds the files."""
        uris = [f.uri for f in self.files if f.uri is not None]
        assert len(uris) == len(self.files)  # only files with a URI are read natively (_native_file)
        return uris


@dataclass(frozen=True)
class NativeRead:
    """A planned read: the engine's plan, the file groups Spark reads natively, the input
    partitions the engine reads; :meth:`frame` builds the DataFrame."""

    builder: ReadBuilder  # the engine's read of the needed columns, pruned by the pushable filter
    table_schema: TableSchema
    columns: list[str]
    needed: list[str]  # the columns, then the others ``where`` may use
    where: Condition | None
    filter: Predicate | None  # what of ``where`` the plan was pruned with
    plan: Plan
    files: list[FileGroup]
    merged: list[SplitPartition]
    schema: st.StructType  # of the needed columns, then the row kind with ``kinds``
    parallelism: int | None = field(default=None)
    kinds: bool = False  # each row with its kind, in a last ``_row_kind`` column

    def frame(self, spark: SparkSession) -> DataFrame:
        parts = [self._native(spark, group) for group in self.files]
        if self.merged:
            parts.append(self._engine(spark))
        if parts:
            df = functools.reduce(lambda a, b: a.union(b), parts)
        else:
            df = spark.createDataFrame([], self.schema)
        if self.where is None and self.needed == self.columns:
            return df  # every part has exactly these columns
        if self.where is not None:
            df = df.where(spark_condition(self.where, functions_for(df), self.table_schema))
        return df.select(*[quoted(c) for c in self.columns], *([ROW_KIND] if self.kinds else []))

    def _native(self, spark: SparkSession, group: FileGroup) -> DataFrame:
        """The needed columns of a file group, read by Spark, retractions and deleted rows dropped."""
        read = st.StructType([st.StructField(name, dtype) for name, dtype in group.layout.read])
        if group.retracts or group.kinds:
            read = read.add(RawFile.KIND_COLUMN, st.ByteType())
        df = spark.read.schema(read).options(**PARQUET_OPTIONS).parquet(*group.uris)
        f = functions_for(df)
        if group.retracts:
            df = df.where(~f.col(RawFile.KIND_COLUMN).isin(list(group.files[0].retracted_kinds)))
        columns = [_column(f, *source) for source in group.layout.sources]
        if self.kinds:
            columns.append(_row_kinds(f, group.kinds).alias(ROW_KIND))
        if not group.deleting:
            return df.select(*columns)
        located = df.select(*columns, f.col(f"{METADATA}.file_name").alias(FILE),
                            f.col(f"{METADATA}.row_index").alias(ROW))  # fmt: skip
        deleted = self._deleted_rows(spark, group.deleting)
        return located.join(f.broadcast(deleted), [FILE, ROW], "left_anti").drop(FILE, ROW)

    def _deleted_rows(self, spark: SparkSession, files: tuple[RawFile, ...]) -> DataFrame:
        """(file name, row position) of every row the deletion vectors delete, read by tasks."""
        tasks = max(1, min(len(files), self.parallelism or 1))
        ids = spark.range(0, len(files), 1, tasks)
        return ids.mapInArrow(DeletedRows(self.builder, files), DELETED_ROWS)

    def _engine(self, spark: SparkSession) -> DataFrame:
        """The needed columns of the input partitions the engine reads, one task each: their
        pickled descriptions shuffled so that row ``i`` lands in Spark partition ``i``."""
        n = len(self.merged)
        keys = hash_partition_keys(n)
        rows = [(int(keys[i]), pickle.dumps(p)) for i, p in enumerate(self.merged)]
        tasks = spark.createDataFrame(rows, TASKS).repartition(n, ROUTE)
        return tasks.mapInArrow(EngineTasks(self.builder, arrow_layout(self.schema)), self.schema)


@dataclass(frozen=True)
class DeletedRows:
    """``mapInArrow`` function: for the ids in its batches, the rows those files' deletion vectors
    delete."""

    builder: ReadBuilder
    files: tuple[RawFile, ...]

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        reader = self.builder.new_read()
        for batch in batches:
            for i in batch.column(0).to_pylist():
                file = self.files[i]
                rows = reader.deleted_rows(file)
                names = pa.repeat(pa.scalar(file.name, pa.string()), len(rows))
                yield pa.RecordBatch.from_arrays([names, pa.array(rows, pa.int64())], names=[FILE, ROW])


@dataclass(frozen=True)
class EngineTasks:
    """``mapInArrow`` function: reads the input partitions pickled in its batches with the engine."""

    builder: ReadBuilder
    layout: pa.Schema

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for blob in batch.column(TASK).to_pylist():
                partition = pickle.loads(blob)  # written by this read's driver
                yield from read_splits(self.builder, partition.splits, self.layout)


def _row_kinds(f: ModuleType, stored: bool) -> Column:
    """Each row's kind as ``+I``, ``-U``, ``+U`` or ``-D``: from the files' kind bytes if ``stored``,
    else ``+I`` (an append table's rows)."""
    if not stored:
        return f.lit(RowKind.INSERT.short_string)
    names = f.array(*[f.lit(kind.short_string) for kind in RowKind])  # by byte value
    return f.element_at(names, f.col(RawFile.KIND_COLUMN).cast("int") + 1)


def _column(f: ModuleType, name: str, stored: str | None, cast: st.DataType | None) -> Column | str:
    """A needed column of a file group: its name when stored under it as it is (a cheaper select),
    else the stored column (None: nulls) cast and renamed."""
    if stored == name and cast is None:
        return quoted(name)
    source = f.lit(None) if stored is None else f.col(quoted(stored))
    return (source if cast is None else source.cast(cast)).alias(name)
