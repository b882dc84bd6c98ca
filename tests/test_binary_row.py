from __future__ import annotations

import math
from decimal import Decimal

import pyarrow as pa
import pytest

from lakehouse.errors import CorruptFileError
from lakehouse.manifest import binary_row
from lakehouse.types import parse_type, to_arrow

from .conftest import golden

CASES = golden("binary_row.json")["cases"]


def _column(value, dtype):
    atype = to_arrow(dtype)
    if value is None:
        return pa.array([None], atype)
    if dtype.root == "DECIMAL":
        return pa.array([Decimal(value)], atype)
    if dtype.root == "TIMESTAMP":
        millis, nanos = value["epoch_millis"], value["nanos_of_millisecond"]
        unit = atype.unit
        raw = millis if unit == "ms" else millis * 1000 + nanos // 1000
        return pa.array([raw], pa.int64()).cast(atype)
    return pa.array([value], atype)


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c['types']}={c['values']}")
def test_bytes_hash_and_bucket_match_java(case):
    types = [parse_type(t) for t in case["types"]]
    columns = [_column(v, t) for v, t in zip(case["values"], types, strict=True)]
    rows = binary_row.encode_rows(columns, types)
    assert rows.row(0).hex() == case["bytes_hex"]
    h = int(rows.hash_codes()[0])
    assert h == case["hash_code"]
    assert binary_row.row_hashes(columns, types).tolist() == [h]  # fixed-width rows: from their slots
    assert binary_row.hash_code(rows.row(0)) == h
    for n, bucket in case["bucket"].items():
        assert abs(math.fmod(h, int(n))) == bucket  # Java: Math.abs(hash % n)


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c['types']}={c['values']}")
def test_decode_round_trips(case):
    types = [parse_type(t) for t in case["types"]]
    row = bytes.fromhex(case["bytes_hex"])
    decoded = binary_row.decode_row(row, types)
    assert binary_row.encode_row(decoded, types).hex() == case["bytes_hex"]


def test_many_rows_hash_like_one_at_a_time():
    types = [parse_type("INT"), parse_type("STRING")]
    ints = pa.array([1, -5, None, 7, 300] * 3, pa.int32())
    strs = pa.array(["a", "long string value here", "x", None, "abcdefgh"] * 3)
    rows = binary_row.encode_rows([ints, strs], types)
    singles = [
        binary_row.hash_code(binary_row.encode_row([i, s], types))
        for i, s in zip(ints.to_pylist(), strs.to_pylist(), strict=True)
    ]
    assert rows.hash_codes().tolist() == singles


STRING, BIGINT = parse_type("STRING"), parse_type("BIGINT")


def _slot(row: bytes, value: int) -> bytes:
    """``row`` (one field) with its slot set to ``value``."""
    return row[:8] + value.to_bytes(8, "little") + row[16:]


@pytest.mark.parametrize(
    "row, types, problem",
    [
        (bytes(12), [BIGINT, BIGINT], "of 12 bytes is too short for 2 fields"),
        (bytes(3), [], "of 3 bytes is too short for 0 fields"),
        (_slot(bytes(24), (16 << 32) | 50), [STRING], "points to bytes 16..66"),
        (_slot(bytes(24), (2**30 << 32) | 8), [STRING], "points to bytes 1073741824"),
        (_slot(bytes(16), (0x80 | 0x7F) << 56), [STRING], "inline value of 127 bytes"),
    ],
    ids=["short", "shorter-than-header", "past-the-end", "far-past-the-end", "inline-too-long"],
)
def test_a_damaged_row_is_corrupt(row, types, problem):
    with pytest.raises(CorruptFileError, match=problem):
        binary_row.decode_row(row, types)


def test_a_serialized_row_shorter_than_its_arity_is_corrupt():
    with pytest.raises(CorruptFileError, match="shorter than its arity"):
        binary_row.deserialize(b"\x00\x00")


@pytest.mark.parametrize("arity", [1, 3, 57])  # 57 fields: a 16-byte header
@pytest.mark.parametrize("nulls", [False, True])
def test_row_hashes_are_the_hash_codes_of_the_encoded_rows(arity, nulls):
    """Bucket keys are hashed without encoding rows whose fields are all fixed-width and set;
    the hashes are those of the encoded rows, whatever the fields and the width of the header."""
    names = ["BIGINT", "INT", "DOUBLE", "BOOLEAN", "DATE", "TIMESTAMP(3)", "DECIMAL(10, 2)", "SMALLINT"]
    types = [parse_type(names[i % len(names)]) for i in range(arity)]
    n = 1000
    columns = []
    for i, t in enumerate(types):
        values = pa.array(range(i * 7919 - 500, i * 7919 - 500 + n), pa.int64())
        if t.root == "DECIMAL":
            column = values.cast(pa.decimal128(19, 0)).cast(to_arrow(t))
        elif t.root == "BOOLEAN":
            column = pa.compute.equal(pa.compute.bit_wise_and(values, 1), 1)
        elif t.root in ("TIMESTAMP", "DATE"):
            column = values.cast(pa.int64() if t.root == "TIMESTAMP" else pa.int32()).cast(to_arrow(t))
        else:
            column = values.cast(to_arrow(t), safe=False)
        if nulls and i == arity - 1:
            column = pa.compute.if_else(pa.compute.equal(pa.compute.bit_wise_and(values, 3), 0), None, column)
        columns.append(column)
    expected = binary_row.encode_rows(columns, types).hash_codes()
    assert binary_row.row_hashes(columns, types).tolist() == expected.tolist()
    assert binary_row.row_hashes(columns, types)[:5].tolist() == [
        binary_row.hash_code(binary_row.encode_rows([c.slice(r, 1) for c in columns], types).row(0))
        for r in range(5)
    ]
