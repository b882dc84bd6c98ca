"""The buckets a write touches: per (partition, bucket) one :class:`BucketWrite` holding its
writers, the files they finished, its LSM tree and its next sequence number, over the table as
the write found it (:class:`WriteBase`). A data write (``TableWrite``) and a dedicated
compaction both work through :class:`Buckets` and get their commit messages from it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from lakehouse.append.compactor import AppendCompactor
from lakehouse.bucket.hash_index import HASH_INDEX
from lakehouse.deletionvectors.index_file import DELETION_VECTORS
from lakehouse.deletionvectors.maintainer import BucketDeletionVectors
from lakehouse.errors import InvalidArgumentError, UnsupportedFeatureError
from lakehouse.io.memory import JobMemory
from lakehouse.io.pool import map_parallel, map_reads
from lakehouse.manifest.entries import DataFileMeta, IndexFileMeta, IndexManifestEntry
from lakehouse.manifest.index_manifest import by_bucket
from lakehouse.mergetree.compactor import BucketCompactor
from lakehouse.mergetree.spill import SpilledRun
from lakehouse.paths import index_file_namer
from lakehouse.snapshot import Snapshot
from lakehouse.store.data_writer import BucketWriter, FileLayout, WrittenFile, file_metas
from lakehouse.write.message import CommitMessage
from lakehouse.write.settings import WriteSettings

if TYPE_CHECKING:
    from lakehouse.store.table_store import TableStore

BucketKey = tuple[bytes, int]  # (partition, bucket)
MAX_FILE_NAME_BYTES = 255  # NAME_MAX of local filesystems and HDFS's default component limit


@dataclass
class WriteBase:
    """The table as a write found it (empty when overwriting): every bucket's live files, the
    next sequence number after them and its deletion-vector file, and the hash-index files."""

    snapshot: Snapshot | None = None
    files: dict[BucketKey, list[DataFileMeta]] = field(default_factory=dict)
    next_sequence: dict[BucketKey, int] = field(default_factory=dict)
    vector_files: dict[BucketKey, IndexManifestEntry] = field(default_factory=dict)
    hash_files: list[IndexManifestEntry] = field(default_factory=list)

    @classmethod
    def load(cls, table: TableStore) -> WriteBase:
        """The latest snapshot's files and index files, read once."""
        latest = table.snapshots.latest()
        indexes = table.index_entries(latest)
        newer = sorted({e.index_file.index_type for e in indexes} - {HASH_INDEX, DELETION_VECTORS})
        if newer:
            raise UnsupportedFeatureError(
                f"table {table.name}: its index manifest holds {newer} index files, newer than "
                f"this engine, which would leave them stale by rewriting the table's files; write "
                f"the table with Apache Paimon (Java) or pypaimon"
            )
        base = cls(
            latest,
            vector_files=by_bucket(indexes, DELETION_VECTORS),
            hash_files=[e for e in indexes if e.index_file.index_type == HASH_INDEX],
        )
        for e in table.live_entries(latest) if latest is not None else []:
            key = (e.partition, e.bucket)
            base.files.setdefault(key, []).append(e.file)
            after = e.file.max_sequence_number + 1
            base.next_sequence[key] = max(base.next_sequence.get(key, 0), after)
        return base


@dataclass
class BucketWrite:
    """One bucket of a write."""

    partition: bytes
    bucket: int
    directory: str
    next_sequence: int
    compactor: BucketCompactor | AppendCompactor  # the bucket's files as this write sees them
    vector_file: IndexManifestEntry | None = None  # its deletion-vector file when the write began
    writer: BucketWriter | None = None  # the run or files being written
    changelog_writer: BucketWriter | None = None
    closed: list[BucketWriter] = field(default_factory=list)  # finished writers
    # files of finished writers not yet described: data, changelog
    undescribed: tuple[list[WrittenFile], list[WrittenFile]] = field(default_factory=lambda: ([], []))
    new_files: list[DataFileMeta] = field(default_factory=list)
    new_changelog: list[DataFileMeta] = field(default_factory=list)
    spilled: list[SpilledRun] = field(default_factory=list)  # buffers spilled to local disk, oldest first

    @property
    def key(self) -> BucketKey:
        return self.partition, self.bucket

    def claim(self, rows: int) -> int:
        """The first of ``rows`` sequence numbers reserved for new rows."""
        base, self.next_sequence = self.next_sequence, self.next_sequence + rows
        return base

    def data_writer(self, layout: FileLayout) -> BucketWriter:
        if self.writer is None:
            self.writer = BucketWriter(layout, self.partition, self.bucket, self.directory)
        return self.writer

    def changelog_file_writer(self, layout: FileLayout) -> BucketWriter:
        if self.changelog_writer is None:
            self.changelog_writer = BucketWriter(layout, self.partition, self.bucket, self.directory)
        return self.changelog_writer

    def close_writers(self) -> None:
        """Finish the files of the open writers, freeing what the writers hold (their output
        buffers): a job closes its bucket's once its run is written, so that a flush of many
        buckets never holds a writer per bucket. :meth:`take_undescribed` hands the files out."""
        for writer, out in ((self.writer, self.undescribed[0]), (self.changelog_writer, self.undescribed[1])):
            if writer is not None:
                out.extend(writer.close())
                self.closed.append(writer)
        self.writer = self.changelog_writer = None

    def take_undescribed(self) -> tuple[list[WrittenFile], list[WrittenFile]]:
        """Close the open writers: the data and changelog files finished since the last call."""
        self.close_writers()
        taken, self.undescribed = self.undescribed, ([], [])
        return taken

    @property
    def writing(self) -> bool:
        """Whether files of the bucket are still open or not yet described."""
        return bool(self.writer or self.changelog_writer or self.undescribed[0] or self.undescribed[1])

    def abort(self) -> None:
        """Delete every file this bucket's writers and compactions produced."""
        for writer in (*self.closed, self.writer, self.changelog_writer):
            if writer is not None:
                writer.abort()
        self.compactor.abort()

    def changed_vectors(
        self, table: TableStore, settings: WriteSettings
    ) -> tuple[IndexFileMeta | None, IndexFileMeta | None]:
        """The bucket's new deletion-vector file and the one it replaces, if its compactions
        changed any vector."""
        vectors = self.compactor.deletion_vectors
        if vectors is None or not vectors.changed:
            return None, None
        new = vectors.write(table.io, table.paths, index_file_namer(settings.names))
        return new, None if self.vector_file is None else self.vector_file.index_file


class Buckets:
    """The buckets of one write, created on first use over the table as the write found it."""

    def __init__(self, table: TableStore, settings: WriteSettings) -> None:
        self.table = table
        self.settings = settings
        self._base: WriteBase | None = None
        self.writes: dict[BucketKey, BucketWrite] = {}
        self.table_id = table.identity  # what every message of the write is bound to
        self.base_snapshot = table.latest_snapshot_id()

    @property
    def base(self) -> WriteBase:
        if self._base is None:
            self._base = WriteBase() if self.settings.overwrite else WriteBase.load(self.table)
        return self._base

    def get(self, partition: bytes, bucket: int) -> BucketWrite:
        """A bucket's state, created (with its compactor: the LSM tree of a primary-key bucket, the
        files of an append bucket) when first used."""
        key = (partition, bucket)
        found = self.writes.get(key)
        if found is None:
            base, settings, table = self.base, self.settings, self.table
            bucket_path = table.bucket_path(partition, bucket)
            _check_name_lengths(table, bucket_path)
            vector_file = base.vector_files.get(key)
            compactor: BucketCompactor | AppendCompactor
            if settings.engine is not None:
                vectors = None
                if settings.deletion_vectors:
                    vectors = BucketDeletionVectors.load(
                        table.io,
                        table.paths,
                        None if vector_file is None else vector_file.index_file,
                        settings.bitmap64,
                    )
                compactor = BucketCompactor(
                    table,
                    settings.layout,
                    settings.engine,
                    partition,
                    bucket,
                    base.files.get(key, []),
                    vectors,
                    settings.changelog,
                )
            else:
                compactor = AppendCompactor(
                    table,
                    settings.layout,
                    partition,
                    bucket,
                    base.files.get(key, []),
                    vector_file is not None,
                    settings.buffer_size,
                )
            found = BucketWrite(
                partition,
                bucket,
                f"{table.paths.root}/{bucket_path}",
                base.next_sequence.get(key, 0),
                compactor,
                vector_file=vector_file,
            )
            self.writes[key] = found
        return found

    def finish_files(self, writes: list[BucketWrite]) -> list[tuple[BucketWrite, list[DataFileMeta]]]:
        """Close the writers of ``writes``: each bucket with its new data files (described in one
        pass over all of them); changelog files are added to the buckets directly."""
        closed = [(w, *w.take_undescribed()) for w in writes]
        data = [(w, f) for w, files, _ in closed for f in files]
        changelog = [(w, f) for w, _, files in closed for f in files]
        for (w, _), meta in zip(
            changelog, file_metas(self.settings.changelog_layout, [f for _, f in changelog]), strict=True
        ):
            w.new_changelog.append(meta)
        added: dict[BucketKey, tuple[BucketWrite, list[DataFileMeta]]] = {}
        for (w, _), meta in zip(data, file_metas(self.settings.layout, [f for _, f in data]), strict=True):
            w.new_files.append(meta)
            added.setdefault(w.key, (w, []))[1].append(meta)
        return list(added.values())

    def messages(
        self, hash_files: dict | None = None, key_index_snapshot: int | None = None
    ) -> list[CommitMessage]:
        """One commit message per bucket touched; ``hash_files``: the dynamic-bucket index
        changes per bucket, ``key_index_snapshot``: the snapshot a cross-partition key index was
        read at."""
        messages = []
        for key, w in self.writes.items():
            self.base.next_sequence[key] = w.next_sequence  # a later round continues the numbering
            vectors, old_vectors = w.changed_vectors(self.table, self.settings)
            hash_file = (hash_files or {}).get(key)
            replaced = [old_vectors, hash_file and hash_file.replaced]
            messages.append(
                CommitMessage(
                    *key,
                    self.settings.bucket_count,
                    tuple(w.new_files),
                    compact_before=tuple(w.compactor.before),
                    compact_after=tuple(w.compactor.after),
                    new_index_files=(hash_file.new,) if hash_file else (),
                    compact_index_files=(vectors,) if vectors else (),
                    replaced_index_files=tuple(f for f in replaced if f is not None),
                    key_index_snapshot=key_index_snapshot,
                    changelog_files=tuple(w.new_changelog),
                    compact_changelog_files=tuple(w.compactor.changelog),
                    table_id=self.table_id,
                    base_snapshot=self.base_snapshot,
                )
            )
        self.writes = {}
        return messages

    def abort(self) -> None:
        """Delete every file of every bucket, and the directories the write created that are
        now empty."""
        for w in self.writes.values():
            w.abort()
        self.table.io.remove_empty_dirs([w.directory for w in self.writes.values()], self.table.paths.root)
        self.writes = {}


def rewrite_parallel(
    table: TableStore,
    targets: list[BucketWrite],
    rewrite: Callable[[BucketWrite], object],
    job_bytes: Callable[[BucketWrite], int],
    beside_buffer: bool = False,
) -> None:
    """Run ``rewrite`` (a compaction, an index rewrite) on each bucket, in parallel: as many at
    once as the table's jobs budget affords rewrites of the largest ``job_bytes`` (``beside_buffer``:
    while the process holds a write buffer, which leaves them half of it)."""
    if not targets:
        return
    budget = table.schema.core_options.jobs_budget(beside_buffer)
    sizes = map_reads(job_bytes, targets, parallel=not table.io.is_local)  # may read footers
    map_parallel(rewrite, targets, JobMemory(max(sizes), budget))


def _check_name_lengths(table: TableStore, bucket_path: str) -> None:
    """Local and HDFS file names have at most 255 bytes: refuse a partition value whose
    directory would be longer before any file is written (object stores take any)."""
    if not (table.io.is_local or table.io.is_hdfs):
        return
    for part in bucket_path.split("/"):
        if len(part.encode()) > MAX_FILE_NAME_BYTES:
            column = part.split("=", 1)[0]
            raise InvalidArgumentError(
                f"table {table.name}: partition directory {part[:40]}... would be "
                f"{len(part.encode())} bytes, more than the {MAX_FILE_NAME_BYTES} a file name has on "
                f"this filesystem; use shorter values for partition column {column!r}"
            )
