"""The streaming k-way merge's steps: every version once, keys complete within a step and in
order across steps, at most one batch of each run per step, and runs of one batch each merged
in a single step."""

from __future__ import annotations

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from lakehouse.mergetree import stream
from lakehouse.mergetree.engine import ORDINAL
from lakehouse.mergetree.stream import merge_steps

# a run: sorted unique keys, cut into batches of the given sizes
runs_strategy = st.lists(
    st.tuples(
        st.sets(st.integers(0, 200), max_size=60), st.lists(st.integers(1, 25), min_size=1, max_size=8)
    ),
    min_size=1,
    max_size=5,
)


def batches(keys: list[int], sizes: list[int], run: int) -> list[pa.Table]:
    """``keys`` in batches cut at ``sizes`` (the last batch takes the rest); ``v`` names the run."""
    out, start = [], 0
    for size in sizes:
        if start >= len(keys):
            break
        out.append(
            pa.table(
                {
                    "k": pa.array(keys[start : start + size], pa.int64()),
                    "v": [run] * len(keys[start : start + size]),
                }
            )
        )
        start += size
    if start < len(keys):
        out.append(pa.table({"k": pa.array(keys[start:], pa.int64()), "v": [run] * (len(keys) - start)}))
    return out


@settings(max_examples=300, deadline=None)
@given(runs_strategy)
def test_steps_hold_every_version_once_with_complete_keys_in_order(spec):
    runs = [batches(sorted(keys), sizes, i) for i, (keys, sizes) in enumerate(spec)]
    steps = list(merge_steps([iter(r) for r in runs], ["k"]))
    got = sorted((row["k"], row["v"]) for step in steps for row in step.to_pylist())
    assert got == sorted((k, i) for i, (keys, _) in enumerate(spec) for k in keys)
    widest = sum(max((b.num_rows for b in run), default=0) for run in runs)
    previous = None
    for step in steps:
        assert step.num_rows and step.num_rows <= widest  # at most one batch of each run
        keys = step.column("k").to_pylist()
        assert previous is None or min(keys) > previous  # a key never spans two steps
        previous = max(keys)
        assert step.column(ORDINAL).to_pylist() == step.column("v").to_pylist()  # tagged with its run
        seen: dict[int, list[int]] = {}
        for k, v in zip(keys, step.column("v").to_pylist(), strict=True):
            seen.setdefault(k, []).append(v)
        assert all(runs == sorted(runs) for runs in seen.values())  # a key's versions run after run
    untagged = list(merge_steps([iter(r) for r in runs], ["k"], tagged=False))
    assert [s.to_pylist() for s in untagged] == [s.drop_columns([ORDINAL]).to_pylist() for s in steps]


@given(st.lists(st.sets(st.integers(0, 1000), min_size=1, max_size=50), min_size=1, max_size=6))
def test_runs_of_one_batch_each_merge_in_one_step(spec):
    runs = [
        [pa.table({"k": pa.array(sorted(keys), pa.int64()), "v": [i] * len(keys)})]
        for i, keys in enumerate(spec)
    ]
    steps = list(merge_steps([iter(r) for r in runs], ["k"]))
    assert len(steps) == 1
    assert steps[0].num_rows == sum(len(keys) for keys in spec)


def test_a_run_that_goes_on_bounds_the_step_and_one_that_ends_does_not():
    first = [pa.table({"k": pa.array([1, 5], pa.int64())}), pa.table({"k": pa.array([9], pa.int64())})]
    second = [pa.table({"k": pa.array([2, 3, 6, 8], pa.int64())})]
    steps = [s.column("k").to_pylist() for s in merge_steps([iter(first), iter(second)], ["k"])]
    assert steps == [[1, 5, 2, 3], [6, 8, 9]]  # the second run ends: the step goes on to the first


def test_a_merge_hands_back_what_each_step_freed_before_its_result_goes_on(monkeypatch):
    events: list[str] = []
    monkeypatch.setattr(stream, "release_arrow_freed", lambda: events.append("release"))
    runs = [
        iter(batches(list(range(0, 100, 2)), [10] * 5, 0)),
        iter(batches(list(range(1, 100, 2)), [25] * 2, 1)),
    ]
    merged = []
    for rows in stream.merged_steps(runs, ["k"], lambda step: step.num_rows):
        events.append("result")
        merged.append(rows)
    assert sum(merged) == 100 and len(merged) > 1
    assert events == ["release", "result"] * len(merged)
