"""A RowRouter's formula states what its routes are: the BinaryRows hashed and the arithmetic."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from lakehouse import ChannelFormula, FixedBucketFormula, RowRouter, Slot, parse_type
from lakehouse.manifest import binary_row
from lakehouse.schema import new_schema

SCHEMA = pa.schema(
    [
        ("id", pa.int64(), False),
        ("day", pa.date32(), False),
        ("name", pa.string(), False),
        ("small", pa.int16(), False),
        ("flag", pa.bool_(), False),
        ("price", pa.float64()),
    ]
)
DATA = pa.table(
    {
        "id": [1, -2, 3_000_000_000, 4, 5, 6],
        "day": pa.array([0, 19000, -5, 7, 19000, 1], pa.date32()),
        "name": ["a", "", "longer than seven", "héllo", "ab", "a"],
        "small": pa.array([1, -1, 300, 0, 7, 8], pa.int16()),
        "flag": [True, False, True, False, True, True],
        "price": [1.5, None, 2.0, 3.0, 4.0, 5.0],
    },
    schema=SCHEMA,
)


def _hash(fields, data: pa.Table) -> np.ndarray:
    columns = [data.column(f.name).combine_chunks() for f in fields]
    return binary_row.row_hashes(columns, [f.type for f in fields], data.num_rows).astype(np.int64)


def _evaluate(formula: FixedBucketFormula | ChannelFormula, data: pa.Table) -> np.ndarray:
    """The formula as its documentation states it (Java's truncating %)."""
    if isinstance(formula, FixedBucketFormula):
        return np.abs(np.fmod(_hash(formula.key, data), formula.buckets))
    start = np.abs(np.fmod(_hash(formula.partition, data), formula.channels))
    return (start + np.abs(np.fmod(_hash(formula.key, data), formula.assigners))) % formula.channels


@pytest.mark.parametrize(
    ("keys", "partitions", "options"),
    [
        (["id"], [], {"bucket": "5"}),
        (["id", "name", "small", "flag"], [], {"bucket": "3", "bucket-key": "name,small,flag"}),
        (["id", "day"], ["day"], {"bucket": "-1"}),
        (["id", "name", "day"], ["name", "day"], {"bucket": "-1", "dynamic-bucket.initial-buckets": "2"}),
    ],
)
def test_the_formula_computes_the_routes(keys, partitions, options):
    router = RowRouter(new_schema("db.t", SCHEMA, keys, partitions, options), 4)
    formula = router.formula
    assert formula is not None
    routes = router.route(*(DATA.column(c).combine_chunks() for c in router.columns))
    assert _evaluate(formula, DATA).tolist() == routes.tolist()
    if isinstance(formula, ChannelFormula):
        assert [f.name for f in formula.partition] == partitions and formula.channels == 4
        assert formula.assigners == int(options.get("dynamic-bucket.initial-buckets", 4))


def test_slots_say_how_each_type_fills_its_slot():
    slots = {
        "BOOLEAN": Slot.INT8,
        "TINYINT": Slot.INT8,
        "SMALLINT": Slot.INT16,
        "INT": Slot.INT32,
        "DATE": Slot.INT32,
        "TIME": Slot.INT32,
        "BIGINT": Slot.INT64,
        "STRING": Slot.BYTES,
        "VARBINARY(3)": Slot.BYTES,
        "DOUBLE": Slot.OTHER,
        "DECIMAL(10, 2)": Slot.OTHER,
        "TIMESTAMP(3)": Slot.OTHER,
    }
    assert {t: Slot.of(parse_type(t)) for t in slots} == slots


def test_tables_that_route_nothing_have_no_formula():
    append = new_schema("db.a", SCHEMA, [], [], {"bucket": "-1"})
    assert RowRouter(append, 2).formula is None
