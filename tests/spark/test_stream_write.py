"""Streaming writes through the ``paimon`` data source: one snapshot per micro-batch with the batch
id as its commit identifier, upserts and deletes routed by bucket, and every batch committed once -
when Spark commits it again, when a query restarts from its checkpoint, and when a query is killed
between writing a batch and committing it, or between committing it and logging it done."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lakehouse.errors import InvalidOptionError
from lakehouse.rowkind import ROW_KIND
from lakehouse.snapshot import CommitKind
from lakehouse.spark import write_stream, writer
from lakehouse.spark.session import PROJECT_ROOT
from lakehouse.spark.stream_writer import QUERY_ID, PaimonStreamWriter
from lakehouse.spark.types import spark_schema

from ..conftest import ORDERS, orders, pk_orders_table, rows
from ..interop import oracle

pytestmark = pytest.mark.spark

DAYS = ["2024-01-01", "2024-01-02"]
FIRST_MTIME = 1_700_000_000  # the file source takes the oldest file first: one per micro-batch


def feed(source: Path, batches: list[pa.Table], first: int = 0) -> None:
    """Parquet files ``first``, ``first + 1``, ... in ``source``, in that order for the file source."""
    source.mkdir(parents=True, exist_ok=True)
    for i, batch in enumerate(batches, first):
        path = source / f"part-{i}.parquet"
        pq.write_table(batch, path)
        os.utime(path, (FIRST_MTIME + i, FIRST_MTIME + i))


def files_stream(spark, source: Path):
    """The files of ``source`` as a stream, one file per micro-batch."""
    schema = spark.read.parquet(str(source)).schema
    return spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).parquet(str(source))


def run(sink, checkpoint: Path):
    """Run the query of ``sink`` (a DataStreamWriter) over what its source has, then return it."""
    query = sink.option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start()
    query.awaitTermination()
    return query


def stamps(t) -> list[tuple[CommitKind, str, int]]:
    """Each snapshot's kind, commit user and commit identifier."""
    return [
        (s.commit_kind, s.commit_user, s.commit_identifier)
        for s in map(t.snapshot, t.snapshots.snapshot_ids())
    ]


def data_files(t) -> set[str]:
    return {f for _, _, names in os.walk(t.paths.root) for f in names if f.startswith("data-")}


def live_files(t) -> set[str]:
    return {e.file.file_name for e in t.live_entries()}


@pytest.mark.interop
def test_append_stream_commits_one_snapshot_per_micro_batch_and_restarts(
    any_spark, catalog, warehouse, tmp_path
):
    t = catalog.create_table("db.t", ORDERS, partition_keys=["dt"])
    source, checkpoint = tmp_path / "in", tmp_path / "checkpoint"
    batches = [orders(range(i * 10, i * 10 + 10), dt=DAYS[i % 2]) for i in range(3)]
    feed(source, batches)

    def sink():
        return files_stream(any_spark, source).writeStream.format("paimon").option("warehouse", warehouse)

    query = run(sink().option("path", "db.t"), checkpoint)
    assert stamps(t) == [(CommitKind.APPEND, query.id, i) for i in range(3)]
    writes = {f[len("data-") :][:36] for f in data_files(t)}  # data-<write id>-<task>-<n>.parquet
    assert len(writes) == 3  # Spark plans each micro-batch with a new writer: a write of its own
    assert rows(t.read()) == rows(pa.concat_tables(batches)) == rows(oracle.read(warehouse, "db.t"))
    # restarted from its checkpoint, the query goes on with the next batch, as the same commit user
    more = orders(range(30, 35), dt=DAYS[0])
    feed(source, [more], first=3)
    again = run(sink().option("path", "db.t"), checkpoint)
    assert again.id == query.id and stamps(t)[3:] == [(CommitKind.APPEND, query.id, 3)]
    assert rows(t.read()) == rows(pa.concat_tables([*batches, more]))


def keyed(ids, price: float = 1.0) -> pa.Table:
    """Orders whose day follows from their id: the same key in every batch."""
    return orders(ids, dt=[DAYS[i % 2] for i in ids], price=price)


def with_kinds(data: pa.Table, kind: str) -> pa.Table:
    return data.append_column(ROW_KIND, pa.array([kind] * data.num_rows))


@pytest.mark.interop
def test_primary_key_stream_upserts_and_deletes_routed_by_bucket(spark, catalog, warehouse, tmp_path):
    t = pk_orders_table(catalog)  # 2 buckets per partition
    source = tmp_path / "in"
    inserts, updates, deletes = keyed(range(20)), keyed(range(0, 10), price=2.0), keyed(range(5, 15))
    feed(source, [with_kinds(inserts, "+I"), with_kinds(updates, "+U"), with_kinds(deletes, "-D")])
    scattered = files_stream(spark, source).repartition(3)  # a bucket's rows in several partitions
    # a plain writeStream lets two tasks write one bucket: refused, nothing committed
    plain = scattered.writeStream.format("paimon").option("warehouse", warehouse).option("path", "db.t")
    with pytest.raises(Exception, match=r"lakehouse\.spark\.write_stream\(df, 'db\.t'"):
        run(plain, tmp_path / "refused")
    assert t.latest_snapshot_id() is None and data_files(t) == set()
    query = run(write_stream(scattered, "db.t", warehouse=warehouse), tmp_path / "checkpoint")
    assert stamps(t) == [(CommitKind.APPEND, query.id, i) for i in range(3)]
    expected = {r["order_id"]: r for r in inserts.to_pylist()}
    expected.update({r["order_id"]: r for r in updates.to_pylist()})
    for r in deletes.to_pylist():
        del expected[r["order_id"]]
    assert rows(t.read()) == sorted(expected.values(), key=lambda r: r["order_id"])
    assert rows(oracle.read(warehouse, "db.t")) == rows(t.read())


class FakeTask:
    """What a write task asks of Spark's TaskContext, for calling the writer outside Spark."""

    def __init__(self, attempt: int, query: str | None) -> None:
        self.attempt, self.query = attempt, query

    def partitionId(self) -> int:
        return 0

    def attemptNumber(self) -> int:
        return 0

    def taskAttemptId(self) -> int:
        return self.attempt

    def getLocalProperty(self, key: str) -> str | None:
        return self.query if key == QUERY_ID else None


def test_a_micro_batch_committed_again_lands_once(catalog, warehouse, monkeypatch):
    t = catalog.create_table("db.t", ORDERS, partition_keys=["dt"])
    tasks = iter(range(100))
    query: list[str | None] = ["query-1"]
    monkeypatch.setattr(writer, "TaskContext", SimpleNamespace(get=lambda: FakeTask(next(tasks), query[0])))

    def planned() -> PaimonStreamWriter:
        """A writer as Spark makes one: to plan each micro-batch, to commit or abort it."""
        return PaimonStreamWriter(catalog.get_table("db.t"), spark_schema(t.schema.fields), False, {})

    def written(ids) -> list:
        """The task messages of a micro-batch of ``ids``, written by one task."""
        return [planned().write(iter(orders(ids).to_batches()))]

    batch0 = written(range(5))
    planned().commit(batch0, 0)
    assert stamps(t) == [(CommitKind.APPEND, "query-1", 0)]
    planned().commit(batch0, 0)  # the same messages committed again: nothing lands, nothing is lost
    replay = written(range(5))  # batch 0 written again by a restarted query: its files are deleted
    planned().commit(replay, 0)
    assert t.latest_snapshot_id() == 1 and rows(t.read()) == rows(orders(range(5)))
    assert data_files(t) == live_files(t)
    batch1 = written(range(5, 8))
    planned().commit(batch1, 1)
    planned().abort(batch1, 1)  # an abort after the commit landed keeps what it committed
    assert stamps(t)[1:] == [(CommitKind.APPEND, "query-1", 1)] and rows(t.read()) == rows(orders(range(8)))
    assert data_files(t) == live_files(t)
    query[0] = "query-2"  # another query's batch 0 is its own
    planned().commit(written(range(8, 9)), 0)
    assert stamps(t)[2:] == [(CommitKind.APPEND, "query-2", 0)] and t.read().num_rows == 9
    query[0] = None
    with pytest.raises(InvalidOptionError, match="set the write option commit.user"):
        written(range(9, 10))


def test_complete_output_mode_overwrites_the_table(spark, catalog, warehouse, tmp_path):
    counts = pa.schema([pa.field("dt", pa.string(), nullable=False), pa.field("n", pa.int64())])
    t = catalog.create_table("db.counts", counts, primary_keys=["dt"], options={"bucket": "1"})
    source = tmp_path / "in"
    feed(source, [orders(range(3), dt=DAYS[0]), orders(range(3, 5), dt=DAYS[1]), orders([5], dt=DAYS[0])])
    totals = files_stream(spark, source).groupBy("dt").count().withColumnRenamed("count", "n")
    sink = write_stream(totals, "db.counts", warehouse=warehouse).outputMode("complete")
    query = run(sink, tmp_path / "checkpoint")
    assert stamps(t) == [(CommitKind.OVERWRITE, query.id, i) for i in range(3)]
    assert rows(t.read(), "dt") == [{"dt": DAYS[0], "n": 4}, {"dt": DAYS[1], "n": 2}]


def test_queries_killed_inside_a_commit_restart_with_every_row_once(spark, catalog, warehouse, tmp_path):
    """Two queries of one process, killed in the commit of batch 1: ``before`` committing it, the
    restarted query commits it; ``after``, it finds batch 1 committed and commits only batch 2.
    Either way every row is in the table once and no file the killed query left is referenced."""
    ats = ("before", "after")
    tables = {at: catalog.create_table(f"db.{at}", ORDERS, partition_keys=["dt"]) for at in ats}
    source, checkpoint, marker = ({at: tmp_path / at / name for at in ats} for name in ("in", "cp", "paused"))
    batches = [orders(range(i * 10, i * 10 + 10), dt=DAYS[i % 2]) for i in range(3)]
    for at in ats:
        feed(source[at], batches)
    queries = [f"db.{at},{source[at]},{checkpoint[at]},{at},{marker[at]}" for at in ats]
    code = "import sys; from tests.spark.pausing import run; run(*sys.argv[1:])"
    # a process of its own, not a client of this one's Spark (nor of a Connect server)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SPARK_CONNECT", "PYSPARK_GATEWAY"))}
    with open(tmp_path / "query.log", "wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-c", code, warehouse, "1", *queries], cwd=PROJECT_ROOT, env=env, stdout=log,
            stderr=subprocess.STDOUT, start_new_session=True,  # its process group: the JVM dies with it
        )  # fmt: skip

        def paused() -> bool:
            return all(m.exists() for m in marker.values())

        try:
            deadline = time.monotonic() + 300
            while not paused() and process.poll() is None and time.monotonic() < deadline:
                time.sleep(0.2)
            assert paused(), (tmp_path / "query.log").read_text()[-3000:]
        finally:
            with contextlib.suppress(ProcessLookupError):  # what is left of the queries' processes
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    for at, t in tables.items():
        killed = stamps(t)
        assert [s[2] for s in killed] == ([0, 1] if at == "after" else [0])
        orphans = data_files(t) - live_files(t)  # files of batch 1, written but not committed
        assert bool(orphans) == (at == "before")
        sink = files_stream(spark, source[at]).writeStream.format("paimon").option("warehouse", warehouse)
        restarted = run(sink.option("path", f"db.{at}"), checkpoint[at])
        user = killed[0][1]
        assert restarted.id == user and stamps(t) == [(CommitKind.APPEND, user, i) for i in range(3)]
        assert rows(t.read()) == rows(pa.concat_tables(batches))
        assert data_files(t) - live_files(t) == orphans  # a replay of a committed batch deletes its files
        t.remove_orphan_files(older_than_ms=int(time.time() * 1000) - 1)
        assert data_files(t) == live_files(t) and rows(t.read()) == rows(pa.concat_tables(batches))
