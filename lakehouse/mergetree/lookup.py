"""Finding older versions of a compaction's keys in the levels it does not touch (``LookupLevels``).

Readers of deletion-vector and first-row tables skip level 0 and never merge levels, so a key
may have only one visible version above level 0; ``changelog-producer=lookup`` needs each key's
previous version to write its changelog. A compaction that brings level-0 rows up therefore
looks the output keys that have no version above level 0 among its inputs up in the runs above
its output level (the lowest level holding a key has its newest version). With deletion vectors
the found row is marked deleted; the compaction merges it into the output or, for first-row,
drops the new row, since the older one came first.

The output and every level are sorted by key, so the lookup is a streaming merge-join: each
level is read once, in batches, in step with the output, and files entirely below the output's
current key are skipped unread. Only key columns are read when no old values are needed.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Protocol

import numpy as np
import pyarrow as pa

from lakehouse.format import parquet
from lakehouse.manifest.entries import DataFileMeta
from lakehouse.mergetree.keyorder import comparable_keys
from lakehouse.mergetree.levels import KeyRanges, SortedRun
from lakehouse.mergetree.stream import count_at_most, first_key, last_key
from lakehouse.store.data_reader import iter_data_file

if TYPE_CHECKING:
    from lakehouse.deletionvectors.maintainer import BucketDeletionVectors
    from lakehouse.mergetree.engine import MergeEngine
    from lakehouse.store.table_store import TableStore

POSITION = "_LOOKUP_POSITION"  # row position in its file
FILE = "_LOOKUP_FILE"  # index of its file in Lookup.files
_LEFT, _RIGHT = "_LOOKUP_LEFT", "_LOOKUP_RIGHT"


class LookupBucket(Protocol):
    """What a lookup needs of the bucket being compacted (a ``BucketCompactor`` has it)."""

    table: TableStore
    engine: MergeEngine
    ranges: KeyRanges
    deletion_vectors: BucketDeletionVectors | None

    @property
    def bucket_path(self) -> str: ...


class Lookup:
    """Finds older versions of merged compaction output in the runs above the output level."""

    def __init__(self, bucket: LookupBucket, runs: list[SortedRun], batch_rows: int, values: bool) -> None:
        self.bucket = bucket
        self.key = bucket.engine.key
        self.values = values  # read old rows whole, not only their keys
        self.files: list[DataFileMeta] = [f for run in runs for f in run.files]
        self.batch_rows = batch_rows
        self._low: tuple | None = None
        self.cursors = []
        start = 0
        for run in runs:
            self.cursors.append(_Cursor(self, start, list(run.files)))
            start += len(run.files)

    def find(self, merged: pa.Table, wanted: np.ndarray) -> tuple[np.ndarray, pa.Table] | None:
        """For the rows of ``merged`` (one per key, key order) where ``wanted``, the newest older
        version above (the lowest level holding the key): their indices into ``merged`` and those
        rows; None where no row has one. With deletion vectors the found rows are marked deleted.
        Every call must come with the next rows of the output: the runs are read in step with it."""
        if not merged.num_rows or not self.cursors:
            return None
        self._low = first_key(merged, self.key)
        bound = last_key(merged, self.key)
        taken = [c.take_until(bound) for c in self.cursors]
        found = [t for t in taken if t is not None and t.num_rows]
        if not found or not wanted.any():
            return None
        candidates = pa.concat_tables(found) if len(found) > 1 else found[0]
        asked = np.flatnonzero(wanted)
        rows, hits = _matches(merged.take(pa.array(asked)), candidates, self.key)
        if not len(rows):
            return None
        # several levels may hold the key (without deletion vectors): the lowest one is the newest
        order = np.lexsort((np.asarray(candidates.column(FILE))[hits], rows))
        rows, hits = rows[order], hits[order]
        first = np.concatenate([[True], rows[1:] != rows[:-1]])
        rows, hits = rows[first], hits[first]
        old = candidates.take(pa.array(hits))
        self._delete_older(old)
        return asked[rows], old.drop_columns([FILE, POSITION])

    def _delete_older(self, old: pa.Table) -> None:
        """Mark the found rows deleted in their files' deletion vectors (tables that keep them)."""
        vectors = self.bucket.deletion_vectors
        if vectors is None:
            return
        files = np.asarray(old.column(FILE))
        positions = np.asarray(old.column(POSITION))
        for i in np.unique(files).tolist():
            vectors.delete_rows(self.files[i].file_name, positions[files == i])

    def read(self, f: DataFileMeta, index: int) -> Iterator[pa.Table]:
        """Rows of one lookup file not yet deleted, with their file index and position."""
        bucket = self.bucket
        table = bucket.table
        fields = list(table.schema.fields) if self.values else table.schema.fields_named(self.key)
        system = [parquet.SEQUENCE_NUMBER, parquet.VALUE_KIND] if self.values else []
        vectors = bucket.deletion_vectors
        deletion = None if vectors is None else vectors.get(f.file_name)
        for batch in iter_data_file(
            table, bucket.bucket_path, f, fields, system, self.batch_rows, deletion, POSITION
        ):
            yield batch.append_column(FILE, pa.array(np.full(batch.num_rows, index, np.int32)))

    def below_output(self, f: DataFileMeta) -> bool:
        """Whether every key of ``f`` precedes the output's current key (nothing there can match)."""
        return self._low is not None and self.bucket.ranges.max(f) < self._low


class _Cursor:
    """One run's rows in key order, consumed as the compaction output advances."""

    def __init__(self, lookup: Lookup, first_index: int, files: list[DataFileMeta]) -> None:
        self.lookup = lookup
        self.files = files
        self.first_index = first_index
        self.next_file = 0
        self.batches: Iterator[pa.Table] | None = None
        self.buffer: pa.Table | None = None

    def take_until(self, bound: tuple) -> pa.Table | None:
        """Rows with key <= ``bound`` not taken before; the rest stays buffered."""
        out = []
        while True:
            if self.buffer is None or not self.buffer.num_rows:
                self.buffer = self._next_batch()
                if self.buffer is None:
                    break
            n = count_at_most(self.buffer, self.lookup.key, bound)
            if n:
                out.append(self.buffer.slice(0, n))
            self.buffer = self.buffer.slice(n)
            if self.buffer.num_rows:
                break
        if not out:
            return None
        return pa.concat_tables(out) if len(out) > 1 else out[0]

    def _next_batch(self) -> pa.Table | None:
        while True:
            if self.batches is not None:
                batch = next(self.batches, None)
                if batch is not None:
                    return batch
                self.batches = None
            if self.next_file == len(self.files):
                return None
            f = self.files[self.next_file]
            index = self.first_index + self.next_file
            self.next_file += 1
            if not self.lookup.below_output(f):
                self.batches = self.lookup.read(f, index)


def _matches(merged: pa.Table, candidates: pa.Table, key: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Row indices (into ``merged``, into ``candidates``) of the pairs with equal keys."""
    left = comparable_keys(merged, key)
    left = left.append_column(_LEFT, pa.array(np.arange(merged.num_rows, dtype=np.int64)))
    right = comparable_keys(candidates, key)
    right = right.append_column(_RIGHT, pa.array(np.arange(candidates.num_rows, dtype=np.int64)))
    joined = left.join(right, keys=key, join_type="inner")
    return np.asarray(joined.column(_LEFT)), np.asarray(joined.column(_RIGHT))
