"""An IO manager that stores assets in Paimon tables, as dagster-deltalake and dagster-iceberg do
for theirs: an asset returns a ``pyarrow.Table``, a ``pyarrow.RecordBatchReader`` (written as a
stream), a pandas or Polars DataFrame (or LazyFrame) or a PySpark DataFrame, and downstream assets
get the table back as the type their input is annotated with.

The asset key names the table (``["db", "t"]`` -> ``db.t``; one part: a table of ``database``).
Definition metadata of the asset, all optional:

- ``table`` (or Dagster's ``dagster/table_name``): the table, ``"db.t"``, instead of the one the
  key names;
- ``write_mode``: ``append`` (default of append tables), ``upsert`` (default of primary-key
  tables), ``overwrite`` (the run's partitions - also those the output has no rows for - or, for
  an unpartitioned asset, the whole table) or ``delete`` (the output's rows delete their keys);
- ``schema_mode``: ``merge`` (default: the table gets the output's new columns) or ``strict``;
- ``partition_expr``: the column the asset's partition keys are values of (else the table's only
  partition key);
- ``primary_keys``, ``partition_keys``, ``options``: how the table is created on the first output
  (a partitioned asset is partitioned by ``partition_expr``, else by ``dt`` if the output has it).

Input metadata ``columns`` reads only those columns. A partitioned upstream asset is read only in
the partitions the input maps to, pruned when the read is planned. Every write is one snapshot
committed as the run (``dagster-<run id>``), after which the output gets the table's metadata
(:func:`~dagster_lakehouse.metadata.run_metadata`).

Definition metadata ``incremental=True`` makes an asset incremental
(:mod:`dagster_lakehouse.incremental`): each input is what its upstream table changed since the
asset's last materialization, with a ``_row_kind`` column (all of its partitions; every row,
as ``+I``, on the first run or when a change has no changelog - an overwrite that replaced rows,
expired snapshots), and the output is upserted exactly once - or replaces the table when the
inputs were read whole. The positions are planned once per step, when the first input loads.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from dagster import (
    AssetKey,
    ConfigurableIOManager,
    InputContext,
    MetadataValue,
    MultiPartitionsDefinition,
    OutputContext,
)

from dagster_lakehouse.factory import commit_user
from dagster_lakehouse.incremental import (
    Commit,
    Increment,
    Position,
    arrow_changes,
    plan_increment,
    record_consumers,
    spark_changes,
)
from dagster_lakehouse.lineage import column_lineage
from dagster_lakehouse.metadata import COLUMN_LINEAGE, TABLE_NAME, run_metadata
from dagster_lakehouse.resources import LakehouseResource, SparkResource
from dagster_lakehouse.spark_logs import spark_logs
from dagster_lakehouse.spec import PARTITION_COLUMN
from lakehouse import (
    ROW_KIND,
    Catalog,
    Overwrite,
    Predicate,
    RowKind,
    Table,
    col,
    define_table,
    fill_missing,
    plan_merge,
    with_columns,
)
from lakehouse.errors import ArgumentTypeError, InvalidArgumentError, SchemaMismatchError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

# definition metadata of an asset
TABLE = "table"
WRITE_MODE = "write_mode"
SCHEMA_MODE = "schema_mode"
PARTITION_EXPR = "partition_expr"
PRIMARY_KEYS = "primary_keys"
PARTITION_KEYS = "partition_keys"
OPTIONS = "options"
INCREMENTAL = "incremental"
# metadata of an input
COLUMNS = "columns"


class WriteMode(Enum):
    """How an output changes its table."""

    APPEND = "append"  # add the rows (on a primary-key table they are upserts all the same)
    UPSERT = "upsert"  # primary-key tables: a row replaces (or merges into) the row of its key
    OVERWRITE = "overwrite"  # replace the run's partitions, or the whole table when unpartitioned
    DELETE = "delete"  # primary-key tables: delete the rows of the output's keys


class SchemaMode(Enum):
    """What an output with columns its table lacks does."""

    MERGE = "merge"  # the table gets them (nullable; older rows read them as null)
    STRICT = "strict"  # refused


@dataclass(frozen=True)
class Selection:
    """The rows of a table an input reads: some columns, some partitions - or ``rows`` read
    already (the changes of an incremental input)."""

    table: Table
    columns: list[str] | None
    filter: Predicate | None
    rows: pa.Table | None = None

    def arrow(self) -> pa.Table:
        return (
            self.rows if self.rows is not None else self.table.read(columns=self.columns, filter=self.filter)
        )

    def stream(self) -> pa.RecordBatchReader:
        """The rows split by split, a batch at a time."""
        if self.rows is not None:
            return pa.RecordBatchReader.from_batches(self.rows.schema, self.rows.to_batches())
        builder = self.table.new_read_builder().with_projection(self.columns).with_filter(self.filter)
        return builder.new_read().to_arrow_batch_reader(builder.new_scan().plan().splits)


@dataclass(frozen=True)
class ClassName:
    """A class by name: looked up, never imported (pandas and Polars are optional)."""

    module: str
    name: str

    def type(self) -> type | None:
        """The class, if its module is imported (no value of it can exist otherwise)."""
        return getattr(sys.modules.get(self.module), self.name, None)

    def of(self, obj: Any) -> bool:
        kind = self.type()
        return kind is not None and isinstance(obj, kind)

    def covers(self, annotation: Any) -> bool:
        kind = self.type()
        return kind is not None and isinstance(annotation, type) and issubclass(annotation, kind)

    def __str__(self) -> str:
        return f"{self.module}.{self.name}"


@dataclass(frozen=True)
class Handler:
    """One kind of asset value: how an output becomes Arrow, how an input is made from a read."""

    cls: ClassName
    to_arrow: Callable[[Any], pa.Table | pa.RecordBatchReader]
    load: Callable[[Selection], Any]


def _polars_lazy_to_arrow(frame: Any) -> pa.Table | pa.RecordBatchReader:
    """A LazyFrame as a stream of batches where Polars can produce one, else collected."""
    if not hasattr(frame, "collect_batches"):  # an older Polars
        return frame.collect().to_arrow()
    schema = sys.modules["polars"].DataFrame(schema=frame.collect_schema()).to_arrow().schema
    batches = (b for chunk in frame.collect_batches() for b in chunk.to_arrow().to_batches())
    return pa.RecordBatchReader.from_batches(schema, batches)


def _polars(selection: Selection) -> Any:
    return sys.modules["polars"].from_arrow(selection.arrow())


HANDLERS = (
    Handler(ClassName("pyarrow", "Table"), lambda t: t, Selection.arrow),
    Handler(ClassName("pyarrow", "RecordBatchReader"), lambda r: r, Selection.stream),
    Handler(
        ClassName("pandas", "DataFrame"),
        lambda df: pa.Table.from_pandas(df, preserve_index=False),
        lambda s: s.arrow().to_pandas(),
    ),
    Handler(ClassName("polars", "DataFrame"), lambda df: df.to_arrow(), _polars),
    Handler(ClassName("polars", "LazyFrame"), _polars_lazy_to_arrow, lambda s: _polars(s).lazy()),
)
SPARK = ClassName("pyspark.sql", "DataFrame")  # not through Arrow: Spark's tasks write and read


class PaimonIOManager(ConfigurableIOManager):
    """Stores assets in the Paimon tables of a warehouse and loads them back (see the module)."""

    lakehouse: LakehouseResource
    spark: SparkResource | None = None  # the session of PySpark inputs (outputs carry their own)
    database: str = "default"  # the database of assets whose key has one part

    # ---- outputs -------------------------------------------------------------------------

    def handle_output(self, context: OutputContext, obj: Any) -> None:
        """Write ``obj`` into the asset's table as one snapshot of the run's commit user."""
        metadata = _plain(context.definition_metadata)
        asset = context.asset_key.to_user_string()
        mode = _choice(WriteMode, metadata, WRITE_MODE, asset)
        schema_mode = _choice(SchemaMode, metadata, SCHEMA_MODE, asset) or SchemaMode.MERGE
        frame, data = _output_value(obj, asset)
        if frame is not None:
            incoming = _spark_arrow_schema(frame)
        else:
            assert data is not None  # _output_value gives a DataFrame or Arrow data
            incoming = data.schema
        if mode is WriteMode.DELETE and ROW_KIND in incoming.names:
            raise InvalidArgumentError(
                f"asset {asset}: write_mode delete makes every row a deletion, but the output has a "
                f"{ROW_KIND} column; drop it, or use write_mode upsert to apply its row kinds"
            )
        if metadata.get(INCREMENTAL) and mode not in (None, WriteMode.UPSERT, WriteMode.APPEND):
            raise InvalidArgumentError(
                f"asset {asset} is incremental: its output is upserted (or replaces the table when its "
                f"inputs were read whole); remove write_mode {mode.value}"
            )
        partitions = _run_partitions(context, asset)
        catalog = self.lakehouse.catalog()
        table, mode = _table_for_output(
            catalog, self.table_name(context.asset_key, metadata), incoming, metadata, mode, partitions, asset
        )
        merge = plan_merge(table.schema, incoming, table.name)  # nothing changes before this passes
        if merge.added and schema_mode is SchemaMode.STRICT:
            raise SchemaMismatchError(
                f"asset {asset}: the output has columns {[f.name for f in merge.added]} that table "
                f"{table.name} lacks and schema_mode is strict; drop them, or set schema_mode to merge"
            )
        for f in merge.added:
            table.add_column(f.name, f.type)
        overwrite = _overwrite(mode, partitions, metadata, table, asset)
        commit = Commit(commit_user(context.run_id))
        increment = _planned(context, catalog, table.name) if metadata.get(INCREMENTAL) else None
        if increment is not None:
            commit, overwrite = increment.commit, True if increment.full else None
        before = table.latest_snapshot_id() or 0
        lineage = None
        if frame is not None:
            with spark_logs(context.log, frame.sparkSession):
                self._write_spark(frame, table, merge.missing, mode, overwrite, commit)
            lineage = column_lineage(frame, _LOADED.pop((context.run_id, context.step_key), []))
        else:
            if mode is WriteMode.DELETE:
                kind = pa.field(ROW_KIND, pa.int8())
                data = with_columns(data, [(kind, pa.scalar(int(RowKind.DELETE), kind.type))])
            table.write(fill_missing(data, table.schema), overwrite=overwrite, commit_user=commit.user,
                        identifier=commit.identifier, properties=commit.properties)  # fmt: skip
        if increment is not None:
            record_consumers(catalog, increment)
        context.add_output_metadata(run_metadata(table.refresh(), commit.user, before))
        if lineage is not None and lineage.deps_by_column:
            context.add_output_metadata({COLUMN_LINEAGE: MetadataValue.column_lineage(lineage)})

    def _write_spark(
        self,
        frame: DataFrame,
        table: Table,
        missing: tuple[str, ...],
        mode: WriteMode,
        overwrite: Overwrite,
        commit: Commit,
    ) -> None:
        """Write through the ``paimon`` data source: the frame's tasks write, the driver commits as
        ``commit`` says."""
        from lakehouse.spark import functions_for, spark_type, write

        f = functions_for(frame)
        added = {n: f.lit(None).cast(spark_type(table.schema.field(n).type)) for n in missing}
        if mode is WriteMode.DELETE:
            added[ROW_KIND] = f.lit(int(RowKind.DELETE)).cast("byte")
        write(
            frame.withColumns(added) if added else frame,
            table.name,
            warehouse=self.lakehouse.warehouse,
            options=self.lakehouse.storage(),
            overwrite=overwrite,
            commit_user=commit.user,
            commit_identifier=commit.identifier,
            commit_properties=commit.properties,
        )

    # ---- inputs --------------------------------------------------------------------------

    def load_input(self, context: InputContext) -> Any:
        """The upstream table as the input's annotated type: its ``columns`` (input metadata), in
        the partitions the input maps to when the upstream asset is partitioned."""
        upstream = _plain(context.upstream_output.definition_metadata if context.upstream_output else {})
        asset = context.asset_key.to_user_string()
        table = self.lakehouse.catalog().load_table(self.table_name(context.asset_key, upstream))
        columns = _plain(context.definition_metadata).get(COLUMNS)
        columns = list(columns) if columns is not None else None
        partitions = _run_partitions(context, asset)
        column = _partition_column(upstream, table, asset) if partitions is not None else None
        wanted = context.dagster_type.typing_type
        position = self._incremental_position(context, table.name)
        if SPARK.covers(wanted):
            if position is not None:
                frame = self._changes_spark(table.name, columns, position)
            else:
                frame = self._read_spark(table.name, columns, column, partitions)
            _loaded(context, frame)
            return frame
        if wanted in (Any, object, None):
            wanted = pa.Table
        handler = next((h for h in HANDLERS if h.cls.covers(wanted)), None)
        if handler is None:
            raise ArgumentTypeError(
                f"input {context.name!r} from asset {asset} is annotated {wanted}; PaimonIOManager loads "
                f"{_supported()}"
            )
        if position is not None:
            changes = arrow_changes(table, position)
            return handler.load(
                Selection(table, columns, None, changes.select([*columns, ROW_KIND]) if columns else changes)
            )
        where = col(column).isin(partitions) if column is not None and partitions is not None else None
        return handler.load(Selection(table, columns, where))

    def _incremental_position(self, context: InputContext, upstream: str) -> Position | None:
        """What an input of an incremental asset reads of ``upstream`` (None: not incremental)."""
        assets_def = context.step_context.assets_def if context.step_context.is_sda_step else None
        if assets_def is None or len(assets_def.keys) != 1:
            return None
        key = assets_def.key
        metadata = _plain(assets_def.metadata_by_key.get(key))
        if not metadata.get(INCREMENTAL):
            return None
        catalog = self.lakehouse.catalog()
        name = self.table_name(key, metadata)
        inputs = [self.table_name(k, {}) for k in assets_def.keys_by_input_name.values()]
        upstream_tables = [t for t in inputs if t == upstream or catalog.table_exists(t)]
        increment = _plan_once(context.step_context.run_id, context.step_context.step.key,
                               lambda: plan_increment(catalog, name, upstream_tables, None))  # fmt: skip
        return increment.position(upstream)

    def _changes_spark(self, name: str, columns: list[str] | None, position: Position) -> DataFrame:
        """The changes of an incremental Spark input (see :func:`spark_changes`)."""
        frame = spark_changes(self._spark(name), name, position, self.lakehouse.warehouse,
                              self.lakehouse.storage(), None)  # fmt: skip
        return frame.select(*columns, ROW_KIND) if columns else frame

    def _read_spark(
        self, name: str, columns: list[str] | None, column: str | None, partitions: list[str] | None
    ) -> DataFrame:
        """The table read by :func:`lakehouse.spark.read` - only ``columns``, the files that need no
        key merge by Spark's native Parquet reader - in ``partitions`` of ``column`` when given
        (pruned when the read is planned), as the factory's :meth:`~dagster_lakehouse.spec.Inputs.read`
        reads."""
        from lakehouse.spark import read

        where = None if column is None else col(column).isin(partitions or [])
        return read(self._spark(name), name, columns=columns, where=where, warehouse=self.lakehouse.warehouse,
                    options=self.lakehouse.storage())  # fmt: skip

    def _spark(self, name: str):
        if self.spark is None:
            raise InvalidArgumentError(
                f"table {name} is loaded as a PySpark DataFrame but PaimonIOManager has no Spark session; "
                f"give it spark=SparkResource(...)"
            )
        return self.spark.spark_session

    # ---- names ---------------------------------------------------------------------------

    def table_name(self, key: AssetKey, metadata: Mapping[str, Any]) -> str:
        """``db.t`` of an asset: its ``table`` metadata, else its key (one part: in ``database``)."""
        named = metadata.get(TABLE) or metadata.get(TABLE_NAME)
        if named:
            return str(named)
        if len(key.path) == 1:
            return f"{self.database}.{key.path[0]}"
        if len(key.path) == 2:
            return ".".join(key.path)
        raise InvalidArgumentError(
            f"asset {key.to_user_string()}: a Paimon table is named db.table, its key has {len(key.path)} "
            f"parts; give the asset definition metadata table='db.table'"
        )


_PLANS: dict[tuple[str, str], Increment] = {}  # (run id, step key) -> the step's incremental plan
MAX_PLANS = 256  # steps that failed before their output leave their entries; the oldest are dropped

# (run id, step key) -> the Spark inputs a step loaded, which its output's column lineage traces
_LOADED: dict[tuple[str, str], list[tuple[AssetKey, DataFrame]]] = {}


def _make_room(by_step: dict[tuple[str, str], Any], step: tuple[str, str]) -> None:
    """Room for ``step`` in a cache by step: the oldest steps, which failed before their output
    took theirs, are dropped beyond MAX_PLANS."""
    if step not in by_step:
        while len(by_step) >= MAX_PLANS:
            del by_step[next(iter(by_step))]


def _loaded(context: InputContext, frame: DataFrame) -> None:
    step = (context.step_context.run_id, context.step_context.step.key)
    _make_room(_LOADED, step)
    _LOADED.setdefault(step, []).append((context.asset_key, frame))


def _plan_once(run_id: str, step: str, plan: Callable[[], Increment]) -> Increment:
    """The increment of a step, planned by its first input: every input and the output then agree
    on the positions."""
    if (run_id, step) not in _PLANS:
        _make_room(_PLANS, (run_id, step))
        _PLANS[run_id, step] = plan()
    return _PLANS[run_id, step]


def _planned(context: OutputContext, catalog: Catalog, table: str) -> Increment:
    """The increment the step's inputs were read with (taken: the step is done with it), or one
    planned now for an incremental asset without Paimon inputs."""
    planned = _PLANS.pop((context.run_id, context.step_key), None)
    return planned if planned is not None else plan_increment(catalog, table, (), None)


def _output_value(obj: Any, asset: str) -> tuple[DataFrame | None, pa.Table | pa.RecordBatchReader | None]:
    """A PySpark DataFrame as is, or any other supported value as Arrow."""
    if SPARK.of(obj):
        return obj, None
    handler = next((h for h in HANDLERS if h.cls.of(obj)), None)
    if handler is None:
        raise ArgumentTypeError(
            f"asset {asset} returned a {type(obj).__module__}.{type(obj).__qualname__}; PaimonIOManager "
            f"stores {_supported()}"
        )
    return None, handler.to_arrow(obj)


def _spark_arrow_schema(frame: DataFrame) -> pa.Schema:
    from lakehouse.spark import arrow_layout

    return arrow_layout(frame.schema)


def _table_for_output(
    catalog: Catalog,
    name: str,
    incoming: pa.Schema,
    metadata: Mapping[str, Any],
    mode: WriteMode | None,
    partitions: list[str] | None,
    asset: str,
) -> tuple[Table, WriteMode]:
    """The table (created as the metadata says if missing) and the write mode, checked to fit it
    before the table is created."""
    if catalog.table_exists(name):
        table = catalog.load_table(name)
        return table, _fitting_mode(mode, table.primary_keys, name, asset)
    schema = pa.schema([f for f in incoming if f.name != ROW_KIND])
    layout = _layout(metadata, schema, partitions is not None, asset)
    planned = define_table(name, schema, **layout)  # validated: nothing is created yet
    mode = _fitting_mode(mode, planned.primary_keys, name, asset)
    catalog.create_database(name.split(".")[0], ignore_if_exists=True)
    return catalog.create_table(name, schema, **layout, ignore_if_exists=True), mode


def _fitting_mode(mode: WriteMode | None, primary_keys: Sequence[str], table: str, asset: str) -> WriteMode:
    """``mode``, or the table's default (upsert with a primary key, else append), if it fits."""
    if mode is None:
        return WriteMode.UPSERT if primary_keys else WriteMode.APPEND
    if mode in (WriteMode.UPSERT, WriteMode.DELETE) and not primary_keys:
        raise SchemaMismatchError(
            f"asset {asset}: write_mode {mode.value} needs a primary key, and table {table} has none; "
            f"use write_mode append or overwrite, or a table with primary_keys"
        )
    return mode


def _layout(metadata: Mapping[str, Any], schema: pa.Schema, partitioned: bool, asset: str) -> dict[str, Any]:
    """Keys and options of a new table from the asset's metadata."""
    partition_keys = list(metadata.get(PARTITION_KEYS) or [])
    if partitioned and not partition_keys:
        if metadata.get(PARTITION_EXPR):
            partition_keys = [metadata[PARTITION_EXPR]]
        elif PARTITION_COLUMN in schema.names:
            partition_keys = [PARTITION_COLUMN]
        else:
            raise InvalidArgumentError(
                f"asset {asset} is partitioned, but its metadata names no partition column and the output "
                f"has no {PARTITION_COLUMN!r} column; set definition metadata partition_expr (or "
                f"partition_keys) to the column its partition keys are values of"
            )
    return {
        "primary_keys": list(metadata.get(PRIMARY_KEYS) or []),
        "partition_keys": partition_keys,
        "options": dict(metadata.get(OPTIONS) or {}),
    }


def _overwrite(
    mode: WriteMode, partitions: list[str] | None, metadata: Mapping[str, Any], table: Table, asset: str
) -> Overwrite:
    """What the write replaces: the run's partitions or the whole table in overwrite mode."""
    if mode is not WriteMode.OVERWRITE:
        return None
    if partitions is None:
        return True
    column = _partition_column(metadata, table, asset)
    return [{column: p} for p in partitions]


def _partition_column(metadata: Mapping[str, Any], table: Table, asset: str) -> str:
    """The column a partitioned asset's keys are values of: ``partition_expr``, else the table's
    only partition key."""
    if metadata.get(PARTITION_EXPR):
        return str(metadata[PARTITION_EXPR])
    if len(table.partition_keys) == 1:
        return table.partition_keys[0]
    raise InvalidArgumentError(
        f"asset {asset} is partitioned, but table {table.name} has partition keys {table.partition_keys}; "
        f"set the asset's definition metadata partition_expr to the column its partition keys are values of"
    )


def _run_partitions(context: InputContext | OutputContext, asset: str) -> list[str] | None:
    """The asset partitions an output writes or an input reads; None when unpartitioned."""
    if not context.has_asset_partitions:
        return None
    if isinstance(context.asset_partitions_def, MultiPartitionsDefinition):
        raise InvalidArgumentError(
            f"asset {asset} has multi-dimensional partitions, whose keys are no column values; "
            f"PaimonIOManager maps one-dimensional partitions to a partition column"
        )
    return list(context.asset_partition_keys)


def _choice(kind: type[Enum], metadata: Mapping[str, Any], key: str, asset: str) -> Any:
    """The member of ``kind`` that definition metadata ``key`` names (None if not set)."""
    value = metadata.get(key)
    if value is None:
        return None
    try:
        return kind(value)
    except ValueError:
        raise InvalidArgumentError(
            f"asset {asset}: {key} {value!r} is not one of {[m.value for m in kind]}; set its definition "
            f"metadata {key} to one of them"
        ) from None


def _plain(metadata: Mapping[str, Any] | None) -> dict[str, Any]:
    """Metadata with ``MetadataValue`` wrappers (``MetadataValue.json(...)``, ...) unwrapped."""
    return {k: v.value if isinstance(v, MetadataValue) else v for k, v in (metadata or {}).items()}


def _supported() -> str:
    names = [str(c) for c in (*(h.cls for h in HANDLERS), SPARK)]
    return ", ".join(names[:-1]) + f" and {names[-1]}"
