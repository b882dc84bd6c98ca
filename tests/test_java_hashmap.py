"""Java HashMap iteration order, including resized and red-black-tree bins, against JDK 17.

The expected orders come from ``tests/data/java_hashmap_order.jsh`` run in jshell: 32 strings
sharing one hash code (every mix of "Aa" and "BB") force a tree bin among 70 other keys.
"""

from pathlib import Path

import pytest

from lakehouse.fileindex.java_hashmap import JavaHashMap, long_hash_code, string_hash

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


def test_long_keys_with_colliding_hashes_iterate_like_java():
    table = JavaHashMap()
    for key in map(int, _split("LINSERT")):
        table.compute_if_absent(key, long_hash_code(key))
    assert list(table) == [int(k) for k in _split("LCIA")]
