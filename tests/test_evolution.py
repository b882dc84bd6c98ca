"""Schema evolution on write: the plan of a merge checks everything before anything changes; the
columns data lacks are filled with nulls, a reader staying a reader."""

from __future__ import annotations

import pyarrow as pa
import pytest

from lakehouse.errors import SchemaMismatchError
from lakehouse.rowkind import ROW_KIND
from lakehouse.table.evolution import fill_missing, plan_merge, with_columns

from .conftest import ORDERS, orders


@pytest.fixture
def table(catalog):
    return catalog.create_table("db.t", ORDERS, partition_keys=["dt"])


def test_a_merge_adds_new_columns_and_fills_missing_ones(table):
    data = orders([1, 2]).drop_columns(["status"]).append_column("channel", pa.array(["web", "app"]))
    merge = plan_merge(table.schema, data.schema, table.name)
    assert [f.name for f in merge.added] == ["channel"] and merge.missing == ("status",)
    assert table.schema.field_names == ORDERS.names  # planning changed nothing
    for f in merge.added:
        table.add_column(f.name, f.type)
    table.write(fill_missing(data, table.schema))
    got = table.read().sort_by("order_id")
    assert got.column("status").to_pylist() == [None, None]
    assert got.column("channel").to_pylist() == ["web", "app"]


def test_row_kinds_are_no_new_column(catalog):
    t = catalog.create_table("db.k", ORDERS, primary_keys=["order_id", "dt"])
    data = orders([1]).append_column(ROW_KIND, pa.array(["-D"]))
    merge = plan_merge(t.schema, data.schema, t.name)
    assert merge.added == () and merge.missing == ()


@pytest.mark.parametrize(
    "data, message",
    [
        (
            orders([1]).set_column(3, "price", pa.array(["1.5"])),
            r"column 'price' of table db.t is double; data of type string",
        ),
        (orders([1]).drop_columns(["order_id"]), r"lacks the NOT NULL columns \['order_id'\]"),
        (orders([1]).append_column("nothing", pa.nulls(1)), r"new column 'nothing'"),
    ],
    ids=["incompatible type", "missing NOT NULL column", "type Paimon lacks"],
)
def test_data_that_cannot_fit_is_refused_before_any_change(table, data, message):
    with pytest.raises(SchemaMismatchError, match=message):
        plan_merge(table.schema, data.schema, table.name)
    assert table.schema.id == 0


def test_a_reader_is_filled_batch_by_batch(table):
    data = orders(range(4)).drop_columns(["status", "user_id"])
    reader = pa.RecordBatchReader.from_batches(data.schema, data.to_batches(max_chunksize=2))
    filled = fill_missing(reader, table.schema)
    assert isinstance(filled, pa.RecordBatchReader)
    batches = list(filled)
    assert [b.num_rows for b in batches] == [2, 2]
    assert batches[0].schema.names == [*data.schema.names, "user_id", "status"]
    assert batches[1].column("status").null_count == 2


def test_constant_columns():
    data = pa.table({"a": [1, 2, 3]})
    out = with_columns(data, [(pa.field("k", pa.int8()), pa.scalar(3, pa.int8()))])
    assert out.column("k").to_pylist() == [3, 3, 3] and out.schema.field("k").type == pa.int8()
    assert with_columns(data, []) is data
