from __future__ import annotations

import hashlib
import struct

import pyarrow as pa
import pytest

from lakehouse.errors import CorruptFileError
from lakehouse.fileindex import bitmap
from lakehouse.types import parse_type, to_arrow

from .conftest import GOLDEN_OPS, golden

CASES = golden("bitmap_index.json")["cases"]


def _matches(rows: list[int], expected) -> bool:
    if isinstance(expected, list):
        return rows == expected
    joined = ",".join(map(str, rows)).encode()
    return (len(rows), hashlib.sha256(joined).hexdigest(), rows[:16]) == (
        expected["count"],
        expected["sha256_of_comma_joined"],
        expected["first_16"],
    )


def _literal(value, atype):
    return pa.scalar(value, atype)


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c['name']}-{c['options']}")
def test_bytes_and_probes_match_java(case):
    dtype = parse_type(case["type"])
    atype = to_arrow(dtype)
    data = bitmap.build(pa.array(case["values"], atype), dtype, case["options"])
    assert data.hex() == case["serialized_hex"]
    reader = bitmap.BitmapReader(bytes.fromhex(case["serialized_hex"]), dtype)
    assert reader.row_count == case["row_count"]
    for probe in case["probes"]:
        lit = probe["literal"]
        literals = (
            tuple(_literal(v, atype) for v in lit)
            if isinstance(lit, list)
            else (() if lit is None else (_literal(lit, atype),))
        )
        result = reader.visit(GOLDEN_OPS[probe["op"]], literals)
        assert _matches(list(result.rows), probe["row_ids"]), probe


@pytest.mark.parametrize("version, at, problem", [
    ("1", 5, "claims 2147483647 values"),  # V1: the value count is the dictionary's
    ("2", 10, "claims 2147483647 dictionary blocks"),
    ("2", 22, "claims 2147483647 of"),  # V2: the dictionary's size in bytes
    ("2", 26, "claims 2147483647 dictionary entries"),
])  # fmt: skip
def test_counts_of_the_dictionary_are_checked_against_the_bytes(version, at, problem):
    """Version byte, rows, count, has-null; V2 then block count, block keys (an INT and an
    offset each), the blocks' size, and a block's entry count: each a count a damaged file could
    make huge."""
    dtype = parse_type("INT")
    data = bytearray(bitmap.build(pa.array([1, 2, 2], pa.int32()), dtype, {"version": version}))
    struct.pack_into(">i", data, at, 2**31 - 1)
    with pytest.raises(CorruptFileError, match=problem):
        bitmap.BitmapReader(bytes(data), dtype)
