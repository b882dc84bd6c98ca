"""Distributed writes: Spark tasks write data files, the driver commits them as one snapshot.

A write is the engine's :class:`~lakehouse.WriteJob` (its leases, aborts and checks are the
engine's): each Spark task attempt is one writer of the job, named by its task attempt id, and
returns its :class:`~lakehouse.TaskResult` in a :class:`TaskCommit`. Spark hands ``commit`` one
message per partition, from the one attempt its commit coordinator let through, so retried and
speculative attempts never duplicate rows; ``commit`` turns them into exactly one snapshot (plus a
COMPACT one when the writers compacted), then deletes the files of attempts that were not
committed and expires old partitions when the table sets ``partition.expiration-time``. ``abort``
deletes every file of the write once no task can still create one.

:class:`TableWriter` is what batch writes (:class:`PaimonWriter`) and streaming writes
(:class:`~lakehouse.spark.stream_writer.PaimonStreamWriter`) share: the tasks' half, and the
driver's commit and abort, which take the write's id, base snapshot and commit user from the
tasks' results (a streaming commit runs on a new writer instance).

Primary-key tables need every bucket written by one task, which numbers the bucket's rows in
order (``lakehouse.spark.write`` shuffles rows so); a write in which two tasks wrote the same
bucket is refused before anything is committed. Dynamic-bucket tables are written by
``dynamic-bucket.assigner-parallelism`` tasks (write option, else table option, else 1): task
``c`` writes as assigner ``c``, and refuses rows of another assigner's channel.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage
from pyspark.sql.types import StructType

from lakehouse import Overwrite, Table, TaskResult
from lakehouse.spark.options import COMMIT_USER, commit_identifier, commit_properties, overwrite_mode
from lakehouse.spark.types import arrow_layout


@dataclass(frozen=True)
class TaskCommit(WriterCommitMessage):
    """What one Spark task attempt wrote (``result``), as the writer of its partition."""

    partition_id: int
    attempt: int
    result: TaskResult


class TableWriter:
    """Writes rows into a table in Spark tasks; commits or aborts them on the driver (the data
    source writers add Spark's ``commit`` and ``abort``). ``overwrite``: what an overwrite
    replaces, None to append."""

    helper = "lakehouse.spark.write"  # what routes rows for this writer, named in refusals

    def __init__(
        self, table: Table, schema: StructType, overwrite: Overwrite, options: Mapping[str, str]
    ) -> None:
        self.commit_user = options.get(COMMIT_USER)
        routing = f"write with {self.helper}(df, {table.name!r}, ...)"
        self.job = table.new_write_job(
            overwrite=overwrite,
            commit_user=self.commit_user,
            properties=commit_properties(options),
            routing=routing,
        )
        self.job.check_schema(arrow_layout(schema))  # columns and types fit, before any task runs
        self.table = table

    def write(self, iterator: Iterator[pa.RecordBatch]) -> TaskCommit:
        """Write this task's rows as one writer of the job; on failure its files are deleted
        before the error surfaces."""
        context = TaskContext.get()
        assert context is not None  # Spark calls write in a task
        token = str(context.taskAttemptId())  # unique among the attempts of every task of the job
        user = self._task_commit_user(context)
        with self.job.task(token, assigner=context.partitionId(), commit_user=user) as task:
            for batch in iterator:
                task.write(batch)
            result = task.finish()
        return TaskCommit(context.partitionId(), context.attemptNumber(), result)

    def _task_commit_user(self, context: TaskContext) -> str | None:
        """The commit user of the task's files: the ``commit.user`` write option, else a fresh
        one at commit."""
        return self.commit_user

    def _commit(self, messages: list[WriterCommitMessage | None], identifier: int | None) -> None:
        """Commit every task's files as one snapshot (see :meth:`WriteJob.commit`)."""
        self.job.commit([m.result for m in messages if isinstance(m, TaskCommit)], identifier)

    def _abort(self, messages: list[WriterCommitMessage | None]) -> None:
        """Delete every file of the write once no task can still create one."""
        self.job.abort([m.result for m in messages if isinstance(m, TaskCommit)])


class PaimonWriter(TableWriter, DataSourceArrowWriter):
    """Writes a DataFrame into a table (append, overwrite or dynamic partition overwrite)."""

    def __init__(self, table: Table, schema: StructType, overwrite: bool, options: Mapping[str, str]) -> None:
        super().__init__(table, schema, overwrite_mode(table, options) if overwrite else None, options)
        self.identifier = commit_identifier(options)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        self._commit(messages, self.identifier)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        self._abort(messages)
