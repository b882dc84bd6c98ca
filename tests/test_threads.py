"""Threads and memory: the cores a process may use (affinity, cgroup quota, ``LAKEHOUSE_THREADS``)
and the budget that bounds what parallel jobs hold together, whatever the number of cores."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from lakehouse.errors import InvalidOptionError
from lakehouse.io import memory, pool
from lakehouse.io.cores import THREADS_ENV, cgroup_cpu_limit, count_cores, scheduler_cores, usable_cores
from lakehouse.io.memory import JOBS, JobMemory
from lakehouse.io.pool import in_job, map_parallel, spare_core
from lakehouse.mergetree.compactor import BucketCompactor
from lakehouse.read import table_read
from lakehouse.write import table_write
from lakehouse.write.table_write import TableWrite

ROOT = Path(__file__).resolve().parent.parent


def run_python(code: str, **env: str) -> subprocess.CompletedProcess:
    """``code`` in a fresh interpreter (this checkout's engine), with ``env`` added."""
    return subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "PYTHONPATH": str(ROOT), **env},
        capture_output=True,
        text=True,
        cwd=ROOT,
    )


@pytest.fixture
def sixteen_cores(monkeypatch):
    """The engine believes it has 16 cores (this machine may have 2)."""
    monkeypatch.setenv(THREADS_ENV, "16")
    usable_cores.cache_clear()
    yield
    usable_cores.cache_clear()  # the environment is restored after this; the next call reads it again


# ---- cores --------------------------------------------------------------------------------------


def cgroup(tmp_path: Path, own: str, limits: dict[str, str]) -> tuple[str, str]:
    """A fake cgroup v2 tree under ``tmp_path``: the process in cgroup ``own``, ``cpu.max`` files
    with the given contents per cgroup path."""
    root = tmp_path / "cgroup"
    for path, content in limits.items():
        directory = root / path.strip("/")
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "cpu.max").write_text(content + "\n")
    proc = tmp_path / "proc-self-cgroup"
    proc.write_text(f"0::{own}\n")
    return str(root), str(proc)


@pytest.mark.parametrize(
    ("content", "cores"),
    [("200000 100000", 2), ("150000 100000", 2), ("50000 100000", 1), ("max 100000", None)],
)
def test_cgroup_quota_in_whole_cores_rounded_up(tmp_path, content, cores):
    root, proc = cgroup(tmp_path, "/", {"/": content})
    assert cgroup_cpu_limit(root, proc) == cores


def test_cgroup_quota_is_the_tightest_of_the_process_cgroup_and_its_ancestors(tmp_path):
    limits = {
        "/kubepods": "800000 100000",
        "/kubepods/pod1": "max 100000",
        "/kubepods/pod1/c1": "250000 100000",
    }
    root, proc = cgroup(tmp_path, "/kubepods/pod1/c1", limits)
    assert cgroup_cpu_limit(root, proc) == 3
    root, proc = cgroup(tmp_path / "other", "/kubepods/pod1", limits)
    assert cgroup_cpu_limit(root, proc) == 8


@pytest.mark.parametrize("content", ["", "garbage", "0 100000", "100000 0", "-1 100000", "1 2 3"])
def test_unusable_cpu_max_means_no_quota(tmp_path, content):
    root, proc = cgroup(tmp_path, "/", {"/": content})
    assert cgroup_cpu_limit(root, proc) is None


def test_no_cgroup_v2_means_no_quota(tmp_path):
    assert cgroup_cpu_limit(str(tmp_path / "missing"), str(tmp_path / "missing-proc")) is None


def test_cores_are_the_scheduler_cores_lowered_to_the_quota(tmp_path):
    root, proc = cgroup(tmp_path, "/", {"/": "100000 100000"})
    assert count_cores({}, root, proc) == 1
    root, proc = cgroup(tmp_path / "wide", "/", {"/": "6400000 100000"})
    assert count_cores({}, root, proc) == scheduler_cores()
    assert count_cores({}, str(tmp_path / "none"), str(tmp_path / "none")) == scheduler_cores()


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="the platform has no CPU affinity")
def test_cores_follow_the_cpu_affinity():
    first = min(os.sched_getaffinity(0))
    out = run_python(
        f"import os; os.sched_setaffinity(0, {{{first}}}); "
        "from lakehouse.io.cores import usable_cores; print(usable_cores())",
        **{THREADS_ENV: ""},
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "1"


def test_override_wins_over_cpus_and_quota(tmp_path):
    root, proc = cgroup(tmp_path, "/", {"/": "100000 100000"})
    assert count_cores({THREADS_ENV: "16"}, root, proc) == 16
    assert count_cores({THREADS_ENV: " 3 "}, root, proc) == 3
    assert count_cores({THREADS_ENV: ""}, root, proc) == 1  # blank: not set


@pytest.mark.parametrize("value", ["0", "-2", "two", "1.5", "4 cores"])
def test_override_must_be_a_positive_integer(value):
    with pytest.raises(InvalidOptionError, match=THREADS_ENV) as e:
        count_cores({THREADS_ENV: value})
    assert repr(value) in str(e.value)


def test_override_is_read_once_per_process():
    code = (
        "import os; from lakehouse.io.cores import usable_cores; a = usable_cores(); "
        f"os.environ['{THREADS_ENV}'] = '9'; print(a, usable_cores())"
    )
    out = run_python(code, **{THREADS_ENV: "5"})
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["5", "5"]


def test_bad_override_fails_a_write_before_it_commits(tmp_path):
    code = f"""
import pyarrow as pa
from lakehouse import Catalog
from lakehouse.errors import InvalidOptionError
cat = Catalog({str(tmp_path)!r})
cat.create_database("db")
t = cat.create_table("db.t", pa.schema([("id", pa.int64())]))
try:
    t.write(pa.table({{"id": [1, 2, 3]}}))
except InvalidOptionError as e:
    print("refused:", e)
print("snapshot:", t.latest_snapshot_id())
"""
    out = run_python(code, **{THREADS_ENV: "many"})
    assert out.returncode == 0, out.stderr
    assert f"refused: environment variable {THREADS_ENV}='many'" in out.stdout
    assert "snapshot: None" in out.stdout


# ---- the jobs budget ----------------------------------------------------------------------------


class Workload:
    """Fake jobs that record how many bytes the jobs running at once claim to hold."""

    def __init__(self, job: int) -> None:
        self.job = job
        self.held = 0
        self.high_water = 0
        self.ran = 0
        self._lock = threading.Lock()

    def start(self) -> None:
        with self._lock:
            self.held += self.job
            self.high_water = max(self.high_water, self.held)
            self.ran += 1

    def end(self) -> None:
        with self._lock:
            self.held -= self.job


def test_jobs_get_the_threads_their_budget_affords(sixteen_cores):
    work = Workload(30)
    first_wave = threading.Barrier(3, timeout=30)  # only if three jobs run at once

    def job(i: int) -> int:
        work.start()
        try:
            if i < 3:
                first_wave.wait()  # meanwhile a fourth thread, if there were one, would run item 3
            return i * i
        finally:
            work.end()

    assert map_parallel(job, range(12), JobMemory(job=30, budget=100)) == [i * i for i in range(12)]
    assert work.ran == 12
    assert work.high_water == 90
    assert JOBS.held == 0


def test_concurrent_calls_share_the_process_budget(sixteen_cores):
    work = Workload(40)
    a_running = threading.Barrier(3, timeout=30)  # both jobs of call a, and the test
    b_ran = threading.Event()

    def a_job(i: int) -> None:
        work.start()
        try:
            a_running.wait()
            b_ran.wait(timeout=0.2)  # a job of the other call starting now would make 3 x 40 > 100
        finally:
            work.end()

    def b_job(i: int) -> None:
        work.start()
        try:
            b_ran.set()
        finally:
            work.end()

    memory = JobMemory(job=40, budget=100)
    a = threading.Thread(target=map_parallel, args=(a_job, range(2), memory))
    a.start()
    a_running.wait()
    map_parallel(b_job, range(4), memory)
    a.join()
    assert work.ran == 6
    assert work.high_water <= 100
    assert JOBS.held == 0


def test_a_job_larger_than_the_budget_runs_alone(sixteen_cores):
    work = Workload(500)

    def job(i: int) -> int:
        work.start()
        work.end()
        return i

    assert map_parallel(job, range(5), JobMemory(job=500, budget=100)) == list(range(5))
    assert work.high_water == 500  # one at a time
    assert JOBS.held == 0


def test_a_failed_job_hands_its_share_back(sixteen_cores):
    def job(i: int) -> int:
        if i == 2:
            raise RuntimeError("boom")
        return i

    with pytest.raises(RuntimeError, match="boom"):
        map_parallel(job, range(6), JobMemory(job=10, budget=30))
    assert JOBS.held == 0


def test_helpers_run_only_while_the_jobs_leave_a_core(sixteen_cores):
    """A job's helper threads (reading ahead, encoding in the background) only take turns with it
    when the jobs running keep every core busy."""
    started, looked = threading.Barrier(16, timeout=30), threading.Barrier(16, timeout=30)

    def job(fill: int) -> bool:
        if not fill:
            return spare_core()
        started.wait()  # all sixteen run at once
        spare = spare_core()
        looked.wait()  # and none ends before all have looked
        return spare

    assert spare_core()
    assert map_parallel(job, [0]) == [True]  # one job: fifteen cores to help it
    assert map_parallel(job, [1] * 16) == [False] * 16
    assert spare_core()  # the jobs ended


def test_a_file_read_while_jobs_fill_the_cores_and_more_wait_decodes_on_its_own_thread(
    sixteen_cores, decode_threads
):
    """Arrow's threads decode a file's columns side by side unless the jobs keep every core busy
    for a while yet (more wait to start): they would only contend with them then (compacting
    16 buckets on 2 cores: 5-7% faster without). The last jobs use them on the cores the jobs
    ending before them leave."""
    read_file, asked = decode_threads
    started, read = threading.Barrier(16, timeout=30), threading.Barrier(16, timeout=30)

    def job(fill: int) -> int:
        if fill:
            started.wait()  # sixteen run at once, a seventeenth waits
        rows = read_file()
        if fill:
            read.wait()  # and none ends before all sixteen have read
        return rows

    assert map_parallel(job, [0]) == [100]
    assert asked == [True]
    assert map_parallel(job, [1] * 16 + [0]) == [100] * 17
    assert asked[1:] == [False] * 16 + [True]
    assert not pool.cores_stay_busy()


def test_a_thread_knows_whether_it_runs_a_bulk_job(sixteen_cores):
    """On the call's threads and on the caller's (one job runs there), nested or not; not
    before, after, or after a nested call has ended."""

    def nested(i: int) -> list[bool]:
        inner = map_parallel(lambda _: in_job(), range(i))
        return [*inner, in_job()]

    assert not in_job()
    assert map_parallel(lambda _: in_job(), range(4)) == [True] * 4
    assert map_parallel(lambda _: in_job(), [0]) == [True]  # on the caller's thread
    assert map_parallel(nested, [1, 3]) == [[True, True], [True] * 4]
    assert map_parallel(nested, [2]) == [[True, True, True]]
    assert not in_job()


@pytest.mark.parametrize("budget", [100, 10_000])  # jobs one after another, or side by side
def test_a_failed_call_leaves_no_job_waiting(sixteen_cores, budget):
    def job(i: int) -> int:
        if i == 1:
            raise ValueError("bad item")
        return i

    with pytest.raises(ValueError, match="bad item"):
        map_parallel(job, range(40), JobMemory(job=100, budget=budget))
    assert pool._RUNNING.waiting == 0 and pool._RUNNING.count == 0


# ---- streams of items side by side ---------------------------------------------------------------


def _stream_items(work: Workload, side_by_side: threading.Barrier | None = None):
    """Item ``i`` gives ``i`` x 10 .. ``i`` x 10 + 4; the first two wait for each other."""

    def elements(i: int):
        work.start()
        try:
            if side_by_side is not None and i < 2:
                side_by_side.wait()
            for k in range(5):
                yield i * 10 + k
        finally:
            work.end()

    return elements


def test_streams_run_side_by_side_and_come_item_after_item(sixteen_cores):
    work = Workload(30)
    elements = _stream_items(work, threading.Barrier(2, timeout=30))
    memory = JobMemory(job=30, budget=100)
    held = []
    out = []
    for element in pool.map_streams(elements, range(6), memory, 3, lambda _: 1, ahead=2):
        held.append(JOBS.held)
        out.append(element)
    assert out == [i * 10 + k for i in range(6) for k in range(5)]
    assert work.ran == 6 and work.high_water <= 90
    assert set(held) == {90}  # the call holds its jobs' memory while it runs
    assert JOBS.held == 0 and pool._RUNNING.count == 0 and pool._RUNNING.waiting == 0


def test_a_stream_makes_no_more_than_ahead_before_the_caller_takes(sixteen_cores):
    made = {0: 0, 1: 0}
    second_waits = threading.Event()

    def elements(i: int):
        for k in range(100):
            made[i] += 1
            yield k
        if i == 1:
            second_waits.set()

    streams = pool.map_streams(elements, [0, 1], JobMemory(job=1, budget=10), 2, lambda k: 10, ahead=30)
    assert next(streams) == 0  # the first item's first; the second item runs meanwhile
    deadline = time.monotonic() + 30
    while made[1] < 4 and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.2)  # time to make more, were it allowed to
    assert made[1] == 4  # 3 waiting (30 bytes), the fourth made and waiting to be handed on
    assert not second_waits.is_set()
    assert list(streams) == list(range(1, 100)) + list(range(100))
    assert second_waits.is_set()


@pytest.mark.parametrize("at_once", [False, True])  # failing on its way, or before its first element
def test_a_failed_stream_raises_where_its_elements_were_due(sixteen_cores, at_once):
    def generate(i: int):
        yield i
        if i == 1:
            raise ValueError("bad item")
        yield i

    def elements(i: int):
        if at_once and i == 1:
            raise ValueError("bad item")
        return generate(i)

    got = []
    with pytest.raises(ValueError, match="bad item"):
        for element in pool.map_streams(elements, range(8), JobMemory(job=10, budget=100), 4, lambda _: 1, 1):
            got.append(element)
    assert got == ([0, 0] if at_once else [0, 0, 1])
    assert JOBS.held == 0 and pool._RUNNING.count == 0 and pool._RUNNING.waiting == 0


def test_a_finished_stream_frees_its_thread_before_the_caller_takes_its_elements(sixteen_cores):
    """Its end is handed on at once: the next item starts on its thread."""
    started = threading.Event()

    def elements(i: int):
        if i == 3:
            started.set()
        yield i

    streams = pool.map_streams(elements, range(4), JobMemory(job=10, budget=100), 2, lambda _: 1, ahead=1)
    assert next(streams) == 0
    assert started.wait(30)  # on one of the two threads, though items 1 and 2 wait to be taken
    assert list(streams) == [1, 2, 3]


def test_a_stream_closed_early_stops_its_jobs(sixteen_cores):
    started, closed = [], []

    def elements(i: int):
        started.append(i)
        try:
            yield from range(1_000_000)
        finally:
            closed.append(i)

    streams = pool.map_streams(elements, range(50), JobMemory(job=10, budget=100), 2, lambda _: 1, 1)
    assert next(streams) == 0
    streams.close()
    assert sorted(started) == sorted(closed) == [0, 1]  # the two running; no other starts
    assert JOBS.held == 0 and pool._RUNNING.count == 0 and pool._RUNNING.waiting == 0


def test_a_merged_read_streams_its_splits_side_by_side_in_order(sixteen_cores, catalog, monkeypatch):
    t, splits, read = _read_of(catalog, ["id"], writes=2)
    assert not any(split.raw_convertible for split in splits)
    threads = set()
    batches = read.batches

    def recorded(split, read_ahead=True):
        threads.add(threading.get_ident())
        return batches(split, read_ahead)

    monkeypatch.setattr(read, "batches", recorded)
    streamed = pa.concat_tables(read.stream(splits))
    assert streamed.equals(pa.concat_tables([t.new_read().read_split(split) for split in splits]))
    assert streamed.num_rows == 8_000 and streamed.column("v").to_pylist()[0].startswith("1-")
    assert threading.get_ident() not in threads and len(threads) > 1
    assert JOBS.held == 0


def test_threads_of_a_budget():
    assert JobMemory(job=30, budget=100).threads() == 3
    assert JobMemory(job=30, budget=100).threads(held=50) == 1
    assert JobMemory(job=30, budget=100).threads(held=100) == 1  # never none
    assert JobMemory(job=0, budget=100).threads() == 100


@pytest.mark.skipif(memory._GLIBC is None or memory._GLIBC.info is None, reason="glibc 2.33+ only")
def test_glibc_counts_the_bytes_its_arenas_hold_freed():
    """``mallinfo2`` is read with glibc's layout: freeing every other of 2,000 arrays of 64 KB
    (allocated by malloc, not mmap; freed in between live ones, so not given back) adds about
    64 MB to the freed bytes it reports. Counted from when all are live: the allocations may
    first reuse what the process had freed before (after a long run, tens of MB), which would
    otherwise take from the count."""
    info = memory._GLIBC.info
    arrays = [np.ones(8192) for _ in range(2000)]
    before = info().fordblks
    del arrays[::2]
    assert info().fordblks - before > 56 << 20
    del arrays


def test_glibc_is_trimmed_only_when_its_arenas_hold_much_freed(monkeypatch):
    trims: list[int] = []
    freed = [memory.TRIM_ABOVE]
    monkeypatch.setattr(
        memory, "_GLIBC", memory._Glibc(trims.append, lambda: SimpleNamespace(fordblks=freed[0]))
    )
    memory.release_freed()
    assert trims == []  # a next job reuses what is held: trimming would make it fault the pages in again
    freed[0] += 1
    memory.release_freed()
    assert trims == [0]
    monkeypatch.setattr(memory, "_GLIBC", memory._Glibc(trims.append, None))
    memory.release_freed()
    assert trims == [0, 0]  # a glibc that cannot tell is trimmed after every job


def test_glibc_heap_parameters_are_settled_unless_the_user_set_them():
    calls: list[tuple[int, int]] = []
    glibc = memory._Glibc(lambda pad: 0, None, lambda option, value: calls.append((option, value)) or 1)
    assert memory.settle_heap(glibc, {}) == [memory.HEAP_THRESHOLDS, memory.HEAP_ARENAS]
    # M_MMAP_THRESHOLD, M_TRIM_THRESHOLD, M_ARENA_MAX
    assert calls == [(-3, 32 << 20), (-1, 64 << 20), (-8, 4)]
    calls.clear()
    for user in ({"MALLOC_TRIM_THRESHOLD_": "1"}, {"GLIBC_TUNABLES": "glibc.malloc.mmap_threshold=4096"}):
        assert memory.settle_heap(glibc, user) == [memory.HEAP_ARENAS]
    assert calls == [(-8, 4), (-8, 4)]
    calls.clear()
    for user in ({"MALLOC_ARENA_MAX": "2"}, {"GLIBC_TUNABLES": "glibc.malloc.arena_max=2"}):
        assert memory.settle_heap(glibc, user) == [memory.HEAP_THRESHOLDS]
    assert calls == [(-3, 32 << 20), (-1, 64 << 20)] * 2
    both = {"MALLOC_TOP_PAD_": "0", "GLIBC_TUNABLES": "glibc.malloc.arena_max=1"}
    assert memory.settle_heap(glibc, both) == []
    assert memory.settle_heap(memory._Glibc(lambda pad: 0, None), {}) == []  # no mallopt: left alone


def fresh_python(script: str, *args: str, **user: str) -> str:
    """The stripped output of ``script`` run by a new interpreter whose environment sets none of
    the allocators' settings but ``user``'s."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MALLOC_", "GLIBC_TUNABLES", "ARROW_"))}
    out = subprocess.run([sys.executable, "-c", script, *args], env={**env, **user},
                         capture_output=True, text=True, check=True)  # fmt: skip
    return out.stdout.strip()


FAULTING_STEPS = """
import resource, sys
import numpy as np
if sys.argv[1] == "engine":
    import lakehouse
start = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(100):  # steps of many arrays below 128 KiB, freed together, as a merged read's
    held = [np.ones(12_000) for _ in range(32)]
    del held
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - start)
"""


@pytest.mark.skipif(memory._GLIBC is None or memory._GLIBC.option is None, reason="glibc only")
def test_importing_the_engine_keeps_glibc_from_handing_back_each_steps_heap():
    """Without the settled thresholds glibc gives the top of its heap back after every step
    (about 750 page faults each: 3 MB); with them, only the first step faults its pages in."""

    def faults(imported: str) -> int:
        return int(fresh_python(FAULTING_STEPS, imported))

    assert faults("engine") * 10 < faults("numpy alone")


ARENAS_OF_THREADS = """
import ctypes, os, sys, tempfile, threading
import numpy as np
if sys.argv[1] == "engine":
    import lakehouse
together = threading.Barrier(12)

def allocate():  # 12 threads allocating at once: each wants an arena of its own
    together.wait()
    held = [np.ones(100_000) for _ in range(4)]
    together.wait()

threads = [threading.Thread(target=allocate) for _ in range(12)]
for t in threads:
    t.start()
for t in threads:
    t.join()
libc = ctypes.CDLL(None)
libc.fdopen.restype, libc.fdopen.argtypes = ctypes.c_void_p, [ctypes.c_int, ctypes.c_char_p]
libc.malloc_info.argtypes, libc.fclose.argtypes = [ctypes.c_int, ctypes.c_void_p], [ctypes.c_void_p]
with tempfile.TemporaryFile() as report:
    stream = libc.fdopen(os.dup(report.fileno()), b"w")
    libc.malloc_info(0, stream)
    libc.fclose(stream)
    report.seek(0)
    print(report.read().decode().count("<heap nr="))
"""


@pytest.mark.skipif(memory._GLIBC is None or memory._GLIBC.option is None, reason="glibc only")
def test_importing_the_engine_bounds_glibcs_arenas_whatever_the_threads():
    """glibc gives each of 12 threads allocating at once an arena of its own (up to 8 per core),
    each keeping what its thread freed; after importing the engine they share 4."""

    def arenas(imported: str) -> int:
        return int(fresh_python(ARENAS_OF_THREADS, imported))

    assert arenas("engine") == memory.ARENAS
    assert arenas("numpy alone") > memory.ARENAS


JEMALLOC = "jemalloc" in pa.supported_memory_backends()


@pytest.mark.skipif(not JEMALLOC, reason="this pyarrow has no jemalloc")
def test_jemalloc_becomes_arrows_allocator_unless_the_user_chose_one(monkeypatch):
    chosen: list[str] = []
    monkeypatch.setattr(pa, "set_memory_pool", lambda p: chosen.append(p.backend_name))
    assert memory.settle_arrow_pool({}) == "jemalloc"
    assert memory.settle_arrow_pool({"ARROW_DEFAULT_MEMORY_POOL": "mimalloc"}) is None
    assert chosen == ["jemalloc"]

    def missing() -> pa.MemoryPool:
        raise NotImplementedError("built without jemalloc")

    monkeypatch.setattr(pa, "jemalloc_memory_pool", missing)  # a pyarrow without it: its own stays
    assert memory.settle_arrow_pool({}) is None
    assert chosen == ["jemalloc"]


ARROW_POOL = """
import pyarrow as pa
import lakehouse
big = pa.array(range(1_000_000))  # allocated after the import, from the pool it chose
print(pa.default_memory_pool().backend_name, pa.jemalloc_memory_pool().bytes_allocated() >= big.nbytes)
"""


@pytest.mark.skipif(not JEMALLOC, reason="this pyarrow has no jemalloc")
def test_importing_the_engine_after_pyarrow_allocates_from_jemalloc():
    """pyarrow imported first (its default pool already made), as a user's program does."""

    def run(**user: str) -> str:
        return fresh_python(ARROW_POOL, **user)

    assert run() == "jemalloc True"
    assert run(ARROW_DEFAULT_MEMORY_POOL="mimalloc") == "mimalloc False"


def test_writes_and_compactions_on_many_cores_keep_every_row(sixteen_cores, catalog):
    """Flushes, spilled merges and compactions run through the budget: the table is right."""
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.string())])
    options = {"bucket": "8", "write-buffer-size": "256 kb", "sort-spill-buffer-size": "64 kb"}
    t = catalog.create_table(
        "db.t", schema, primary_keys=["id"], options={**options, "target-file-size": "128 kb"}
    )
    n = 20_000
    t.write(pa.table({"id": pa.array(range(n), pa.int64()), "v": [f"a{i}" for i in range(n)]}))
    t.write(pa.table({"id": pa.array(range(0, n, 2), pa.int64()), "v": [f"b{i}" for i in range(0, n, 2)]}))
    t.compact(full=True)
    rows = t.new_read().to_arrow(t.plan().splits).sort_by("id")
    assert rows.column("id").to_pylist() == list(range(n))
    assert rows.column("v").to_pylist() == [f"{'b' if i % 2 == 0 else 'a'}{i}" for i in range(n)]
    assert JOBS.held == 0


@pytest.fixture
def open_writers(monkeypatch) -> list[int]:
    """``[open now, most open at once]`` of Parquet file writers, counted as they open and close."""
    from lakehouse.format.parquet import ParquetFileWriter

    counts = [0, 0]
    lock = threading.Lock()
    init, close = ParquetFileWriter.__init__, ParquetFileWriter.close

    def opened(self, *args, **kwargs):
        init(self, *args, **kwargs)
        with lock:
            counts[0] += 1
            counts[1] = max(counts[1], counts[0])

    def closed(self):
        with lock:
            counts[0] -= 1
        return close(self)

    monkeypatch.setattr(ParquetFileWriter, "__init__", opened)
    monkeypatch.setattr(ParquetFileWriter, "close", closed)
    return counts


@pytest.mark.parametrize("spill", [False, True])
def test_a_flush_of_many_buckets_holds_a_file_writer_per_running_job_only(
    sixteen_cores, catalog, open_writers, spill
):
    """Each bucket's job finishes its files when its run is written (a writer holds its output
    buffer): a flush of 64 buckets, direct or merged from spilled runs, never holds 64 writers."""
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.string())])
    options = {"bucket": "64", "changelog-producer": "input"}  # a changelog writer per bucket too
    if spill:
        options.update({"write-buffer-size": "256 kb", "sort-spill-buffer-size": "64 kb"})
    t = catalog.create_table("db.t", schema, primary_keys=["id"], options=options)
    n = 20_000
    t.write(pa.table({"id": pa.array(range(n), pa.int64()), "v": [f"v{i}" for i in range(n)]}))
    assert len(t.live_entries()) == 64
    assert open_writers[1] <= 2 * 16  # a data and a changelog writer per job, 16 jobs at most
    assert t.read().num_rows == n


def test_an_append_write_of_many_partitions_keeps_few_writers_open(sixteen_cores, catalog, open_writers):
    """Rows of 40 partitions in many flushes: past ``write-max-writers-to-spill`` buckets the
    rows are spilled, and written at the end, one file per partition; the writers open at once
    stay within the running jobs, not one per partition."""
    schema = pa.schema([("id", pa.int64()), ("p", pa.int64()), ("v", pa.string())])
    options = {"write-buffer-size": "64 kb", "write-max-writers-to-spill": "4"}
    t = catalog.create_table("db.t", schema, partition_keys=["p"], options=options)
    n = 20_000
    t.write(pa.table({"id": range(n), "p": [i % 40 for i in range(n)], "v": [f"v{i}" for i in range(n)]}))
    assert open_writers[1] <= 16
    assert len(t.live_entries()) == 40
    assert t.read().sort_by("id").column("id").to_pylist() == list(range(n))


def _in_arrival_order(t, n: int) -> None:
    """Every row was written, each partition's in the order given (its files and their rows)."""
    got = t.read()
    assert sorted(got.column("id").to_pylist()) == list(range(n))
    for p in set(got.column("p").to_pylist()):
        ids = got.filter(pc.equal(got.column("p"), p)).column("id").to_pylist()
        assert ids == sorted(ids)


@pytest.mark.parametrize(
    ("options", "one_file_each"),
    [
        ({}, True),  # spilled, then written after the files kept open
        ({"write-buffer-spillable": "false"}, False),  # each flush finishes its files
        ({"write-buffer-spill.max-disk-size": "1 kb"}, False),  # the disk allowed one spill
    ],
)
def test_append_rows_past_the_open_writers_are_spilled_or_finished(catalog, options, one_file_each):
    """A partition's rows, then those of three more, then the first's again, in flushes of 2 kb
    (halves of the buffer, each flushed while the other fills), two writers kept open: spilled
    rows follow the rows of the files still open."""
    schema = pa.schema([("id", pa.int64()), ("p", pa.int64())])
    options = {"write-buffer-size": "4 kb", "write-max-writers-to-spill": "2", **options}
    t = catalog.create_table("db.t", schema, partition_keys=["p"], options=options)
    n = 5000
    t.write(pa.table({"id": range(n), "p": [0 if i < 1000 or i >= 4000 else 1 + i % 3 for i in range(n)]}))
    assert (len(t.live_entries()) == 4) == one_file_each
    _in_arrival_order(t, n)


PK = {"primary_keys": ["id", "p"]}


@pytest.mark.parametrize(
    ("keys", "options", "jobs", "share", "overlaps"),
    [
        ({}, {}, "_append_jobs", 1, True),  # append files stay open across flushes
        (PK, {"bucket": "2"}, "_run_jobs", 1, True),  # spilled runs are merged at the end
        (PK, {"bucket": "2", "write-buffer-spillable": "false"}, "_run_jobs", 1, False),
        ({}, {}, "_append_jobs", 8 << 10, False),  # 3 partitions of 8 kb each: more than a half
    ],
    ids=["append", "pk-spillable", "pk-not-spillable", "slivers"],
)
def test_a_write_fills_one_half_of_its_buffer_while_the_other_is_flushed(
    catalog, monkeypatch, keys, options, jobs, share, overlaps
):
    """The second flush waits until the caller has asked for the batch after the one that
    filled a half, which it can only do if the flush does not hold it up; every row lands, an
    append table's in arrival order. A primary-key buffer that cannot spill is flushed whole,
    each flush a level-0 run; so is a buffer whose buckets would each get less than ``share``
    of a half (the first flush, before the buckets are known, is a half)."""
    schema = pa.schema(
        [pa.field("id", pa.int64(), nullable=False), pa.field("p", pa.int64(), nullable=False)]
    )
    options = {"write-buffer-size": "32 kb", **options}
    t = catalog.create_table("db.t", schema, partition_keys=["p"], options=options, **keys)
    monkeypatch.setattr(table_write, "SMALLEST_SHARE", share)
    began, asked, waited, routed = [], threading.Event(), [], threading.Event()
    flush, make_jobs = TableWrite._flush, getattr(TableWrite, jobs)

    def noted(self, final, background=False):
        began.append(final)
        return flush(self, final, background)

    def second_waits(self, *args):
        if routed.is_set():
            waited.append(asked.wait(timeout=10 if overlaps else 0.2))
        routed.set()  # the first flush knows its buckets
        return make_jobs(self, *args)

    monkeypatch.setattr(TableWrite, "_flush", noted)
    monkeypatch.setattr(TableWrite, jobs, second_waits)
    n, step = 8000, 1000  # 16 kb per batch (id and p)

    def batches():
        for start in range(0, n, step):
            ids = range(start, start + step)
            if began:  # more rows once the first flush knows its buckets
                assert routed.wait(timeout=10)
            yield pa.record_batch({"id": ids, "p": [i % 3 for i in ids]}, schema)
            if len(began) == 2:  # the second flush began while the caller wrote the batch just yielded
                asked.set()

    t.write(pa.RecordBatchReader.from_batches(schema, batches()))
    assert waited[:1] == [overlaps]
    if keys:  # a primary key orders each bucket's rows by key
        assert sorted(t.read().column("id").to_pylist()) == list(range(n))
    else:
        _in_arrival_order(t, n)


def _upserted_four_times(catalog, options: dict[str, str]):
    """A 4-bucket table holding an insert and three upserts: its next write triggers a compaction
    in every bucket (five sorted runs each)."""
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.int64())])
    t = catalog.create_table("db.t", schema, primary_keys=["id"], options={"bucket": "4", **options})
    for round_ in range(4):
        ids = pa.array(range(0, 400, round_ + 1), pa.int64())
        t.write(pa.table({"id": ids, "v": pa.array([round_] * len(ids), pa.int64())}))
    assert [s.sorted_runs for s in t.lsm_shape()] == [4] * 4
    return t, pa.table({"id": pa.array(range(0, 400, 5), pa.int64()), "v": pa.array([9] * 80, pa.int64())})


def test_a_writes_compactions_run_at_once(sixteen_cores, catalog, monkeypatch):
    """The buckets a commit compacts are compacted in parallel, as a dedicated compaction's are."""
    t, last = _upserted_four_times(catalog, {})
    together = threading.Barrier(4, timeout=30)  # passes only if the four buckets compact at once
    compact = BucketCompactor.compact

    def meeting(self, full=False):
        together.wait()
        return compact(self, full)

    monkeypatch.setattr(BucketCompactor, "compact", meeting)
    t.write(last)
    assert [s.sorted_runs for s in t.lsm_shape()] == [1] * 4
    rows = t.read().sort_by("id")
    assert rows.column("v").to_pylist() == [
        9 if i % 5 == 0 else max(r for r in range(4) if i % (r + 1) == 0) for i in range(400)
    ]


def test_a_failed_compaction_of_one_bucket_leaves_the_table_as_it_was(sixteen_cores, catalog, monkeypatch):
    t, last = _upserted_four_times(catalog, {})
    before = t.latest_snapshot_id()
    files = {p for p in Path(t.paths.root).rglob("*") if p.is_file()}
    compact, calls = BucketCompactor.compact, []

    def failing(self, full=False):
        calls.append(self.bucket)
        if len(calls) == 2:
            raise OSError("disk full")
        return compact(self, full)

    monkeypatch.setattr(BucketCompactor, "compact", failing)
    with pytest.raises(OSError, match="disk full"):
        t.write(last)
    assert t.refresh().latest_snapshot_id() == before
    assert {p for p in Path(t.paths.root).rglob("*") if p.is_file()} == files


def _read_of(catalog, primary_keys: list[str], writes: int):
    """A table of 8 buckets of small files (``writes`` of 8,000 rows), its splits and a read."""
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.string())])
    options = {"bucket": "8", "bucket-key": "id", "write-buffer-size": "4 mb"}
    options["sort-spill-buffer-size"] = "1 mb"
    t = catalog.create_table("db.t", schema, primary_keys=primary_keys, options=options)
    n = 8_000
    for i in range(writes):
        t.write(pa.table({"id": pa.array(range(n), pa.int64()), "v": [f"{i}-{k}" for k in range(n)]}))
    return t, t.plan().splits, t.new_read()


@pytest.mark.parametrize("primary_keys", [[], ["id"]])
def test_a_read_of_many_small_splits_reads_them_all_at_once(sixteen_cores, catalog, primary_keys):
    """Splits whose files decode to far less than the merge buffer hold far less: their read
    gets a thread each (under the buffer's bound alone, 2 of the 8 splits at a time)."""
    t, splits, read = _read_of(catalog, primary_keys, writes=2)
    bound = 4 * (1 << 20)
    assert len(splits) == 8
    assert (8 << 20) // bound == 2
    memory = read.memory(splits)
    assert 0 < memory.job < bound / 8 and memory.threads() >= 8
    projected = t.new_read(columns=["id"]).memory(splits)  # the strings are not decoded
    assert 0 < projected.job < memory.job
    rows = read.to_arrow(splits).sort_by("id")
    assert rows.num_rows == (8_000 if primary_keys else 16_000)
    assert JOBS.held == 0


def test_a_read_on_the_cores_its_bound_affords_reads_no_footer(catalog, monkeypatch):
    """On 2 cores the buffer's bound already affords a thread per core: no footer is read."""
    monkeypatch.setenv(THREADS_ENV, "2")
    usable_cores.cache_clear()
    t, splits, read = _read_of(catalog, ["id"], writes=2)

    def footer(*args, **kwargs):
        raise AssertionError("a footer was read")

    monkeypatch.setattr(table_read, "file_decoded_bytes", footer)
    try:
        assert read.memory(splits).job == 4 * (1 << 20)
        assert read.to_arrow(splits).num_rows == 8_000
    finally:
        usable_cores.cache_clear()


def test_a_split_read_is_estimated_from_its_files_batches(sixteen_cores, catalog):
    """A file read straight holds copies of one batch of it; a merge, copies of a batch per
    sorted run: the estimate grows with the runs, never past the buffer's bound."""
    _, one_run, read = _read_of(catalog, ["id"], writes=1)
    one = read.memory(one_run).job
    catalog.drop_table("db.t")
    _, three_runs, read = _read_of(catalog, ["id"], writes=3)
    assert not three_runs[0].raw_convertible
    three = read.memory(three_runs).job
    assert 2 * one < three <= 4 * (1 << 20)
