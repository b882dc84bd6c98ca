"""Primary keys compare as Java's ``Double.compare``/``Float.compare``: every NaN is one key, -0.0
and 0.0 are two, on every table kind; pypaimon reads the same rows.

pypaimon 2.1 merges single-column signed-zero keys as Java does, but not NaN key bounds (its
``IntervalPartition`` compares them with Python's ``<``) nor signed zeros in a later column of a
composite key; so its reads are compared where it is right or where each bucket is one sorted
run (after a full compaction), and the rest against the model."""

from __future__ import annotations

import struct

import pyarrow as pa
import pytest

from lakehouse.mergetree.keyorder import comparable, comparable_value

from .interop import oracle

NAN, INF = float("nan"), float("inf")
SCHEMA = pa.schema(
    [
        pa.field("k", pa.float64(), nullable=False),
        pa.field("f", pa.float32(), nullable=False),
        pa.field("v", pa.int64()),
    ]
)


def rows(table: pa.Table) -> list[tuple]:
    """Rows with each float as its bits (one NaN), sorted: equal as Java's keys are equal."""

    def bits(x: float, fmt: str) -> bytes:
        return b"NaN" if x != x else struct.pack(fmt, x)

    return sorted((bits(r["k"], ">d"), bits(r["f"], ">f"), r["v"]) for r in table.to_pylist())


def batch(k: list[float], f: list[float], v: list[int]) -> pa.Table:
    return pa.table({"k": k, "f": f, "v": v}, SCHEMA)


FIRST = batch([NAN, 0.0, -0.0, 1.0, INF], [NAN, 0.0, -0.0, 0.0, 1.0], [1, 2, 3, 4, 5])
SECOND = batch([NAN, -0.0, 0.0], [NAN, -0.0, -0.0], [10, 30, 60])
MERGED = batch([NAN, 0.0, -0.0, 1.0, INF, 0.0], [NAN, 0.0, -0.0, 0.0, 1.0, -0.0], [10, 2, 30, 4, 5, 60])


def test_the_integer_image_orders_as_java():
    values = [-INF, -1.5, -0.0, 0.0, 1e-30, 2.0, INF, NAN]
    for width, arrow_type in ((64, pa.float64()), (32, pa.float32())):
        image = comparable(pa.array(values, arrow_type)).to_pylist()
        assert image == sorted(image) and len(set(image)) == len(values)
        assert image == [comparable_value(v, width) for v in values]
    assert comparable(pa.array([NAN, None, 1.0])).to_pylist()[1] is None


@pytest.mark.interop
@pytest.mark.parametrize(
    "options",
    [
        {"bucket": "2"},
        {"bucket": "2", "deletion-vectors.enabled": "true"},
        {"bucket": "2", "changelog-producer": "lookup"},
        {"bucket": "-1"},
    ],
    ids=["merge-on-read", "deletion-vectors", "lookup", "dynamic-bucket"],
)
def test_nan_is_one_key_and_signed_zeros_are_two(catalog, warehouse, options):
    t = catalog.create_table("db.f", SCHEMA, primary_keys=["k", "f"], options=options)
    t.write(FIRST)
    t.write(SECOND)
    assert rows(t.read()) == rows(MERGED)
    assert t.verify_primary_key().ok
    t.compact(full=True)
    assert rows(t.read()) == rows(MERGED) == rows(oracle.read(warehouse, "db.f"))


@pytest.mark.interop
@pytest.mark.parametrize("key_type", [pa.float64(), pa.float32()], ids=["double", "float"])
def test_signed_zero_keys_merge_as_pypaimon_merges_them(catalog, warehouse, key_type):
    schema = pa.schema([pa.field("k", key_type, nullable=False), pa.field("v", pa.int64())])
    t = catalog.create_table("db.z", schema, primary_keys=["k"], options={"bucket": "1"})
    t.write(pa.table({"k": [0.0, -0.0, 1.0], "v": [1, 2, 3]}, schema))
    t.write(pa.table({"k": [-0.0, 1.0], "v": [20, 30]}, schema))  # merged on read over two runs
    expected = [(struct.pack(">d", k), v) for k, v in ((0.0, 1), (-0.0, 20), (1.0, 30))]
    for table in (t.read(), oracle.read(warehouse, "db.z")):
        assert sorted((struct.pack(">d", r["k"]), r["v"]) for r in table.to_pylist()) == sorted(expected)


@pytest.mark.interop
def test_we_merge_pypaimon_files_with_nan_and_signed_zero_keys(warehouse, catalog):
    oracle.create(warehouse, "db.p", SCHEMA, primary_keys=["k", "f"], options={"bucket": "1"})
    for data in (batch([NAN, 0.0], [1.0, 1.0], [1, 2]), batch([-0.0], [1.0], [3]), batch([NAN], [1.0], [10])):
        oracle.write(warehouse, "db.p", data)
    expected = batch([NAN, 0.0, -0.0], [1.0, 1.0, 1.0], [10, 2, 3])
    assert rows(catalog.get_table("db.p").read()) == rows(expected)
