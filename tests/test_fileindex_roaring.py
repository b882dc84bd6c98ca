"""Bulk-built roaring bitmaps equal pyroaring's own, container for container."""

import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyroaring import BitMap

from lakehouse.errors import CorruptFileError
from lakehouse.fileindex import roaring


def _positions(seed: int, count: int, span: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.unique(rng.integers(0, span, count))


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    count=st.sampled_from([0, 1, 255, 256, 4096, 4097, 20_000, 70_000]),
    span=st.sampled_from([300, 65_536, 65_537, 200_000, 2**31 - 1]),
)
def test_bulk_bitmaps_equal_inserted_ones(seed, count, span):
    positions = _positions(seed, count, span)
    expected = BitMap(positions.tolist())
    mask = np.zeros(min(span, 300_000), dtype=bool)
    mask[positions[positions < len(mask)]] = True
    assert roaring.of(positions) == expected
    assert roaring.serialize(roaring.of(positions)) == roaring.serialize(BitMap(positions.tolist()))
    assert roaring.from_mask(mask) == BitMap(np.flatnonzero(mask).tolist())


def test_read_walks_back_to_back_bitmaps():
    first, second = BitMap(range(0, 100_000, 3)), BitMap([7, 70_000])
    data = roaring.serialize(first) + roaring.serialize(second)
    got, offset = roaring.read(data)
    assert got == first
    assert roaring.read(data, offset) == (second, len(data))
    with pytest.raises(CorruptFileError):
        roaring.read(data[:-1], offset)


def test_a_bitmap_outside_its_bytes_is_corrupt():
    data = roaring.serialize(BitMap([1, 2, 3]))
    for offset in (-4, len(data), 2**40):
        with pytest.raises(CorruptFileError, match="outside"):
            roaring.read(data, offset)


def test_a_container_count_beyond_the_bytes_is_corrupt_at_once():
    """The portable format's 32-bit container count, read from damaged bytes, is checked before
    a header of that many containers is unpacked."""
    for count in (2**32 - 1, 70_000, 5):
        data = struct.pack("<II", 12346, count) + bytes(16)
        with pytest.raises(CorruptFileError, match=f"{count} containers"):
            roaring.serialized_size(data)
