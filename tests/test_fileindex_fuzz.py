"""Property tests: indexes never lose a matching row, and decoders never crash on bad bytes."""

from __future__ import annotations

import contextlib

import pyarrow as pa
import pyarrow.compute as pc
from hypothesis import given, settings
from hypothesis import strategies as st

from lakehouse.errors import CorruptFileError
from lakehouse.fileindex import bitmap, bloom, bsi, format
from lakehouse.fileindex.result import RowSet
from lakehouse.types import parse_type

BIGINT = parse_type("BIGINT")
STRING = parse_type("STRING")
values = st.lists(st.one_of(st.none(), st.integers(-40, 40)), min_size=1, max_size=80)
OPS = ["eq", "ne", "lt", "le", "gt", "ge", "in", "not_in", "is_null", "is_not_null"]


def _exact(column: pa.Array, op: str, literals: tuple) -> set[int]:
    if op == "is_null":
        mask = pc.is_null(column)
    elif op == "is_not_null":
        mask = pc.is_valid(column)
    elif op in ("in", "not_in"):
        mask = pc.is_in(column, value_set=pa.array([v.as_py() for v in literals], pa.int64()))
        mask = pc.and_(pc.invert(mask), pc.is_valid(column)) if op == "not_in" else mask
    else:
        fn = {
            "eq": pc.equal,
            "ne": pc.not_equal,
            "lt": pc.less,
            "le": pc.less_equal,
            "gt": pc.greater,
            "ge": pc.greater_equal,
        }[op]
        mask = fn(column, literals[0])
    return {i for i, hit in enumerate(mask.fill_null(False).to_pylist()) if hit}


@settings(max_examples=300, deadline=None)
@given(
    values,
    st.sampled_from(OPS),
    st.lists(st.integers(-45, 45), min_size=1, max_size=3),
    st.sampled_from([{}, {"version": "1"}, {"version": "2", "index-block-size": "64b"}]),
)
def test_no_index_loses_a_matching_row(data, op, probes, bitmap_options):
    column = pa.array(data, pa.int64())
    literals = tuple(pa.scalar(p, pa.int64()) for p in (probes if op in ("in", "not_in") else probes[:1]))
    expected = _exact(column, op, literals)
    readers = [
        bloom.BloomReader(bloom.build(column, BIGINT, 50, 0.05), BIGINT),
        bitmap.BitmapReader(bitmap.build(column, BIGINT, bitmap_options), BIGINT),
    ]
    built = bsi.build(column, BIGINT)
    readers.append(bsi.BsiReader(built, BIGINT))
    for reader in readers:
        result = reader.visit(op, literals)
        if isinstance(result, RowSet):
            assert expected <= set(result.rows), (type(reader).__name__, op)
        elif not result.remain():
            assert not expected, (type(reader).__name__, op)


def _valid_indexes(data):
    column = pa.array(data, pa.int64())
    strings = pa.array([None if v is None else f"v{v}" for v in data], pa.string())
    return [
        (bloom.BloomReader, bloom.build(column, BIGINT, 20, 0.1), BIGINT),
        (bitmap.BitmapReader, bitmap.build(column, BIGINT), BIGINT),
        (bitmap.BitmapReader, bitmap.build(strings, STRING, {"version": "1"}), STRING),
        (bsi.BsiReader, bsi.build(column, BIGINT), BIGINT),
    ]


@settings(max_examples=300, deadline=None)
@given(values, st.data())
def test_damaged_indexes_give_typed_errors_not_crashes(data, draw):
    for reader_type, good, dtype in _valid_indexes(data):
        damage = draw.draw(st.sampled_from(["truncate", "flip", "random", "extend"]))
        raw = bytearray(good)
        if damage == "truncate":
            raw = raw[: draw.draw(st.integers(0, max(0, len(raw) - 1)))]
        elif damage == "flip" and raw:
            i = draw.draw(st.integers(0, len(raw) - 1))
            raw[i] ^= 1 << draw.draw(st.integers(0, 7))
        elif damage == "random":
            raw = bytearray(draw.draw(st.binary(max_size=64)))
        else:
            raw += draw.draw(st.binary(min_size=1, max_size=16))
        literal = pa.scalar(3, pa.int64()) if dtype == BIGINT else pa.scalar("v3")
        with contextlib.suppress(CorruptFileError):
            reader = reader_type(bytes(raw), dtype)
            for op in ("eq", "ne", "in", "is_null", "is_not_null", "lt", "ge"):
                reader.visit(op, (literal,) if op not in ("is_null", "is_not_null") else ())


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200))
def test_container_reader_rejects_garbage_with_a_typed_error(raw):
    with contextlib.suppress(CorruptFileError):
        format.read(raw)
