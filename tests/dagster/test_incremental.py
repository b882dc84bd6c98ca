"""Incremental tables: a materialization reads only what its upstream tables changed since the last
one, propagates updates and deletes, recomputes the days an upstream replaced, commits exactly once,
and keeps the snapshots it still needs from expiring - always equal to a full recomputation."""

from __future__ import annotations

import datetime as dt
import tempfile
from collections import defaultdict

import pyarrow as pa
import pytest
from dagster import DailyPartitionsDefinition, materialize
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dagster_lakehouse.factory as factory
from dagster_lakehouse.factory import table_asset
from dagster_lakehouse.incremental import consumer_id, incremental_user, plan_increment
from dagster_lakehouse.resources import LakehouseResource, SparkResource
from dagster_lakehouse.spec import Inputs, TableSpec
from dagster_lakehouse.yaml_spec import SqlTransform
from lakehouse import Catalog
from lakehouse.errors import InvalidArgumentError, InvalidOptionError
from lakehouse.store import consumers

pytestmark = pytest.mark.spark

DAYS = ["2026-01-01", "2026-01-02"]
PARTITIONS = DailyPartitionsDefinition(start_date=DAYS[0])
SRC = "src.items"
ITEMS = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("dt", pa.string(), nullable=False),
                   pa.field("grp", pa.int64()), pa.field("amount", pa.int64())])  # fmt: skip
SUMS_SQL = """
WITH delta AS (
  SELECT grp, dt, SUM(CASE WHEN _row_kind IN ('-U', '-D') THEN -1 ELSE 1 END) AS n,
         SUM(CASE WHEN _row_kind IN ('-U', '-D') THEN -amount ELSE amount END) AS total
  FROM {src_items} GROUP BY grp, dt)
SELECT d.grp, d.dt, d.n, d.total,
       CASE WHEN COALESCE(t.n, 0) + d.n = 0 THEN '-D' ELSE '+I' END AS _row_kind
FROM delta d LEFT JOIN {this} t ON t.grp = d.grp AND t.dt = d.dt
"""
SUMS = TableSpec(
    "inc.sums",
    pa.schema(
        [
            pa.field("grp", pa.int64(), nullable=False),
            pa.field("dt", pa.string(), nullable=False),
            pa.field("n", pa.int64()),
            pa.field("total", pa.int64()),
        ]
    ),  # fmt: skip
    SqlTransform(SUMS_SQL, (SRC,), incremental=True),
    primary_keys=("grp", "dt"),
    options={
        "bucket": "1",
        "merge-engine": "aggregation",
        "fields.n.aggregate-function": "sum",
        "fields.total.aggregate-function": "sum",
        "aggregation.remove-record-on-delete": "true",
    },  # fmt: skip
    upstream=(SRC,),
    incremental=True,
)


def _doubled(inputs):
    changes = inputs.changes(SRC).where("_row_kind != '-U'")
    return changes.selectExpr("id", "dt", "amount * 2 AS doubled", "_row_kind")


COPY = TableSpec(
    "inc.copy",
    pa.schema(
        [
            pa.field("id", pa.int64(), nullable=False),
            pa.field("dt", pa.string(), nullable=False),
            pa.field("doubled", pa.int64()),
        ]
    ),  # fmt: skip
    _doubled,
    primary_keys=("id", "dt"),
    options={"bucket": "1"},
    upstream=(SRC,),
    incremental=True,
)
ASSETS = [table_asset(s, PARTITIONS) for s in (SUMS, COPY)]


class Model:
    """The upstream table as plain Python, and what each downstream table must then hold."""

    def __init__(self) -> None:
        self.rows: dict[tuple[int, str], tuple[int, int]] = {}

    def sums(self) -> list[tuple]:
        out: dict[tuple[int, str], list[int]] = defaultdict(lambda: [0, 0])
        for (_, day), (grp, amount) in self.rows.items():
            out[grp, day][0] += 1
            out[grp, day][1] += amount
        return sorted((g, d, n, total) for (g, d), (n, total) in out.items())

    def copy(self) -> list[tuple]:
        return sorted((i, d, amount * 2) for (i, d), (_, amount) in self.rows.items())


def source(warehouse: str):
    catalog = Catalog(warehouse)
    catalog.create_database("src", ignore_if_exists=True)
    return catalog.create_table(SRC, ITEMS, primary_keys=["id", "dt"], partition_keys=["dt"],
                                options={"bucket": "1", "changelog-producer": "lookup"},
                                ignore_if_exists=True)  # fmt: skip


def upsert(table, model: Model, ops: list[tuple[str, int, str, int, int]]) -> None:
    """Apply (op, id, day, grp, amount) upserts and deletes to the table and the model, as one commit."""
    kinds = {"upsert": "+I", "delete": "-D"}
    table.write(pa.table({"id": [o[1] for o in ops], "dt": [o[2] for o in ops], "grp": [o[3] for o in ops],
                          "amount": [o[4] for o in ops], "_row_kind": [kinds[o[0]] for o in ops]},
                         schema=ITEMS.append(pa.field("_row_kind", pa.string()))))  # fmt: skip
    for op, i, day, grp, amount in ops:
        if op == "upsert":
            model.rows[i, day] = (grp, amount)
        else:
            model.rows.pop((i, day), None)


def replace_day(table, model: Model, day: str, rows: list[tuple[int, int, int]]) -> None:
    """Overwrite one day of the table (a rerun of it upstream) with (id, grp, amount) rows."""
    kept = {(i, day): (g, a) for i, g, a in rows}
    ids, values = [k[0] for k in kept], list(kept.values())
    data = pa.table({"id": ids, "dt": [day] * len(ids), "grp": [v[0] for v in values],
                     "amount": [v[1] for v in values]}, schema=ITEMS)  # fmt: skip
    table.write(data, overwrite={"dt": day})
    model.rows = {k: v for k, v in model.rows.items() if k[1] != day} | kept


def run(warehouse: str):
    resources = {"lakehouse": LakehouseResource(warehouse=warehouse), "spark": SparkResource()}
    result = materialize(ASSETS, resources=resources, partition_key=DAYS[0])
    assert result.success
    return {m.asset_key.to_user_string(): m.metadata for m in result.get_asset_materialization_events()
            for m in [m.materialization]}  # fmt: skip


def tuples(table: pa.Table, *columns: str) -> list[tuple]:
    return sorted(zip(*[table.column(c).to_pylist() for c in columns], strict=True))


def assert_matches(warehouse: str, model: Model) -> None:
    catalog = Catalog(warehouse)
    assert tuples(catalog.get_table(SUMS.name).read(), "grp", "dt", "n", "total") == model.sums()
    assert tuples(catalog.get_table(COPY.name).read(), "id", "dt", "doubled") == model.copy()


OPS = st.tuples(st.sampled_from(["upsert", "delete"]), st.integers(0, 9), st.sampled_from(DAYS),
                st.integers(0, 2), st.integers(-5, 20))  # fmt: skip
STEPS = st.lists(
    st.one_of(
        st.lists(OPS, min_size=1, max_size=6).map(lambda ops: ("ops", ops)),
        st.tuples(
            st.sampled_from(DAYS),
            st.lists(st.tuples(st.integers(0, 9), st.integers(0, 2), st.integers(-5, 20)), max_size=4),
        ).map(lambda r: ("replace", r)),  # fmt: skip
    ),
    min_size=1,
    max_size=3,
)


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(first=st.lists(OPS, min_size=1, max_size=8), steps=STEPS)
def test_incremental_tables_equal_a_full_recomputation(spark, first, steps):
    """Random upserts, deletes and day rewrites upstream; after every materialization both
    incremental tables hold exactly what recomputing them from the upstream's rows gives."""
    warehouse = tempfile.mkdtemp(prefix="incremental-")
    table, model = source(warehouse), Model()
    upsert(table, model, first)
    assert run(warehouse)[SUMS.key.to_user_string()]["incremental"].value == "full"
    assert_matches(warehouse, model)
    for kind, change in steps:
        if kind == "ops":
            upsert(table, model, change)
        else:
            replace_day(table, model, *change)
        metadata = run(warehouse)
        assert metadata[COPY.key.to_user_string()]["incremental"].value == "changes"
        assert_matches(warehouse, model)


def test_a_rerun_day_is_recomputed_and_the_others_take_changes(spark, warehouse):
    table, model = source(warehouse), Model()
    upsert(table, model, [("upsert", i, d, i % 2, i) for i in range(6) for d in DAYS])
    run(warehouse)
    replace_day(table, model, DAYS[1], [(0, 1, 100)])
    upsert(table, model, [("delete", 3, DAYS[0], 0, 0), ("upsert", 4, DAYS[0], 2, 7)])
    sums = run(warehouse)[SUMS.key.to_user_string()]
    assert sums["incremental"].value == "changes" and sums["replaced_days"].value == DAYS[1]
    assert_matches(warehouse, model)


def _both(inputs):
    one, two = (inputs.changes(n).selectExpr(f"'{n}' AS src", *ITEMS.names, "_row_kind") for n in (SRC, SRC2))
    return one.unionByName(two).where("_row_kind != '-U'")


SRC2 = "src.more"
BOTH = TableSpec(
    "inc.both",
    pa.schema([pa.field("src", pa.string(), nullable=False), *ITEMS]),
    _both,
    primary_keys=("src", "id", "dt"),
    options={"bucket": "1"},
    upstream=(SRC, SRC2),
    incremental=True,
)  # fmt: skip


def test_a_day_one_upstream_replaced_is_read_whole_from_every_upstream(spark, warehouse):
    """The run replaces a day any upstream replaced, so it reads that day whole from all of them:
    the other upstream's rows of the day, unchanged since the last run, stay."""
    catalog, one, two = Catalog(warehouse), Model(), Model()
    first = source(warehouse)
    second = catalog.create_table(SRC2, ITEMS, primary_keys=["id", "dt"], partition_keys=["dt"],
                                  options={"bucket": "1", "changelog-producer": "input"})  # fmt: skip
    upsert(first, one, [("upsert", i, d, 0, i) for i in range(3) for d in DAYS])
    upsert(second, two, [("upsert", i, d, 0, 10 + i) for i in range(3) for d in DAYS])
    resources = {"lakehouse": LakehouseResource(warehouse=warehouse), "spark": SparkResource()}
    assert materialize([table_asset(BOTH, PARTITIONS)], resources=resources, partition_key=DAYS[0]).success
    replace_day(first, one, DAYS[1], [(7, 0, 70)])
    upsert(second, two, [("upsert", 0, DAYS[0], 0, 99)])
    done = materialize([table_asset(BOTH, PARTITIONS)], resources=resources, partition_key=DAYS[0])
    metadata = done.get_asset_materialization_events()[0].materialization.metadata
    assert metadata["incremental"].value == "changes" and metadata["replaced_days"].value == DAYS[1]
    expected = [(SRC, i, d, g, a) for (i, d), (g, a) in one.rows.items()]
    expected += [(SRC2, i, d, g, a) for (i, d), (g, a) in two.rows.items()]
    assert tuples(catalog.get_table(BOTH.name).read(), "src", "id", "dt", "grp", "amount") == sorted(expected)


def test_a_replayed_commit_is_dropped_and_its_changes_read_again(spark, warehouse, monkeypatch):
    """Two runs planned from the same commit: the second commits the same identifier, which its
    commit user committed already - nothing of it lands - and the next run applies what it missed."""
    table, model = source(warehouse), Model()
    upsert(table, model, [("upsert", i, DAYS[0], 0, 1) for i in range(4)])
    run(warehouse)
    catalog = Catalog(warehouse)
    stale = {s.name: plan_increment(catalog, s.name, s.upstream, "dt") for s in (SUMS, COPY)}
    upsert(table, model, [("upsert", 0, DAYS[0], 1, 5)])
    run(warehouse)  # the first of the two runs
    before = {s.name: catalog.get_table(s.name).latest_snapshot_id() for s in (SUMS, COPY)}
    upsert(table, model, [("delete", 1, DAYS[0], 0, 0)])
    monkeypatch.setattr(factory, "plan_increment", lambda _c, name, *_: stale[name])
    run(warehouse)  # the second: planned like the first, its commit is a replay
    assert {s.name: catalog.get_table(s.name).latest_snapshot_id() for s in (SUMS, COPY)} == before
    monkeypatch.undo()
    run(warehouse)
    assert_matches(warehouse, model)


def test_consumers_keep_the_snapshots_the_next_run_reads(spark, warehouse):
    """Each incremental table stands as a consumer on its upstream at the snapshot after the one it
    read up to: expiration keeps the rest, and the next run still reads changes. Without the
    consumer the snapshots expire, and the next run falls back to a full recomputation."""
    table, model = source(warehouse), Model()
    upsert(table, model, [("upsert", i, DAYS[0], 0, i) for i in range(3)])
    run(warehouse)
    read_up_to = table.latest_snapshot_id()
    assert consumers.consumers(table.store) == {consumer_id(SUMS.name): read_up_to + 1,
                                                consumer_id(COPY.name): read_up_to + 1}  # fmt: skip
    for i in range(3):
        upsert(table, model, [("upsert", 10 + i, DAYS[1], 1, i)])
    table.expire_snapshots(retain_min=1, retain_max=1)
    assert table.snapshots.earliest_id() == read_up_to + 1
    assert run(warehouse)[SUMS.key.to_user_string()]["incremental"].value == "changes"
    assert_matches(warehouse, model)
    for spec in (SUMS, COPY):
        consumers.delete(table.store, consumer_id(spec.name))
    upsert(table, model, [("delete", 0, DAYS[0], 0, 0)])
    upsert(table, model, [("upsert", 1, DAYS[0], 2, 9)])
    table.expire_snapshots(retain_min=1, retain_max=1)
    metadata = run(warehouse)
    assert {metadata[s.key.to_user_string()]["incremental"].value for s in (SUMS, COPY)} == {"full"}
    assert_matches(warehouse, model)
    sums = Catalog(warehouse).get_table(SUMS.name)
    assert sums.snapshot().commit_user == incremental_user(SUMS.name)


def test_late_events_reach_the_example_tables_as_changes(spark, warehouse):
    """The example: a day materialized, then late events land in its ods.orders partition; the
    next run of dwd.orders reads only them, the dws tables only dwd.orders' changelog (and
    dws.order_wide the new pay events), and all hold what recomputing them from every event gives:
    cancelled orders leave dws.order_wide, paid or not, and one that comes back has its payment."""
    from assets.definitions import defs
    from assets.events import late_events

    resources = {"lakehouse": LakehouseResource(warehouse=warehouse), "spark": SparkResource()}
    assert materialize([*defs.assets, *defs.asset_checks], resources=resources, partition_key=DAYS[0]).success
    catalog = Catalog(warehouse)
    ods = catalog.get_table("ods.orders")
    keys = {"dwd/orders", "dws/user_daily", "dws/order_wide"}
    selected = [a for a in defs.assets if a.key.to_user_string() in keys]
    selected += [c for c in defs.asset_checks if {k.asset_key.to_user_string() for k in c.check_keys} & keys]

    def propagate(late: pa.Table) -> tuple[dict, dict]:
        """Land ``late``, run the incremental tables; check them against every event, and give
        each order's last event and last payment."""
        ods.write(late)
        result = materialize(selected, resources=resources, partition_key=DAYS[0])
        assert result.success and all(c.passed for c in result.get_asset_check_evaluations())
        metadata = {e.materialization.asset_key.to_user_string(): e.materialization.metadata
                    for e in result.get_asset_materialization_events()}  # fmt: skip
        assert {metadata[k]["incremental"].value for k in keys} == {"changes"}
        assert metadata["dwd/orders"]["rows_written"].value == len(set(late.column("order_id").to_pylist()))
        last: dict[int, dict] = {}
        paid: dict[int, dict] = {}
        for event in sorted(ods.read().to_pylist(), key=lambda e: (e["event_time"], e["event_id"])):
            last[event["order_id"]] = event
            if event["event_type"] == "pay":
                paid[event["order_id"]] = event
        live = {o: e for o, e in last.items() if e["event_type"] != "cancel"}
        orders = catalog.get_table("dwd.orders").read()
        assert tuples(orders, "order_id", "status", "price") == sorted(
            (o, e["status"], e["price"]) for o, e in live.items()
        )
        daily: dict[tuple, list] = defaultdict(lambda: [0, 0])
        for e in live.values():
            daily[e["user_id"], e["dt"]][0] += 1
            daily[e["user_id"], e["dt"]][1] += e["price"]
        got = catalog.get_table("dws.user_daily").read()
        assert tuples(got, "user_id", "dt", "order_count", "total_amount") == sorted(
            (*k, *v) for k, v in daily.items()
        )
        wide = catalog.get_table("dws.order_wide").read()
        columns = ("order_id", "status", "price", "updated_at", "pay_method", "amount_paid", "paid_at")
        payment = {o: (p["pay_method"], p["price"], p["event_time"]) for o, p in paid.items()}
        assert tuples(wide, *columns) == sorted(
            (o, e["status"], e["price"], e["event_time"], *payment.get(o, (None,) * 3))
            for o, e in live.items()
        )
        return last, paid

    last, paid = propagate(late_events(DAYS[0], 1))
    cancelled = sorted(o for o, e in last.items() if e["event_type"] == "cancel" and o in paid)
    assert cancelled  # a paid order was cancelled, and left dws.order_wide
    back = {**last[cancelled[0]], "event_id": 10**12, "event_type": "update", "status": "CONFIRMED"}
    back["event_time"] += dt.timedelta(minutes=1)
    last, _ = propagate(pa.Table.from_pylist([back], schema=ods.arrow_schema))
    assert last[cancelled[0]]["event_type"] == "update"  # it came back, with its payment


def test_the_streaming_mode_keeps_dws_fresh(spark, warehouse, tmp_path, monkeypatch):
    """``make stream``: rounds of late events, each through the incremental job; every round's
    events reach dws.user_daily, and the freshness it reports is the span between the commits."""
    from assets import streaming

    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster_home"))
    rounds = streaming.main(rounds=2, pause=0, warehouse=warehouse)
    assert [r.rows_written["dwd/orders"] for r in rounds] == [r.events for r in rounds]  # one event per order
    assert all(r.rows_written["dws/user_daily"] > 0 and r.freshness > 0 for r in rounds)
    ods = Catalog(warehouse).get_table("ods.orders")
    landed = ods.snapshot().time_millis
    assert (
        rounds[-1].freshness
        == (Catalog(warehouse).get_table("dws.user_daily").snapshot().time_millis - landed) / 1000
    )


def test_a_primary_key_upstream_needs_a_changelog_producer(warehouse):
    catalog = Catalog(warehouse)
    catalog.create_database("src")
    catalog.create_table(
        SRC, ITEMS, primary_keys=["id", "dt"], partition_keys=["dt"], options={"bucket": "1"}
    )
    SUMS.ensure(catalog)
    with pytest.raises(InvalidOptionError, match="changelog-producer to input, lookup or full-compaction"):
        plan_increment(catalog, SUMS.name, (SRC,), "dt")


def test_previous_rows_are_those_of_a_named_table():
    inputs = Inputs(spark=None, days=None, warehouse="unused")  # no table: nothing is read
    with pytest.raises(InvalidArgumentError, match="these inputs name none"):
        inputs.previous()
