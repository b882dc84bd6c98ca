"""PaimonIOManager: assets in every supported type stored in Paimon tables and loaded back in every
type, column selection, the partitions of an input, write modes, tables created from metadata,
schema evolution, typed errors that commit nothing, and the run's commit user and metadata."""

from __future__ import annotations

import sys

import pandas as pd
import polars as pl
import pyarrow as pa
import pytest
from dagster import AssetIn, AssetSpec, DailyPartitionsDefinition, MetadataValue, asset, materialize
from pyspark.sql import DataFrame as SparkFrame

from dagster_lakehouse.factory import commit_user
from dagster_lakehouse.io_manager import PaimonIOManager
from dagster_lakehouse.resources import LakehouseResource, SparkResource
from lakehouse import Catalog, Table
from lakehouse.errors import ArgumentTypeError, InvalidArgumentError, SchemaMismatchError

DAYS = ["2024-01-01", "2024-01-02"]
DAILY = DailyPartitionsDefinition(start_date=DAYS[0])
ROWS = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "name": ["a", "b", "c"]})


@pytest.fixture
def warehouse(tmp_path) -> str:
    return str(tmp_path / "warehouse")


def run(assets, warehouse: str, partition_key: str | None = None, spark: bool = False, **kwargs):
    """Materialize ``assets`` with the IO manager on ``warehouse`` (a SparkResource if ``spark``)."""
    lakehouse = LakehouseResource(warehouse=warehouse)
    io_manager = PaimonIOManager(lakehouse=lakehouse, spark=SparkResource() if spark else None)
    return materialize(assets, resources={"io_manager": io_manager}, partition_key=partition_key, **kwargs)


def table(warehouse: str, name: str = "db.t") -> Table:
    return Catalog(warehouse).get_table(name)


def sorted_rows(data: pa.Table, key: str = "id") -> list[dict]:
    return data.sort_by(key).to_pylist()


def day_rows(day: str, ids: list[int]) -> pa.Table:
    return pa.table(
        {"id": pa.array(ids, pa.int64()), "dt": [day] * len(ids), "v": [f"{day}/{i}" for i in ids]}
    )


# ---- output types ----------------------------------------------------------------------------

OUTPUTS = {
    "arrow": lambda: ROWS,
    "reader": lambda: pa.RecordBatchReader.from_batches(ROWS.schema, ROWS.to_batches(max_chunksize=1)),
    "pandas": lambda: ROWS.to_pandas(),
    "polars": lambda: pl.from_arrow(ROWS),
    "polars-lazy": lambda: pl.from_arrow(ROWS).lazy(),
}


@pytest.mark.parametrize("kind", OUTPUTS)
def test_each_output_type_is_stored_as_the_run(warehouse, kind):
    @asset(key=["db", "t"])
    def t():
        return OUTPUTS[kind]()

    result = run([t], warehouse)
    stored = table(warehouse)
    assert sorted_rows(stored.read()) == ROWS.to_pylist()
    assert stored.snapshot().commit_user == commit_user(result.run_id) == f"dagster-{result.run_id}"
    metadata = result.asset_materializations_for_node("db__t")[0].metadata
    assert metadata["dagster/row_count"].value == 3
    assert metadata["dagster/table_name"].value == "db.t"


def test_a_reader_reaches_the_engine_as_a_stream(warehouse, monkeypatch):
    """A RecordBatchReader is never materialized: the engine gets a reader (which it writes batch
    by batch), also after schema evolution fills in a column the output lacks."""
    written = []
    write = Table.write

    def spy(self, data, *args, **kwargs):
        written.append(type(data))
        return write(self, data, *args, **kwargs)

    monkeypatch.setattr(Table, "write", spy)
    first = pa.table({"id": pa.array([0], pa.int64()), "name": ["z"], "extra": [1.5]})

    @asset(key=["db", "t"])
    def t():
        if not written:
            return first
        return pa.RecordBatchReader.from_batches(ROWS.schema, ROWS.to_batches(max_chunksize=1))

    run([t], warehouse)
    run([t], warehouse)
    assert written == [pa.Table, pa.RecordBatchReader]
    extra = table(warehouse).read(columns=["id", "extra"]).sort_by("id").column("extra")
    assert extra.to_pylist() == [1.5, None, None, None]


def test_an_unsupported_output_type_is_refused(warehouse):
    @asset(key=["db", "t"])
    def t():
        return [{"id": 1}]

    with pytest.raises(
        ArgumentTypeError, match=r"asset db/t returned a builtins.list; PaimonIOManager stores"
    ):
        run([t], warehouse)


# ---- input types -----------------------------------------------------------------------------

INPUTS = {
    pa.Table: lambda v: v,
    pa.RecordBatchReader: lambda v: v.read_all(),
    pd.DataFrame: lambda v: pa.Table.from_pandas(v, preserve_index=False),
    pl.DataFrame: lambda v: v.to_arrow(),
    pl.LazyFrame: lambda v: v.collect().to_arrow(),
}


@pytest.mark.parametrize("kind", INPUTS, ids=lambda k: f"{k.__module__.split('.')[0]}.{k.__name__}")
def test_downstream_assets_get_the_table_as_their_annotated_type(warehouse, kind):
    seen = {}

    @asset(key=["db", "t"])
    def t() -> pa.Table:
        return ROWS

    def copy(t):
        seen["type"] = type(t)
        return INPUTS[kind](t)

    copy.__annotations__ = {"t": kind, "return": pa.Table}  # the parameter's type, not the name "kind"
    copy_asset = asset(key=["db", "copy"], ins={"t": AssetIn(key=["db", "t"])})(copy)
    run([t, copy_asset], warehouse)
    assert issubclass(seen["type"], kind)
    assert sorted_rows(table(warehouse, "db.copy").read()) == ROWS.to_pylist()


def test_an_unannotated_input_is_an_arrow_table_of_the_selected_columns(warehouse):
    seen = {}

    @asset(key=["db", "t"])
    def t() -> pa.Table:
        return ROWS

    @asset(key=["db", "names"], ins={"t": AssetIn(key=["db", "t"], metadata={"columns": ["name"]})})
    def names(t):
        seen["t"] = t
        return t

    run([t, names], warehouse)
    assert isinstance(seen["t"], pa.Table) and seen["t"].column_names == ["name"]
    assert table(warehouse, "db.names").arrow_schema.names == ["name"]


def test_an_unsupported_input_type_is_refused(warehouse):
    @asset(key=["db", "t"])
    def t() -> pa.Table:
        return ROWS

    @asset(key=["db", "u"], ins={"t": AssetIn(key=["db", "t"])})
    def u(t: dict) -> pa.Table:
        return ROWS

    with pytest.raises(ArgumentTypeError, match=r"input 't' from asset db/t is annotated <class 'dict'>"):
        run([t, u], warehouse)


# ---- partitions ------------------------------------------------------------------------------


@asset(
    key=["db", "events"], partitions_def=DAILY, metadata={"partition_expr": "dt", "write_mode": "overwrite"}
)
def events(context) -> pa.Table:
    return day_rows(context.partition_key, [1, 2] if context.partition_key == DAYS[0] else [3])


def test_a_partitioned_input_reads_only_its_days(warehouse):
    seen = {}

    @asset(key=["db", "daily"], partitions_def=DAILY, ins={"events": AssetIn(key=["db", "events"])})
    def daily(context, events: pl.DataFrame) -> pl.DataFrame:
        seen[context.partition_key] = events
        return events

    @asset(key=["db", "total"], ins={"events": AssetIn(key=["db", "events"], metadata={"columns": ["id"]})})
    def total(events: pa.Table) -> pa.Table:
        return events

    for day in DAYS:
        run([events, daily], warehouse, partition_key=day)
    assert seen[DAYS[0]]["dt"].unique().to_list() == [DAYS[0]] and seen[DAYS[0]].height == 2
    assert seen[DAYS[1]]["id"].to_list() == [3]
    assert table(warehouse, "db.daily").partition_keys == ["dt"]  # partitioned by dt: the output has it
    run([events, total], warehouse, selection=[total])  # unpartitioned downstream: every day
    assert sorted(table(warehouse, "db.total").read().column("id").to_pylist()) == [1, 2, 3]


def test_overwrite_replaces_exactly_the_runs_partitions(warehouse):
    outputs = {DAYS[0]: [1, 2], DAYS[1]: [3]}

    @asset(
        key=["db", "t"], partitions_def=DAILY, metadata={"partition_expr": "dt", "write_mode": "overwrite"}
    )
    def t(context) -> pd.DataFrame:
        return day_rows(context.partition_key, outputs[context.partition_key]).to_pandas()

    for day in DAYS:
        run([t], warehouse, partition_key=day)
    assert table(warehouse).partition_keys == ["dt"]
    outputs[DAYS[0]] = [7]
    run([t], warehouse, partition_key=DAYS[0])
    run([t], warehouse, partition_key=DAYS[0])  # a rerun changes nothing
    expected = pa.concat_tables([day_rows(DAYS[0], [7]), day_rows(DAYS[1], [3])])
    assert sorted_rows(table(warehouse).read()) == sorted_rows(expected)
    outputs[DAYS[1]] = []  # the day's rows are gone upstream: the partition is emptied
    run([t], warehouse, partition_key=DAYS[1])
    assert sorted_rows(table(warehouse).read()) == day_rows(DAYS[0], [7]).to_pylist()


def test_overwrite_of_an_unpartitioned_asset_replaces_the_table(warehouse):
    ids = [[1, 2], [3]]

    @asset(key=["db", "t"], metadata={"write_mode": "overwrite"})
    def t() -> pa.Table:
        return pa.table({"id": pa.array(ids.pop(0), pa.int64())})

    run([t], warehouse)
    run([t], warehouse)
    assert table(warehouse).read().column("id").to_pylist() == [3]


def test_a_partitioned_asset_without_a_partition_column_is_refused(warehouse):
    @asset(key=["db", "t"], partitions_def=DAILY)
    def t() -> pa.Table:
        return ROWS

    with pytest.raises(InvalidArgumentError, match="set definition metadata partition_expr"):
        run([t], warehouse, partition_key=DAYS[0])
    assert not Catalog(warehouse).table_exists("db.t")


# ---- write modes -----------------------------------------------------------------------------


def test_append_adds_the_rows_of_every_run(warehouse):
    @asset(key=["db", "t"])
    def t() -> pa.Table:
        return ROWS

    run([t], warehouse)
    run([t], warehouse)
    assert table(warehouse).read().num_rows == 6


def keyed(metadata: dict, outputs: list):
    @asset(key=["db", "t"], metadata={"primary_keys": ["id"], **metadata})
    def t() -> pa.Table:
        return outputs.pop(0)

    return t


def test_upsert_is_the_default_of_a_primary_key_table(warehouse):
    t = keyed({}, [ROWS, pa.table({"id": pa.array([2, 4], pa.int64()), "name": ["B", "d"]})])
    run([t], warehouse)
    run([t], warehouse)
    assert [r["name"] for r in sorted_rows(table(warehouse).read())] == ["a", "B", "c", "d"]


def test_delete_removes_the_outputs_keys(warehouse):
    t = keyed({"write_mode": "delete"}, [pa.table({"id": pa.array([2], pa.int64())})])
    run([keyed({}, [ROWS])], warehouse)
    run([t], warehouse)
    assert [r["id"] for r in sorted_rows(table(warehouse).read())] == [1, 3]


@pytest.mark.parametrize("mode", ["upsert", "delete"])
def test_key_modes_on_an_append_table_commit_nothing(warehouse, mode):
    @asset(key=["db", "t"])
    def plain() -> pa.Table:
        return ROWS

    @asset(key=["db", "t"], metadata={"write_mode": mode})
    def t() -> pa.Table:
        return ROWS

    run([plain], warehouse)
    with pytest.raises(
        SchemaMismatchError, match=f"write_mode {mode} needs a primary key, and table db.t has none"
    ):
        run([t], warehouse)
    assert table(warehouse).latest_snapshot_id() == 1


def test_a_bad_write_mode_is_refused_before_anything_happens(warehouse):
    @asset(key=["db", "t"], metadata={"write_mode": "merge"})
    def t() -> pa.Table:
        return ROWS

    with pytest.raises(InvalidArgumentError, match=r"write_mode 'merge' is not one of \['append', 'upsert'"):
        run([t], warehouse)
    assert not Catalog(warehouse).table_exists("db.t")

    @asset(key=["db", "t"], metadata={"write_mode": "overwrite", "incremental": True})
    def incremental() -> pa.Table:
        return ROWS

    with pytest.raises(InvalidArgumentError, match="is incremental: its output is upserted"):
        run([incremental], warehouse)
    assert not Catalog(warehouse).table_exists("db.t")


# ---- tables ----------------------------------------------------------------------------------


def test_the_table_is_created_as_the_metadata_says(warehouse):
    @asset(
        key=["db", "t"],
        partitions_def=DAILY,
        metadata={
            "primary_keys": ["id", "dt"],
            "partition_keys": ["dt"],
            "options": MetadataValue.json({"bucket": "2", "file.format": "parquet"}),
        },
    )
    def t(context) -> pa.Table:
        return day_rows(context.partition_key, [1])

    run([t], warehouse, partition_key=DAYS[0])
    created = table(warehouse)
    assert (created.primary_keys, created.partition_keys) == (["id", "dt"], ["dt"])
    assert created.options["bucket"] == "2" and created.options["file.format"] == "parquet"


def test_table_names_from_keys_and_metadata(warehouse):
    @asset
    def plain() -> pa.Table:
        return ROWS

    @asset(key=["x", "named"], metadata={"table": "db.elsewhere"})
    def named() -> pa.Table:
        return ROWS

    @asset(key=["a", "b", "c"])
    def deep() -> pa.Table:
        return ROWS

    run([plain, named], warehouse)
    catalog = Catalog(warehouse)
    assert catalog.table_exists("default.plain") and catalog.table_exists("db.elsewhere")
    with pytest.raises(InvalidArgumentError, match="give the asset definition metadata table='db.table'"):
        run([deep], warehouse)


def test_schema_evolution_adds_the_outputs_new_columns(warehouse):
    outputs = [ROWS, pa.table({"id": pa.array([4], pa.int64()), "score": [0.5]})]

    @asset(key=["db", "t"])
    def t() -> pa.Table:
        return outputs.pop(0)

    run([t], warehouse)
    run([t], warehouse)
    got = sorted_rows(table(warehouse).read())
    assert [(r["name"], r["score"]) for r in got] == [("a", None), ("b", None), ("c", None), (None, 0.5)]


def test_strict_schema_mode_refuses_new_columns(warehouse):
    outputs = [ROWS, ROWS.append_column("score", pa.array([1.0, 2.0, 3.0]))]

    @asset(key=["db", "t"], metadata={"schema_mode": "strict"})
    def t() -> pa.Table:
        return outputs.pop(0)

    run([t], warehouse)
    with pytest.raises(
        SchemaMismatchError, match=r"columns \['score'\] that table db.t lacks and schema_mode is strict"
    ):
        run([t], warehouse)
    assert table(warehouse).arrow_schema.names == ["id", "name"]


def test_an_incompatible_type_leaves_the_table_unchanged(warehouse):
    outputs = [ROWS, pa.table({"id": ["four"], "extra": [1]})]

    @asset(key=["db", "t"])
    def t() -> pa.Table:
        return outputs.pop(0)

    run([t], warehouse)
    before = table(warehouse)
    with pytest.raises(SchemaMismatchError, match=r"column 'id' of table db.t is int64; data of type string"):
        run([t], warehouse)
    after = table(warehouse)
    assert after.latest_snapshot_id() == before.latest_snapshot_id() == 1
    assert after.schema.id == before.schema.id  # not even the new column was added


def test_pypaimon_is_not_needed(warehouse, monkeypatch):
    monkeypatch.setitem(sys.modules, "pypaimon", None)  # importing it now fails

    @asset(key=["db", "t"])
    def t() -> pa.Table:
        return ROWS

    @asset(key=["db", "u"], ins={"t": AssetIn(key=["db", "t"])})
    def u(t: pa.RecordBatchReader) -> pa.RecordBatchReader:
        return t

    run([t, u], warehouse)
    assert sorted_rows(table(warehouse, "db.u").read()) == ROWS.to_pylist()


# ---- PySpark ---------------------------------------------------------------------------------


@pytest.mark.spark
def test_a_spark_output_is_written_by_spark_as_the_run(spark, warehouse):
    @asset(key=["db", "t"], metadata={"primary_keys": ["id"]})
    def t():
        return spark.createDataFrame(ROWS.to_pandas())

    @asset(key=["db", "t"], metadata={"write_mode": "delete"})
    def deletion():
        return spark.createDataFrame(pd.DataFrame({"id": [2]}))

    result = run([t], warehouse)
    stored = table(warehouse)
    assert sorted_rows(stored.read()) == ROWS.to_pylist()
    assert stored.snapshot().commit_user == f"dagster-{result.run_id}"
    assert result.asset_materializations_for_node("db__t")[0].metadata["dagster/row_count"].value == 3
    run([deletion], warehouse)
    assert [r["id"] for r in sorted_rows(table(warehouse).read())] == [1, 3]


@pytest.mark.spark
def test_spark_inputs_and_overwrite_of_the_runs_partitions(spark, warehouse):
    outputs = {DAYS[0]: [1, 2], DAYS[1]: [3]}

    @asset(
        key=["db", "t"], partitions_def=DAILY, metadata={"partition_expr": "dt", "write_mode": "overwrite"}
    )
    def t(context):
        rows = day_rows(context.partition_key, outputs[context.partition_key])
        if context.partition_key == DAYS[1]:  # the table has v (from the first day): written as nulls
            return spark.createDataFrame(rows.drop_columns(["v"]).to_pandas(), "id long, dt string")
        return spark.createDataFrame(rows.to_pandas(), "id long, dt string, v string")

    @asset(
        key=["db", "daily"],
        partitions_def=DAILY,
        ins={"t": AssetIn(key=["db", "t"], metadata={"columns": ["id", "dt"]})},
    )
    def daily(t: SparkFrame) -> SparkFrame:
        return t

    for day in DAYS:
        result = run([t, daily], warehouse, partition_key=day, spark=True)
        (stored,) = result.asset_materializations_for_node("db__daily")
        lineage = stored.metadata["dagster/column_lineage"].value.deps_by_column  # its columns are t's
        traced = {
            c: [(d.asset_key.to_user_string(), d.column_name) for d in deps] for c, deps in lineage.items()
        }
        assert traced == {"id": [("db/t", "id")], "dt": [("db/t", "dt")]}
    assert sorted_rows(table(warehouse, "db.daily").read()) == sorted_rows(
        table(warehouse).read(columns=["id", "dt"])
    )
    outputs[DAYS[0]] = []  # a day without rows empties its partition (static partition overwrite)
    run([t], warehouse, partition_key=DAYS[0])
    assert table(warehouse).read().to_pylist() == [{"id": 3, "dt": DAYS[1], "v": None}]


# ---- incremental assets ----------------------------------------------------------------------


SUM_METADATA = {
    "incremental": True,
    "primary_keys": ["k"],
    "options": {"bucket": "1", "merge-engine": "aggregation", "fields.total.aggregate-function": "sum"},
}
SEEN: list[int] = []  # rows each run of the incremental sum read


def _signed_total(data: pa.Table) -> pa.Table:
    """One row: the sum of ``v`` over the changes, -U/-D rows subtracting."""
    SEEN.append(data.num_rows)
    signs = [-1 if k in ("-U", "-D") else 1 for k in data.column("_row_kind").to_pylist()]
    value = sum(s * v for s, v in zip(signs, data.column("v").to_pylist(), strict=True))
    return pa.table({"k": pa.array([0], pa.int64()), "total": pa.array([value], pa.int64())})


def _arrow_sum(src: pa.Table) -> pa.Table:
    return _signed_total(src)


def _spark_sum(src: SparkFrame) -> pa.Table:
    return _signed_total(src.toArrow())


@pytest.mark.spark
@pytest.mark.parametrize("kind", ["arrow", "spark"])
def test_an_incremental_asset_reads_the_changes_since_its_last_materialization(warehouse, kind):
    """``incremental=True``: the first run reads the upstream whole, later runs only its changes
    (with row kinds, deletes included), each committed once by the table's incremental user; an
    overwrite upstream that replaced rows makes the next run read everything and replace the table."""
    catalog = Catalog(warehouse)
    catalog.create_database("db")
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.int64())])
    source = catalog.create_table("db.src", schema, primary_keys=["id"],
                                  options={"bucket": "1", "changelog-producer": "lookup"})  # fmt: skip
    fn = _spark_sum if kind == "spark" else _arrow_sum
    total = asset(key=["db", "sum"], ins={"src": AssetIn(key=["db", "src"])}, metadata=SUM_METADATA)(fn)
    SEEN.clear()

    def materialize_sum():
        assert run([AssetSpec(["db", "src"]), total], warehouse, spark=kind == "spark").success

    source.write(pa.table({"id": [1, 2], "v": [10, 20]}, schema=schema))
    materialize_sum()
    changes = pa.table({"id": [1, 2], "v": [15, 20], "_row_kind": ["+U", "-D"]})
    source.write(changes.cast(schema.append(pa.field("_row_kind", pa.string()))))
    materialize_sum()
    materialize_sum()  # nothing changed: an empty increment, committed to record its position
    assert SEEN == [2, 3, 0]  # the whole table, then -U, +U, -D
    result = table(warehouse, "db.sum")
    assert result.read().to_pylist() == [{"k": 0, "total": 15}]
    assert result.snapshot().commit_user == "dagster-incremental-db.sum"
    assert [result.snapshot(i).commit_identifier for i in result.snapshots.snapshot_ids()] == [1, 2, 3]
    source.write(pa.table({"id": [5], "v": [1]}, schema=schema), overwrite=True)
    materialize_sum()
    assert SEEN[-1] == 1 and result.read().to_pylist() == [{"k": 0, "total": 1}]
