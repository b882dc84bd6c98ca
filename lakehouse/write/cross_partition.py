"""Cross-partition upsert: a primary key that lacks some partition key, so a key can change
partition (Paimon's ``GlobalIndexAssigner``; such tables take ``bucket = -1``).

A writer keeps where every live key is - key -> (partition, bucket) - bootstrapped from the
snapshot it starts from by reading the full primary key of every bucket (all sorted runs, merged
by the table's engine), and routes each incoming row by the table's merge engine
(``ExistingProcessor``):

- deduplicate: the key's newest row wins; when it names another partition than the key's, a
  ``-D`` retracts the key from its old (partition, bucket) and the row goes to a bucket of the new
  partition (rows of the batch for partitions the key left again are superseded and dropped);
- partial-update, aggregation: rows join the key's existing row in its partition (their partition
  columns are rewritten to it), so nothing accumulated is lost;
- first-row: rows for another partition than the key's are dropped.

A key new to the table fills its partition's buckets in id order up to
``dynamic-bucket.target-row-num`` keys each, then opens the lowest free id (Paimon's
cross-partition ``BucketAssigner``). No HASH index files are written: the index lives with the
writer. Two writers could both place a new key, so the commit of a writer whose index is older
than the table's latest data fails instead (see ``TableCommit``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakehouse.bucket.channels import AssignerSplit
from lakehouse.bucket.dynamic import DynamicBucketOptions
from lakehouse.io.pool import map_parallel
from lakehouse.manifest import binary_row
from lakehouse.options import CROSS_PARTITION_UPSERT_INDEX_TTL, MergeEngineKind
from lakehouse.read.scan import bucket_splits
from lakehouse.read.table_read import TableRead
from lakehouse.rowkind import RowKind
from lakehouse.snapshot import Snapshot
from lakehouse.store.data_writer import creation_time_millis
from lakehouse.store.partitions import row_partitions
from lakehouse.write.rows import take_rows

if TYPE_CHECKING:
    from lakehouse.store.table_store import TableStore


class KeyLocations:
    """Key -> (partition, bucket) of one writer's cross-partition table, and the row router."""

    def __init__(self, table: TableStore, snapshot: Snapshot | None, split: AssignerSplit | None = None):
        schema = table.schema
        self.schema = schema
        self.split = split or AssignerSplit()
        self.key_names = list(schema.primary_keys)
        self.key_types = [f.type for f in schema.fields_named(self.key_names)]
        self.partition_names = list(schema.partition_keys)
        self._partition_schema = pa.schema([schema.arrow_schema.field(n) for n in self.partition_names])
        self.engine = schema.core_options.merge_engine
        self.target = DynamicBucketOptions.from_table(schema.core_options).target_row_num
        self.snapshot_id = snapshot.id if snapshot is not None else 0
        self._partition_ids: dict[bytes, int] = {}
        self._partition_values: list[pa.Table] = []  # one row per partition id
        self._values_table: pa.Table | None = None
        self._counts: list[dict[int, int]] = []  # per partition id: bucket -> keys
        self.keys = pa.chunked_array([], pa.large_binary())
        self.partition = np.empty(0, np.int32)
        self.bucket = np.empty(0, np.int32)
        if snapshot is not None:
            self._bootstrap(table, snapshot)

    # ---- bootstrap ---------------------------------------------------------------------------

    def _bootstrap(self, table: TableStore, snapshot: Snapshot) -> None:
        """Read the full primary key of every live key, bucket by bucket (``IndexBootstrap``)."""
        ttl = table.schema.core_options.duration_ms(CROSS_PARTITION_UPSERT_INDEX_TTL)
        now = creation_time_millis()
        splits = [
            s
            for s in bucket_splits(table, snapshot, table.live_entries(snapshot))
            if self.split.owns(np.array([s.bucket]))[0]
            and (ttl is None or any(f.creation_time is None or f.creation_time + ttl >= now for f in s.files))
        ]
        columns = list(dict.fromkeys([*self.key_names, *self.partition_names]))
        reader = TableRead(table, columns)
        keys, partitions, buckets = [], [], []
        read = map_parallel(reader.read_split, splits, reader.memory(splits, beside_buffer=True))
        for split, rows in zip(splits, read, strict=True):
            if rows.num_rows == 0:
                continue
            part = self._register(split.partition, rows.slice(0, 1))
            keys.append(self._encode(rows))
            partitions.append(np.full(rows.num_rows, part, np.int32))
            buckets.append(np.full(rows.num_rows, split.bucket, np.int32))
            counts = self._counts[part]
            counts[split.bucket] = counts.get(split.bucket, 0) + rows.num_rows
        if keys:
            self.keys = pa.chunked_array(keys, pa.large_binary())
            self.partition, self.bucket = np.concatenate(partitions), np.concatenate(buckets)

    def _register(self, partition: bytes, values: pa.Table) -> int:
        found = self._partition_ids.get(partition)
        if found is None:
            found = self._partition_ids[partition] = len(self._partition_values)
            self._partition_values.append(values.select(self.partition_names).cast(self._partition_schema))
            self._counts.append({})
            self._values_table = None
        return found

    def _encode(self, rows: pa.Table) -> pa.Array:
        """Each row's full primary key as BinaryRow bytes: exact, hashable, one Arrow column."""
        columns = [rows.column(k).combine_chunks() for k in self.key_names]
        encoded = binary_row.encode_rows(columns, self.key_types, rows.num_rows)
        buffers = [None, pa.py_buffer(encoded.offsets), pa.py_buffer(encoded.buffer)]
        return pa.Array.from_buffers(pa.large_binary(), len(encoded), buffers)

    # ---- routing -----------------------------------------------------------------------------

    def route(self, data: pa.Table, kinds: pa.Array) -> tuple[pa.Table, pa.Array, np.ndarray]:
        """The rows to write (partition columns possibly rewritten, retractions appended), their
        kinds and buckets; updates the key locations. Rows of a key are taken in arrival order."""
        n = data.num_rows
        parts = row_partitions(data, self.schema)
        local = np.array(
            [self._register(p, parts.values.slice(i, 1)) for i, p in enumerate(parts.partitions)], np.int32
        )
        row_part = local[parts.ids]
        encoded = pc.dictionary_encode(self._encode(data))
        key_of_row = np.asarray(encoded.indices, np.int64)
        num_keys = len(encoded.dictionary)
        found = self._lookup(encoded.dictionary)
        has_old = found >= 0
        old_part, old_bucket = np.full(num_keys, -1, np.int32), np.full(num_keys, -1, np.int32)
        old_part[has_old], old_bucket[has_old] = self.partition[found[has_old]], self.bucket[found[has_old]]

        order = np.argsort(key_of_row, kind="stable")
        starts = np.searchsorted(key_of_row[order], np.arange(num_keys))
        ends = np.append(starts[1:], n)
        first_part, last_part = row_part[order[starts]], row_part[order[ends - 1]]
        moved = np.zeros(num_keys, bool)
        if self.engine == MergeEngineKind.DEDUPLICATE:
            target = last_part
            moved = has_old & (old_part != target)
            # keep each key's last run of rows for its final partition
            positions = np.arange(n)
            elsewhere = np.where(row_part[order] != target[key_of_row[order]], positions, -1)
            last_elsewhere = np.maximum.reduceat(elsewhere, starts)
            keep = np.empty(n, bool)
            keep[order] = positions > last_elsewhere[key_of_row[order]]
        else:
            target = np.where(has_old, old_part, first_part)
            keep = (
                np.ones(n, bool)
                if self.engine != MergeEngineKind.FIRST_ROW
                else row_part == target[key_of_row]
            )

        bucket = np.where(has_old & ~moved, old_bucket, -1).astype(np.int32)
        for p, b in zip(old_part[moved].tolist(), old_bucket[moved].tolist(), strict=True):
            self._counts[p][b] -= 1
        fresh = np.flatnonzero(bucket < 0)
        bucket[fresh] = self._assign(target[fresh])
        self._remember(encoded.dictionary, found, target, bucket)

        rows = np.flatnonzero(keep)
        out = self._in_partitions(take_rows(data, rows), target[key_of_row[rows]], row_part[rows])
        out_kinds, out_buckets = kinds.take(pa.array(rows)), bucket[key_of_row[rows]]
        if moved.any():  # retract the moved keys from where they were
            last_rows = order[ends - 1][moved]
            retract = take_rows(data, last_rows)
            retract = self._in_partitions(retract, old_part[moved], row_part[last_rows])
            out = pa.concat_tables([out, retract])
            out_kinds = pa.concat_arrays(
                [out_kinds, pa.array(np.full(len(last_rows), RowKind.DELETE, np.int8))]
            )
            out_buckets = np.concatenate([out_buckets, old_bucket[moved].astype(np.int32)])
        return out, out_kinds, out_buckets

    def _lookup(self, keys: pa.Array) -> np.ndarray:
        """Index position of each key, -1 for keys the table does not have."""
        found = np.full(len(keys), -1, np.int64)
        if len(self.keys) == 0 or len(keys) == 0:
            return found
        hits = pc.index_in(self.keys, value_set=keys)
        positions = np.asarray(pc.fill_null(hits, -1).combine_chunks(), np.int64)
        at = np.flatnonzero(positions >= 0)
        found[positions[at]] = at
        return found

    def _remember(self, keys: pa.Array, found: np.ndarray, partition: np.ndarray, bucket: np.ndarray) -> None:
        old = found >= 0
        self.partition[found[old]] = partition[old]
        self.bucket[found[old]] = bucket[old]
        new = ~old
        if new.any():
            self.keys = pa.chunked_array([*self.keys.chunks, keys.filter(pa.array(new))], pa.large_binary())
            self.partition = np.concatenate([self.partition, partition[new].astype(np.int32)])
            self.bucket = np.concatenate([self.bucket, bucket[new]])

    def _assign(self, partitions: np.ndarray) -> np.ndarray:
        """Buckets for keys new to their partition, in key order: existing buckets below the
        target fill first (ascending id), then the lowest free ids this writer owns."""
        out = np.empty(len(partitions), np.int32)
        order = np.argsort(partitions, kind="stable")
        sorted_parts = partitions[order]
        bounds = np.flatnonzero(np.diff(sorted_parts, prepend=-1, append=-1))
        for start, end in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True):
            out[order[start:end]] = self._fill(int(sorted_parts[start]), end - start)
        return out

    def _fill(self, partition: int, n: int) -> np.ndarray:
        counts = self._counts[partition]
        taken: list[np.ndarray] = []
        for b in sorted(counts):
            room = min(self.target - counts[b], n) if self.split.owns(np.array([b]))[0] else 0
            if room > 0:
                taken.append(np.full(room, b, np.int32))
                counts[b] += room
                n -= room
        b = self.split.assign_id % self.split.num_assigners
        while n > 0:
            if b not in counts:
                room = min(self.target, n)
                taken.append(np.full(room, b, np.int32))
                counts[b] = room
                n -= room
            b += self.split.num_assigners
        return np.concatenate(taken) if taken else np.empty(0, np.int32)

    def _in_partitions(self, rows: pa.Table, target: np.ndarray, current: np.ndarray) -> pa.Table:
        """``rows`` with their partition columns set to the ``target`` partitions."""
        if np.array_equal(target, current):
            return rows
        if self._values_table is None:
            self._values_table = pa.concat_tables(self._partition_values)
        values = self._values_table.take(pa.array(target))
        for name in self.partition_names:
            i = rows.schema.get_field_index(name)
            rows = rows.set_column(i, rows.schema.field(i), values.column(name))
        return rows
