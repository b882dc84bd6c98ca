"""Dynamic buckets (``bucket = -1``) for one write: each key's bucket, and the HASH files to commit.

The assigner group (:mod:`lakehouse.bucket.dynamic`) loads a partition's HASH files from the
snapshot the writer started from the first time a batch touches the partition. At commit
preparation every bucket that received new keys gets a new HASH file holding all its key
hashes; the commit replaces the bucket's previous file with it, and fails with a conflict if
another writer replaced that file first (its keys would otherwise be lost from the index).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from lakehouse.bucket import hash_index
from lakehouse.bucket.dynamic import BucketAssignerGroup, DynamicBucketOptions, key_hashes
from lakehouse.manifest.entries import IndexFileMeta, IndexManifestEntry
from lakehouse.paths import FileNamer

if TYPE_CHECKING:
    from lakehouse.table.table import Table


@dataclass(frozen=True)
class HashFileChange:
    """A bucket's new HASH file and the one it replaces (None: the bucket had none)."""

    new: IndexFileMeta
    replaced: IndexFileMeta | None


class DynamicBuckets:
    """Assigns buckets to the keys a writer receives, partition by partition."""

    def __init__(self, table: Table, hash_files: list[IndexManifestEntry]) -> None:
        self.table = table
        schema = table.schema
        self.key = list(schema.trimmed_primary_keys)
        self.key_types = [f.type for f in schema.fields_named(self.key)]
        self.files: dict[tuple[bytes, int], IndexFileMeta] = {
            (e.partition, e.bucket): e.index_file for e in hash_files
        }
        self.assigner = BucketAssignerGroup(DynamicBucketOptions.from_table(schema.core_options), self._load)

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
            return self.assigner.assign(partitions[0], int(partition_hashes[0]), hashes)
        buckets = np.empty(data.num_rows, np.int32)
        order = np.argsort(part_ids, kind="stable")
        bounds = np.searchsorted(part_ids[order], np.arange(len(partitions) + 1))
        for p, (start, end) in enumerate(zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True)):
            rows = order[start:end]
            buckets[rows] = self.assigner.assign(partitions[p], int(partition_hashes[p]), hashes[rows])
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
