"""A write by many processes, committed by one: the shape of a Spark job's write, or any engine's.

The driver makes a :class:`WriteJob` (picklable) and sends it to its writers; each writer writes
its rows under :meth:`WriteJob.task` and hands back a :class:`TaskResult`; the driver commits the
results of the writers it chose (:meth:`WriteJob.commit`: one snapshot) or aborts the write
(:meth:`WriteJob.abort`)::

    job = table.new_write_job(overwrite="dynamic")               # on the driver
    with job.task(writer="7") as task:                            # in each writer
        for batch in batches:
            task.write(batch)
        result = task.finish()
    job.commit([result, ...])                                      # back on the driver

Every file of the job carries its write id, and every writer holds a lease while it writes
(:mod:`lakehouse.write.scope`). A writer that fails deletes its own files before the error
surfaces; one that is killed cannot, and a driver hears only of writers that finished. So an abort
marks the write ended, waits until no writer can still create files (each lease done, released,
or stale after ``write.heartbeat-timeout``) and deletes every file of the write; after a commit,
the files of writers that were not committed (a crashed attempt that was retried, a lost
speculative one) are deleted the same way.

Primary-key tables need each bucket written by one writer (:class:`~lakehouse.write.router.RowRouter`
says which rows go together): a write in which two writers wrote one bucket is refused when
committed, before anything lands. Dynamic-bucket tables are written by as many writers as
``dynamic-bucket.assigner-parallelism`` says (the table handle's options, default 1), writer
``c`` as assigner ``c``; rows of another assigner's channel make it fail.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING

import pyarrow as pa

from lakehouse.bucket.mode import BucketMode
from lakehouse.commit.table_commit import Overwrite, TableCommit
from lakehouse.errors import MisroutedRowsError
from lakehouse.ops.partition_expire import expire_partitions_after_commit
from lakehouse.options import DYNAMIC_BUCKET_ASSIGNER_PARALLELISM, parse_int
from lakehouse.schema import check_writable
from lakehouse.snapshot import BATCH_COMMIT_IDENTIFIER
from lakehouse.store.partitions import partition_values
from lakehouse.write.bucket_assigner import assigner_splits
from lakehouse.write.conform import conform
from lakehouse.write.message import CommitMessage
from lakehouse.write.scope import Lease, LeasedWrite, committed_since
from lakehouse.write.table_write import TableWrite

if TYPE_CHECKING:
    from lakehouse.store.table_store import TableStore

log = logging.getLogger(__name__)
ROUTE_ROWS = "route each bucket's rows to one writer (RowRouter)"


@dataclass(frozen=True)
class WriteOrigin:
    """Which write a writer's files belong to: its write id, the latest snapshot when the write
    started, and the commit user it is committed as (None: a fresh one)."""

    write_id: str
    base_snapshot: int | None
    commit_user: str | None


@dataclass(frozen=True)
class TaskResult:
    """What one writer of a job hands the driver: its token, its commit messages, its write."""

    writer: str
    messages: tuple[CommitMessage, ...]
    origin: WriteOrigin


class WriteJob:
    """A write of one table by many writers in other processes, committed as one snapshot.

    ``overwrite``: what the write replaces (see ``Table.write``), checked now, before any writer
    writes; ``commit_user``: the snapshot's (default: a fresh one; writers may name their own);
    ``properties``: the snapshot's properties; ``routing``: how the caller routes rows to writers,
    named in refusals of misrouted rows (default: :class:`~lakehouse.write.router.RowRouter`)."""

    def __init__(
        self,
        table: TableStore,
        *,
        overwrite: Overwrite = None,
        commit_user: str | None = None,
        properties: Mapping[str, str] | None = None,
        routing: str = ROUTE_ROWS,
    ) -> None:
        check_writable(table.schema, table.name)
        if overwrite is not None:
            TableCommit(table).check_overwrite(overwrite)
        self.table = table
        self.overwrite = overwrite
        self.commit_user = commit_user
        self.properties = dict(properties) if properties is not None else None
        self.routing = routing
        self.mode = BucketMode.of(table.schema)
        self.assigners = assigner_parallelism(table) if self.mode == BucketMode.HASH_DYNAMIC else None
        self.write = LeasedWrite.start(table)

    def check_schema(self, schema: pa.Schema) -> None:
        """Refuse data of ``schema`` before any writer starts: a column the table lacks, a type it
        cannot take (``SchemaMismatchError``)."""
        conform(schema.empty_table(), self.table.schema, self.table.name)

    def task(self, writer: str, *, assigner: int | None = None, commit_user: str | None = None) -> WriteTask:
        """Writer ``writer`` of the job (a token unique within the job: letters and digits, e.g. a
        task attempt id), as assigner ``assigner`` of a dynamic-bucket table; ``commit_user``: the
        user its files are committed as (default: the job's)."""
        return WriteTask(self, writer, assigner, commit_user or self.commit_user)

    def commit(self, results: Sequence[TaskResult], identifier: int | None = None) -> int | None:
        """Commit the files of ``results`` (one per writer chosen) as one snapshot with commit
        ``identifier`` (None: a batch commit, never deduplicated), or delete every file of the
        write when that is impossible or the commit user committed ``identifier`` already (a
        replay). Returns the snapshot id (None: nothing landed). Never raises once the snapshot
        exists."""
        identifier = BATCH_COMMIT_IDENTIFIER if identifier is None else identifier
        write, origin = self._origin(results)
        found = [m for r in results for m in r.messages]
        committer = TableCommit(self.table, origin.commit_user)
        if committer.committed(identifier):
            log.info(
                "table %s: commit user %s committed %d already; the files written again are deleted",
                self.table.name,
                committer.commit_user,
                identifier,
            )
            committer.abort(found, write.scope, committed_since(self.table, write.base_snapshot))
            return None
        try:
            self._check_one_writer_per_bucket(results)
            snapshot_id = committer.commit(
                found, overwrite=self.overwrite, identifier=identifier, properties=self.properties
            )
        except BaseException:
            committer.abort(found, write.scope)
            raise
        write.finish({r.writer for r in results})
        expire_partitions_after_commit(self.table, committer.commit_user, identifier)
        return snapshot_id

    def abort(self, results: Sequence[TaskResult] = ()) -> None:
        """Delete every file of the write once no writer can still create one (nothing was
        committed; what a later snapshot references stays all the same)."""
        write, _ = self._origin(results)
        keep = committed_since(self.table, write.base_snapshot)
        TableCommit(self.table).abort([m for r in results for m in r.messages], write.scope, keep)

    def _origin(self, results: Sequence[TaskResult]) -> tuple[LeasedWrite, WriteOrigin]:
        """The write the results belong to: this job's when none came (a streaming engine may
        commit a write on another instance of its job than the writers ran, so the results say)."""
        if not results:
            return self.write, WriteOrigin(
                self.write.scope.write_id, self.write.base_snapshot, self.commit_user
            )
        origin = results[0].origin
        return self.write.of(origin.write_id, origin.base_snapshot), origin

    def _check_one_writer_per_bucket(self, results: Sequence[TaskResult]) -> None:
        """Refuse a primary-key write in which two writers wrote one bucket: their sequence numbers
        overlap, so no reader could tell which version of a key is the newest. A cross-partition
        upsert table takes one writer (each would place keys the others do not know)."""
        table = self.table
        if not table.schema.primary_keys:
            return
        writing = sorted(r.writer for r in results if r.messages)
        if self.mode == BucketMode.KEY_DYNAMIC and len(writing) > 1:
            raise MisroutedRowsError(
                f"cross-partition upsert table {table.name}: writers {writing} all wrote rows, but where "
                f"each key lives is known to one writer only; nothing was committed - {self.routing}, "
                f"which writes such tables from one writer"
            )
        writers: dict[tuple[bytes, int], str] = {}
        for result in results:
            for m in result.messages:
                other = writers.setdefault((m.partition, m.bucket), result.writer)
                if other != result.writer:
                    raise MisroutedRowsError(
                        f"primary-key table {table.name}: writers {other} and {result.writer} both wrote "
                        f"bucket {m.bucket} of partition {partition_values(table.schema, m.partition)}; "
                        f"nothing was committed - {self.routing}, which sends each bucket to one writer"
                    )


class WriteTask:
    """One writer of a :class:`WriteJob`, holding the write's lease while it writes: use it as a
    context manager, write, then :meth:`finish` inside the block. Leaving the block by an error
    deletes what it wrote, then gives the lease up."""

    def __init__(self, job: WriteJob, writer: str, assigner: int | None, commit_user: str | None) -> None:
        self.job = job
        self.writer = writer
        self.assigner = assigner
        self.origin = WriteOrigin(job.write.scope.write_id, job.write.base_snapshot, commit_user)
        self._lease: Lease | None = None
        self._write: TableWrite | None = None
        self._result: TaskResult | None = None
        self._messages: list[CommitMessage] = []

    def __enter__(self) -> WriteTask:
        self._lease = self.job.write.lease(self.writer)
        return self

    def write(self, data: pa.Table | pa.RecordBatch) -> None:
        """Write rows (upserts for primary-key tables; see ``_row_kind``)."""
        if data.num_rows == 0:
            return
        if self._write is None:
            self._write = self._new_write()
        with self._routed():
            self._write.write(data)

    def finish(self) -> TaskResult:
        """Finish every file; the result the driver commits. The lease is done."""
        assert self._lease is not None, "use the task as a context manager: with job.task(...) as task"
        with self._routed():
            self._messages = self._write.prepare_commit() if self._write is not None else []
        self._lease.finish()
        self._result = TaskResult(self.writer, tuple(self._messages), self.origin)
        return self._result

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        if error is None or self._result is not None or self._lease is None:
            return
        try:
            if self._write is not None:
                self._write.abort()
            TableCommit(self.job.table).abort(self._messages)
        finally:
            self._lease.release()

    @contextmanager
    def _routed(self) -> Iterator[None]:
        """Rows of another assigner's channel (met when a buffer flushes) as the job's refusal."""
        try:
            yield
        except MisroutedRowsError as e:
            job = self.job
            raise MisroutedRowsError(
                f"dynamic-bucket table {job.table.name}: writer {self.writer} (assigner {self.assigner} of "
                f"{job.assigners}) received rows of another assigner's channel; nothing was committed - "
                f"{job.routing}, which sends each assigner's keys to its writer"
            ) from e

    def _new_write(self) -> TableWrite:
        job, lease = self.job, self._lease
        assert lease is not None
        names = job.write.names(self.writer, lease)
        overwrite = job.overwrite is not None
        if job.assigners is None:
            return TableWrite(job.table, overwrite=overwrite, names=names)
        if self.assigner is None or not 0 <= self.assigner < job.assigners:
            raise MisroutedRowsError(
                f"dynamic-bucket table {job.table.name}: writer {self.writer} has no assigner among the "
                f"{job.assigners} of the write (assigner={self.assigner}); {job.routing}"
            )
        split = assigner_splits(job.table.schema, job.assigners)[self.assigner]
        return TableWrite(job.table, overwrite=overwrite, assigner=split, names=names)


def assigner_parallelism(table: TableStore) -> int:
    """How many writers write a dynamic-bucket table, each as one assigner: the table handle's
    ``dynamic-bucket.assigner-parallelism`` (default 1)."""
    value = table.schema.core_options.get(DYNAMIC_BUCKET_ASSIGNER_PARALLELISM) or "1"
    return parse_int(value, DYNAMIC_BUCKET_ASSIGNER_PARALLELISM, minimum=1)
