"""Deletion vectors and their index files, byte for byte against Apache Paimon (Java)."""

from __future__ import annotations

import struct
import zlib
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyroaring import BitMap

from lakehouse.deletionvectors.index_file import (
    DELETION_VECTORS,
    encode,
    read_all_vectors,
    read_vector,
    write_index_file,
)
from lakehouse.deletionvectors.vector import MAX_POSITION_32, DeletionVector
from lakehouse.errors import CorruptFileError
from lakehouse.fileindex import roaring
from lakehouse.io.fs import FileIO
from lakehouse.manifest.entries import DeletionVectorMeta
from lakehouse.paths import FileNamer, TablePaths
from tests.conftest import golden

CASES = golden("deletion_vectors.json")["cases"]


def _positions(spec: list[int] | dict) -> np.ndarray:
    if isinstance(spec, list):
        return np.array(spec, dtype=np.int64)
    ap = spec["arithmetic_progression"]
    return ap["start"] + ap["step"] * np.arange(ap["count"], dtype=np.int64)


def _vectors(case: dict) -> dict[str, DeletionVector]:
    bitmap64 = case["table_option"].endswith("=true")
    return {
        i["data_file"]: DeletionVector.from_positions(_positions(i["deleted_positions"]), bitmap64)
        for i in case["input"]
    }


def _write(tmp_path: Path, case: dict):
    io, root = FileIO.for_uri(str(tmp_path / "table"))
    paths = TablePaths(root)
    prefix, _, counter = case["index_file_meta"]["file_name"].rpartition("-")
    assert counter == "0"
    names = FileNamer("index-", uid=prefix.removeprefix("index-"))
    return io, paths, write_index_file(io, paths, names, _vectors(case))


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_vectors_serialize_like_java(case):
    vectors = _vectors(case)
    for expected in case["per_vector_serializeTo"]:
        data = vectors[expected["data_file"]].serialize()
        assert data.hex() == expected["bytes_hex"]
        frame = 0 if vectors[expected["data_file"]].bitmap64 else 8
        assert len(data) - frame == expected["serializeTo_return"]


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_index_file_matches_java(tmp_path, case):
    io, paths, meta = _write(tmp_path, case)
    want = case["index_file_meta"]
    path = paths.index_file(meta.file_name)
    assert path == f"{paths.root}/index/{want['file_name']}"
    assert io.read_bytes(path).hex() == case["file_hex"]
    assert encode(_vectors(case)) == (bytes.fromhex(case["file_hex"]), meta.dv_ranges)
    assert (meta.index_type, meta.file_name, meta.row_count) == (
        DELETION_VECTORS,
        want["file_name"],
        want["row_count"],
    )
    assert meta.file_size == want["file_size"] == case["file_length"]
    assert [(r.data_file, r.offset, r.length, r.cardinality) for r in meta.dv_ranges] == [
        (r["data_file"], r["offset"], r["length"], r["cardinality"]) for r in want["dv_ranges"]
    ]


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_index_file_reads_back(tmp_path, case):
    io, paths, meta = _write(tmp_path, case)
    path = paths.index_file(meta.file_name)
    expected = {i["data_file"]: _positions(i["deleted_positions"]) for i in case["input"]}
    assert set(case["read_back_ok"]) == set(expected)
    every = read_all_vectors(io, path, meta)
    assert list(every) == list(expected)
    for r in meta.dv_ranges:
        one = read_vector(io, path, r)
        np.testing.assert_array_equal(one.positions(), expected[r.data_file])
        assert one == every[r.data_file]
        assert one.cardinality == r.cardinality


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_java_file_reads_back(tmp_path, case):
    """Ranges and bytes exactly as Java wrote them, without our writer in the loop."""
    io, root = FileIO.for_uri(str(tmp_path))
    path = f"{root}/{case['index_file_meta']['file_name']}"
    io.publish(path, bytes.fromhex(case["file_hex"]))
    for r, i in zip(case["index_file_meta"]["dv_ranges"], case["input"], strict=True):
        meta = DeletionVectorMeta(r["data_file"], r["offset"], r["length"], r["cardinality"])
        np.testing.assert_array_equal(
            read_vector(io, path, meta).positions(), _positions(i["deleted_positions"])
        )


def test_empty_index_file_is_just_the_version(tmp_path):
    io, root = FileIO.for_uri(str(tmp_path))
    meta = write_index_file(io, TablePaths(root), FileNamer("index-"), {})
    assert io.read_bytes(TablePaths(root).index_file(meta.file_name)) == b"\x01"
    assert (meta.file_size, meta.row_count, meta.dv_ranges) == (1, 0, ())


def test_empty_vectors():
    for bitmap64, body in ((False, roaring.serialize(BitMap())), (True, bytes(8))):
        dv = DeletionVector.from_positions([], bitmap64)
        assert dv.cardinality == 0 and len(dv.positions()) == 0
        data = dv.serialize()
        assert data[8:-4] == body
        assert DeletionVector.deserialize(data, "f") == dv


def test_64bit_keys_are_dense_like_java():
    """Java writes one bitmap per high 32-bit key from 0 up, empty bitmaps in the gaps."""
    positions = np.array([5, (2 << 32) + 7], dtype=np.int64)
    data = DeletionVector.from_positions(positions, bitmap64=True).serialize()
    body = data[8:-4]
    assert struct.unpack_from("<Q", body)[0] == 3
    expected = struct.pack("<Q", 3)
    for key, low in ((0, [5]), (1, []), (2, [7])):
        expected += struct.pack("<I", key) + roaring.serialize(BitMap(low))
    assert body == expected
    np.testing.assert_array_equal(DeletionVector.deserialize(data, "f").positions(), positions)


def test_masks_and_kept_rows():
    dv = DeletionVector.from_positions(np.array([9, 1, 3, 3, 12]))
    np.testing.assert_array_equal(dv.positions(), [1, 3, 9, 12])
    mask = dv.deleted_mask(10)
    assert mask.dtype == bool and np.flatnonzero(mask).tolist() == [1, 3, 9]
    assert dv.kept_rows(10).tolist() == [0, 2, 4, 5, 6, 7, 8]


def test_positions_out_of_range_are_refused():
    with pytest.raises(ValueError, match="row positions"):
        DeletionVector.from_positions([MAX_POSITION_32 + 1])
    with pytest.raises(ValueError, match="row positions"):
        DeletionVector.from_positions([-1], bitmap64=True)
    with pytest.raises(ValueError, match="integers"):
        DeletionVector.from_positions([1.5])
    with pytest.raises(ValueError, match="merge"):
        DeletionVector.from_positions([1]).merge(DeletionVector.from_positions([1], bitmap64=True))


# ---- corruption ------------------------------------------------------------------------------


@pytest.fixture(params=[False, True], ids=["bitmap32", "bitmap64"])
def serialized(request) -> bytes:
    return DeletionVector.from_positions(np.arange(0, 20_000, 3), request.param).serialize()


def _corrupt(data: bytes, match: str) -> None:
    with pytest.raises(CorruptFileError, match=match) as info:
        DeletionVector.deserialize(data, "/t/index/index-x-0", offset=17)
    assert "/t/index/index-x-0" in str(info.value) and "offset 17" in str(info.value)
    assert "restore" in str(info.value)


def test_flipped_bit_fails_the_checksum(serialized):
    for at in (5, 20, len(serialized) // 2, len(serialized) - 1):
        data = bytearray(serialized)
        data[at] ^= 0x10
        _corrupt(bytes(data), "checksum|magic")


def test_truncated_vector(serialized):
    _corrupt(serialized[:-1], "truncated")
    _corrupt(serialized[:6], "truncated")


def test_wrong_magic(serialized):
    data = bytearray(serialized)
    data[4:8] = b"\x00\x00\x00\x01"
    _corrupt(bytes(data), "magic")


def test_malformed_bitmap_with_a_valid_checksum(serialized):
    payload = serialized[4:-4] + b"\x00"  # a stray byte after the bitmap
    data = struct.pack(">I", len(payload)) + payload + struct.pack(">I", zlib.crc32(payload))
    _corrupt(data, "malformed")


def test_index_file_damage(tmp_path):
    io, root = FileIO.for_uri(str(tmp_path))
    paths = TablePaths(root)
    vectors = {"a": DeletionVector.from_positions([1, 2]), "b": DeletionVector.from_positions([7])}
    meta = write_index_file(io, paths, FileNamer("index-"), vectors)
    path = paths.index_file(meta.file_name)
    data = io.read_bytes(path)
    a, b = meta.dv_ranges
    with pytest.raises(CorruptFileError, match="does not match the length"):
        read_vector(io, path, DeletionVectorMeta("b", b.offset, b.length + 4, 1))
    io.write_bytes(path, b"\x02" + data[1:])
    with pytest.raises(CorruptFileError, match="version 2"):
        read_vector(io, path, a)
    io.write_bytes(path, data[:-3])
    with pytest.raises(CorruptFileError, match="manifest says"):
        read_all_vectors(io, path, meta)
    with pytest.raises(CorruptFileError, match="truncated"):
        read_vector(io, path, b)
    io.delete(path)
    with pytest.raises(CorruptFileError, match="missing"):
        read_vector(io, path, a)
    with pytest.raises(CorruptFileError, match="missing"):
        read_all_vectors(io, path, meta)


@pytest.mark.parametrize(
    "offset, length, problem",
    [
        (-5, 20, "no range of it"),
        (0, 20, "no range of it"),  # the version byte is no vector
        (1, -9, "no range of it"),
        (1, 2**40, "does not match the length"),  # read as far as the file goes, no further
        (2**40, 20, "truncated"),
    ],
    ids=["negative-offset", "version-byte", "negative-length", "huge-length", "huge-offset"],
)
def test_a_damaged_range_in_the_index_manifest_is_corrupt(tmp_path, offset, length, problem):
    """Ranges come from the index manifest: checked before any read, and ranged reads never ask
    the file for more than it has."""
    io, root = FileIO.for_uri(str(tmp_path))
    paths = TablePaths(root)
    meta = write_index_file(io, paths, FileNamer("index-"), {"a": DeletionVector.from_positions([1, 2])})
    path = paths.index_file(meta.file_name)
    damaged = DeletionVectorMeta("a", offset, length, 2)
    with pytest.raises(CorruptFileError, match=problem):
        read_vector(io, path, damaged)
    with pytest.raises(CorruptFileError, match=problem):
        read_all_vectors(io, path, replace(meta, dv_ranges=(damaged,)))


# ---- properties ------------------------------------------------------------------------------

_SPANS = [1, 100, 65_536, 70_000, 1 << 20, MAX_POSITION_32 + 1]


@st.composite
def _position_sets(draw, bitmap64: bool) -> np.ndarray:
    """Sparse picks, dense runs and progressions, reaching past 2^32 for 64-bit vectors."""
    span = draw(st.sampled_from(_SPANS + ([(5 << 32) + 3] if bitmap64 else [])))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    kind = draw(st.sampled_from(["random", "run", "step"]))
    if kind == "random":
        picked = rng.integers(0, span, draw(st.integers(0, 6000)))
    else:
        start = int(rng.integers(0, span))
        step = 1 if kind == "run" else draw(st.integers(2, 9))
        picked = np.arange(start, min(span, start + step * draw(st.integers(1, 9000))), step)
    return picked.astype(np.int64)


@settings(max_examples=80, deadline=None)
@given(data=st.data(), bitmap64=st.booleans())
def test_round_trip_and_merge_is_union(data, bitmap64):
    first = data.draw(_position_sets(bitmap64))
    second = data.draw(_position_sets(bitmap64))
    a = DeletionVector.from_positions(first, bitmap64)
    b = DeletionVector.from_positions(second, bitmap64)
    np.testing.assert_array_equal(a.positions(), np.unique(first))
    for dv in (a, b):
        back = DeletionVector.deserialize(dv.serialize(), "f")
        assert back == dv and back.cardinality == dv.cardinality
        np.testing.assert_array_equal(back.positions(), dv.positions())
    merged = a.merge(b)
    np.testing.assert_array_equal(merged.positions(), np.union1d(first, second))
    assert a == DeletionVector.from_positions(first, bitmap64)  # merge leaves its inputs alone
    assert DeletionVector.deserialize(merged.serialize(), "f") == merged


@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_64bit_bitmaps_embed_the_32bit_bytes(data):
    """Below 2^32 a 64-bit vector holds the very bitmap bytes of the 32-bit one (verified vs Java)."""
    positions = data.draw(_position_sets(False))
    body32 = DeletionVector.from_positions(positions).serialize()[8:-4]
    body64 = DeletionVector.from_positions(positions, bitmap64=True).serialize()[8:-4]
    if len(positions):
        assert body64 == struct.pack("<QI", 1, 0) + body32
    else:
        assert body64 == bytes(8)
