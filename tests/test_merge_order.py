"""The merge order of versions and the streaming merge's step bounds: the fast paths for a single
integral key (numpy's stable sort over concatenated runs, binary search in a sorted run) agree
with Arrow's sort and a row-by-row comparison, over random runs with repeated keys, null
sequence fields and composite keys."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from lakehouse import nulls_first
from lakehouse.format.parquet import SEQUENCE_NUMBER
from lakehouse.mergetree.groups import KeyGroups
from lakehouse.mergetree.keyorder import comparable_keys
from lakehouse.mergetree.levels import SortedRun, sequenced
from lakehouse.mergetree.stream import count_at_most
from lakehouse.read import table_read

from .conftest import orders, pk_orders_table, rows

runs = st.lists(
    st.lists(st.integers(-5, 30), min_size=0, max_size=25).map(sorted), min_size=1, max_size=4
).filter(lambda rs: sum(map(len, rs)) > 0)


def versions(keys: list[list[int]], seq: list[int | None], key_type: pa.DataType, aged: bool) -> pa.Table:
    """Runs concatenated as a merge step holds them: key, a nullable sequence field ``s``, the
    sequence number (``aged``: ascending with the runs, as runs oldest first hold them; else
    random: a later run may hold older versions) and the run's ordinal."""
    flat = [k for run in keys for k in run]
    n = len(flat)
    ordinal = [i for i, run in enumerate(keys) for _ in run]
    return pa.table(
        {
            "k": pa.array(flat, key_type),
            "k2": pa.array([k % 3 for k in flat], pa.int32()),
            "s": pa.array((seq * n)[:n], pa.int64()),
            "_SEQUENCE_NUMBER": pa.array(np.arange(n) if aged else np.random.default_rng(n).permutation(n)),
            "_FILE_ORDINAL": pa.array(ordinal, pa.int32()),
            "_VALUE_KIND": pa.array([0] * n, pa.int8()),
        }
    )


@settings(max_examples=200, deadline=None)
@given(
    runs,
    st.lists(st.one_of(st.none(), st.integers(0, 3)), min_size=1, max_size=5),
    st.sampled_from([pa.int64(), pa.int32(), pa.float64()]),
    st.sampled_from([["k"], ["k", "k2"]]),
    st.sampled_from([[], ["s"]]),
    st.booleans(),
)
def test_the_merge_order_is_arrows_sort_of_key_then_order(keys, seq, key_type, key, fields, aged):
    table = versions(keys, seq, key_type, aged)
    order = [*fields, "_SEQUENCE_NUMBER", "_FILE_ORDINAL"]
    groups = KeyGroups.of(table, key, order[:-1], "_VALUE_KIND", tiebreak="_FILE_ORDINAL")
    assert "_FILE_ORDINAL" not in groups.rows(np.arange(table.num_rows)).column_names  # sorted by, not taken
    columns = comparable_keys(table, key)
    for c in order:
        columns = columns.append_column(c, table.column(c))
    expected = nulls_first.sort_indices(columns, key + order).to_numpy()
    assert groups.positions(np.arange(table.num_rows)).tolist() == expected.tolist()
    sorted_keys = [
        tuple(row) for row in zip(*(columns.column(k).take(expected).to_pylist() for k in key), strict=True)
    ]
    ends = [
        i + 1
        for i in range(len(sorted_keys))
        if i + 1 == len(sorted_keys) or sorted_keys[i] != sorted_keys[i + 1]
    ]
    assert groups.ends.tolist() == ends
    assert groups.starts.tolist() == [0, *ends[:-1]]


@settings(max_examples=200, deadline=None)
@given(runs, st.integers(-7, 32), st.sampled_from([pa.int64(), pa.int16(), pa.float32()]), st.data())
def test_a_step_bound_counts_the_keys_at_most_it(keys, bound, key_type, data):
    """Also over a run whose column comes in several chunks (batches concatenated, a run's rest
    after a step took its head): each chunk is searched in place."""
    values = pa.array(keys[0], key_type)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(values)), max_size=3)))
    chunks = [values.slice(a, b - a) for a, b in zip([0, *cuts], [*cuts, len(values)], strict=True)]
    image = comparable_keys(pa.table({"k": pa.array([bound], key_type)}), ["k"]).column("k")[0].as_py()
    for run in (pa.table({"k": values}), pa.table({"k": pa.chunked_array(chunks, key_type)})):
        expected = sum(1 for k in comparable_keys(run, ["k"]).column("k").to_pylist() if k <= image)
        assert count_at_most(run, ["k"], (image,)) == expected


@settings(max_examples=100, deadline=None)
@given(runs, st.lists(st.one_of(st.none(), st.integers(0, 3)), min_size=1, max_size=5), st.data())
def test_values_taken_at_sorted_positions_are_those_of_the_column_in_merge_order(keys, seq, data):
    """A key's winning value is taken from the table at once (no column put in merge order
    first), and is the value the column in merge order holds there; -1 takes a null."""
    table = versions(keys, seq, pa.int64(), aged=False)
    n = table.num_rows
    picks = np.array(data.draw(st.lists(st.integers(-1, n - 1), max_size=10)), np.int64)
    groups = KeyGroups.of(table, ["k"], ["s", "_SEQUENCE_NUMBER"], "_VALUE_KIND")
    valid, taken = groups.valid("s"), groups.take("s", picks).to_pylist()
    assert not groups._ordered  # neither put a column in merge order
    ordered = groups.column("s").to_pylist()
    assert taken == [None if p < 0 else ordered[p] for p in picks]
    assert valid.tolist() == [v is not None for v in ordered]
    assert groups.take("s", picks).to_pylist() == taken  # from the column in merge order, now taken


def test_runs_newer_one_after_another_merge_in_the_order_they_come(catalog, monkeypatch):
    """A read merges runs whose sequence ranges follow one another (commits one after another)
    without decoding sequence numbers; runs of concurrent writers, whose ranges interleave, by
    them, in reads and compactions: the version with the higher sequence number wins even from
    the run committed first."""
    t = pk_orders_table(catalog, bucket="1", **{"write-only": "true"})
    decoded: list[list[str]] = []
    original = table_read.iter_data_file

    def spy(table, bucket_path, meta, fields, system, *args, **kwargs):
        decoded.append(list(system))
        return original(table, bucket_path, meta, fields, system, *args, **kwargs)

    monkeypatch.setattr(table_read, "iter_data_file", spy)
    t.write(orders(range(10), price=1.0))
    t.write(orders(range(5, 15), price=2.0))
    t.write(orders([3], price=3.0))
    expected = [(i, 3.0 if i == 3 else 1.0 if i < 5 else 2.0) for i in range(15)]
    assert [(r["order_id"], r["price"]) for r in rows(t.read())] == expected
    assert decoded and all(SEQUENCE_NUMBER not in system for system in decoded)

    first, second = t.new_write(), t.new_write()  # both number their rows from the same sequence
    first.write(orders([*range(20, 29), 0], price=4.0))  # key 0 is its 10th row
    second.write(orders([0, *range(30, 50)], price=5.0))  # key 0 is its 1st: older, in a newer run
    messages = [first.prepare_commit(), second.prepare_commit()]
    for prepared in messages:  # the second commits files numbered as if the first had not
        t.new_commit().commit(prepared)
    decoded.clear()
    got = {r["order_id"]: r["price"] for r in rows(t.read())}
    assert got[0] == 4.0 and got[20] == 4.0 and got[30] == 5.0 and len(got) == 44
    assert any(SEQUENCE_NUMBER in system for system in decoded)
    t.compact(full=True)  # a compaction merges them by sequence numbers too
    assert {r["order_id"]: r["price"] for r in rows(t.read())} == got


def test_sequenced_runs_hold_rising_disjoint_sequence_ranges():
    def run(*ranges: tuple[int, int]) -> SortedRun:
        return SortedRun(
            0, tuple(SimpleNamespace(min_sequence_number=a, max_sequence_number=b) for a, b in ranges)
        )

    assert sequenced([run((0, 9)), run((10, 10)), run((11, 20), (21, 30))])
    assert not sequenced([run((0, 9)), run((9, 12))])  # a shared sequence number: file order breaks it
    assert not sequenced([run((0, 4), (20, 30)), run((5, 19))])  # a run spanning another's range
    assert sequenced([run((3, 3))])
