"""``lakehouse.spark.read``: column-pruned reads, raw-convertible files by Spark's native Parquet
reader, merges by the engine; every read equals the ``paimon`` data source's."""

from __future__ import annotations

import datetime
from dataclasses import replace

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lakehouse import Catalog, Predicate, col
from lakehouse.errors import InvalidArgumentError, InvalidOptionError
from lakehouse.spark import read, read_changes
from lakehouse.spark.kinds import functions_for
from lakehouse.spark.native_read import FileGroup, FileLayout, plan_read
from lakehouse.spark.types import as_nullable

from ..conftest import ORDERS, orders, pk_orders_table
from .test_read import TYPED, typed_rows

pytestmark = pytest.mark.spark

DAYS = ["2024-01-01", "2024-01-02", "2024-01-03"]
DV = {"deletion-vectors.enabled": "true"}


SQL = {"eq": "=", "ge": ">="}  # the comparisons the engine predicates below use


def expected_frame(spark, warehouse, name="db.t", columns=None, where=None, **options):
    """What the ``paimon`` data source reads for the same query."""
    df = spark.read.format("paimon").option("warehouse", warehouse).options(**options).load(name)
    if isinstance(where, Predicate):  # as SQL: the engine's translation is what is checked
        where = " AND ".join(f"{leaf.column} {SQL[leaf.op]} {leaf.literals[0]!r}" for leaf in where.children)
    if where is not None:
        df = df.where(where)
    return df.select(*columns) if columns is not None else df


def assert_same(got, expected, key="order_id"):
    """Same columns, types (as file sources read them: nullable, but for the row kind of changes,
    which every row has) and rows, in any order."""
    assert got.columns == expected.columns
    assert [as_nullable(f.dataType) for f in got.schema] == [as_nullable(f.dataType) for f in expected.schema]
    assert all(f.nullable != (f.name == "_row_kind") for f in got.schema)
    keys = [key] if isinstance(key, str) else key
    sort = [(k, "ascending") for k in keys]
    left, right = got.toArrow(), expected.toArrow()
    assert left.num_rows == right.num_rows
    assert left.sort_by(sort).to_pylist() == right.sort_by(sort).to_pylist()


def check(spark, warehouse, name="db.t", columns=None, where=None, key="order_id", **options):
    got = read(spark, name, columns=columns, where=where, warehouse=warehouse, options=options)
    assert_same(got, expected_frame(spark, warehouse, name, columns, where, **options), key)
    return got


def planned(catalog, name="db.t", columns=None, where=None, **options):
    table = catalog.load_table(name)
    return plan_read(table.copy(options) if options else table, columns, where, 2)


def test_append_tables_read_natively_and_only_the_columns_asked(any_spark, catalog, warehouse):
    t = catalog.create_table("db.t", ORDERS, partition_keys=["dt"])
    for start in (0, 20, 40):
        t.write(orders(range(start, start + 20), dt=DAYS * 6 + DAYS[:2], price=start / 10))
    plan = planned(catalog, columns=["price", "order_id"])
    assert not plan.merged and sum(len(g.files) for g in plan.files) == 9  # every file read by Spark
    assert [name for name, _ in plan.files[0].layout.read] == ["price", "order_id"]
    check(any_spark, warehouse)
    got = check(any_spark, warehouse, columns=["price", "order_id"])
    assert got.columns == ["price", "order_id"]
    check(any_spark, warehouse, columns=["dt", "status"], key=["dt", "status"])


def test_partition_and_value_filters_prune_the_plan(any_spark, catalog, warehouse):
    t = catalog.create_table("db.t", ORDERS, partition_keys=["dt"])
    for start in (0, 100, 200):
        t.write(orders(range(start, start + 30), dt=DAYS * 10))
    f = functions_for(any_spark)
    pruning = [
        "dt = '2024-01-02' AND order_id >= 100",
        (col("dt") == "2024-01-02") & (col("order_id") >= 100),
    ]
    applied = [
        (f.col("dt") == "2024-01-02") & (f.col("order_id") >= 100),
        f.expr("dt = '2024-01-02' AND order_id >= 100"),
    ]
    for i, where in enumerate(pruning + applied):
        plan = planned(catalog, columns=["price"], where=where)
        pruned = (plan.plan.stats["pruned_by_partition"], plan.plan.stats["pruned_by_stats"])
        assert pruned == ((6, 1) if i < len(pruning) else (0, 0))  # a Spark Column prunes nothing
        assert sorted(plan.needed) == ["dt", "order_id", "price"]  # what the condition uses is read too
        got = check(any_spark, warehouse, columns=["price", "user_id"], where=where, key=["price", "user_id"])
        assert got.count() == 20
    # a condition nothing of which can be pushed still filters, in Spark
    unpushed = "dt = '2024-01-02' OR order_id >= 200"
    assert planned(catalog, where=unpushed).filter is None
    check(any_spark, warehouse, where=unpushed)


def test_deletion_vectors_drop_the_rows_they_delete(any_spark, catalog, warehouse):
    t = pk_orders_table(catalog, **DV)
    t.write(orders(range(40), dt=DAYS[0]))
    t.write(orders(range(0, 40, 3), dt=DAYS[0], price=2.0))  # updates: the old rows get deleted
    t.write(orders([1, 4, 7], dt=DAYS[0]).append_column("_row_kind", pa.array(["-D"] * 3)))
    plan = planned(catalog, columns=["order_id", "price"])
    assert not plan.merged and any(g.deleting for g in plan.files)
    got = check(any_spark, warehouse, columns=["order_id", "price"])
    assert got.count() == 37
    check(any_spark, warehouse, where="price > 1.5")


def test_retractions_in_files_spark_reads_are_dropped(spark, catalog):
    """Files above level 0 may keep -U/-D rows (Java's compactions into a middle level do); a
    native scan of them drops those rows as the engine's merge-free read does."""
    t = pk_orders_table(catalog, bucket="1")
    kinds = ["+I", "-D", "+I", "-U", "+U", "+I"]
    t.write(orders(range(6)).append_column("_row_kind", pa.array(kinds)))
    [meta] = [e.file for e in t.live_entries()]
    assert meta.delete_row_count == 2
    plan = planned(catalog, columns=["order_id", "status"])
    [split] = plan.plan.splits
    layout = FileLayout.of(t.schema, t.schema, plan.needed)
    [raw] = t.new_read().raw_files(replace(split, raw_convertible=True))  # as if above level 0
    assert raw.retracted_kinds
    for retracts, ids in ((True, [0, 2, 4, 5]), (False, [0, 1, 2, 3, 4, 5])):
        native = replace(plan, files=[FileGroup(layout, (raw,), retracts)], merged=[])
        assert sorted(r.order_id for r in native.frame(spark).collect()) == ids
    assert sorted(t.read().column("order_id").to_pylist()) == [0, 2, 4, 5]


def test_merging_buckets_are_read_by_the_engine(any_spark, catalog, warehouse):
    t = pk_orders_table(catalog)
    t.write(orders(range(30), dt=DAYS[0]))
    t.write(orders(range(0, 30, 2), dt=DAYS[0], price=2.0))  # two sorted runs per bucket
    t.write(orders(range(10), dt=DAYS[1]))
    t.compact(full=True, partitions={"dt": DAYS[1]})  # one file per bucket: raw-convertible
    plan = planned(catalog, columns=["price", "order_id"])
    assert len(plan.merged) == 2 and sum(len(g.files) for g in plan.files) == 2
    check(any_spark, warehouse, columns=["price", "order_id"])
    check(any_spark, warehouse, where="dt = '2024-01-01' AND status = 'PAID'")


def test_only_merging_buckets_or_none_at_all(any_spark, catalog, warehouse):
    t = pk_orders_table(catalog)
    got = read(any_spark, "db.t", columns=["status"], warehouse=warehouse)
    assert got.columns == ["status"] and got.count() == 0
    check(any_spark, warehouse, where="order_id > 3")
    t.write(orders(range(8)))
    t.write(orders(range(4), price=3.0))
    plan = planned(catalog)
    assert plan.merged and not plan.files
    check(any_spark, warehouse, columns=["status", "order_id"])


def test_files_of_older_schemas_are_mapped_by_field_id(spark, catalog, warehouse):
    t = catalog.create_table("db.t", ORDERS)
    t.write(orders(range(10)))
    t.add_column("note", pa.string())
    t.rename_column("status", "state")
    t.alter_column_type("user_id", pa.int64())
    renamed = orders(range(10, 20)).rename_columns([*ORDERS.names[:4], "state"])
    t.write(renamed.append_column("note", pa.array(["n"] * 10)))
    plan = planned(catalog, columns=["note", "state", "user_id"])
    assert not plan.merged and len(plan.files) == 2  # both schema versions read by Spark
    got = check(spark, warehouse, columns=["note", "state", "user_id"], key=["user_id", "note"])
    assert got.where("note IS NULL").count() == 10 and got.where("state = 'PAID'").count() == 20
    check(spark, warehouse)
    other = catalog.create_table("db.u", pa.schema([("id", pa.int64()), ("n", pa.int32())]))
    other.write(pa.table({"id": [1, 2], "n": [7, None]}, schema=other.arrow_schema))
    other.alter_column_type("n", pa.float64())  # widening, but not one Spark's cast is trusted with
    other.write(pa.table({"id": [3], "n": [0.5]}, schema=other.arrow_schema))
    plan = planned(catalog, "db.u")
    assert len(plan.merged) == 1 and len(plan.files) == 1  # the older file by the engine
    check(spark, warehouse, "db.u", key="id")


def test_types_spark_reads_natively_and_types_it_leaves_to_the_engine(spark, catalog, warehouse):
    schema = TYPED.append(pa.field("at_ntz_ms", pa.timestamp("ms")))
    t = catalog.create_table("db.t", schema)
    data = typed_rows()
    t.write(data.append_column("at_ntz_ms", pa.array([datetime.datetime(1500, 3, 1, 2, 3, 4, 5000), None])))
    assert not planned(catalog).merged
    check(spark, warehouse, key="id")
    finer = catalog.create_table(
        "db.fine", pa.schema([("id", pa.int32()), ("at", pa.timestamp("ns")), ("clock", pa.time32("ms"))])
    )
    fine = {"id": [1], "at": [datetime.datetime(2024, 1, 1, 1)], "clock": [datetime.time(1, 2, 3)]}
    finer.write(pa.table(fine, schema=finer.arrow_schema))
    assert planned(catalog, "db.fine", columns=["id", "clock"]).merged
    assert not planned(catalog, "db.fine", columns=["id"]).merged
    check(spark, warehouse, "db.fine", key="id")
    check(spark, warehouse, "db.fine", columns=["clock", "id"], key="id")


def test_time_travel_and_branches_read_their_own_files(spark, catalog, warehouse):
    t = catalog.create_table("db.t", ORDERS, partition_keys=["dt"])
    t.write(orders(range(5)))
    t.add_column("note", pa.string())
    t.write(orders(range(5, 9)).append_column("note", pa.array(["x"] * 4)))
    got = check(spark, warehouse, **{"scan.snapshot-id": "1"})
    assert got.columns == ORDERS.names and got.count() == 5
    t.create_branch("b", snapshot_id=2)
    t.on_branch("b").write(orders(range(100, 102)).append_column("note", pa.array(["b", "b"])))
    got = check(spark, warehouse, "db.t$branch_b", columns=["order_id", "note"])
    assert got.count() == 11


def test_paths_with_escaped_partition_values_or_glob_characters(spark, catalog, warehouse, tmp_path):
    t = catalog.create_table("db.t", ORDERS, partition_keys=["dt"])
    t.write(orders(range(8), dt=["a b:c%d=e", "x/y#z", "[x]*?", "a}b"] * 2))
    plan = planned(catalog)
    assert not plan.merged and len(plan.files[0].files) == 4  # Paimon escapes what Spark would expand
    check(spark, warehouse)
    check(spark, warehouse, where="dt = 'x/y#z'")
    odd = str(tmp_path / "w{1}[2]")  # a warehouse Spark would take for a glob: the engine reads it
    odd_catalog = Catalog(odd)
    odd_catalog.create_database("db")
    odd_catalog.create_table("db.t", ORDERS).write(orders(range(3)))
    plan = planned(odd_catalog)
    assert plan.merged and not plan.files
    check(spark, odd)


def test_tables_on_object_stores_are_read_by_the_engine(any_spark, s3_warehouse):
    uri, s3 = s3_warehouse
    catalog = Catalog(uri, options=s3)
    catalog.create_database("db")
    t = pk_orders_table(catalog, **DV)
    t.write(orders(range(20)))
    t.write(orders(range(5), price=2.0))
    plan = planned(catalog, columns=["price"])
    assert plan.merged and not plan.files  # Spark's Hadoop filesystems know nothing of the store
    query = {"columns": ["price", "order_id"], "where": "order_id < 8"}
    got = read(any_spark, "db.t", warehouse=uri, options=s3, **query)
    assert_same(got, expected_frame(any_spark, uri, **query, **s3))


def test_bad_reads_say_what_to_do(spark, catalog, warehouse):
    catalog.create_table("db.t", ORDERS)
    for columns in (["nope"], [], ["dt", "dt"]):
        with pytest.raises(InvalidArgumentError, match="at most once, at least one"):
            read(spark, "db.t", columns=columns, warehouse=warehouse)
    with pytest.raises(InvalidArgumentError, match="a list of names"):
        read(spark, "db.t", columns="dt", warehouse=warehouse)
    with pytest.raises(InvalidArgumentError, match="system table"):
        read(spark, "db.t$snapshots", warehouse=warehouse)
    with pytest.raises(InvalidOptionError, match="read.changelog"):
        read(spark, "db.t", warehouse=warehouse, options={"read.changelog": "true"})


def changes_of(spark, warehouse, name, start, end, **options):
    """``read_changes`` and what the ``paimon`` data source reads of the same range, checked equal."""
    got = read_changes(spark, name, start, end, warehouse=warehouse, overwrites=bool(options))
    expected = expected_frame(spark, warehouse, name, **{
        "incremental-between": f"{start},{end}", "read.changelog": "true", **options,
    })  # fmt: skip
    assert_same(got, expected, key=["order_id", "_row_kind", "price"])
    return got


def planned_changes(catalog, name, start, end):
    table = catalog.load_table(name).copy({"incremental-between": f"{start},{end}", "read.changelog": "true"})
    return plan_read(table, parallelism=2, changes=True)


def kinds(df):
    return sorted((r.order_id, r._row_kind, r.price) for r in df.collect())


def test_changes_are_read_natively_each_row_with_its_kind(any_spark, catalog, warehouse):
    """The changelog files of a table with a producer, the files commits added to a table without
    one (retractions kept: they are changes) and to an append table (every row +I) are read by
    Spark, as the data source reads them."""
    t = pk_orders_table(catalog, **{"changelog-producer": "lookup"})
    t.write(orders(range(4), price=1.0))
    first = t.latest_snapshot_id()
    t.write(orders([1], price=2.0).append_column("_row_kind", pa.array(["+U"])))
    t.write(orders([2]).append_column("_row_kind", pa.array(["-D"])))
    plan = planned_changes(catalog, "db.t", first, t.latest_snapshot_id())
    assert not plan.merged and plan.files and all(g.kinds and not g.retracts for g in plan.files)
    got = changes_of(any_spark, warehouse, "db.t", first, t.latest_snapshot_id())
    assert got.columns == [*ORDERS.names, "_row_kind"]
    assert kinds(got) == [(1, "+U", 2.0), (1, "-U", 1.0), (2, "-D", 1.0)]

    u = catalog.create_table("db.u", ORDERS, primary_keys=["order_id", "dt"], options={"bucket": "1"})
    u.write(orders(range(3)))
    u.write(orders([0, 5], price=3.0).append_column("_row_kind", pa.array(["-D", "+I"])))
    assert all(g.kinds for g in planned_changes(catalog, "db.u", 1, 2).files)
    assert kinds(changes_of(any_spark, warehouse, "db.u", 1, 2)) == [(0, "-D", 3.0), (5, "+I", 3.0)]

    a = catalog.create_table("db.a", ORDERS, partition_keys=["dt"])
    a.write(orders([1], dt="d1"))
    a.write(orders([2, 3], dt="d2"))
    a.write(orders([4], dt="d3"), overwrite={"dt": "d3"})
    plan = planned_changes(catalog, "db.a", 0, 3)
    assert not plan.merged and not any(g.kinds for g in plan.files)
    inserted = [(1, "+I", 1.0), (2, "+I", 1.0), (3, "+I", 1.0)]
    assert kinds(changes_of(any_spark, warehouse, "db.a", 0, 3)) == inserted
    overwritten = changes_of(any_spark, warehouse, "db.a", 2, 3, **{"streaming-read-overwrite": "true"})
    assert kinds(overwritten) == [(4, "+I", 1.0)]
    assert changes_of(any_spark, warehouse, "db.a", 3, 3).count() == 0


def test_changed_files_of_older_schemas_or_types_spark_cannot_read(spark, catalog, warehouse):
    """Changed files of an older schema are mapped by field id; files with a type Spark's reader
    does not read as the engine does go to the engine's tasks, with their kinds too."""
    t = pk_orders_table(catalog, bucket="1")
    t.write(orders(range(3), dt=["d1", "d2", "d1"]))
    t.add_column("note", pa.string())
    t.write(orders([1], dt="d2", price=5.0).append_column("note", pa.array(["n"])))
    t.write(orders([2], dt="d1", price=6.0).append_column("note", pa.array([None], pa.string()))
            .append_column("_row_kind", pa.array(["-D"])))  # fmt: skip
    plan = planned_changes(catalog, "db.t", 0, 3)
    assert len(plan.files) == 2 and sum(len(g.files) for g in plan.files) == 4 and not plan.merged
    got = changes_of(spark, warehouse, "db.t", 0, 3)
    assert got.columns == [*ORDERS.names, "note", "_row_kind"]
    assert kinds(got) == [(0, "+I", 1.0), (1, "+I", 1.0), (1, "+I", 5.0), (2, "+I", 1.0), (2, "-D", 6.0)]
    assert got.where("note = 'n'").count() == 1

    timed = ORDERS.append(pa.field("clock", pa.time32("ms")))  # TIME: Spark's reader wants us or ns
    u = catalog.create_table("db.u", timed, primary_keys=["order_id", "dt"], options={"bucket": "1"})
    clock = pa.array([1000, None], pa.time32("ms"))
    u.write(orders([1, 2]).append_column("clock", clock))
    u.write(orders([1]).append_column("clock", clock[1:]).append_column("_row_kind", pa.array(["-D"])))
    plan = planned_changes(catalog, "db.u", 0, 2)
    assert not plan.files and sum(len(p.splits) for p in plan.merged) == 2
    got = changes_of(spark, warehouse, "db.u", 0, 2)
    assert kinds(got) == [(1, "+I", 1.0), (1, "-D", 1.0), (2, "+I", 1.0)]
    # a TIME column added later: Spark cannot even hold its nulls, so the older files are the engine's
    v = catalog.create_table("db.v", ORDERS)
    v.write(orders(range(2)))
    v.add_column("clock", pa.time32("ms"))
    v.write(orders([5]).append_column("clock", pa.array([None], pa.time32("ms"))))
    assert not planned(catalog, "db.v").files
    check(spark, warehouse, "db.v")


HISTORY = st.lists(
    st.tuples(
        st.lists(st.integers(0, 30), min_size=1, max_size=12, unique=True),
        st.sampled_from(["+I", "-D"]),
        st.booleans(),  # compact afterwards
    ),
    min_size=1,
    max_size=4,
)


@settings(max_examples=6, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    history=HISTORY,
    options=st.sampled_from([DV, {}, {"merge-engine": "first-row"}]),
    columns=st.sampled_from([None, ["price"], ["status", "order_id"], ["dt"]]),
    where=st.sampled_from([None, "order_id < 15", "dt = '2024-01-02' AND price > 1.5"]),
)
def test_any_history_reads_as_the_data_source_reads(
    spark, tmp_path_factory, history, options, columns, where
):
    warehouse = str(tmp_path_factory.mktemp("wh"))
    catalog = Catalog(warehouse)
    catalog.create_database("db")
    t = pk_orders_table(catalog, **options)
    for i, (ids, kind, compact) in enumerate(history):
        data = orders(ids, dt=[DAYS[k % 2] for k in ids], price=float(i + 1))
        if kind == "-D" and options.get("merge-engine") != "first-row":
            data = data.append_column("_row_kind", pa.array(["-D"] * len(ids)))
        t.write(data)
        if compact:
            t.compact()
    key = ["order_id", "dt"] if columns is None else columns
    check(spark, warehouse, columns=columns, where=where, key=key)
