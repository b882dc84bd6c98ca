"""Dynamic buckets (``bucket = -1``) for one write: each key's bucket, and the HASH files to commit.

A writer runs either every assigner of the table's ``dynamic-bucket.assigner-parallelism``
(:class:`~lakehouse.bucket.dynamic.BucketAssignerGroup`), or one assigner split of a job whose
writers each receive the rows of their own assigner channel (``RowRouter.route``) and write
only the buckets that assigner owns - Paimon's assigner tasks with the bucket writers in the same
task. Such writers never write a common bucket, so their commit messages go into one commit.

An assigner loads a partition's HASH files from the snapshot the writer started from the first
time a batch touches the partition (all of them, as Java's ``loadIndex``: a key of this assigner
may sit in a bucket a writer with another parallelism created). At commit preparation every
bucket that received new keys gets a new HASH file holding all its key hashes; the commit
replaces the bucket's previous file with it, and fails with a conflict if another writer
replaced that file first (its keys would otherwise be lost from the index).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from lakehouse.bucket import hash_index
from lakehouse.bucket.channels import AssignerSplit
from lakehouse.bucket.dynamic import (
    BucketAssignerGroup,
    DynamicBucketOptions,
    HashBucketAssigner,
    key_hashes,
)
from lakehouse.errors import InvalidOptionError
from lakehouse.manifest.entries import IndexFileMeta, IndexManifestEntry
from lakehouse.paths import FileNamer
from lakehouse.schema import TableSchema
from lakehouse.store.partitions import partition_values

if TYPE_CHECKING:
    from lakehouse.store.table_store import TableStore


@dataclass(frozen=True)
class HashFileChange:
    """A bucket's new HASH file and the one it replaces (None: the bucket had none)."""

    new: IndexFileMeta
    replaced: IndexFileMeta | None


class DynamicBuckets:
    """Assigns buckets to the keys a writer receives, partition by partition; with a ``split``,
    only to the keys of that assigner, and only buckets it owns."""

    def __init__(
        self, table: TableStore, hash_files: list[IndexManifestEntry], split: AssignerSplit | None = None
    ) -> None:
        self.table = table
        schema = table.schema
        self.key = list(schema.trimmed_primary_keys)
        self.key_types = [f.type for f in schema.fields_named(self.key)]
        self.files: dict[tuple[bytes, int], IndexFileMeta] = {
            (e.partition, e.bucket): e.index_file for e in hash_files
        }
        options = DynamicBucketOptions.from_table(schema.core_options)
        self.split = split
        self.assigner: BucketAssignerGroup[bytes] | HashBucketAssigner[bytes]
        if split is None:
            self.assigner = BucketAssignerGroup(options, self._load)
        elif not split.owns_exclusively:
            raise InvalidOptionError(
                f"table {table.name}: {split.num_channels} writers with {split.num_assigners} assigners per "
                f"partition would share bucket ids; use a multiple of {split.num_assigners} writers "
                f"(dynamic-bucket.initial-buckets), or one"
            )
        else:
            self.assigner = HashBucketAssigner(options, split, self._load)

    def _load(self, partition: bytes) -> list[tuple[int, np.ndarray]]:
        """(bucket, key hashes) of every HASH file of ``partition``, in index-manifest order."""
        io, paths = self.table.io, self.table.paths
        files = [(b, meta) for (p, b), meta in self.files.items() if p == partition]
        return [(b, hash_index.read(io, paths, meta)) for b, meta in files]

    def assign(
        self, data: pa.Table, part_ids: np.ndarray, partitions: list[bytes], partition_hashes: np.ndarray
    ) -> np.ndarray:
        """The bucket of every row (int32); rows of one partition are assigned as one batch."""
        hashes = key_hashes(data, self.key, self.key_types)
        if len(partitions) == 1:
            return self._assign(partitions[0], int(partition_hashes[0]), hashes)
        buckets = np.empty(data.num_rows, np.int32)
        order = np.argsort(part_ids, kind="stable")
        bounds = np.searchsorted(part_ids[order], np.arange(len(partitions) + 1))
        for p, (start, end) in enumerate(zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True)):
            rows = order[start:end]
            buckets[rows] = self._assign(partitions[p], int(partition_hashes[p]), hashes[rows])
        return buckets

    def _assign(self, partition: bytes, partition_hash: int, hashes: np.ndarray) -> np.ndarray:
        """The buckets of one partition's keys; a split writer refuses a key living in a bucket
        another assigner owns (that assigner's writer may write the bucket too)."""
        buckets = self.assigner.assign(partition, partition_hash, hashes)
        if self.split is None:
            return buckets
        foreign = np.unique(buckets[~self.split.owns(buckets)])
        if len(foreign):
            schema = self.table.schema
            raise InvalidOptionError(
                f"table {self.table.name}, partition {partition_values(schema, partition)}: keys of assigner "
                f"{self.split.assign_id} (of {self.split.num_channels}) live in buckets {foreign.tolist()}, "
                f"which other assigners own - the table's keys were bucketed with another "
                f"dynamic-bucket.assigner-parallelism or initial-buckets; write with the parallelism the "
                f"table was written with, or with one writer"
            )
        return buckets

    def write_changes(self, names: FileNamer) -> dict[tuple[bytes, int], HashFileChange]:
        """Write a new HASH file for every bucket that received new keys."""
        io, paths = self.table.io, self.table.paths
        return {
            (u.partition, u.bucket): HashFileChange(
                hash_index.write(io, paths, names, u.hashes), self.files.get((u.partition, u.bucket))
            )
            for u in self.assigner.take_changes()
        }


def assigner_splits(schema: TableSchema, num_writers: int) -> list[AssignerSplit]:
    """The assigner split of each of ``num_writers`` writers of a dynamic-bucket table."""
    return AssignerSplit.tasks(
        num_writers, DynamicBucketOptions.from_table(schema.core_options).initial_buckets
    )
