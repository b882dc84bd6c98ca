"""The first phase of a write: Arrow data in, data files and picklable commit messages out.

A :class:`TableWrite` can run in any process (a Spark task, a thread); it never touches table
metadata. Rows are split by partition and bucket with vectorized group ids. Append tables
stream each (partition, bucket) into rolling Parquet files. Primary-key tables buffer up to
``write-buffer-size``, then flush every bucket as one sorted, key-unique run (duplicate keys of
the buffer folded by the deduplicate engine), numbering rows with sequence numbers that continue
after the bucket's existing files (``MergeTreeWriter``). With ``changelog-producer=input`` each
flush also writes the buffer's rows, with their kinds, as changelog files; the compaction
producers' changelog files come from the buckets' compactors.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakehouse.bucket.channels import AssignerSplit
from lakehouse.bucket.fixed import fixed_buckets
from lakehouse.bucket.hash_index import HASH_INDEX
from lakehouse.deletionvectors.index_file import DELETION_VECTORS
from lakehouse.deletionvectors.maintainer import BucketDeletionVectors
from lakehouse.errors import (
    ArgumentTypeError,
    InvalidArgumentError,
    InvalidOptionError,
    SchemaMismatchError,
    UnsupportedFeatureError,
)
from lakehouse.fileindex import options as fileindex_options
from lakehouse.fileindex.build import FileIndexBuilder
from lakehouse.format import parquet
from lakehouse.io.pool import map_parallel
from lakehouse.manifest import stats
from lakehouse.manifest.entries import DataFileMeta, IndexFileMeta, IndexManifestEntry
from lakehouse.manifest.index_manifest import by_bucket
from lakehouse.mergetree.changelog import ChangelogProducer, changelog_layout, input_rows
from lakehouse.mergetree.compactor import BucketCompactor
from lakehouse.mergetree.engine import MergeEngine
from lakehouse.options import (
    DATA_FILE_PREFIX,
    DATA_FILE_THIN_MODE,
    DELETION_VECTORS_BITMAP64,
    DELETION_VECTORS_ENABLED,
    FILE_COMPRESSION,
    FILE_COMPRESSION_ZSTD_LEVEL,
    FULL_COMPACTION_DELTA_COMMITS,
    WRITE_BUFFER_SIZE,
    WRITE_ONLY,
    ChangelogProducerKind,
    parse_memory_size,
)
from lakehouse.paths import FileNamer, index_file_namer
from lakehouse.rowkind import RowKind
from lakehouse.schema import check_writable, check_writable_keys
from lakehouse.snapshot import CommitKind, Snapshot
from lakehouse.store.data_writer import BucketWriter, FileLayout, file_metas
from lakehouse.store.partitions import row_partitions
from lakehouse.write.bucket_assigner import DynamicBuckets
from lakehouse.write.conform import conform
from lakehouse.write.cross_partition import KeyLocations
from lakehouse.write.scope import WriteScope

if TYPE_CHECKING:
    from lakehouse.store.table_store import TableStore

DEFAULT_WRITE_BUFFER = "256 mb"
MAX_FILE_NAME_BYTES = 255  # NAME_MAX of local filesystems and HDFS's default component limit


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


class TableWrite:
    """Writes data files for one table; ``prepare_commit`` returns what the committer needs.

    ``assigner``: for dynamic-bucket tables written by several writers at once, the split of this
    writer (see :mod:`lakehouse.write.bucket_assigner`); it must receive exactly the rows
    ``assigner_channels`` sends to it. ``names``: this writer's file names in its write's scope
    (:meth:`WriteScope.namer`; default: a write of its own).
    """

    def __init__(
        self,
        table: TableStore,
        *,
        overwrite: bool = False,
        assigner: AssignerSplit | None = None,
        names: FileNamer | None = None,
    ) -> None:
        self.table = table
        self.names = names or WriteScope().namer()
        self.origin = {"table_id": table.identity, "base_snapshot": table.latest_snapshot_id()}
        schema = table.schema
        self.schema = schema
        options = schema.core_options
        if assigner is not None and not schema.dynamic_buckets:
            raise InvalidOptionError(
                f"table {table.name} has no dynamic buckets (bucket = -1 with a primary key): "
                f"its writers take no assigner split"
            )
        self.assigner = assigner
        self.primary_key = list(schema.trimmed_primary_keys) if schema.primary_keys else []
        self.bucket_count = options.bucket
        check_writable(schema, table.name)
        self.engine = MergeEngine(schema, table.name) if schema.primary_keys else None
        if schema.primary_keys:
            check_writable_keys(schema, table.name)
        self.bucket_types = [f.type for f in schema.fields_named(schema.bucket_keys)]
        self.partition_types = schema.partition_types()
        self.buffer_size = parse_memory_size(options.get(WRITE_BUFFER_SIZE) or DEFAULT_WRITE_BUFFER)
        self.thin = options.get_bool(DATA_FILE_THIN_MODE)
        value_fields = list(schema.fields)
        self.key_fields = schema.fields_named(self.primary_key)
        self.layout = FileLayout(
            io=table.io,
            schema_id=schema.id,
            file_schema=self._file_schema(value_fields),
            value_fields=value_fields,
            value_modes=stats.value_modes(value_fields, options),
            key_fields=self.key_fields,
            target_size=options.target_file_size(bool(schema.primary_keys)),
            parquet=parquet.ParquetOptions(
                options.get(FILE_COMPRESSION), options.get_int(FILE_COMPRESSION_ZSTD_LEVEL)
            ),
            prefix=options.get(DATA_FILE_PREFIX),
            indexes=FileIndexBuilder.from_options(
                schema.options, {f.name: f.type for f in value_fields}, table.name
            )
            or None,
            index_threshold=fileindex_options.in_manifest_threshold(schema.options),
            names=self.names,
        )
        self.ignore_previous_files = overwrite
        # an overwrite commits no changelog (Paimon), so its writer produces none
        self.changelog = None
        if schema.primary_keys and not overwrite:
            self.changelog = ChangelogProducer.of(schema, table.name)
        self.changelog_layout = changelog_layout(self.layout, options)
        self._changelog_writers: dict[tuple[bytes, int], BucketWriter] = {}
        self._new_changelog: dict[tuple[bytes, int], list[DataFileMeta]] = {}
        self.write_only = options.get_bool(WRITE_ONLY)
        self.stop_trigger = options.stop_trigger
        self.deletion_vectors = bool(schema.primary_keys) and options.get_bool(DELETION_VECTORS_ENABLED)
        self.bitmap64 = options.get_bool(DELETION_VECTORS_BITMAP64)
        self._index_names = index_file_namer(self.names)
        self._vector_files: dict[tuple[bytes, int], IndexManifestEntry] = {}
        self._hash_files: list[IndexManifestEntry] = []
        self._dynamic: DynamicBuckets | None = None
        self._locations: KeyLocations | None = None
        self._base: Snapshot | None = None
        self._writers: dict[tuple[bytes, int], BucketWriter] = {}
        self._done: list[BucketWriter] = []
        self._next_sequence: dict[tuple[bytes, int], int] | None = None
        self._existing: dict[tuple[bytes, int], list[DataFileMeta]] = {}
        self._compactors: dict[tuple[bytes, int], BucketCompactor] = {}
        self._new_files: dict[tuple[bytes, int], list[DataFileMeta]] = {}
        self._pending: list[pa.Table] = []
        self._pending_bytes = 0

    # ---- public --------------------------------------------------------------------------

    def write(self, data: pa.Table | pa.RecordBatch | pa.RecordBatchReader) -> None:
        """Write rows; for primary-key tables they are upserts (see ``_row_kind``)."""
        for batch in _batches(data, self.table.name):
            if batch.num_rows == 0:
                continue
            self._pending.append(batch)
            self._pending_bytes += batch.nbytes
            if self._pending_bytes >= self.buffer_size:
                self._flush()

    def prepare_commit(self) -> list[CommitMessage]:
        """Finish every file and return one commit message per (partition, bucket) written.

        Primary-key buckets are then compacted as Paimon's batch writers do (unless
        ``write-only``): universal compaction, or full compaction every
        ``full-compaction.delta-commits`` commits; its changes ride along in the messages.
        """
        self._flush()
        if self.primary_key:
            return self._primary_key_messages()
        self._done.extend(self._writers.values())
        self._writers.clear()
        written = [(w.partition, w.bucket, f) for w in self._done for f in w.close()]
        self._done = []
        messages: dict[tuple[bytes, int], list[DataFileMeta]] = {}
        for (part, bucket, _), meta in zip(
            written, file_metas(self.layout, [f for *_, f in written]), strict=True
        ):
            messages.setdefault((part, bucket), []).append(meta)
        return [
            CommitMessage(p, b, self.bucket_count, tuple(files), **self.origin)
            for (p, b), files in messages.items()
        ]

    def abort(self) -> None:
        """Delete every file this writer produced (nothing of it was committed), and the
        directories it created for them that are now empty."""
        writers = [*self._done, *self._writers.values(), *self._changelog_writers.values()]
        for w in writers:
            w.abort()
        directories = [w.directory for w in writers] + [c.directory for c in self._compactors.values()]
        self.table.io.remove_empty_dirs(directories, self.table.paths.root)
        for c in self._compactors.values():
            c.abort()
        self._done, self._writers, self._changelog_writers, self._pending = [], {}, {}, []
        self._compactors, self._new_files, self._new_changelog = {}, {}, {}

    def _primary_key_messages(self) -> list[CommitMessage]:
        if not self.write_only and self._new_files:
            full = self._full_compaction_due()
            for key in self._new_files:
                self._compactors[key].compact(full=full)
        hashes = self._dynamic.write_changes(self._index_names) if self._dynamic is not None else {}
        keys_at = None
        if self._locations is not None and not self.ignore_previous_files:
            keys_at = self._locations.snapshot_id
        messages = []
        for (part, bucket), c in self._compactors.items():
            vectors, old_vectors = self._changed_vectors(c)
            hash_file = hashes.get((part, bucket))
            replaced = [old_vectors, hash_file and hash_file.replaced]
            messages.append(
                CommitMessage(
                    part,
                    bucket,
                    self.bucket_count,
                    tuple(self._new_files.get((part, bucket), ())),
                    compact_before=tuple(c.before),
                    compact_after=tuple(c.after),
                    new_index_files=(hash_file.new,) if hash_file else (),
                    compact_index_files=(vectors,) if vectors else (),
                    replaced_index_files=tuple(f for f in replaced if f is not None),
                    key_index_snapshot=keys_at,
                    changelog_files=tuple(self._new_changelog.get((part, bucket), ())),
                    compact_changelog_files=tuple(c.changelog),
                    **self.origin,
                )
            )
        self._compactors, self._new_files, self._new_changelog, self._done = {}, {}, {}, []
        return messages

    def _changed_vectors(self, compactor: BucketCompactor) -> tuple[IndexFileMeta | None, ...]:
        """The bucket's new deletion-vectors index file and the one it replaces, if its
        compactions changed any vector."""
        vectors = compactor.deletion_vectors
        if vectors is None or not vectors.changed:
            return None, None
        old = self._vector_files.get((compactor.partition, compactor.bucket))
        new = vectors.write(self.table.io, self.table.paths, self._index_names)
        return new, old and old.index_file

    def _full_compaction_due(self) -> bool:
        """Whether this commit is the ``full-compaction.delta-commits``-th since the last compaction."""
        options = self.schema.core_options
        if options.get(FULL_COMPACTION_DELTA_COMMITS) is not None:
            every = options.get_int(FULL_COMPACTION_DELTA_COMMITS)
        elif self.changelog is not None and self.changelog.kind == ChangelogProducerKind.FULL_COMPACTION:
            every = 1  # as Paimon's writers for this producer: a full compaction per commit
        else:
            return False
        snapshots = self.table.snapshots
        latest = snapshots.latest_id()
        since = 0
        while latest is not None and since + 1 < every:
            snap = snapshots.snapshot(latest)
            if snap.commit_kind == CommitKind.COMPACT:
                break
            since += 1
            latest = latest - 1 if latest > 1 else None
        return since + 1 >= every

    # ---- buffering -----------------------------------------------------------------------

    def _flush(self) -> None:
        if not self._pending:
            return
        data = pa.concat_tables(self._pending) if len(self._pending) > 1 else self._pending[0]
        self._pending, self._pending_bytes = [], 0
        data, kinds = conform(data, self.schema, self.table.name)
        inputs = None  # the rows as given, for changelog-producer=input
        buckets = None  # assigned by cross-partition routing
        if not self.primary_key and kinds is not None and pc.any(pc.not_equal(kinds, RowKind.INSERT)).as_py():
            raise SchemaMismatchError(
                f"table {self.table.name} is an append table and accepts only inserts (+I); "
                f"give it a primary key to apply updates and deletes"
            )
        if self.primary_key:
            if kinds is None:
                kinds = pa.array(np.zeros(data.num_rows, dtype=np.int8))
            data, kinds = self.engine.accept(data, kinds)
            if data.num_rows == 0:
                return
            if self.schema.cross_partition_update:
                data, kinds, buckets = self._key_locations().route(data, kinds)
                if data.num_rows == 0:
                    return
            if self.changelog is not None and self.changelog.kind == ChangelogProducerKind.INPUT:
                inputs = (data, kinds)
            data, kinds = self.engine.stored(data, kinds)
        groups, locations = self._group_ids(data, buckets)
        jobs = (
            self._run_jobs(data, kinds, groups, locations, inputs)
            if self.primary_key
            else self._append_jobs(data, groups, locations)
        )
        map_parallel(lambda job: job(), jobs)
        if self.primary_key:
            self._finish_runs()

    def _finish_runs(self) -> None:
        """A flush is one sorted run per bucket: finish its files (level 0) and hand them to the
        bucket's compactor; a bucket past ``num-sorted-run.stop-trigger`` compacts right away."""
        writers = list(self._writers.values())
        changelog_writers = list(self._changelog_writers.values())
        self._writers.clear()
        self._changelog_writers.clear()
        self._done.extend(writers + changelog_writers)
        closed = [(w.partition, w.bucket, f) for w in writers for f in w.close()]
        metas = file_metas(self.layout, [f for *_, f in closed])
        for (part, bucket, _), meta in zip(closed, metas, strict=True):
            self._new_files.setdefault((part, bucket), []).append(meta)
            self.compactor(part, bucket).add([meta])
        changelog = [(w.partition, w.bucket, f) for w in changelog_writers for f in w.close()]
        metas = file_metas(self.changelog_layout, [f for *_, f in changelog])
        for (part, bucket, _), meta in zip(changelog, metas, strict=True):
            self._new_changelog.setdefault((part, bucket), []).append(meta)
        if self.write_only:
            return
        for compactor in {(p, b): self._compactors[(p, b)] for p, b, _ in closed}.values():
            while compactor.sorted_runs() > self.stop_trigger and compactor.compact():
                pass

    def compactor(self, partition: bytes, bucket: int) -> BucketCompactor:
        """The LSM tree of a bucket as this writer sees it (also what compaction jobs work on)."""
        key = (partition, bucket)
        found = self._compactors.get(key)
        if found is None:
            self._restore()
            vectors = None
            if self.deletion_vectors:
                entry = self._vector_files.get(key)
                vectors = BucketDeletionVectors.load(
                    self.table.io, self.table.paths, entry and entry.index_file, self.bitmap64
                )
            found = self._compactors[key] = BucketCompactor(
                self.table,
                self.layout,
                self.engine,
                partition,
                bucket,
                self._existing.get(key, []),
                vectors,
                self.changelog,
            )
        return found

    def _group_ids(
        self, data: pa.Table, buckets: np.ndarray | None = None
    ) -> tuple[np.ndarray, list[tuple[bytes, int]]]:
        """A dense (partition, bucket) group id per row, and each group's partition and bucket
        (``buckets``: already assigned, as cross-partition routing does)."""
        parts = row_partitions(data, self.schema)
        part_ids, partitions = parts.ids, parts.partitions
        if buckets is None and self.bucket_count > 0:
            keys = [data.column(k) for k in self.schema.bucket_keys]
            buckets = fixed_buckets(keys, self.bucket_types, self.bucket_count)
        elif buckets is None and self.primary_key:
            buckets = self._dynamic_buckets().assign(data, part_ids, partitions, parts.hashes)
        elif buckets is None:
            return part_ids, [(p, 0) for p in partitions]  # bucket-unaware append table
        combined = (part_ids << 32) | np.asarray(buckets, np.int64)
        unique, groups = np.unique(combined, return_inverse=True)
        return groups, [(partitions[int(u) >> 32], int(u) & 0xFFFFFFFF) for u in unique]

    def _key_locations(self) -> KeyLocations:
        if self._locations is None:
            self._restore()
            self._locations = KeyLocations(self.table, self._base)
        return self._locations

    def _dynamic_buckets(self) -> DynamicBuckets:
        if self._dynamic is None:
            self._restore()
            self._dynamic = DynamicBuckets(self.table, self._hash_files, self.assigner)
        return self._dynamic

    # ---- jobs: one per (partition, bucket), run in worker threads --------------------------

    def _append_jobs(self, data: pa.Table, groups: np.ndarray, locations: list[tuple[bytes, int]]) -> list:
        """Append-table rows of each group, numbered in arrival order."""
        order = np.argsort(groups, kind="stable")
        jobs = []
        for g, start, end in _runs(groups[order]):
            writer, base = self._claim(*locations[g], end - start)
            rows = None if end - start == len(order) else order[start:end]

            def job(writer=writer, rows=rows, base=base):
                part = data if rows is None else data.take(pa.array(rows))
                writer.write(part, pa.array(np.arange(base, base + part.num_rows)), None)

            jobs.append(job)
        return jobs

    def _run_jobs(
        self,
        data: pa.Table,
        kinds: pa.Array,
        groups: np.ndarray,
        locations: list[tuple[bytes, int]],
        inputs: tuple[pa.Table, pa.Array] | None,
    ) -> list:
        """One sorted, key-unique run per primary-key bucket: the versions of a key in the buffer
        are merged by the table's merge engine, numbered in arrival order. ``inputs``: the rows as
        given, written to changelog files too."""
        order = np.argsort(groups, kind="stable")
        jobs = []
        for g, start, end in _runs(groups[order]):
            part, bucket = locations[g]
            writer, base = self._claim(part, bucket, data.num_rows)
            changelog = None if inputs is None else self._changelog_writer(part, bucket)
            rows = order[start:end]

            def job(writer=writer, changelog=changelog, rows=rows, base=base):
                take = pa.array(rows)
                sequence = pa.array(rows + base)
                versions = data.take(take).append_column(parquet.SEQUENCE_NUMBER, sequence)
                versions = versions.append_column(parquet.VALUE_KIND, kinds.take(take))
                run = self.engine.merge(versions, arrival_order=True)
                seq, run_kinds = run.column(parquet.SEQUENCE_NUMBER), run.column(parquet.VALUE_KIND)
                writer.write(self.layout.file_rows(run), seq, run_kinds)
                if changelog is not None:
                    given = inputs[0].take(take).append_column(parquet.SEQUENCE_NUMBER, sequence)
                    given = given.append_column(parquet.VALUE_KIND, inputs[1].take(take))
                    given = input_rows(given, self.primary_key, self.engine.sequence_fields)
                    seq, given_kinds = given.column(parquet.SEQUENCE_NUMBER), given.column(parquet.VALUE_KIND)
                    changelog.write(self.changelog_layout.file_rows(given), seq, given_kinds)

            jobs.append(job)
        return jobs

    def _claim(self, part: bytes, bucket: int, rows: int) -> tuple[BucketWriter, int]:
        """The writer of a bucket and its first sequence number; reserves ``rows`` numbers."""
        base = self._sequence_start(part, bucket)
        self._next_sequence[(part, bucket)] = base + rows
        return self._writer(part, bucket), base

    def _sequence_start(self, partition: bytes, bucket: int) -> int:
        """Next sequence number of a bucket: one past the largest in its existing files."""
        self._restore()
        return self._next_sequence.get((partition, bucket), 0)

    def _restore(self) -> None:
        """Load the live files and index files of every bucket once, from one snapshot (none
        when overwriting)."""
        if self._next_sequence is not None:
            return
        self._next_sequence = {}
        if not self.ignore_previous_files:
            latest = self._base = self.table.snapshots.latest()
            indexes = self.table.index_entries(latest)
            newer = sorted({e.index_file.index_type for e in indexes} - {HASH_INDEX, DELETION_VECTORS})
            if newer:
                raise UnsupportedFeatureError(
                    f"table {self.table.name}: its index manifest holds {newer} index files, newer than "
                    f"this engine, which would leave them stale by rewriting the table's files; write "
                    f"the table with Apache Paimon (Java) or pypaimon"
                )
            self._vector_files = by_bucket(indexes, DELETION_VECTORS)
            self._hash_files = [e for e in indexes if e.index_file.index_type == HASH_INDEX]
            for e in self.table.live_entries(latest) if latest is not None else []:
                key = (e.partition, e.bucket)
                self._existing.setdefault(key, []).append(e.file)
                after = e.file.max_sequence_number + 1
                self._next_sequence[key] = max(self._next_sequence.get(key, 0), after)

    def _file_schema(self, value_fields: list) -> pa.Schema:
        fields = [parquet.data_field(f) for f in value_fields]
        if not self.primary_key:
            return pa.schema(fields)
        keys = [] if self.thin else [parquet.key_field(f) for f in self.key_fields]
        return pa.schema([*keys, *parquet.SYSTEM_FIELDS, *fields])

    # ---- writers -------------------------------------------------------------------------

    def _writer(self, partition: bytes, bucket: int) -> BucketWriter:
        return self._bucket_writer(self._writers, self.layout, partition, bucket)

    def _changelog_writer(self, partition: bytes, bucket: int) -> BucketWriter:
        return self._bucket_writer(self._changelog_writers, self.changelog_layout, partition, bucket)

    def _bucket_writer(
        self,
        writers: dict[tuple[bytes, int], BucketWriter],
        layout: FileLayout,
        partition: bytes,
        bucket: int,
    ) -> BucketWriter:
        key = (partition, bucket)
        w = writers.get(key)
        if w is None:
            bucket_path = self.table.bucket_path(partition, bucket)
            self._check_name_lengths(bucket_path)
            directory = f"{self.table.paths.root}/{bucket_path}"
            w = writers[key] = BucketWriter(layout, partition, bucket, directory)
        return w

    def _check_name_lengths(self, bucket_path: str) -> None:
        """Local and HDFS file names have at most 255 bytes: refuse a partition value whose
        directory would be longer before any file is written (object stores take any)."""
        io = self.table.io
        if not (io.is_local or io.is_hdfs):
            return
        for part in bucket_path.split("/"):
            if len(part.encode()) > MAX_FILE_NAME_BYTES:
                column = part.split("=", 1)[0]
                raise InvalidArgumentError(
                    f"table {self.table.name}: partition directory {part[:40]}... would be "
                    f"{len(part.encode())} bytes, more than the {MAX_FILE_NAME_BYTES} a file name has on "
                    f"this filesystem; use shorter values for partition column {column!r}"
                )


def _runs(sorted_ids: np.ndarray) -> Iterator[tuple[int, int, int]]:
    """(id, start, end) of each run of equal values in a sorted id array."""
    starts = np.flatnonzero(np.diff(sorted_ids, prepend=-1))
    ends = np.append(starts[1:], len(sorted_ids))
    for start, end in zip(starts.tolist(), ends.tolist(), strict=True):
        yield int(sorted_ids[start]), start, end


def _batches(data, table: str) -> Iterator[pa.Table]:
    if isinstance(data, pa.Table):
        yield data
    elif isinstance(data, pa.RecordBatch):
        yield pa.Table.from_batches([data])
    elif isinstance(data, pa.RecordBatchReader):
        for batch in data:
            yield pa.Table.from_batches([batch])
    else:
        raise ArgumentTypeError(
            f"write() to table {table} takes a pyarrow Table, RecordBatch or RecordBatchReader, not "
            f"{type(data).__name__}; convert it first (e.g. pa.Table.from_pylist(rows))"
        )
