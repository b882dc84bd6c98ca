"""Streaming writes: ``df.writeStream.format("paimon")`` commits one snapshot per micro-batch.

Spark plans every micro-batch with a new :class:`PaimonStreamWriter`, runs its ``write`` in the
batch's tasks (the batch writer's code: files under a lease, named after the write) and calls
``commit(messages, batchId)`` - or ``abort`` - on another new instance in a Python worker of the
driver, which takes the write's id, base snapshot and commit user from the tasks' messages.

Exactly once, as Paimon's streaming sinks: every snapshot of a query is committed by one stable
commit user with the micro-batch id as its ``commitIdentifier``. A query killed after its commit
landed but before Spark logged the batch as done replays the batch when it restarts from its
checkpoint; the commit then finds the batch id covered by the user's newest snapshot
(:meth:`lakehouse.WriteJob.commit`), commits nothing and deletes the
files written again. A query killed before its commit landed leaves files no snapshot references
(``remove_orphan_files`` deletes them), and the replay commits the batch.

The commit user is the write option ``commit.user`` if given, else the streaming query's id
(prefixed with the table's ``commit.user-prefix``). Spark keeps the id in the checkpoint's
``metadata`` file, so a query restarted from the same ``checkpointLocation`` commits as the same
user; a new checkpoint is a new query. A ``commit.user`` given by hand must go with its checkpoint
the same way: a fresh checkpoint numbers batches from 0 again, which that user's snapshots
already cover, so it needs a fresh user.

Output modes: append writes the rows as they come (upserts for primary-key tables, with
``_row_kind`` for deletes); complete overwrites the whole table each micro-batch (Spark refuses
update for Python data sources). Primary-key tables need each bucket written by one task:
:func:`lakehouse.spark.write_stream` routes rows so.
"""

from __future__ import annotations

from collections.abc import Mapping

from pyspark import TaskContext
from pyspark.sql.datasource import DataSourceStreamArrowWriter, WriterCommitMessage
from pyspark.sql.types import StructType

from lakehouse import Table
from lakehouse.errors import InvalidOptionError
from lakehouse.spark.options import COMMIT_USER
from lakehouse.spark.writer import TableWriter

QUERY_ID = "sql.streaming.queryId"  # the local property Spark gives a streaming query's tasks


class PaimonStreamWriter(TableWriter, DataSourceStreamArrowWriter):
    """Writes the micro-batches of a streaming query, one snapshot each, idempotent on replay."""

    helper = "lakehouse.spark.write_stream"

    def __init__(self, table: Table, schema: StructType, overwrite: bool, options: Mapping[str, str]) -> None:
        super().__init__(table, schema, True if overwrite else None, options)

    def _task_commit_user(self, context: TaskContext) -> str:
        """``commit.user``, else the id of the streaming query the task runs for."""
        if self.commit_user:
            return self.commit_user
        query = context.getLocalProperty(QUERY_ID)
        if not query:
            raise InvalidOptionError(
                f"streaming write to table {self.table.name}: Spark gave the task no streaming query id "
                f"to commit as; set the write option {COMMIT_USER} to a name kept with the query's "
                f"checkpoint"
            )
        return self.table.commit_user(query)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Commit the micro-batch as one snapshot with ``batchId`` as its commit identifier, unless
        the query's commit user committed it already (see :meth:`TableWriter._commit`)."""
        self._commit(messages, batchId)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Delete every file of the micro-batch's write (see :meth:`TableWriter._abort`)."""
        self._abort(messages)
