from __future__ import annotations

import struct

import pyarrow as pa
import pytest

from lakehouse.errors import CorruptFileError
from lakehouse.fileindex import format
from lakehouse.fileindex.build import FileIndexBuilder
from lakehouse.fileindex.evaluate import FileIndexes
from lakehouse.fileindex.result import REMAIN, SKIP, RowSet
from lakehouse.predicate import Leaf
from lakehouse.types import parse_type, to_arrow

from .conftest import GOLDEN_OPS, golden

CASES = golden("file_index_format.json")["cases"]


def _rows_of(result) -> list[int] | str:
    if isinstance(result, RowSet):
        return list(result.rows)
    return "REMAIN" if result is REMAIN else "SKIP"


@pytest.mark.parametrize("case", [c for c in CASES if "table_options" in c], ids=lambda c: c["name"])
def test_a_container_written_piece_by_piece_is_the_whole_columns_one(case, monkeypatch):
    from lakehouse.fileindex import bloom

    types = {k: parse_type(v) for k, v in case["row_type"].items()}
    names = list(case["row_type"])
    table = pa.table(
        {k: pa.array([r[i] for r in case["rows"]], to_arrow(types[k])) for i, k in enumerate(names)}
    )
    monkeypatch.setattr(bloom, "HASHES_AT_ONCE", 2)  # a bloom filter's bits set a block at a time
    writer = FileIndexBuilder.from_options(case["table_options"], types, "t").writer()
    for start in range(0, table.num_rows, 3):
        writer.add(table.slice(start, 3))
    assert writer.finish() == bytes.fromhex(case["serialized_hex"])


@pytest.mark.parametrize("case", CASES, ids=lambda c: c["name"])
def test_containers_match_java_and_answer_like_it(case):
    types = {k: parse_type(v) for k, v in case["row_type"].items()}
    data = bytes.fromhex(case["serialized_hex"])
    if "table_options" in case:
        names = list(case["row_type"])
        table = pa.table(
            {k: pa.array([r[i] for r in case["rows"]], to_arrow(types[k])) for i, k in enumerate(names)}
        )
        assert FileIndexBuilder.from_options(case["table_options"], types, "t").build(table) == data
    else:  # written directly by FileIndexFormat.Writer with an explicit (linked) order
        indexes = {i["column"]: {} for i in case["indexes"]}
        for i in case["indexes"]:
            indexes[i["column"]][i["index_type"]] = (
                None if i["index_hex"] is None else bytes.fromhex(i["index_hex"])
            )
        assert format.write(indexes) == data
    parsed = format.read(data)
    assert [(c, t) for c, ts in parsed.items() for t in ts] == [
        (i["column"], i["index_type"]) for i in case["indexes"]
    ]
    indexes = FileIndexes(parsed, {k: (k, v) for k, v in types.items()})
    for probe in case["read_back"]:
        atype = to_arrow(types[probe["column"]])
        lit = probe["literal"]
        literals = (
            tuple(pa.scalar(v, atype) for v in lit)
            if isinstance(lit, list)
            else (() if lit is None else (pa.scalar(lit, atype),))
        )
        leaf = Leaf(GOLDEN_OPS[probe["op"]], probe["column"], literals)
        for index_type, expected in probe["results_by_index"].items():
            if index_type == "empty":  # the column's index entry that holds no bytes
                index_type = next(t for t, v in parsed[probe["column"]].items() if v is None)
            single = FileIndexes(
                {probe["column"]: {index_type: parsed[probe["column"]][index_type]}},
                {probe["column"]: (probe["column"], types[probe["column"]])},
            )
            assert _rows_of(single.visit(leaf)) == expected, (probe, index_type)
        assert indexes.visit(leaf) is not None


def test_names_use_java_modified_utf8():
    assert format.java_utf("a\x00") == b"\x00\x03a\xc0\x80"
    assert format.java_utf("😀")[2:] == bytes.fromhex("eda0bdedb880")
    data = format.write({"é😀": {"bloom-filter": b"\x00\x00\x00\x01\x00"}})
    assert list(format.read(data)) == ["é😀"]


def test_unknown_index_types_and_redundant_bytes_are_tolerated():
    good = format.write({"c": {"future-index": b"xyz", "bloom-filter": b"\x00\x00\x00\x01\xff"}})
    magic, version, head, columns = struct.unpack_from(">qiii", good)
    # a later version's reader may add redundant bytes after the header: shift the body by 3
    redundant = good[: head - 4] + struct.pack(">i", 3) + b"abc" + good[head:]
    patched = bytearray(redundant)
    struct.pack_into(">i", patched, 12, head + 3)
    pos = 20 + 2 + 1 + 4
    for _ in range(2):
        (n,) = struct.unpack_from(">H", patched, pos)
        pos += 2 + n
        start, length = struct.unpack_from(">ii", patched, pos)
        struct.pack_into(">i", patched, pos, start + 3)
        pos += 8
    parsed = format.read(bytes(patched))
    assert parsed == format.read(good)
    indexes = FileIndexes(parsed, {"c": ("c", parse_type("INT"))})
    assert indexes.visit(Leaf("eq", "c", (pa.scalar(1, pa.int32()),))) in (REMAIN, SKIP)


@pytest.mark.parametrize("damage", [b"", b"\x00" * 30, b"not an index at all, really not"])
def test_garbage_is_a_typed_error(damage):
    with pytest.raises(CorruptFileError):
        format.read(damage)


def test_one_column_is_read_without_fetching_the_others():
    big = bytes(range(256)) * 1024  # 256 KiB index on another column
    data = format.write({"big": {"bitmap": big}, "small": {"bloom-filter": b"\x00\x00\x00\x02\xab"}})
    fetched: list[tuple[int, int]] = []

    def fetch(offset: int, length: int) -> bytes:
        fetched.append((offset, length))
        return data[offset : offset + length]

    assert format.read_columns(fetch, {"small"}) == {"small": {"bloom-filter": b"\x00\x00\x00\x02\xab"}}
    assert sum(n for _, n in fetched) < format.HEAD_READ + 16  # the head read, then only "small"
    assert format.read_columns(fetch, {"big"})["big"]["bitmap"] == big
    assert format.read_columns(fetch, None) == format.read(data)


def test_an_entry_past_the_end_of_a_file_is_a_typed_error():
    data = format.write({"c": {"bloom-filter": b"\x00\x00\x00\x01" + bytes(200_000)}})
    with pytest.raises(CorruptFileError, match="outside the file"):
        format.read_columns(lambda at, n: data[: len(data) - 10][at : at + n], {"c"})


def _head_with(**fields) -> bytes:
    """A one-column container with a field of its head replaced (head_length, count, entries)."""
    data = bytearray(format.write({"c": {"bloom-filter": b"\x00\x00\x00\x02\xab"}}))
    at = {"head_length": 12, "count": 16, "entries": 23}  # after magic, version; after the name "c"
    for name, value in fields.items():
        struct.pack_into(">i", data, at[name], value)
    return bytes(data)


@pytest.mark.parametrize(
    "fields, problem",
    [
        ({"head_length": 2**31 - 1}, "head claims 2147483647 bytes"),
        ({"head_length": 3}, "head claims 3 bytes"),
        ({"count": 2**31 - 1}, "claims 2147483647 columns"),
        ({"count": -1}, "claims -1 columns"),
        ({"entries": 2**30}, "claims 1073741824 indexes of column c"),
        ({"entries": -2}, "claims -2 indexes"),
    ],
    ids=["huge-head", "tiny-head", "huge-count", "negative-count", "huge-entries", "negative-entries"],
)
def test_counts_and_lengths_of_the_head_are_checked_against_the_bytes(fields, problem):
    data = _head_with(**fields)
    with pytest.raises(CorruptFileError, match=problem):
        format.read_columns(lambda offset, length: data[offset : offset + length], None)
