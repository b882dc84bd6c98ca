"""Proving a table's indexes and keys tell the truth, beyond file indexes
(:func:`lakehouse.ops.file_index.verify_file_indexes`):

- deletion vectors: every vector belongs to a live data file of its bucket, its cardinality is
  the one the index manifest records, and it deletes only rows the file has;
- bucket placement: with fixed buckets every row is in the bucket its bucket key hashes to; with
  dynamic buckets every live key's hash is in the HASH file of the bucket its rows are in, no
  hash sits in two buckets of a partition, and each HASH file holds as many hashes as recorded;
- primary key: no key is visible twice in a read of the table (across buckets and, for
  cross-partition tables, across partitions).

Each returns an :class:`IndexReport` (``ok``, ``files_checked``, ``problems``); problems name
the file or key.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakehouse.bucket import hash_index
from lakehouse.bucket.dynamic import key_hashes
from lakehouse.bucket.fixed import fixed_buckets
from lakehouse.deletionvectors.index_file import DELETION_VECTORS, read_all_vectors
from lakehouse.errors import CorruptFileError
from lakehouse.io.pool import map_parallel
from lakehouse.manifest.entries import IndexManifestEntry, ManifestEntry
from lakehouse.mergetree.keyorder import comparable_keys
from lakehouse.ops.file_index import IndexReport
from lakehouse.read import scan
from lakehouse.read.scan import bucket_splits
from lakehouse.read.table_read import TableRead
from lakehouse.snapshot import Snapshot
from lakehouse.store.data_reader import read_data_file
from lakehouse.store.partitions import Partitions, in_partitions, partition_values

if TYPE_CHECKING:
    from lakehouse.store.table_store import TableStore

_SHOWN = 5  # duplicate keys named in a report


def verify_deletion_vectors(
    table: TableStore, snapshot_id: int | None = None, partitions: Partitions = None
) -> IndexReport:
    """Check every deletion vector of a snapshot (default latest; of ``partitions``, default all)
    against its data file."""
    snapshot = table.snapshot(snapshot_id)
    if snapshot is None:
        return IndexReport(True, 0)
    live = {(e.partition, e.bucket, e.file.file_name): e.file for e in _live(table, snapshot, partitions)}
    entries = [
        e for e in _indexes(table, snapshot, partitions) if e.index_file.index_type == DELETION_VECTORS
    ]

    def check(entry: IndexManifestEntry) -> list[str]:
        meta = entry.index_file
        path = table.paths.index_file(meta.file_name, meta.external_path)
        try:
            vectors = read_all_vectors(table.io, path, meta)
        except CorruptFileError as e:
            return [str(e)]
        problems = []
        for r in meta.dv_ranges or ():
            where = f"deletion vector of {table.bucket_path(entry.partition, entry.bucket)}/{r.data_file}"
            data_file = live.get((entry.partition, entry.bucket, r.data_file))
            vector = vectors[r.data_file]
            if data_file is None:
                problems.append(f"{where} in {meta.file_name}: no such live data file in its bucket")
                continue
            if r.cardinality is not None and r.cardinality != vector.cardinality:
                problems.append(
                    f"{where}: holds {vector.cardinality} rows, the index manifest says {r.cardinality}"
                )
            positions = vector.positions()
            if len(positions) and int(positions.max()) >= data_file.row_count:
                problems.append(
                    f"{where}: deletes row {int(positions.max())}, the file has {data_file.row_count} rows"
                )
        return problems

    problems = [p for found in map_parallel(check, entries) for p in found]
    return IndexReport(not problems, len(entries), problems)


def verify_buckets(
    table: TableStore, snapshot_id: int | None = None, partitions: Partitions = None
) -> IndexReport:
    """Check that every row (of ``partitions``, default all) is in the bucket the table's bucket
    mode gives it."""
    schema = table.schema
    snapshot = table.snapshot(snapshot_id)
    if snapshot is None:
        return IndexReport(True, 0)
    if schema.core_options.bucket > 0:
        return _verify_fixed_buckets(table, snapshot, partitions)
    if schema.primary_keys and not schema.cross_partition_update:
        return _verify_hash_index(table, snapshot, partitions)
    return IndexReport(True, 0)  # unaware append tables and cross-partition tables (no HASH files)


def _live(table: TableStore, snapshot: Snapshot, partitions: Partitions) -> list[ManifestEntry]:
    return _in(table, table.live_entries(snapshot), partitions)


def _indexes(table: TableStore, snapshot: Snapshot, partitions: Partitions) -> list[IndexManifestEntry]:
    return _in(table, table.index_entries(snapshot), partitions)


def _in(table: TableStore, items: list, partitions: Partitions) -> list:
    """The entries or splits in ``partitions``."""
    return in_partitions(table.schema, table.name, items, partitions, "verify partitions")


def _verify_fixed_buckets(table: TableStore, snapshot: Snapshot, partitions: Partitions) -> IndexReport:
    schema = table.schema
    names = list(schema.bucket_keys)
    types = [f.type for f in schema.fields_named(names)]
    count = schema.core_options.bucket

    def check(entry: ManifestEntry) -> list[str]:
        meta = entry.file
        if meta.row_count == 0:
            return []
        label = f"{table.bucket_path(entry.partition, entry.bucket)}/{meta.file_name}"
        rows = read_data_file(table, table.bucket_path(entry.partition, entry.bucket), meta,
                              schema.fields_named(names), [])  # fmt: skip
        buckets = fixed_buckets([rows.column(n) for n in names], types, count)
        wrong = np.flatnonzero(buckets != entry.bucket)
        if len(wrong) == 0:
            return []
        row, bucket = rows.slice(int(wrong[0]), 1).to_pylist()[0], int(buckets[wrong[0]])
        return [f"{label}: {len(wrong)} rows belong to other buckets, e.g. {row} to bucket {bucket}"]

    entries = _live(table, snapshot, partitions)
    problems = [p for found in map_parallel(check, entries) for p in found]
    return IndexReport(not problems, len(entries), problems)


def _verify_hash_index(table: TableStore, snapshot: Snapshot, partitions: Partitions) -> IndexReport:
    """The HASH files of a dynamic-bucket table against where each key's rows are."""
    schema = table.schema
    hash_files = {
        (e.partition, e.bucket): e.index_file
        for e in _indexes(table, snapshot, partitions)
        if e.index_file.index_type == hash_index.HASH_INDEX
    }
    splits = {
        (s.partition, s.bucket): s for s in bucket_splits(table, snapshot, _live(table, snapshot, partitions))
    }
    key = list(schema.trimmed_primary_keys)
    key_types = [f.type for f in schema.fields_named(key)]
    reader = TableRead(table, key)

    def check(where: tuple[bytes, int]) -> tuple[list[str], np.ndarray]:
        label = table.bucket_path(*where)
        split = splits.get(where)
        present = np.zeros(0, np.int32)
        if split is not None:
            present = key_hashes(reader.read_split(split), key, key_types)
        meta = hash_files.get(where)
        if meta is None:
            return ([f"{label}: {len(present)} keys but no HASH index file"] if len(present) else []), present
        try:
            indexed = hash_index.read(table.io, table.paths, meta)
        except CorruptFileError as e:
            return [str(e)], present
        problems = []
        if len(indexed) != meta.row_count:
            problems.append(
                f"{label}: HASH file {meta.file_name} holds {len(indexed)} hashes, not {meta.row_count}"
            )
        missing = np.setdiff1d(present, indexed)
        if len(missing):
            problems.append(
                f"{label}: {len(missing)} key hashes are not in its HASH file, e.g. {int(missing[0])}"
            )
        return problems, indexed

    buckets = sorted(set(splits) | set(hash_files))
    found = map_parallel(check, buckets)
    problems = [p for bucket_problems, _ in found for p in bucket_problems]
    by_partition: dict[bytes, list[np.ndarray]] = {}
    for (partition, bucket), (_, indexed) in zip(buckets, found, strict=True):
        if (partition, bucket) in hash_files:
            by_partition.setdefault(partition, []).append(np.unique(indexed))
    for partition, arrays in by_partition.items():
        unique, counts = np.unique(np.concatenate(arrays), return_counts=True)
        if (counts > 1).any():
            problems.append(
                f"partition {partition_values(schema, partition)}: {int((counts > 1).sum())} key hashes are "
                f"in two buckets' HASH files, e.g. {int(unique[counts > 1][0])}"
            )
    return IndexReport(not problems, len(hash_files), problems)


def verify_primary_key(
    table: TableStore, snapshot_id: int | None = None, partitions: Partitions = None
) -> IndexReport:
    """Check that a read of the snapshot (of ``partitions``, default all) shows every primary key
    once."""
    schema = table.schema
    if not schema.primary_keys:
        return IndexReport(True, 0)
    snap, view = table.travel(snapshot_id)
    splits = _in(table, scan.plan(view, snap).splits, partitions)
    columns = list(dict.fromkeys([*schema.primary_keys, *schema.partition_keys]))
    key = list(schema.primary_keys) if schema.cross_partition_update else columns
    rows = TableRead(table, columns).to_arrow(splits)
    keys = comparable_keys(rows, key).append_column("_row", pa.array(np.arange(rows.num_rows)))
    counts = keys.group_by(key, use_threads=False).aggregate([([], "count_all"), ("_row", "min")])
    repeated = counts.filter(pc.greater(counts.column("count_all"), 1))
    files = sum(len(s.files) for s in splits)
    if repeated.num_rows == 0:
        return IndexReport(True, files)
    shown = rows.select(key).take(repeated.column("_row_min").slice(0, _SHOWN)).to_pylist()
    problem = f"{repeated.num_rows} primary keys are visible more than once, e.g. {shown}"
    return IndexReport(False, files, [problem])
