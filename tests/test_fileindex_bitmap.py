from __future__ import annotations

import hashlib

import pyarrow as pa
import pytest

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
