"""Clustering of append tables (``sort_compact``): rows unchanged, files prune better, and the
z-order and Hilbert keys agree with brute-force references."""

from __future__ import annotations

import itertools
import struct
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lakehouse import col
from lakehouse.append.sort_keys import hilbert_index, ordered_bytes, ordered_uint64, sort_bytes, z_values
from lakehouse.errors import InvalidArgumentError, SchemaMismatchError, UnsupportedFeatureError
from lakehouse.snapshot import CommitKind

from .conftest import ORDERS

POINTS = pa.schema(
    [
        pa.field("dt", pa.string(), nullable=False),
        pa.field("x", pa.int64()),
        pa.field("y", pa.int32()),
        pa.field("name", pa.string()),
    ]
)
STRATEGIES = ["order", "zorder", "hilbert"]


def points(n: int, seed: int, dt: str = "2024-01-01") -> pa.Table:
    rng = np.random.default_rng(seed)
    x, y = rng.integers(0, 1000, n), rng.integers(-500, 500, n)
    names = [f"n{v:04d}" for v in rng.integers(0, 5000, n)]
    return pa.table({"dt": [dt] * n, "x": x, "y": y.astype(np.int32), "name": names}, schema=POINTS)


def scattered(catalog, writes: int = 10, rows: int = 2000, **options: str):
    """An append table whose files each cover the whole range of x and y."""
    t = catalog.create_table(
        "db.p", POINTS, partition_keys=["dt"], options={"target-file-size": "16 kb", **options}
    )
    for i in range(writes):
        t.write(pa.concat_tables([points(rows, i), points(rows // 4, 100 + i, "2024-01-02")]))
    return t


def sorted_rows(table: pa.Table) -> list[dict]:
    return table.sort_by([(c, "ascending") for c in table.column_names]).to_pylist()


def file_column(table, entry, name: str) -> pa.ChunkedArray:
    """A column of one data file as stored, in its rows' order."""
    path = Path(table.paths.root) / table.bucket_path(entry.partition, entry.bucket) / entry.file.file_name
    return pq.ParquetFile(path).read(columns=[name]).column(name)


def opened(table, flt) -> int:
    return table.plan(filter=flt).stats["files_selected"]


DAY = col("dt") == "2024-01-01"  # 10 files before, 7 after clustering
POINT = DAY & (col("x") == 500) & (col("y") == 100)
RANGE = DAY & col("x").between(100, 199) & col("y").between(-100, -1)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_clustering_keeps_the_rows_and_prunes_files(catalog, strategy):
    t = scattered(catalog)
    before, base = t.read(), t.latest_snapshot_id()
    point, ranged = opened(t, POINT), opened(t, RANGE)
    done = t.sort_compact(["x", "y"], strategy=strategy)
    assert t.snapshot().commit_kind == CommitKind.COMPACT and done.snapshot_id == base + 1
    assert done.files_before == 20 and done.files_after > 4
    assert sorted_rows(t.read()) == sorted_rows(before)
    assert sorted_rows(t.read(filter=RANGE)) == sorted_rows(t.read(filter=RANGE, snapshot_id=base))
    assert point == ranged == 10
    assert opened(t, POINT) <= 2 and opened(t, RANGE) <= 3


def test_order_clusters_lexicographically(catalog):
    t = scattered(catalog)
    t.sort_compact(["x"], strategy="order", partitions={"dt": "2024-01-01"})
    day = [e for e in t.live_entries() if e.file.file_source == 1]
    ranges = []
    for e in day:
        x = file_column(t, e, "x")
        assert x.to_pylist() == sorted(x.to_pylist())
        ranges.append((x[0].as_py(), x[-1].as_py()))
    ranges.sort()
    assert all(a[1] <= b[0] for a, b in itertools.pairwise(ranges))  # files do not overlap
    assert opened(t, (col("x") == 500) & (col("dt") == "2024-01-01")) <= 2
    untouched = [e for e in t.live_entries() if e.file.file_source == 0]
    assert len(untouched) == 10  # the other partition's files


def test_partitions_larger_than_the_buffer_sort_in_chunks(catalog):
    t = scattered(catalog, **{"write-buffer-size": "64 kb"})
    before = t.read()
    t.sort_compact(["x"], strategy="order")
    assert sorted_rows(t.read()) == sorted_rows(before)
    for e in t.live_entries():
        x = file_column(t, e, "x")
        assert x.to_pylist() == sorted(x.to_pylist())  # each file is a sorted slice of its chunk


def test_bad_arguments_are_refused_before_any_work(catalog):
    t = scattered(catalog, writes=1)
    latest = t.latest_snapshot_id()
    with pytest.raises(SchemaMismatchError, match="no column 'z'"):
        t.sort_compact(["x", "z"], strategy="zorder")
    with pytest.raises(InvalidArgumentError, match="unknown strategy 'spiral'.*order, zorder, hilbert"):
        t.sort_compact(["x"], strategy="spiral")
    with pytest.raises(InvalidArgumentError, match="partition key"):
        t.sort_compact(["dt"], strategy="order")
    with pytest.raises(InvalidArgumentError, match="at least two columns"):
        t.sort_compact(["x"], strategy="hilbert")
    with pytest.raises(InvalidArgumentError, match="non-empty list"):
        t.sort_compact([], strategy="order")
    keyed = catalog.create_table("db.k", ORDERS, primary_keys=["order_id", "dt"], partition_keys=["dt"],
                                 options={"bucket": "1"})  # fmt: skip
    with pytest.raises(UnsupportedFeatureError, match="primary-key table"):
        keyed.sort_compact(["price"], strategy="zorder")
    fixed = catalog.create_table("db.f", ORDERS, options={"bucket": "2", "bucket-key": "order_id"})
    with pytest.raises(UnsupportedFeatureError, match="fixed-bucket"):
        fixed.sort_compact(["price"], strategy="order")
    assert t.latest_snapshot_id() == latest


# ---- the keys against references ------------------------------------------------------------

MASK = (1 << 64) - 1
SIGN = 1 << 63


def ref_int(v: int | None) -> bytes:
    return bytes(8) if v is None else ((v & MASK) ^ SIGN).to_bytes(8, "big")


def ref_float(v: float | None) -> bytes:
    if v is None:
        return bytes(8)
    bits = struct.unpack(">Q", struct.pack(">d", v))[0]
    return ((~bits & MASK) if bits & SIGN else bits | SIGN).to_bytes(8, "big")


def ref_str(v: str | None, width: int) -> bytes:
    return bytes(width) if v is None else v.encode()[:width].ljust(width, b"\0")


def ref_interleave(columns: list[bytes]) -> bytes:
    """``ZOrderByteUtils.interleaveBits``, bit by bit: a column out of bits is skipped."""
    total = sum(len(c) for c in columns)
    out, position = 0, 0
    while position < 8 * max(len(c) for c in columns):
        for c in columns:
            if position < 8 * len(c):
                out = (out << 1) | ((c[position // 8] >> (7 - position % 8)) & 1)
        position += 1
    return out.to_bytes(total, "big")


def ref_hilbert(point: list[int], bits: int) -> int:
    """Skilling's AxestoTranspose on Python ints, then the transposed bits interleaved."""
    x, n = list(point), len(point)
    q = 1 << (bits - 1)
    while q > 1:
        p = q - 1
        for i in range(n):
            if x[i] & q:
                x[0] ^= p
            else:
                t = (x[0] ^ x[i]) & p
                x[0] ^= t
                x[i] ^= t
        q >>= 1
    for i in range(1, n):
        x[i] ^= x[i - 1]
    t, q = 0, 1 << (bits - 1)
    while q > 1:
        if x[n - 1] & q:
            t ^= q - 1
        q >>= 1
    x = [v ^ t for v in x]
    out = 0
    for b in range(bits - 1, -1, -1):
        for v in x:
            out = (out << 1) | ((v >> b) & 1)
    return out


ints = st.one_of(st.none(), st.integers(-(2**63), 2**63 - 1))
floats = st.one_of(st.none(), st.floats(allow_nan=False))
texts = st.one_of(st.none(), st.text(max_size=12))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(ints, floats, texts), min_size=1, max_size=40), st.integers(1, 12))
def test_z_values_match_the_bitwise_reference(rows, width):
    a, b, c = (list(v) for v in zip(*rows, strict=True))
    ours = z_values(
        [
            ordered_bytes(pa.array(a, pa.int64())),
            ordered_bytes(pa.array(b, pa.float64())),
            ordered_bytes(pa.array(c, pa.string()), width),
        ]
    )
    expected = [ref_interleave([ref_int(x), ref_float(y), ref_str(z, width)]) for x, y, z in rows]
    assert [bytes(r) for r in ours] == expected
    order = sort_bytes(ours)
    assert [expected[i] for i in order] == sorted(expected)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(ints, min_size=5, max_size=5), min_size=1, max_size=30), st.integers(1, 5))
def test_z_values_of_equal_widths_match_the_bitwise_reference(rows, columns):
    encoded = [ordered_bytes(pa.array([r[c] for r in rows], pa.int64())) for c in range(columns)]
    expected = [ref_interleave([ref_int(v) for v in r[:columns]]) for r in rows]
    assert [bytes(r) for r in z_values(encoded)] == expected


@settings(max_examples=60, deadline=None)
@given(st.lists(st.one_of(st.integers(-(2**31), 2**31 - 1), st.none()), min_size=2, max_size=30))
def test_encodings_preserve_order(values):
    present = [v for v in values if v is not None]
    for array in (pa.array(present, pa.int32()), pa.array([float(v) for v in present], pa.float64())):
        codes = ordered_uint64(array)
        assert [present[i] for i in np.argsort(codes, kind="stable")] == sorted(present)
    with_nulls = ordered_uint64(pa.array(values, pa.int64()))
    assert all(with_nulls[i] == 0 for i, v in enumerate(values) if v is None)  # nulls first


@settings(max_examples=40, deadline=None)
@given(st.lists(st.lists(st.integers(0, MASK), min_size=3, max_size=3), min_size=1, max_size=20),
       st.integers(1, 3))  # fmt: skip
def test_hilbert_index_matches_the_scalar_reference(pts, dims):
    coords = [np.array([p[d] for p in pts], dtype=np.uint64) for d in range(dims)]
    ours = hilbert_index(coords)
    expected = [ref_hilbert([p[d] for d in range(dims)], 64) for p in pts]
    assert [int.from_bytes(bytes(r), "big") for r in ours] == expected


@pytest.mark.parametrize("dims,bits", [(2, 1), (2, 4), (3, 3), (4, 2)])
def test_hilbert_curve_visits_every_cell_once_through_neighbours(dims, bits):
    cells = np.array(list(itertools.product(range(1 << bits), repeat=dims)), dtype=np.uint64)
    keys = hilbert_index([cells[:, d] for d in range(dims)], bits)
    index = [int.from_bytes(bytes(r), "big") >> (8 * keys.shape[1] - dims * bits) for r in keys]
    assert sorted(index) == list(range(len(cells)))
    path = cells[np.argsort(index)].astype(np.int64)
    assert (np.abs(np.diff(path, axis=0)).sum(axis=1) == 1).all()
