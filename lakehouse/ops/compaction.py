"""The dedicated compaction job: ``table.compact(full=..., partitions=...)``.

Every bucket of the chosen partitions gets its compaction, executed in parallel across buckets
and committed as one COMPACT snapshot: for primary-key tables one pick of universal compaction,
or everything into the highest level when ``full``; for append tables the small files Paimon's
append compaction picks, or every file when ``full`` (:mod:`lakehouse.append.compactor`). A
concurrent compaction that removed the same files first makes this one fail with
``CommitConflictError`` after deleting what it wrote: the table is left exactly as the winner
made it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lakehouse.commit.table_commit import TableCommit
from lakehouse.paths import FileNamer
from lakehouse.store.partitions import in_partitions
from lakehouse.write.bucket_write import Buckets, BucketWrite, rewrite_parallel
from lakehouse.write.message import CommitMessage
from lakehouse.write.scope import WriteScope
from lakehouse.write.settings import WriteSettings

if TYPE_CHECKING:
    from lakehouse.store.table_store import TableStore


@dataclass(frozen=True)
class Compaction:
    """What a compaction job did."""

    snapshot_id: int | None  # the COMPACT snapshot (None: nothing to do)
    buckets: int  # buckets that changed
    files_before: int  # files removed (rewritten, or moved to another level)
    files_after: int  # files added
    bytes_before: int
    bytes_after: int


def compact(
    table: TableStore,
    full: bool = False,
    partitions: Mapping[str, Any] | Iterable[Mapping[str, Any]] | None = None,
    commit_user: str | None = None,
) -> Compaction:
    return commit_compaction(
        table, compact_buckets(table, compaction_buckets(table, partitions), full), commit_user
    )


def compaction_buckets(
    table: TableStore, partitions: Mapping[str, Any] | Iterable[Mapping[str, Any]] | None = None
) -> list[tuple[bytes, int]]:
    """The (partition, bucket) pairs holding live files in ``partitions`` (None: all), sorted."""
    entries = in_partitions(table.schema, table.name, table.live_entries(), partitions, "compact partitions")
    return sorted({(e.partition, e.bucket) for e in entries})


def compact_buckets(
    table: TableStore,
    buckets: list[tuple[bytes, int]],
    full: bool = False,
    names: FileNamer | None = None,
    beside_buffer: bool = False,
) -> list[CommitMessage]:
    """Compact some buckets (in parallel) and return the messages of those that changed; any
    process can run this for its share of the buckets (``names``: its file names in the job's
    write scope; ``beside_buffer``: the process holds a write buffer meanwhile, which leaves the
    compactions half the memory). On failure its files are deleted."""
    return rewrite_buckets(
        table,
        buckets,
        lambda w: w.compactor.compact(full=full),
        lambda w: w.compactor.job_bytes(),
        names,
        beside_buffer,
    )


def rewrite_buckets(
    table: TableStore,
    buckets: list[tuple[bytes, int]],
    rewrite: Callable[[BucketWrite], object],
    job_bytes: Callable[[BucketWrite], int],
    names: FileNamer | None = None,
    beside_buffer: bool = False,
) -> list[CommitMessage]:
    """Run ``rewrite`` on each bucket's state (in parallel, as many at once as the table's jobs
    budget affords rewrites of the largest ``job_bytes``) and return the messages of the buckets whose files
    changed; on failure every file it wrote is deleted."""
    work = Buckets(table, WriteSettings.of(table, names or WriteScope().namer()))
    try:
        rewrite_parallel(table, [work.get(p, b) for p, b in buckets], rewrite, job_bytes, beside_buffer)
        return [m for m in work.messages() if m.compact_before or m.compact_after]
    except BaseException:
        work.abort()
        raise


def commit_compaction(
    table: TableStore, messages: list[CommitMessage], commit_user: str | None = None
) -> Compaction:
    """Commit the messages of :func:`compact_buckets` calls as one COMPACT snapshot (by
    ``commit_user``, default a fresh one)."""
    if not messages:
        return Compaction(None, 0, 0, 0, 0, 0)
    committer = TableCommit(table, commit_user)
    try:
        snapshot_id = committer.commit(messages)
    except BaseException:
        committer.abort(messages)
        raise
    before = [f for m in messages for f in m.compact_before]
    after = [f for m in messages for f in m.compact_after]
    return Compaction(
        snapshot_id,
        len(messages),
        len(before),
        len(after),
        sum(f.file_size for f in before),
        sum(f.file_size for f in after),
    )
