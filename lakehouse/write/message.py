"""What a writer hands the committer for one (partition, bucket): :class:`CommitMessage`."""

from __future__ import annotations

from dataclasses import dataclass

from lakehouse.manifest.entries import DataFileMeta, IndexFileMeta


@dataclass(frozen=True)
class CommitMessage:
    """File changes of one (partition, bucket), handed from a writer to the committer.

    ``new_files``/``deleted_files`` change the data (an APPEND, or OVERWRITE when deleting);
    ``compact_before``/``compact_after`` only reorganize it (a COMPACT snapshot: compaction,
    index rewrites). A commit whose removed files another commit removed first fails.
    ``new_index_files`` (hash index) go with the data, ``compact_index_files`` (deletion
    vectors) with the compaction; each replaces the bucket's previous file of its type, named in
    ``replaced_index_files``, and the commit fails if another commit replaced it first.
    ``key_index_snapshot``: a cross-partition writer placed keys by the table as of that snapshot,
    so the commit fails if other data was committed since (it could have placed the same keys).
    ``changelog_files`` are committed with the data, ``compact_changelog_files`` with the
    compaction (changelog producers). ``table_id`` and ``base_snapshot`` bind a message to its
    table and bound the snapshots a commit searches for its files (were they committed already?).
    """

    partition: bytes
    bucket: int
    total_buckets: int
    new_files: tuple[DataFileMeta, ...] = ()
    deleted_files: tuple[DataFileMeta, ...] = ()
    compact_before: tuple[DataFileMeta, ...] = ()
    compact_after: tuple[DataFileMeta, ...] = ()
    new_index_files: tuple[IndexFileMeta, ...] = ()
    compact_index_files: tuple[IndexFileMeta, ...] = ()
    replaced_index_files: tuple[IndexFileMeta, ...] = ()  # must still be live when committing
    key_index_snapshot: int | None = None  # cross-partition: the snapshot its key index was read at
    changelog_files: tuple[DataFileMeta, ...] = ()
    compact_changelog_files: tuple[DataFileMeta, ...] = ()
    table_id: str = ""  # TableStore.identity of the table it was written for ("": not checked)
    base_snapshot: int | None = None  # the latest snapshot when its writer started
