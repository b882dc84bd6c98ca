from __future__ import annotations

import struct

import pyarrow as pa
import pytest

from lakehouse.errors import CorruptFileError
from lakehouse.fileindex import bsi
from lakehouse.fileindex.result import RowSet
from lakehouse.types import parse_type, to_arrow

from .conftest import GOLDEN_OPS, golden

CASES = golden("bsi_index.json")["cases"]


def evaluate(reader: bsi.BsiReader, op: str, literal, atype) -> list[int]:
    if op == "between":
        low, high = (pa.scalar(v, atype) for v in literal)
        return list((reader.visit("ge", (low,)) & reader.visit("le", (high,))).rows)
    literals = (
        tuple(pa.scalar(v, atype) for v in literal)
        if isinstance(literal, list)
        else (() if literal is None else (pa.scalar(literal, atype),))
    )
    result = reader.visit(GOLDEN_OPS[op], literals)
    assert isinstance(result, RowSet)
    return list(result.rows)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c["name"])
def test_bytes_and_probes_match_java(case):
    dtype = parse_type(case["type"])
    atype = to_arrow(dtype)
    assert bsi.build(pa.array(case["values"], atype), dtype).hex() == case["serialized_hex"]
    reader = bsi.BsiReader(bytes.fromhex(case["serialized_hex"]), dtype)
    for probe in case["probes"]:
        assert evaluate(reader, probe["op"], probe["literal"], atype) == probe["row_ids"], probe


def test_a_negative_row_count_is_corrupt():
    dtype = parse_type("BIGINT")
    data = bytearray(bsi.build(pa.array([1, -2, 3], pa.int64()), dtype))
    struct.pack_into(">i", data, 1, -5)
    with pytest.raises(CorruptFileError, match="-5 rows"):
        bsi.BsiReader(bytes(data), dtype)
