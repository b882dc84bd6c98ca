"""The Table facade: write, read, plan, time travel and schema changes of one Paimon table.

A ``Table`` is a light, picklable handle on a :class:`~lakehouse.store.table_store.TableStore`;
the work lives in the layers below: ``lakehouse/write`` (files), ``lakehouse/commit`` (snapshots),
``lakehouse/read`` (planning and reading) and ``lakehouse/ops`` (maintenance).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta
from typing import Any

import pyarrow as pa

from lakehouse import schema as schemas
from lakehouse.append.sort_keys import SortStrategy
from lakehouse.bucket.channels import AssignerSplit
from lakehouse.bucket.mode import BucketMode
from lakehouse.commit.table_commit import Overwrite, TableCommit, prefixed_user
from lakehouse.iceberg.metadata import (
    IcebergSync,
    current_metadata_file,
    external,
    sync_iceberg,
    try_sync_iceberg,
)
from lakehouse.io.fs import FileIO
from lakehouse.io.pool import map_parallel
from lakehouse.manifest.entries import IndexManifestEntry, ManifestEntry
from lakehouse.manifest.files import ManifestStore
from lakehouse.metastore import Metastore
from lakehouse.ops.background_compaction import BackgroundCompaction, compacts_in_background
from lakehouse.ops.branches import Branch, FastForward, create_branch, delete_branch, fast_forward
from lakehouse.ops.clustering import sort_compact
from lakehouse.ops.compaction import Compaction, compact
from lakehouse.ops.expire import Expiration, expire_snapshots
from lakehouse.ops.file_index import IndexReport, IndexRewrite, rewrite_file_index, verify_file_indexes
from lakehouse.ops.lsm_shape import BucketShape, lsm_shape
from lakehouse.ops.manifest_compaction import ManifestCompaction, compact_manifest
from lakehouse.ops.orphans import OrphanFiles, remove_orphan_files
from lakehouse.ops.partition_expire import (
    PartitionExpiration,
    PartitionExpireSettings,
    expire_partitions,
    expire_partitions_after_commit,
)
from lakehouse.ops.rollback import Rollback, rollback_to, rollback_to_timestamp
from lakehouse.ops.verify import verify_buckets, verify_deletion_vectors, verify_primary_key
from lakehouse.options import (
    CONSUMER_ID,
    DYNAMIC_PARTITION_OVERWRITE,
    SNAPSHOT_EXPIRE_AFTER_COMMIT,
    STREAMING_READ_OVERWRITE,
    WRITE_ONLY,
    ChangelogProducerKind,
)
from lakehouse.paths import MAIN_BRANCH, FileNamer, TablePaths, checked_name
from lakehouse.predicate import Predicate
from lakehouse.read import scan
from lakehouse.read.changes import read_changes, replaced_partitions
from lakehouse.read.scan import Split
from lakehouse.read.table_read import TableRead
from lakehouse.schema import SchemaManager, TableSchema
from lakehouse.schema_change import (
    AddColumn,
    DropColumn,
    RemoveOption,
    RenameColumn,
    SchemaChange,
    SetOption,
    UpdateColumnType,
    apply_changes,
)
from lakehouse.snapshot import BATCH_COMMIT_IDENTIFIER, Snapshot, SnapshotManager
from lakehouse.store import consumers
from lakehouse.store.partitions import Partitions, partition_values
from lakehouse.store.references import Deleted
from lakehouse.store.table_store import TableStore
from lakehouse.store.tags import Tag, create_tag, delete_tag, list_tags
from lakehouse.table.jobs import CompactionJob, ExpirationJob, IndexRewriteJob, OrphanCleanupJob
from lakehouse.table.read_builder import ReadBuilder
from lakehouse.table.stream_scan import StreamScan
from lakehouse.table.validation import check_mechanisms
from lakehouse.table.write_builder import BatchWriteBuilder, StreamWriteBuilder
from lakehouse.table.write_job import ROUTE_ROWS, WriteJob, assigner_parallelism
from lakehouse.write.message import CommitMessage
from lakehouse.write.router import RowRouter
from lakehouse.write.scope import WriteScope
from lakehouse.write.table_write import TableWrite


class _Replayed(Exception):
    """A write whose commit identifier its commit user committed while it was writing."""


class Table:
    """A Paimon table in a warehouse: the public face of a :class:`TableStore`."""

    def __init__(
        self,
        io: FileIO,
        path: str,
        name: str,
        schema: TableSchema,
        branch: str = MAIN_BRANCH,
        metastore: Metastore | None = None,
    ) -> None:
        self.store = TableStore(io, path, name, schema, branch, metastore=metastore)
        self._background: BackgroundCompaction | None = None  # compaction.async, started on use

    @classmethod
    def of(cls, store: TableStore) -> Table:
        """The facade of ``store`` (its branch and dynamic options kept)."""
        table = cls.__new__(cls)
        table.__setstate__({"store": store})
        return table

    def copy(self, options: Mapping[str, str]) -> Table:
        """This table with dynamic ``options`` over its own, for this handle only (Paimon's
        ``FileStoreTable.copy``): what its reads address (``scan.snapshot-id``,
        ``incremental-between``...), its writers' buffers, its streams' start. Options fixed at
        creation (bucket, keys, merge engine...) cannot change (``InvalidOptionError``)."""
        return Table.of(self.store.copy(options))

    def __repr__(self) -> str:
        return f"Table({self.name!r}, schema_id={self.schema.id})"

    def __getstate__(self) -> dict[str, Any]:
        return {"store": self.store}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.store = state["store"]
        self._background = None

    # ---- metadata ------------------------------------------------------------------------

    @property
    def io(self) -> FileIO:
        return self.store.io

    @property
    def paths(self) -> TablePaths:
        return self.store.paths

    @property
    def name(self) -> str:
        return self.store.name

    @property
    def schema(self) -> TableSchema:
        return self.store.schema

    @property
    def branch(self) -> str:
        """The branch this handle reads and writes (``main`` unless opened on another)."""
        return self.store.branch

    @property
    def snapshots(self) -> SnapshotManager:
        return self.store.snapshots

    @property
    def schema_manager(self) -> SchemaManager:
        return self.store.schema_manager

    @property
    def primary_keys(self) -> list[str]:
        return list(self.schema.primary_keys)

    @property
    def partition_keys(self) -> list[str]:
        return list(self.schema.partition_keys)

    @property
    def options(self) -> dict[str, str]:
        return dict(self.schema.options)

    @property
    def arrow_schema(self) -> pa.Schema:
        return self.schema.arrow_schema

    @property
    def bucket_mode(self) -> BucketMode:
        """How the table puts rows into buckets (fixed, dynamic, cross-partition, unaware)."""
        return BucketMode.of(self.schema)

    def partition_spec(self, partition: bytes) -> dict[str, Any]:
        """A serialized partition (a split's or commit message's ``partition``) as its values by
        partition key, e.g. ``{"dt": "2024-01-01"}``."""
        return partition_values(self.schema, partition)

    @property
    def identity(self) -> str:
        """What tells this table from any other (see :attr:`TableStore.identity`)."""
        return self.store.identity

    def schema_by_id(self, schema_id: int) -> TableSchema:
        """A schema version (cached: schema files never change)."""
        return self.store.schema_by_id(schema_id)

    def manifests(self) -> ManifestStore:
        return self.store.manifests()

    def bucket_path(self, partition: bytes, bucket: int) -> str:
        """Directory of a bucket relative to the table, e.g. ``dt=2024-01-01/bucket-3``."""
        return self.store.bucket_path(partition, bucket)

    @property
    def uri(self) -> str:
        """Where the table is, as a URI (``file://`` for a local warehouse, ``s3://``...)."""
        return self.io.uri(self.paths.root) or self.paths.root

    def latest_snapshot_id(self) -> int | None:
        return self.store.latest_snapshot_id()

    def earliest_snapshot_id(self) -> int | None:
        """The oldest snapshot still retained (None for an empty table)."""
        return self.snapshots.earliest_id()

    def latest_snapshot_of_user(self, commit_user: str) -> Snapshot | None:
        """The newest snapshot ``commit_user`` committed (Paimon's ``latestSnapshotOfUser``): where
        a writer that commits as one user stands, and which identifier it committed last."""
        return self.snapshots.latest_of_user(commit_user)

    @property
    def changelog_producer(self) -> ChangelogProducerKind:
        """Where the table's changelog comes from (``changelog-producer``)."""
        return self.schema.core_options.changelog_producer

    def list_snapshots(self, *, after: int | None = None) -> list[Snapshot]:
        """The retained snapshots (after snapshot ``after``, if given), oldest first."""
        snapshots = self.snapshots
        ids = snapshots.snapshot_ids()
        return [snapshots.snapshot(i) for i in ids if after is None or i > after]

    def delta_entries(self, snapshot: Snapshot) -> list[ManifestEntry]:
        """The files ``snapshot``'s commit added (``FileKind.ADD``) and removed (``DELETE``)."""
        manifests = self.manifests()
        return [
            e
            for m in manifests.read_list(snapshot.delta_manifest_list)
            for e in manifests.read_manifest(m.file_name)
        ]

    def snapshot(
        self, snapshot_id: int | None = None, *, timestamp_ms: int | None = None, tag: str | None = None
    ) -> Snapshot | None:
        """The snapshot a read addresses: by id, by time, by tag, or the latest (None if empty)."""
        return self.store.snapshot(snapshot_id, timestamp_ms, tag)

    def live_entries(self, snapshot: Snapshot | None = None) -> list[ManifestEntry]:
        """Manifest entries of the files live in ``snapshot`` (default: latest)."""
        return self.store.live_entries(snapshot)

    def index_entries(self, snapshot: Snapshot | None = None) -> list[IndexManifestEntry]:
        """The index files (hash index, deletion vectors) live in ``snapshot`` (default: latest)."""
        return self.store.index_entries(snapshot)

    def refresh(self) -> Table:
        """Reload the latest schema (after another process changed it)."""
        self.store.refresh()
        return self

    # ---- writing -------------------------------------------------------------------------

    def new_write(
        self,
        *,
        overwrite: bool = False,
        assigner: AssignerSplit | None = None,
        names: FileNamer | None = None,
        compact: bool = True,
    ) -> TableWrite:
        """A writer for data files (phase one of a write); usable in any process. ``assigner``:
        this writer's split of a dynamic-bucket write by several writers (see ``TableWrite``);
        ``names``: its file names in a write shared by several writers (``WriteScope.namer``), so
        that ``new_commit().abort(messages, scope)`` finds every file of the write; ``compact``:
        False leaves compaction to others."""
        return TableWrite(self.store, overwrite=overwrite, assigner=assigner, names=names, compact=compact)

    def new_commit(
        self, *, commit_user: str | None = None, clock: Callable[[], int] | None = None
    ) -> TableCommit:
        """A committer turning writers' messages into snapshots (phase two); ``clock`` (epoch
        millis, default the system clock) stamps their commit time."""
        return TableCommit(self.store, commit_user, clock)

    def commit_user(self, base: str) -> str:
        """The commit user a writer that names itself ``base`` (a streaming query's id, say) commits
        as: ``base`` behind the table's ``commit.user-prefix``, if it has one."""
        return prefixed_user(self.schema.core_options, base)

    def new_batch_write_builder(self, *, commit_user: str | None = None) -> BatchWriteBuilder:
        """The writers and committer of one batch write, in Paimon's shape (see
        :mod:`lakehouse.table.write_builder`)."""
        return BatchWriteBuilder(self.store, commit_user)

    def new_stream_write_builder(self, commit_user: str) -> StreamWriteBuilder:
        """The writers and committer of a stream that commits as ``commit_user`` with increasing
        identifiers, each at most once (see :mod:`lakehouse.table.write_builder`)."""
        return StreamWriteBuilder(self.store, checked_name("commit user", commit_user, self.name))

    def new_write_job(
        self,
        *,
        overwrite: Overwrite = None,
        commit_user: str | None = None,
        properties: Mapping[str, str] | None = None,
        routing: str = ROUTE_ROWS,
    ) -> WriteJob:
        """A write by writers in other processes, committed as one snapshot by this one (see
        :mod:`lakehouse.table.write_job`)."""
        return WriteJob(self.store, overwrite=overwrite, commit_user=commit_user, properties=properties,
                        routing=routing)  # fmt: skip

    def overwrite_scope(self) -> Overwrite:
        """What an overwrite replaces when the caller names no partitions (Paimon's ``INSERT
        OVERWRITE``): with ``dynamic-partition-overwrite`` (default true) the partitions the write
        writes to (``"dynamic"``) of a partitioned table, else the whole table (``True``)."""
        dynamic = self.schema.core_options.get_bool(DYNAMIC_PARTITION_OVERWRITE)
        return "dynamic" if dynamic and self.partition_keys else True

    @property
    def assigner_parallelism(self) -> int:
        """How many writers a write by several processes has for a dynamic-bucket table, each one
        assigner: ``dynamic-bucket.assigner-parallelism`` (this handle's options; default 1)."""
        return assigner_parallelism(self.store)

    def new_row_router(self, writers: int) -> RowRouter:
        """Which of ``writers`` writers each row goes to (see :mod:`lakehouse.write.router`)."""
        return RowRouter(self.schema, writers)

    def write(
        self,
        data: pa.Table | pa.RecordBatchReader,
        *,
        overwrite: Overwrite = None,
        commit_user: str | None = None,
        identifier: int | None = None,
        properties: Mapping[str, str] | None = None,
    ) -> int | None:
        """Write ``data`` as exactly one new snapshot and return its id (None if ``data`` is empty).

        ``overwrite=True`` replaces the whole table, ``overwrite={"dt": ...}`` one partition, a list
        of such dicts those partitions (even the ones ``data`` has no rows for),
        ``overwrite="dynamic"`` the partitions present in ``data``; ``commit_user``: the snapshot's
        commit user (default a fresh one), which tells a writer's snapshots apart. ``identifier``:
        the commit's identifier, committed once per commit user - a write of one the user
        committed already writes nothing and returns None; ``properties``: the snapshot's
        properties (with them a snapshot is committed even for no rows).

        With ``compaction.async``, the write commits without compacting and the buckets it wrote
        are compacted on a background thread (:mod:`lakehouse.ops.background_compaction`); a
        write that leaves a bucket with more than ``num-sorted-run.stop-trigger`` sorted runs
        waits for that compaction. :meth:`wait_compaction` waits for it too.
        """
        committer = self.new_commit(commit_user=commit_user)
        committer.check_overwrite(overwrite)
        if identifier is not None and committer.committed(identifier):
            return None  # a replay
        background = compacts_in_background(self.schema, self.name)
        scope = WriteScope()
        writer = self.new_write(overwrite=bool(overwrite), names=scope.namer(), compact=not background)
        messages = []
        try:
            writer.write(data)
            messages = writer.prepare_commit()
            commit_id = BATCH_COMMIT_IDENTIFIER if identifier is None else identifier
            snapshot_id = committer.commit(
                messages, overwrite=overwrite, identifier=commit_id, properties=properties
            )
            if snapshot_id is None and identifier is not None and committer.committed(identifier):
                raise _Replayed  # another writer committed the identifier meanwhile
        except _Replayed:
            committer.abort(messages, scope if writer.names.used else None)
            return None
        except BaseException:
            writer.abort()
            committer.abort(messages, scope if writer.names.used else None)
            raise
        if background and snapshot_id is not None:
            self._compact_in_background(messages, writer.sorted_runs, committer.commit_user)
        self._expire_after_commit(committer.commit_user)
        return snapshot_id

    def wait_compaction(self) -> None:
        """Wait until the background compaction of this handle's writes (``compaction.async``)
        is done; raises the first failure of a background round since the last wait."""
        if self._background is not None:
            self._background.wait()

    def _compact_in_background(
        self, messages: list[CommitMessage], sorted_runs: int, commit_user: str
    ) -> None:
        """Hand the buckets a write added files to to the background compactor; past the stop
        trigger, wait for it (a failure stays for ``wait_compaction``: the write itself is in)."""
        if self._background is None:
            self._background = BackgroundCompaction(self.store)
        self._background.request({(m.partition, m.bucket) for m in messages if m.new_files}, commit_user)
        if sorted_runs > self.schema.core_options.stop_trigger:
            self._background.wait(raise_failure=False)

    def _expire_after_commit(self, commit_user: str) -> None:
        """Partitions expire after a commit when ``partition.expiration-time`` is set and a check
        is due (as ``commit_user``). Paimon expires snapshots after every commit of a writer that
        is not ``write-only``; this engine does so only when ``snapshot.expire.after-commit`` is
        true (default false)."""
        expire_partitions_after_commit(self.store, commit_user)
        options = self.schema.core_options
        if options.get(SNAPSHOT_EXPIRE_AFTER_COMMIT) == "true" and not options.get_bool(WRITE_ONLY):
            self.expire_snapshots()

    # ---- reading -------------------------------------------------------------------------

    def plan(
        self,
        *,
        filter: Predicate | None = None,
        snapshot_id: int | None = None,
        timestamp_ms: int | None = None,
        tag: str | None = None,
    ) -> scan.Plan:
        """The splits a read of the table (or a past snapshot) has to open, after pruning."""
        snap, view = self.store.travel(snapshot_id, timestamp_ms, tag)
        return scan.plan(view, snap, filter)

    def new_read_builder(self) -> ReadBuilder:
        """A read in Paimon's shape: filter and projection, then a scan that plans splits and a
        read of splits (see :mod:`lakehouse.table.read_builder`); the snapshot it reads is the
        one this handle's options address (``copy({"scan.snapshot-id": ...})``), else the latest."""
        return ReadBuilder(self.store)

    def new_stream_scan(self) -> StreamScan:
        """The steps of a stream of this table, started as this handle's options say (see
        :mod:`lakehouse.table.stream_scan`)."""
        return StreamScan(self.store)

    def new_read(
        self,
        *,
        columns: list[str] | None = None,
        filter: Predicate | None = None,
        schema_id: int | None = None,
        row_kinds: bool = False,
    ) -> TableRead:
        """A reader of splits; ``schema_id`` selects the schema a time-travel plan was made with,
        ``row_kinds`` adds each row's kind as a ``_row_kind`` column."""
        view = self.store if schema_id is None else self.store.with_schema(schema_id)
        return TableRead(view, columns, filter, row_kinds)

    def read(
        self,
        *,
        columns: list[str] | None = None,
        filter: Predicate | None = None,
        snapshot_id: int | None = None,
        timestamp_ms: int | None = None,
        tag: str | None = None,
    ) -> pa.Table:
        """Rows of the latest snapshot (or a past one) as an Arrow table."""
        snap, view = self.store.travel(snapshot_id, timestamp_ms, tag)
        return TableRead(view, columns, filter).to_arrow(scan.plan(view, snap, filter).splits)

    def row_count(self, *, filter: Predicate | None = None, snapshot_id: int | None = None) -> int:
        """The exact number of rows a read returns (of the partitions ``filter`` selects: a filter
        on partition keys only keeps it exact)."""
        return sum(self.partition_row_counts(filter=filter, snapshot_id=snapshot_id).values())

    def partition_row_counts(
        self, *, filter: Predicate | None = None, snapshot_id: int | None = None
    ) -> dict[tuple[Any, ...], int]:
        """The exact rows of each partition (its values in partition-key order) a read returns.
        Counted from file metadata and deletion-vector cardinalities where a split needs no merge;
        the other splits are merged on their key columns only, side by side, a batch at a time."""
        snap, view = self.store.travel(snapshot_id, None, None)
        reader = TableRead(view, self.primary_keys or self.arrow_schema.names[:1], None)
        splits = scan.plan(view, snap, filter).splits
        known = [split.merged_row_count for split in splits]
        merged = [split for split, rows in zip(splits, known, strict=True) if rows is None]

        def merged_rows(split: Split) -> int:
            return sum(b.num_rows for b in reader.batches(split))

        counted = iter(map_parallel(merged_rows, merged, reader.memory(merged)))
        counts: dict[bytes, int] = {}
        for split, rows in zip(splits, known, strict=True):
            rows = next(counted) if rows is None else rows
            counts[split.partition] = counts.get(split.partition, 0) + rows
        return {tuple(partition_values(view.schema, p).values()): n for p, n in counts.items()}

    # ---- maintenance ---------------------------------------------------------------------

    def compact(
        self,
        *,
        full: bool = False,
        partitions: list[Mapping[str, Any]] | Mapping[str, Any] | None = None,
        commit_user: str | None = None,
    ) -> Compaction:
        """Compact every bucket of ``partitions`` (None: all) as one COMPACT snapshot; returns a
        :class:`Compaction` report. Primary-key tables: universal compaction (``full``: each
        bucket into one run at the highest level); append tables: small files merged into files
        of about ``target-file-size`` as Paimon picks them (``full``: every file rewritten)."""
        return compact(self.store, full, partitions, commit_user)

    def sort_compact(
        self,
        order_by: list[str],
        *,
        strategy: str | SortStrategy = SortStrategy.ORDER,
        partitions: list[Mapping[str, Any]] | Mapping[str, Any] | None = None,
        commit_user: str | None = None,
    ) -> Compaction:
        """Cluster a bucket-unaware append table: rewrite ``partitions`` (None: all) with rows
        sorted by ``order_by`` - ``strategy`` ``"order"`` (lexicographic), ``"zorder"`` or
        ``"hilbert"`` - as one COMPACT snapshot; returns a :class:`Compaction` report."""
        return sort_compact(self.store, order_by, strategy, partitions, commit_user)

    def rewrite_file_index(
        self,
        *,
        partitions: list[Mapping[str, Any]] | Mapping[str, Any] | None = None,
        commit_user: str | None = None,
    ) -> IndexRewrite:
        """Build or refresh file indexes per the current options; data files are not rewritten."""
        return rewrite_file_index(self.store, partitions, commit_user)

    def verify_file_indexes(
        self, *, snapshot_id: int | None = None, commit_user: str | None = None, partitions: Partitions = None
    ) -> IndexReport:
        """Check every file index of a snapshot (default latest; of ``partitions``, default all)
        against its data; ``commit_user``: only the files that user's commits added."""
        return verify_file_indexes(self.store, snapshot_id, commit_user, partitions)

    def verify_deletion_vectors(
        self, *, snapshot_id: int | None = None, partitions: Partitions = None
    ) -> IndexReport:
        """Check every deletion vector of a snapshot against its data file."""
        return verify_deletion_vectors(self.store, snapshot_id, partitions)

    def verify_buckets(self, *, snapshot_id: int | None = None, partitions: Partitions = None) -> IndexReport:
        """Check that every row is in its bucket (fixed: by hash; dynamic: by the HASH files)."""
        return verify_buckets(self.store, snapshot_id, partitions)

    def verify_primary_key(
        self, *, snapshot_id: int | None = None, partitions: Partitions = None
    ) -> IndexReport:
        """Check that every primary key is visible once."""
        return verify_primary_key(self.store, snapshot_id, partitions)

    def compact_manifest(self, *, commit_user: str | None = None) -> ManifestCompaction:
        """Merge the latest snapshot's manifests fully (cancelled files dropped, small manifests
        merged) as one COMPACT snapshot with no data change; nothing when already compact."""
        return compact_manifest(self.store, commit_user)

    def lsm_shape(self, *, snapshot_id: int | None = None) -> list[BucketShape]:
        """Per bucket: files per level, sorted runs, size amplification, compaction due."""
        return lsm_shape(self.store, snapshot_id)

    # ---- maintenance as jobs (see lakehouse.table.jobs) -----------------------------------

    def new_compaction_job(
        self, *, full: bool = False, partitions: Partitions = None, commit_user: str | None = None
    ) -> CompactionJob:
        """:meth:`compact` as a job whose units (buckets) other processes run."""
        return CompactionJob(self.store, full=full, partitions=partitions, commit_user=commit_user)

    def new_sort_compaction_job(
        self,
        order_by: list[str],
        strategy: str | SortStrategy = SortStrategy.ORDER,
        *,
        partitions: Partitions = None,
        commit_user: str | None = None,
    ) -> CompactionJob:
        """:meth:`sort_compact` as a job whose units (buckets) other processes run."""
        return CompactionJob(self.store, partitions=partitions, order_by=order_by, strategy=strategy,
                             commit_user=commit_user)  # fmt: skip

    def new_index_rewrite_job(
        self, *, partitions: Partitions = None, commit_user: str | None = None
    ) -> IndexRewriteJob:
        """:meth:`rewrite_file_index` as a job whose units (data files) other processes run."""
        return IndexRewriteJob(self.store, partitions=partitions, commit_user=commit_user)

    def new_expiration_job(
        self,
        *,
        retain_min: int | None = None,
        retain_max: int | None = None,
        older_than_ms: int | None = None,
        max_deletes: int | None = None,
    ) -> ExpirationJob:
        """:meth:`expire_snapshots` as a job whose units (files to delete) other processes run."""
        return ExpirationJob(self.store, retain_min=retain_min, retain_max=retain_max,
                             older_than_ms=older_than_ms, max_deletes=max_deletes)  # fmt: skip

    def new_orphan_cleanup_job(
        self, *, older_than_ms: int | None = None, dry_run: bool = False
    ) -> OrphanCleanupJob:
        """:meth:`remove_orphan_files` as a job whose units (orphans) other processes delete."""
        return OrphanCleanupJob(self.store, older_than_ms=older_than_ms, dry_run=dry_run)

    # ---- lifecycle -----------------------------------------------------------------------

    def expire_snapshots(
        self,
        *,
        retain_min: int | None = None,
        retain_max: int | None = None,
        older_than_ms: int | None = None,
        max_deletes: int | None = None,
    ) -> Expiration:
        """Expire old snapshots and the files only they reference; each argument defaults to the
        table option (``snapshot.num-retained.min/max``, now minus ``snapshot.time-retained``,
        ``snapshot.expire.limit``). ``older_than_ms`` is an epoch-millisecond timestamp.
        Returns an :class:`~lakehouse.ops.expire.Expiration`."""
        return expire_snapshots(self.store, retain_min, retain_max, older_than_ms, max_deletes)

    def create_tag(self, name: str, *, snapshot_id: int | None = None) -> Tag:
        """Pin a snapshot (default: the latest) as tag ``name``; read it with ``read(tag=name)``.
        With Iceberg metadata, Iceberg readers see it as a tag of the same name."""
        tag = create_tag(self.store, name, snapshot_id)
        try_sync_iceberg(self.store, f"tag {name}")
        return tag

    def delete_tag(self, name: str) -> Deleted:
        """Delete tag ``name`` (and files only it still kept alive); returns what was deleted."""
        deleted = delete_tag(self.store, name)
        try_sync_iceberg(self.store, f"the deletion of tag {name}")
        return deleted

    def tags(self) -> dict[str, int]:
        """Tag name -> snapshot id, ordered by snapshot id."""
        return {t.name: t.snapshot.id for t in list_tags(self.store)}

    def rollback_to(self, *, snapshot_id: int | None = None, tag: str | None = None) -> Rollback:
        """Make a snapshot or a tag the latest again; later snapshots, their tags and files go."""
        return rollback_to(self.store, snapshot_id, tag)

    def sync_iceberg_metadata(self) -> IcebergSync | None:
        """Write the Iceberg-compatible metadata of the latest snapshot if it is missing (each
        commit writes it; this catches up after a crash between a commit and its metadata).
        None when ``metadata.iceberg.storage`` is disabled or the table has no snapshot."""
        return sync_iceberg(self.store)

    def iceberg_metadata_location(self) -> str | None:
        """Where Iceberg readers find the table: its current ``v<N>.metadata.json`` (what
        ``version-hint.text`` names; ``s3://...`` on S3), None without Iceberg metadata."""
        location = current_metadata_file(self.store)
        return None if location is None else external(self.store, location)

    def rollback_to_timestamp(self, timestamp_ms: int) -> Rollback:
        """Roll back to the newest snapshot committed at or before ``timestamp_ms`` (epoch millis);
        ``SnapshotNotFoundError`` when no retained snapshot is that old."""
        return rollback_to_timestamp(self.store, timestamp_ms)

    def expire_partitions(
        self,
        *,
        expiration_time: str | timedelta | None = None,
        dry_run: bool = False,
        strategy: str | None = None,
        timestamp_formatter: str | None = None,
        timestamp_pattern: str | None = None,
        max_expires: int | None = None,
        commit_user: str | None = None,
    ) -> PartitionExpiration:
        """Drop the partitions older than ``expiration_time`` (default ``partition.expiration-time``)
        as one OVERWRITE snapshot; the other arguments override ``partition.expiration-strategy``,
        ``partition.timestamp-formatter``, ``partition.timestamp-pattern`` and
        ``partition.expiration-max-num``. ``dry_run`` only reports what would go."""
        return expire_partitions(
            self.store,
            expiration_time,
            strategy=strategy,
            timestamp_formatter=timestamp_formatter,
            timestamp_pattern=timestamp_pattern,
            max_expires=max_expires,
            dry_run=dry_run,
            commit_user=commit_user,
        )

    @property
    def partition_expiration_time(self) -> timedelta | None:
        """``partition.expiration-time``: the age at which a partition expires (None: never)."""
        ms = PartitionExpireSettings.of(self.store).expiration_ms
        return None if ms is None else timedelta(milliseconds=ms)

    def remove_orphan_files(self, *, older_than_ms: int | None = None, dry_run: bool = False) -> OrphanFiles:
        """Delete files no snapshot or tag references, last modified before ``older_than_ms``
        (epoch millis; default one day ago); ``dry_run`` only lists them."""
        return remove_orphan_files(self.store, older_than_ms, dry_run)

    def read_changes(
        self,
        start_snapshot_id: int,
        end_snapshot_id: int | None = None,
        *,
        consumer_id: str | None = None,
        overwrites: bool | None = None,
    ) -> pa.Table:
        """Rows changed after ``start_snapshot_id`` up to ``end_snapshot_id`` (default latest) with
        a ``_row_kind`` column; ``consumer_id`` (default: the ``consumer-id`` option) records the
        progress so expiration keeps the snapshots the consumer reads next. ``overwrites``
        (default: the ``streaming-read-overwrite`` option): the files overwrites added count as
        changes."""
        options = self.schema.core_options
        consumer_id = consumer_id or options.get(CONSUMER_ID)
        if overwrites is None:
            overwrites = options.get_bool(STREAMING_READ_OVERWRITE)
        return read_changes(self.store, start_snapshot_id, end_snapshot_id, consumer_id, overwrites)

    def replaced_partitions(
        self, start_snapshot_id: int, end_snapshot_id: int
    ) -> list[dict[str, Any]] | None:
        """The partitions whose rows snapshots ``start+1 .. end`` replaced rather than changed
        (overwrites): their changes do not say what they replaced, so a consumer of the changes
        recomputes them from the whole table; None when a snapshot of the range has expired."""
        found = replaced_partitions(self.store, start_snapshot_id, end_snapshot_id)
        return None if found is None else [self.partition_spec(p) for p in sorted(found)]

    def consumer(self, consumer_id: str) -> int | None:
        """The next snapshot consumer ``consumer_id`` reads (None: no such consumer); expiration
        keeps it and every later one."""
        return consumers.next_snapshot(self.store, consumer_id)

    def record_consumer(self, consumer_id: str, next_snapshot_id: int) -> None:
        """Record that consumer ``consumer_id`` reads snapshot ``next_snapshot_id`` next."""
        consumers.record(self.store, checked_name("consumer id", consumer_id, self.name), next_snapshot_id)

    # ---- branches ------------------------------------------------------------------------

    def branches(self) -> list[str]:
        """The table's branches other than ``main``, by name."""
        return self.store.branches()

    def other_branches(self) -> list[TableStore]:
        """The table's stores on its other branches: the files cleanups of this one keep."""
        return self.store.other_branches()

    def on_branch(self, name: str | None) -> Table:
        """The same table on branch ``name`` (``main`` for None): reads, writes, time travel,
        tags and maintenance there leave the other branches alone."""
        return Table.of(self.store.on_branch(name))

    def create_branch(self, name: str, *, snapshot_id: int | None = None, tag: str | None = None) -> Branch:
        """Create branch ``name`` from a snapshot or a tag of this branch, or with no snapshot and
        the current schema when neither is given; open it with :meth:`on_branch`."""
        return create_branch(self.store, name, snapshot_id, tag)

    def delete_branch(self, name: str) -> Branch:
        """Delete branch ``name``; ``remove_orphan_files`` then frees the files only it used."""
        return delete_branch(self.store, name)

    def fast_forward(self, name: str) -> FastForward:
        """Make this branch (usually ``main``) branch ``name``: its history from the branch's
        earliest snapshot on is replaced by the branch's."""
        return fast_forward(self.store, name)

    # ---- schema and options --------------------------------------------------------------

    def alter(self, changes: Sequence[SchemaChange]) -> None:
        """Apply ``changes`` (:mod:`lakehouse.schema_change`) in one new schema version, through the
        catalog server if the table has one; nothing changes if one of them cannot apply."""
        changes = list(changes)
        has_data = self.latest_snapshot_id() is not None

        def build(latest: TableSchema) -> TableSchema:
            changed = apply_changes(latest, self.name, changes, has_data)
            return check_mechanisms(schemas.next_version(latest, changed, self.name), self.name)

        if self.store.metastore is not None:
            build(self.store.refresh().schema)  # the errors a catalog without a server raises, first
            self.store.metastore.alter_table(self.name, changes)
            self.store.refresh()
            return
        self.store.adopt(self.schema_manager.commit_change(build))

    def set_options(self, options: Mapping[str, Any]) -> None:
        self.alter([SetOption(k, schemas.option_string(v)) for k, v in options.items()])

    def remove_options(self, keys: list[str]) -> None:
        self.alter([RemoveOption(k) for k in keys])

    def add_column(self, name: str, type: pa.DataType, *, comment: str | None = None) -> None:
        self.alter([AddColumn(name, schemas.column_type(self.name, name, type, new=True), comment)])

    def rename_column(self, old: str, new: str) -> None:
        self.alter([RenameColumn(old, new)])

    def drop_column(self, name: str) -> None:
        self.alter([DropColumn(name)])

    def alter_column_type(self, name: str, type: pa.DataType) -> None:
        self.alter([UpdateColumnType(name, schemas.column_type(self.name, name, type, new=False))])
