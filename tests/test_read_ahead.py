"""Read-ahead: items and steps produced on other threads arrive in order, errors where they
happened, items up to ``depth`` ahead, at most ``width`` steps in flight, and a caller that stops
early leaves nothing running."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pyarrow as pa
import pytest

from lakehouse.io import read_ahead as read_ahead_module
from lakehouse.io.cores import THREADS_ENV, usable_cores
from lakehouse.io.read_ahead import map_ahead, read_ahead, reading_ahead
from lakehouse.mergetree.compactor import STREAMED_DEPTH
from lakehouse.read import table_read


def believe_cores(monkeypatch, count: int) -> None:
    """The engine believes it has ``count`` cores (whatever this machine has)."""
    monkeypatch.setenv(THREADS_ENV, str(count))
    usable_cores.cache_clear()


@pytest.fixture
def cores(monkeypatch):
    """Four cores: read-ahead is on (this machine may have fewer)."""
    believe_cores(monkeypatch, 4)
    yield
    usable_cores.cache_clear()


def counted(n: int, threads: set[str]):
    """0..n-1, noting the thread that produced each."""
    for i in range(n):
        threads.add(threading.current_thread().name)
        yield i


def test_read_ahead_produces_the_items_in_order_on_another_thread(cores):
    threads: set[str] = set()
    assert list(read_ahead(counted(50, threads))) == list(range(50))
    assert threading.current_thread().name not in threads


def test_read_ahead_raises_where_the_source_failed(cores):
    def source():
        yield from range(3)
        raise ValueError("broken file")

    got = []
    with pytest.raises(ValueError, match="broken file"):
        for item in read_ahead(source()):
            got.append(item)
    assert got == [0, 1, 2]


def watched() -> tuple[Iterator[int], list[int], threading.Event]:
    """0..999, noting each item produced and when the source was closed."""
    produced, closed = [], threading.Event()

    def source():
        try:
            for i in range(1000):
                produced.append(i)
                yield i
        finally:
            closed.set()

    return source(), produced, closed


def test_a_caller_that_stops_early_closes_the_source(cores):
    source, produced, closed = watched()
    items = read_ahead(source)
    assert [next(items) for _ in range(3)] == [0, 1, 2]
    items.close()
    assert closed.is_set()
    assert len(produced) <= 4  # one item ahead, never the whole source


@pytest.mark.parametrize("depth", [1, 2, 3])
def test_read_ahead_keeps_producing_up_to_depth_items_ahead_and_no_further(cores, depth):
    """The source does not wait for each item to be taken (a merge's largest run decodes on
    while the merge works), but stops ``depth`` items ahead of the caller."""
    produced = []

    def source():
        for i in range(100):
            produced.append(i)
            yield i

    items = read_ahead(source(), depth)
    assert next(items) == 0
    deadline = time.monotonic() + 10
    while len(produced) < 1 + depth and time.monotonic() < deadline:
        time.sleep(0.001)
    time.sleep(0.05)  # time enough to overshoot, were it to
    assert len(produced) == 1 + depth
    assert list(items) == list(range(1, 100))


def test_on_one_core_the_source_is_used_as_it_is(monkeypatch):
    believe_cores(monkeypatch, 1)
    try:
        threads: set[str] = set()
        assert list(read_ahead(counted(5, threads))) == list(range(5))
        assert list(map_ahead(lambda x: x * 2, range(5))) == [0, 2, 4, 6, 8]
        assert threads == {threading.current_thread().name}
    finally:
        usable_cores.cache_clear()


def test_work_too_small_to_overlap_stays_on_the_callers_thread(cores):
    threads: set[str] = set()

    def double(x: int) -> int:
        threads.add(threading.current_thread().name)
        return x * 2

    assert list(map_ahead(double, read_ahead(counted(5, threads), depth=0), ahead=False)) == [
        0,
        2,
        4,
        6,
        8,
    ]
    assert threads == {threading.current_thread().name}


@pytest.mark.parametrize("width", [2, 3])
def test_map_ahead_keeps_the_order_and_at_most_width_steps_in_flight(cores, monkeypatch, width):
    released = []
    monkeypatch.setattr(read_ahead_module, "release_arrow_freed", lambda: released.append(1))
    threads = ThreadPoolExecutor(width + 1)  # room for more than width (the process's pool may have fewer)
    monkeypatch.setattr(read_ahead_module, "_pool", lambda: threads)
    lock, running, most = threading.Lock(), [0], [0]
    last_started, overlapped = threading.Event(), []

    def step(i: int) -> pa.Table:
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        if i == width - 1:
            last_started.set()
        if i < width:  # the first steps last until the last of them has started beside them
            overlapped.append(last_started.wait(10))
        time.sleep(0.002 * (i % 3))  # later steps may finish first
        with lock:
            running[0] -= 1
        return pa.table({"i": [i]})

    got = [t.column("i")[0].as_py() for t in map_ahead(step, range(40), width=width)]
    threads.shutdown()
    assert got == list(range(40))
    assert overlapped == [True] * width
    assert most[0] == width  # that many at once, never more, whatever the cores
    assert len(released) == 40  # each step's thread hands back what it freed


def test_map_ahead_raises_the_failed_step_and_stops(cores):
    called = []

    def step(i: int) -> int:
        called.append(i)
        if i == 5:
            raise ValueError("step 5")
        return i

    got = []
    with pytest.raises(ValueError, match="step 5"):
        for x in map_ahead(step, range(100)):
            got.append(x)
    assert got == [0, 1, 2, 3, 4]
    assert max(called) <= 6


def test_map_ahead_closed_early_waits_for_the_steps_in_flight(cores):
    started, finished = [], []

    def step(i: int) -> int:
        started.append(i)
        time.sleep(0.01)
        finished.append(i)
        return i

    results = map_ahead(step, range(100))
    assert next(results) == 0
    results.close()
    assert sorted(started) == sorted(finished)  # nothing still runs once it has returned


BATCH_ROWS = 4096  # rows a read's merge reads per run and step in these tests


@pytest.fixture
def small_batches(monkeypatch):
    """Reads merge ``BATCH_ROWS`` at a time (``table_read.READ_BATCH_ROWS``): tables of a few
    merge steps stay small."""
    monkeypatch.setattr(table_read, "READ_BATCH_ROWS", BATCH_ROWS)


def runs_table(catalog, n: int, buckets: int = 1):
    """A table of ``buckets`` buckets holding ``n`` rows, each bucket in three sorted runs."""
    schema = pa.schema([pa.field("k", pa.int64(), nullable=False), pa.field("v", pa.int64())])
    table = catalog.create_table(
        "db.t", schema, primary_keys=["k"], options={"bucket": str(buckets), "write-only": "true"}
    )
    table.write(pa.table({"k": pa.array(range(n)), "v": pa.array([0] * n)}, schema))
    for round_ in (1, 2):
        keys = list(range(round_, n, 7 * round_))
        table.write(pa.table({"k": pa.array(keys), "v": pa.array([round_] * len(keys))}, schema))
    return table


def test_a_merged_read_with_and_without_read_ahead_gives_the_same_rows(cores, small_batches, catalog):
    """A bucket of several sorted runs, more rows than a merge batch: merged on read-ahead
    threads or on the caller's, the rows are the same and in key order."""
    n = BATCH_ROWS + 5_000
    table = runs_table(catalog, n)
    split = table.plan().splits[0]
    read = table.new_read()
    ahead, plain = read.read_split(split), read.read_split(split, read_ahead=False)
    assert ahead.equals(plain)
    expected = [0] * n
    for round_ in (1, 2):
        for k in range(round_, n, 7 * round_):
            expected[k] = round_
    assert ahead.column("k").to_pylist() == list(range(n))
    assert ahead.column("v").to_pylist() == expected


def test_a_streamed_merge_reads_further_ahead_than_a_bulk_jobs(cores, small_batches, catalog, monkeypatch):
    """A caller streaming a split has its runs decoded ``STREAMED_DEPTH`` batches ahead; a bulk
    job's read (``to_arrow``), whose memory its call reserved for one batch ahead, one."""
    table = runs_table(catalog, BATCH_ROWS + 5_000)
    depths, original = [], table_read.read_runs

    def recorded(section, read, merge_bytes, depth):
        depths.append(depth)
        return original(section, read, merge_bytes, depth)

    monkeypatch.setattr(table_read, "read_runs", recorded)
    split, read = table.plan().splits[0], table.new_read()
    streamed = pa.concat_tables(read.batches(split))
    assert depths == [STREAMED_DEPTH] and STREAMED_DEPTH > 1
    assert read.to_arrow([split]).equals(streamed)
    assert depths[1:] == [1]


def test_files_read_ahead_decode_on_the_read_ahead_thread_alone(cores, decode_threads):
    """A read-ahead thread already works beside the caller's: Arrow's threads would contend."""
    read, asked = decode_threads

    def rows() -> Iterator[int]:
        assert reading_ahead()
        yield read()

    assert not reading_ahead()
    assert sum(read_ahead(rows())) == 100
    assert asked == [False]
    assert read() == 100
    assert asked == [False, True]  # on the caller's thread, with cores to spare


def test_read_ahead_starts_at_once_and_dropped_closes_its_source(cores):
    """Items are produced before the caller asks for one (a reader opens the next split's runs
    while it reads the current one); dropping the iterator unread stops them and closes the source."""
    source, produced, closed = watched()
    items = read_ahead(source, 2)
    deadline = time.monotonic() + 10
    while len(produced) < 2 and time.monotonic() < deadline:
        time.sleep(0.001)
    time.sleep(0.05)  # time enough to overshoot, were it to
    assert produced == [0, 1]  # two ahead, none asked for yet
    del items
    assert closed.wait(10)
    assert len(produced) == 2


def test_a_stream_read_a_split_at_a_time_opens_the_next_one_ahead(cores, small_batches, catalog, monkeypatch):
    """Where the budget affords one split at a time, the next split is opened once the current
    one has given its first batch, and before it has given its last; the batches are each
    split's, in order."""
    monkeypatch.setattr(table_read, "parallel_workers", lambda items, memory: 1)
    table = runs_table(catalog, BATCH_ROWS * 4, buckets=3)
    splits = table.plan().splits
    assert len(splits) == 3
    read = table.new_read()
    expected = [(i, b) for i, s in enumerate(splits) for b in read.batches(s)]
    assert all(sum(1 for j, _ in expected if j == i) > 1 for i in range(3))  # several batches each
    events: list[tuple[str, int]] = []
    original = table_read.TableRead.batches

    def batches(self, split, read_ahead=True):
        i = splits.index(split)
        events.append(("open", i))

        def noted():
            for batch in original(self, split, read_ahead):
                events.append(("batch", i))
                yield batch

        return noted()

    monkeypatch.setattr(table_read.TableRead, "batches", batches)
    got = list(read.stream(splits))
    assert len(got) == len(expected) and all(a.equals(b) for a, (_, b) in zip(got, expected, strict=True))
    for i in (1, 2):
        opened = events.index(("open", i))
        mine = [n for n, e in enumerate(events) if e == ("batch", i - 1)]
        assert mine[0] < opened < mine[-1]
    assert list(read.stream([])) == []


def test_a_merged_split_starts_decoding_once_opened(cores, small_batches, catalog, monkeypatch):
    """Opening a merged split (``batches``) starts decoding its runs on read-ahead threads before
    anything is read from it; reading it gives the rows as ever."""
    table = runs_table(catalog, BATCH_ROWS * 2)
    split = table.plan().splits[0]
    read = table.new_read()
    expected = read.read_split(split)
    started = threading.Event()
    original = table_read.TableRead._file_batches

    def file_batches(self, *args, **kwargs):
        if reading_ahead():
            started.set()
        yield from original(self, *args, **kwargs)

    monkeypatch.setattr(table_read.TableRead, "_file_batches", file_batches)
    opened = read.batches(split)
    assert started.wait(10)
    assert pa.concat_tables(opened).equals(expected)


def test_a_stream_closed_early_leaves_no_read_running(cores, small_batches, catalog, monkeypatch):
    """A caller that stops after a split's first batch: every file read of the split it was
    reading and of the one opened ahead of it is closed by then (their read-ahead stopped)."""
    table = runs_table(catalog, BATCH_ROWS * 4, buckets=2)
    read = table.new_read()
    lock, started, finished = threading.Lock(), [], []
    original = table_read.TableRead._file_batches

    def file_batches(self, split, i, *args, **kwargs):
        with lock:
            started.append((id(split), i))
        try:
            yield from original(self, split, i, *args, **kwargs)
        finally:
            with lock:
                finished.append((id(split), i))

    monkeypatch.setattr(table_read.TableRead, "_file_batches", file_batches)
    splits = table.plan().splits
    stream = read.stream(splits)
    assert next(stream).num_rows
    deadline = time.monotonic() + 10
    while {s for s, _ in started} != {id(s) for s in splits} and time.monotonic() < deadline:
        time.sleep(0.001)
    assert {s for s, _ in started} == {id(s) for s in splits}  # the second split was opened ahead
    stream.close()
    assert sorted(started) == sorted(finished)
