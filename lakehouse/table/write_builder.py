"""Writes in Paimon's shape: a write builder, writers that write files and prepare commit messages,
and a committer that turns the messages into a snapshot, or aborts them.

Batch (Paimon's ``BatchWriteBuilder``): one commit per write, never deduplicated::

    builder = table.new_batch_write_builder()          # .overwrite({"dt": "2024-01-01"}) replaces
    write = builder.new_write()                          # in any process
    write.write(data)
    messages = write.prepare_commit()                    # picklable
    builder.new_commit().commit(messages)                # one snapshot; abort(messages) instead

Streaming (``StreamWriteBuilder``): one commit user for the life of the stream, every commit with
an increasing identifier (a checkpoint or micro-batch id); a commit of an identifier the user has
committed already - a replay after a restart - lands nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from lakehouse.commit.table_commit import Overwrite, TableCommit
from lakehouse.errors import InvalidArgumentError
from lakehouse.snapshot import BATCH_COMMIT_IDENTIFIER
from lakehouse.write.message import CommitMessage
from lakehouse.write.table_write import TableWrite

if TYPE_CHECKING:
    from lakehouse.store.table_store import TableStore


class BatchWriteBuilder:
    """Builds the writers and the committer of one batch write (Paimon's ``BatchWriteBuilder``)."""

    def __init__(self, table: TableStore, commit_user: str | None = None) -> None:
        self._table = table
        self._commit_user = commit_user
        self._overwrite: Overwrite = None

    def overwrite(self, partitions: Overwrite = True) -> BatchWriteBuilder:
        """Make the write replace data: ``True`` the whole table, a partition dict such as
        ``{"dt": "2024-01-01"}`` that partition, a list of them those partitions, ``"dynamic"``
        the partitions the write writes to. Checked now, before anything is written."""
        TableCommit(self._table).check_overwrite(partitions)
        self._overwrite = partitions
        return self

    def new_write(self) -> TableWrite:
        """A writer of data files; usable in any process, its messages committed here."""
        return TableWrite(self._table, overwrite=bool(self._overwrite))

    def new_commit(self) -> BatchTableCommit:
        return BatchTableCommit(TableCommit(self._table, self._commit_user), self._overwrite)


class BatchTableCommit:
    """Commits the messages of a batch write as one snapshot, or deletes their files."""

    def __init__(self, committer: TableCommit, overwrite: Overwrite) -> None:
        self._committer = committer
        self._overwrite = overwrite

    @property
    def commit_user(self) -> str:
        return self._committer.commit_user

    def commit(
        self, messages: list[CommitMessage], *, properties: Mapping[str, str] | None = None
    ) -> int | None:
        """Commit ``messages`` (of every writer of the write) as one snapshot, plus a COMPACT one
        when the writers compacted; returns the last new snapshot id, None when nothing changed.
        ``properties``: the snapshot's properties (with them a snapshot lands even for no rows)."""
        return self._committer.commit(messages, overwrite=self._overwrite, properties=properties)

    def abort(self, messages: list[CommitMessage]) -> None:
        """Delete the files of ``messages``, which will not be committed."""
        self._committer.abort(messages)


class StreamWriteBuilder:
    """Builds the writers and the committer of a streaming write (Paimon's ``StreamWriteBuilder``):
    ``commit_user`` stays the same for the life of the stream, across restarts."""

    def __init__(self, table: TableStore, commit_user: str) -> None:
        self._table = table
        self._commit_user = commit_user

    @property
    def commit_user(self) -> str:
        return self._commit_user

    def new_write(self) -> TableWrite:
        return TableWrite(self._table)

    def new_commit(self) -> StreamTableCommit:
        return StreamTableCommit(TableCommit(self._table, self._commit_user))


class StreamTableCommit:
    """Commits a stream's messages, one snapshot per commit identifier, each identifier once."""

    def __init__(self, committer: TableCommit) -> None:
        self._committer = committer

    def committed(self, identifier: int) -> bool:
        """Whether the stream's commit user has committed ``identifier`` already (Paimon's
        ``filterCommitted``): after a restart, what it finds committed it must not commit again."""
        return self._committer.committed(identifier)

    def commit(
        self,
        messages: list[CommitMessage],
        identifier: int,
        *,
        properties: Mapping[str, str] | None = None,
        watermark: int | None = None,
    ) -> int | None:
        """Commit ``messages`` as the snapshot of ``identifier`` (a non-negative checkpoint or
        micro-batch id); nothing lands when the commit user committed ``identifier`` already."""
        if not 0 <= identifier < BATCH_COMMIT_IDENTIFIER:
            raise InvalidArgumentError(
                f"table {self._committer.table.name}: a streaming commit needs its identifier (a checkpoint "
                f"or micro-batch id, 0 or more); batch writes commit through new_batch_write_builder()"
            )
        return self._committer.commit(
            messages, identifier=identifier, properties=properties, watermark=watermark
        )

    def abort(self, messages: list[CommitMessage]) -> None:
        """Delete the files of ``messages``, which will not be committed."""
        self._committer.abort(messages)
