"""Clustering of an append table: ``table.sort_compact(order_by=[...], strategy=...)``.

Every file of the chosen partitions is rewritten with its rows in the given order - lexicographic,
z-order or Hilbert curve (:mod:`lakehouse.append.sort_keys`) - so that files cover narrow ranges
of the order columns and their statistics and indexes prune well. Like Paimon's sort compaction
(``CompactProcedure`` with ``order_strategy``) it applies to bucket-unaware append tables; unlike
it, the result is committed as a COMPACT snapshot (the data is unchanged) rather than as a
partition overwrite, so a concurrent append is never lost. Each partition is sorted as a whole
when it fits in ``write-buffer-size``, else in chunks of that size (see
:meth:`~lakehouse.append.compactor.AppendCompactor.sort`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from lakehouse.append.compactor import AppendCompactor
from lakehouse.append.sort_keys import SortOrder, SortStrategy
from lakehouse.errors import UnsupportedFeatureError
from lakehouse.ops.compaction import Compaction, commit_compaction, compaction_buckets, rewrite_buckets
from lakehouse.paths import FileNamer
from lakehouse.store.partitions import Partitions
from lakehouse.write.bucket_write import BucketWrite
from lakehouse.write.message import CommitMessage

if TYPE_CHECKING:
    from lakehouse.store.table_store import TableStore


def sort_order(table: TableStore, order_by: Sequence[str], strategy: str | SortStrategy) -> SortOrder:
    """The checked sort order of a clustering of ``table`` (refused before any work)."""
    schema = table.schema
    if schema.primary_keys or schema.core_options.bucket != -1:
        kind = "a primary-key table" if schema.primary_keys else "a fixed-bucket append table"
        raise UnsupportedFeatureError(
            f"sort_compact of table {table.name}: it is {kind}, whose rows keep their order in a "
            f"bucket; clustering applies to bucket-unaware append tables (bucket = -1), as in Paimon"
        )
    return SortOrder.of(schema, table.name, order_by, strategy)


def sort_buckets(
    table: TableStore, buckets: list[tuple[bytes, int]], order: SortOrder, names: FileNamer | None = None
) -> list[CommitMessage]:
    """Rewrite some buckets sorted by ``order`` (in parallel); the messages of those that changed.
    Any process can run this for its share (``names``: its file names in the job's write scope)."""
    return rewrite_buckets(
        table,
        buckets,
        lambda w: _append_files(w).sort(order),
        lambda w: _append_files(w).sort_job_bytes(),
        names,
    )


def _append_files(write: BucketWrite) -> AppendCompactor:
    assert isinstance(write.compactor, AppendCompactor)  # sort_order admits append tables only
    return write.compactor


def sort_compact(
    table: TableStore,
    order_by: Sequence[str],
    strategy: str | SortStrategy = SortStrategy.ORDER,
    partitions: Partitions = None,
    commit_user: str | None = None,
) -> Compaction:
    """Rewrite the chosen partitions (None: all) sorted by ``order_by`` as one COMPACT snapshot."""
    order = sort_order(table, order_by, strategy)
    messages = sort_buckets(table, compaction_buckets(table, partitions), order)
    return commit_compaction(table, messages, commit_user)
