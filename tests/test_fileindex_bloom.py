from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from lakehouse.fileindex import bloom
from lakehouse.fileindex.result import REMAIN, SKIP
from lakehouse.types import parse_type, to_arrow

from .conftest import golden

CASES = golden("bloom_filter.json")["cases"]


def _array(values, dtype):
    return pa.array(values, to_arrow(dtype))


@pytest.mark.parametrize("case", CASES, ids=lambda c: c["name"])
def test_bytes_and_probes_match_java(case):
    dtype = parse_type(case["type"])
    items, fpp = case["options"]["items"], case["options"]["fpp"]
    assert bloom.sizing(items, fpp) == (case["num_hash_functions"], case["num_bits"])
    data = bloom.build(_array(case["values"], dtype), dtype, items, fpp)
    assert data.hex() == case["serialized_hex"]
    reader = bloom.BloomReader(bytes.fromhex(case["serialized_hex"]), dtype)
    for probe in case["probes"]:
        want = REMAIN if probe["result"] == "REMAIN" else SKIP
        literal = pa.scalar(probe["value"], to_arrow(dtype))
        assert reader.visit("eq", (literal,)) is want, probe


def test_false_positive_rate_is_close_to_the_configured_one():
    dtype = parse_type("BIGINT")
    present = np.arange(0, 20_000, dtype=np.int64) * 7
    for fpp in (0.1, 0.01):
        f = bloom.BloomFilter.deserialize(bloom.build(pa.array(present), dtype, 20_000, fpp))
        absent = np.arange(1, 100_001, dtype=np.int64) * 7 + 3
        from lakehouse.fileindex.hashing import fast_hash

        rate = f.might_contain(fast_hash(pa.array(absent), dtype)).mean()
        assert rate <= 1.5 * fpp, (fpp, rate)
        assert f.might_contain(fast_hash(pa.array(present), dtype)).all()


def test_in_and_null_probes():
    dtype = parse_type("STRING")
    reader = bloom.BloomReader(bloom.build(pa.array(["a", "b", None]), dtype, 100, 0.01), dtype)
    s = [pa.scalar(v, pa.string()) for v in ("zz", "yy", "a")]
    assert reader.visit("in", tuple(s)) is REMAIN
    assert reader.visit("in", tuple(s[:2])) is SKIP
    assert reader.visit("eq", (pa.scalar(None, pa.string()),)) is REMAIN
    assert reader.visit("lt", (s[0],)) is REMAIN
