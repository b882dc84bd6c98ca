"""Java HashMap iteration order, including resized and red-black-tree bins, against JDK 17.

The expected orders come from ``tests/data/java_hashmap_order.jsh`` run in jshell: 32 strings
sharing one hash code (every mix of "Aa" and "BB") force a tree bin among 70 other keys.
"""

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lakehouse.fileindex.java_hashmap import JavaHashMap, computed_order, long_hash_codes, string_hash

LINES = dict(
    line.split(" ", 1)
    for line in (Path(__file__).parent / "data" / "java_hashmap_order.txt").read_text().splitlines()
)


def _split(key: str) -> list[str]:
    return LINES[key].strip(",").split(",")


@pytest.mark.parametrize("method, expected", [("put", "PUT"), ("compute_if_absent", "CIA")])
def test_string_keys_iterate_like_java(method, expected):
    table = JavaHashMap()
    for key in _split("INSERT"):
        getattr(table, method)(key, string_hash(key))
    assert list(table) == _split(expected)
    if method == "compute_if_absent":
        keys = _split("INSERT")
        assert computed_order(keys, np.array([string_hash(k) for k in keys])) == _split(expected)


def test_long_keys_with_colliding_hashes_iterate_like_java():
    keys = [int(k) for k in _split("LINSERT")]
    table = JavaHashMap()
    for key, code in zip(keys, long_hash_codes(np.array(keys)).tolist(), strict=True):
        table.compute_if_absent(key, code)
    assert list(table) == [int(k) for k in _split("LCIA")]
    assert computed_order(keys, long_hash_codes(np.array(keys))) == [int(k) for k in _split("LCIA")]


@settings(max_examples=60, deadline=None)
@given(
    count=st.integers(0, 3000),
    spread=st.sampled_from([2**31, 5000, 300, 40]),
    seed=st.integers(0, 2**32 - 1),
    trailing=st.booleans(),
)
def test_the_vectorized_order_equals_the_replayed_table(count, spread, seed, trailing):
    """Wide hashes take the vectorized path, narrow ones crowd bins and replay: both as Java does,
    including the growth a call for a present key triggers after the last insertion."""
    rng = np.random.default_rng(seed)
    keys = list(dict.fromkeys(rng.integers(-(2**40), 2**40, count).tolist()))
    codes = rng.integers(-spread, spread, len(keys))
    table = JavaHashMap()
    for key, code in zip(keys, codes.tolist(), strict=True):
        table.compute_if_absent(key, code)
    if trailing and keys:
        table.compute_if_absent(keys[0], int(codes[0]))
    assert computed_order(keys, codes, trailing_calls=trailing) == list(table)


@pytest.mark.parametrize("count", [12, 13, 25, 49])
def test_a_full_table_grows_on_the_next_call_for_a_present_key(count):
    """13 distinct values then a repeat: Java's bitmap writer grows its HashMap 16 -> 32 first."""
    keys = list(range(1000, 1000 + count))
    codes = np.array([k * 7919 for k in keys])
    grown = computed_order(keys, codes, trailing_calls=True)
    table = JavaHashMap()
    for key, code in zip([*keys, keys[0]], [*codes.tolist(), int(codes[0])], strict=True):
        table.compute_if_absent(key, code)
    assert grown == list(table)
    assert (grown != computed_order(keys, codes)) == (count in (13, 25, 49))
