"""Distributed writes: Spark tasks write data files, the driver commits them as one snapshot.

Each task runs the engine's :class:`~lakehouse.write.table_write.TableWrite` over the Arrow batches it
receives and returns its commit messages in a :class:`TaskCommit`. Spark hands ``commit`` one
message per partition, from the one attempt its commit coordinator let through, so retried and
speculative attempts never duplicate rows; ``commit`` turns them into exactly one snapshot (plus
a COMPACT one when the writers compacted).

Every file of the write carries its write id (:mod:`lakehouse.write.scope`), and every task
attempt holds a lease while it writes. A task that fails deletes its own files before failing; one
that is killed cannot, and Spark hands ``abort`` only the messages of tasks that finished. So
``abort`` marks the write ended, waits until no task can still create files (each lease done,
released, or stale after ``write.heartbeat-timeout``; default 30 s) and deletes every file of the
write it finds in the table. After a commit, the files of attempts that were not committed (a
crashed attempt Spark retried, a lost speculative one) are deleted the same way, and old
partitions expire when the table sets ``partition.expiration-time`` (:mod:`lakehouse.ops.partition_expire`).

:class:`TableWriter` is what batch writes (:class:`PaimonWriter`) and streaming writes
(:class:`~lakehouse.spark.stream_writer.PaimonStreamWriter`) share: the tasks' half, and the
driver's commit and abort, which take the write's scope, base snapshot and commit user from the
tasks' :class:`WriteOrigin` (a streaming commit runs on a new writer instance).

Primary-key tables need every bucket written by one task, which numbers the bucket's rows in
order (``lakehouse.spark.write`` shuffles rows so); a write in which two tasks wrote the same
bucket is refused before anything is committed. Dynamic-bucket tables are written by
``dynamic-bucket.assigner-parallelism`` tasks (write option, else table option, else 1): task
``c`` writes as assigner ``c`` of the engine's split writers and refuses rows of another
assigner's channel, so one channel's rows reaching several tasks fail the write.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace

import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage
from pyspark.sql.types import StructType

from lakehouse.commit.table_commit import Overwrite
from lakehouse.errors import InvalidOptionError, MisroutedRowsError, UnsupportedFeatureError
from lakehouse.ops.partition_expire import expire_partitions_after_commit
from lakehouse.options import DYNAMIC_BUCKET_ASSIGNER_PARALLELISM, DYNAMIC_PARTITION_OVERWRITE, parse_bool
from lakehouse.schema import check_writable
from lakehouse.snapshot import BATCH_COMMIT_IDENTIFIER
from lakehouse.spark.types import arrow_layout
from lakehouse.store.partitions import partition_values
from lakehouse.table.table import Table
from lakehouse.write.bucket_assigner import assigner_splits
from lakehouse.write.conform import conform
from lakehouse.write.message import CommitMessage
from lakehouse.write.scope import Lease, WriteScope, committed_since, finish_write
from lakehouse.write.table_write import TableWrite

COMMIT_USER = "commit.user"  # write option: the snapshot's commitUser (default: a fresh UUID)
# write option: the snapshot's properties, a JSON object of strings; a write with them always commits
COMMIT_PROPERTIES = "commit.properties"
# write option: the commit's identifier; a commit user's identifier commits once (a replay is dropped)
COMMIT_IDENTIFIER = "commit.identifier"
# write option: the partitions mode("overwrite") replaces, a JSON list such as [{"dt": "2024-01-01"}]
OVERWRITE_PARTITIONS = "overwrite.partitions"
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class WriteOrigin:
    """Which write a task's files belong to: its write id, the latest snapshot when it was
    planned, and the commit user it is committed as (None: a fresh one)."""

    write_id: str
    base_snapshot: int | None
    commit_user: str | None


@dataclass(frozen=True)
class TaskCommit(WriterCommitMessage):
    """The engine's commit messages of one Spark task attempt, written as ``writer`` of the write."""

    partition_id: int
    attempt: int
    writer: str
    messages: tuple[CommitMessage, ...]
    origin: WriteOrigin


class TableWriter:
    """Writes rows into a table in Spark tasks; commits or aborts them on the driver (the data
    source writers add Spark's ``commit`` and ``abort``). ``mode``: what an overwrite replaces
    (see :func:`overwrite_mode`), None to append."""

    helper = "lakehouse.spark.write"  # what routes rows for this writer, named in refusals

    def __init__(self, table: Table, schema: StructType, mode: Overwrite, options: Mapping[str, str]) -> None:
        check_writable(table.schema, table.name)
        conform(arrow_layout(schema).empty_table(), table.schema, table.name)  # columns and types fit
        self.table = table
        self.mode = mode
        self.commit_user = options.get(COMMIT_USER)
        self.properties = commit_properties(options)
        self.assigners = assigner_parallelism(table, options) if table.schema.dynamic_buckets else None
        self.scope = WriteScope.leased_from({**table.options, **options})
        self.base_snapshot = table.latest_snapshot_id()  # an abort keeps what later snapshots reference

    def write(self, iterator: Iterator[pa.RecordBatch]) -> TaskCommit:
        """Write this task's rows under a lease; on failure its files are deleted before the error
        surfaces."""
        context = TaskContext.get()
        origin = WriteOrigin(self.scope.write_id, self.base_snapshot, self._task_commit_user(context))
        token = str(context.taskAttemptId())  # unique among the attempts of every task of the job
        lease = Lease(self.table, self.scope, token).acquire()
        writer: TableWrite | None = None
        messages: list[CommitMessage] = []
        try:
            for batch in iterator:
                if batch.num_rows:
                    if writer is None:
                        writer = self._table_write(context.partitionId(), lease, token)
                    writer.write(batch)
            messages = writer.prepare_commit() if writer is not None else []
        except BaseException as e:
            try:
                self._abort_task(writer, messages)
            finally:
                lease.release()
            if isinstance(e, MisroutedRowsError):
                raise MisroutedRowsError(
                    f"dynamic-bucket table {self.table.name}: Spark task {context.partitionId()} received "
                    f"rows of another task's bucket assigner (of {self.assigners}); nothing was committed - "
                    f"write with {self.helper}(df, {self.table.name!r}, ...), which sends each "
                    f"assigner's keys to its task"
                ) from e
            raise
        lease.finish()
        return TaskCommit(context.partitionId(), context.attemptNumber(), token, tuple(messages), origin)

    def _task_commit_user(self, context: TaskContext) -> str | None:
        """The commit user of the task's files: the ``commit.user`` write option, else a fresh
        one at commit."""
        return self.commit_user

    def _table_write(self, task: int, lease: Lease, token: str) -> TableWrite:
        """The engine's writer of this task: for dynamic-bucket tables, as assigner ``task``."""
        names = self.scope.namer(token, lease)
        overwrite = self.mode is not None
        if self.assigners is None:
            return self.table.new_write(overwrite=overwrite, names=names)
        if task >= self.assigners:
            raise MisroutedRowsError(f"task {task} has no assigner among {self.assigners}")
        split = assigner_splits(self.table.schema, self.assigners)[task]
        return self.table.new_write(overwrite=overwrite, assigner=split, names=names)

    def _abort_task(self, writer: TableWrite | None, messages: list[CommitMessage]) -> None:
        """Delete the files of a failed task."""
        if writer is not None:
            writer.abort()
        self.table.new_commit().abort(messages)

    def _origin(self, tasks: list[TaskCommit]) -> tuple[WriteScope, WriteOrigin]:
        """The scope and origin of the write the tasks wrote: this writer's own when no task
        reported (a batch write's tasks ran this very writer, a micro-batch's a copy of the
        writer Spark planned the batch with)."""
        if not tasks:
            return self.scope, WriteOrigin(self.scope.write_id, self.base_snapshot, self.commit_user)
        origin = tasks[0].origin
        return replace(self.scope, write_id=origin.write_id), origin

    def _commit(self, messages: list[TaskCommit | None], identifier: int) -> None:
        """Commit every task's files as one snapshot with commit ``identifier``, or delete every
        file of the write if that is impossible or the commit user committed ``identifier``
        already (a replayed micro-batch). Never raises once the snapshot exists: Spark would abort
        a committed write."""
        tasks = [m for m in messages if m is not None]
        found = [m for t in tasks for m in t.messages]
        scope, origin = self._origin(tasks)
        committer = self.table.new_commit(origin.commit_user)
        if committer.committed(identifier):
            log.info(
                "table %s: commit user %s committed batch %d already; its files written again are deleted",
                self.table.name,
                committer.commit_user,
                identifier,
            )
            committer.abort(found, scope, committed_since(self.table, origin.base_snapshot))
            return
        try:
            check_one_writer_per_bucket(self.table, tasks, self.helper)
            committer.commit(found, overwrite=self.mode, identifier=identifier, properties=self.properties)
        except BaseException:
            committer.abort(found, scope)
            raise
        finish_write(self.table, scope, {t.writer for t in tasks})
        expire_partitions_after_commit(self.table.store, committer.commit_user, identifier)

    def _abort(self, messages: list[TaskCommit | None]) -> None:
        """Delete every file of the write once no task can still create one (nothing was committed;
        whatever a later snapshot references is kept all the same)."""
        tasks = [m for m in messages if m is not None]
        scope, origin = self._origin(tasks)
        keep = committed_since(self.table, origin.base_snapshot)
        self.table.new_commit().abort([m for t in tasks for m in t.messages], scope, keep)


class PaimonWriter(TableWriter, DataSourceArrowWriter):
    """Writes a DataFrame into a table (append, overwrite or dynamic partition overwrite)."""

    def __init__(self, table: Table, schema: StructType, overwrite: bool, options: Mapping[str, str]) -> None:
        super().__init__(table, schema, overwrite_mode(table, options) if overwrite else None, options)
        self.identifier = commit_identifier(options)

    def commit(self, messages: list[TaskCommit | None]) -> None:
        """Commit every task's files as one snapshot (see :meth:`TableWriter._commit`)."""
        self._commit(messages, self.identifier)

    def abort(self, messages: list[TaskCommit | None]) -> None:
        """Delete every file of the write (see :meth:`TableWriter._abort`)."""
        self._abort(messages)


def commit_identifier(options: Mapping[str, str]) -> int:
    """The ``commit.identifier`` write option (default: a batch commit, never deduplicated); it
    needs a ``commit.user`` to be committed once per user."""
    value = options.get(COMMIT_IDENTIFIER)
    if value is None:
        return BATCH_COMMIT_IDENTIFIER
    if not value.isdigit() or COMMIT_USER not in options:
        raise InvalidOptionError(
            f"write option {COMMIT_IDENTIFIER}={value!r} must be a non-negative integer, given with "
            f"{COMMIT_USER}: the identifier commits once per commit user"
        )
    return int(value)


def commit_properties(options: Mapping[str, str]) -> dict[str, str] | None:
    """The ``commit.properties`` write option: a JSON object whose values are strings."""
    value = options.get(COMMIT_PROPERTIES)
    if value is None:
        return None
    try:
        properties = json.loads(value)
    except ValueError:
        properties = None
    if not isinstance(properties, dict) or not all(isinstance(v, str) for v in properties.values()):
        raise InvalidOptionError(
            f"write option {COMMIT_PROPERTIES}={value!r} must be a JSON object of strings, "
            f'such as {{"source.snapshot": "42"}}'
        )
    return properties


def overwrite_mode(table: Table, options: Mapping[str, str]) -> Overwrite:
    """What ``mode("overwrite")`` replaces: the partitions the write option ``overwrite.partitions``
    lists, even those the data has no rows for (a rerun that produces none empties them); else with
    ``dynamic-partition-overwrite`` (write option, else table option, default true) only the
    partitions the data writes to, else everything."""
    listed = options.get(OVERWRITE_PARTITIONS)
    if listed is not None:
        try:
            specs = json.loads(listed)
        except ValueError:
            specs = None
        if not isinstance(specs, list):
            raise InvalidOptionError(
                f"write option {OVERWRITE_PARTITIONS} must be a JSON list of partitions such as "
                f'[{{"dt": "2024-01-01"}}], not {listed!r}'
            )
        table.new_commit().check_overwrite(specs)  # before any task writes
        return specs
    value = options.get(DYNAMIC_PARTITION_OVERWRITE) or table.options.get(DYNAMIC_PARTITION_OVERWRITE)
    dynamic = True if value is None else parse_bool(value, DYNAMIC_PARTITION_OVERWRITE)
    return "dynamic" if dynamic and table.partition_keys else True


def assigner_parallelism(table: Table, options: Mapping[str, str]) -> int:
    """How many tasks write a dynamic-bucket table, each as one assigner: the write option
    ``dynamic-bucket.assigner-parallelism``, else the table's, else 1."""
    value = (
        options.get(DYNAMIC_BUCKET_ASSIGNER_PARALLELISM)
        or table.options.get(DYNAMIC_BUCKET_ASSIGNER_PARALLELISM)
        or "1"
    )
    try:
        parallelism = int(value)
    except ValueError:
        parallelism = 0
    if parallelism < 1:
        raise InvalidOptionError(
            f"{DYNAMIC_BUCKET_ASSIGNER_PARALLELISM}={value!r} must be a positive integer"
        )
    return parallelism


def check_one_writer_per_bucket(table: Table, tasks: list[TaskCommit], helper: str) -> None:
    """Refuse a primary-key write in which two tasks wrote one bucket: their sequence numbers
    overlap, so no reader could tell which version of a key is the newest. A cross-partition
    upsert table takes one writing task (each would place keys the others do not know)."""
    if not table.primary_keys:
        return
    writing = sorted({t.partition_id for t in tasks if t.messages})
    if table.schema.cross_partition_update and len(writing) > 1:
        raise UnsupportedFeatureError(
            f"cross-partition upsert table {table.name}: Spark tasks {writing} all wrote rows, but where "
            f"each key lives is known to one writer only; nothing was committed - write with "
            f"{helper}(df, {table.name!r}, ...), which writes such tables from one task"
        )
    writers: dict[tuple[bytes, int], int] = {}
    for task in tasks:
        for m in task.messages:
            other = writers.setdefault((m.partition, m.bucket), task.partition_id)
            if other != task.partition_id:
                raise UnsupportedFeatureError(
                    f"primary-key table {table.name}: Spark tasks {other} and {task.partition_id} both "
                    f"wrote bucket {m.bucket} of partition {partition_values(table.schema, m.partition)}; "
                    f"nothing was committed - write with {helper}(df, {table.name!r}, ...), "
                    f"which sends each bucket to one task"
                )
