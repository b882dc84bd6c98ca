"""Per-row work in slices side by side on the cores (:func:`lakehouse.io.pool.map_slices`): a
write's partition grouping and bucket hashes, cut into slices of a few rows, against each row
computed alone."""

from __future__ import annotations

import threading

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lakehouse.bucket.fixed import fixed_buckets, java_bucket
from lakehouse.io import pool
from lakehouse.io.cores import usable_cores
from lakehouse.manifest import binary_row
from lakehouse.store import partitions
from lakehouse.types import parse_type


@pytest.fixture
def tiny_slices(monkeypatch):
    """Slices of a row or a few, so that a handful of rows are many slices."""
    monkeypatch.setattr(pool, "MIN_SLICE_ROWS", 1)
    monkeypatch.setattr(partitions, "PARTITIONED_AT_ONCE", 3)
    monkeypatch.setattr(binary_row, "HASHED_AT_ONCE", 3)


def test_map_slices_covers_the_rows_once_in_order(tiny_slices):
    assert pool.map_slices(lambda start, stop: (start, stop), 0, 3) == [(0, 0)]
    spans = pool.map_slices(lambda start, stop: (start, stop), 10, 3)
    assert spans[0][0] == 0 and spans[-1][1] == 10 and len(spans) > 1
    assert all(a[1] == b[0] for a, b in zip(spans, spans[1:], strict=False))


def test_slices_of_a_job_run_on_its_thread_while_the_jobs_keep_every_core_busy(tiny_slices):
    cores = usable_cores()
    together = threading.Barrier(cores, timeout=30)  # every core's job runs at once

    def job(_: int) -> bool:
        together.wait()
        threads = set(pool.map_slices(lambda start, stop: threading.get_ident(), 10, 3))
        together.wait()  # no job ends before every job's slices ran
        return threads == {threading.get_ident()}

    assert pool.map_parallel(job, range(cores)) == [True] * cores


def _each_alone(values: list[tuple], types) -> list[bytes]:
    """The serialized partition of each row of ``values``, encoded alone."""
    return [binary_row.serialize(binary_row.encode_row(list(v), types), len(v)) for v in values]


@pytest.mark.parametrize("keys", [["day"], ["day", "region"]])  # dictionary codes; their combinations
def test_partitions_of_slices_are_those_of_each_row(catalog, tiny_slices, keys):
    schema = pa.schema([("id", pa.int64()), ("day", pa.string()), ("region", pa.int32())])
    table_schema = catalog.create_table("db.t", schema, partition_keys=keys).schema
    types = table_schema.partition_types()

    row = st.tuples(st.sampled_from(["a", "b", None, "ccc"]), st.sampled_from([1, 2, None]))

    @settings(max_examples=60, deadline=None)
    @given(st.lists(row, max_size=40))
    def check(rows):
        data = pa.table(
            {
                "id": pa.array(range(len(rows)), pa.int64()),
                "day": pa.array([d for d, _ in rows], pa.string()),
                "region": pa.array([r for _, r in rows], pa.int32()),
            }
        )
        found = partitions.row_partitions(data, table_schema)
        keyed = [row[: len(keys)] for row in rows]
        assert [found.partitions[i] for i in found.ids.tolist()] == _each_alone(keyed, types)
        assert len(set(found.partitions)) == len(found.partitions)  # each partition numbered once
        rows_alone = [binary_row.deserialize(p)[1] for p in found.partitions]
        assert found.hashes.tolist() == [binary_row.hash_code(r) for r in rows_alone]
        values = zip(*(found.values.column(k).to_pylist() for k in keys), strict=True)
        assert _each_alone(list(values), types) == found.partitions

    check()


def test_bucket_hashes_of_slices_are_those_of_each_row(tiny_slices):
    types = [parse_type("INT"), parse_type("STRING")]
    ints = pa.array([1, -5, None, 7, 300] * 3, pa.int32())
    strs = pa.array(["a", "long string value here", "x", None, "abcdefgh"] * 3)
    alone = [
        binary_row.hash_code(binary_row.encode_row([i, s], types))
        for i, s in zip(ints.to_pylist(), strs.to_pylist(), strict=True)
    ]
    assert binary_row.row_hashes([ints, strs], types).tolist() == alone
    buckets = java_bucket(pa.array(alone).to_numpy(), 7)
    assert fixed_buckets([ints, strs], types, 7).tolist() == buckets.tolist()
