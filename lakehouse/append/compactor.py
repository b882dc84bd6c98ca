"""Compaction of one append-table (partition, bucket): small files merged into files of about
``target-file-size``, or every file rewritten in a sort order (clustering).

What is picked follows Paimon. Bucket-unaware tables as ``AppendCompactCoordinator`` plans a
batch job: files smaller than ``compaction_file_size`` (``target-file-size`` times
``compaction.small-file-ratio``), by size, packed into bins that are rewritten once they hold
more than one file and twice the target size (each file counted with
``source.split.open-file-cost``); the last bin only if it has ``compaction.min.file-num`` files.
Fixed-bucket tables as ``BucketedAppendCompactManager.pickCompactBefore``: the bucket's files in
sequence order, a window sliding over them until it holds ``compaction.min.file-num`` files before
reaching twice the target size; a dedicated compaction repeats that over the files after each
window, the last output joining them if it is still small. ``full`` rewrites every file of a
bucket that has more than one.

A rewrite streams its inputs in sequence order, batch by batch, into rolling files (level 0,
``FileSource.COMPACT``) with file indexes, numbered from the first input's sequence number on
(``AppendOnlyWriter``'s compact rewriter). Memory holds one row group (at most 64 MB) and the
open file's buffers, or, when sorting, one chunk of up to ``write-buffer-size``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from lakehouse.append.sort_keys import SortOrder
from lakehouse.errors import UnsupportedFeatureError
from lakehouse.manifest.entries import DataFileMeta, FileSource
from lakehouse.mergetree.compactor import BATCH_ROWS, ROW_GROUP_BYTES, BucketFiles, gathered
from lakehouse.options import SOURCE_SPLIT_OPEN_FILE_COST, CoreOptions
from lakehouse.store.data_reader import iter_data_file
from lakehouse.store.data_writer import BucketWriter, FileLayout, file_metas

if TYPE_CHECKING:
    from lakehouse.store.table_store import TableStore


@dataclass(frozen=True)
class AppendPicking:
    """What an append compaction rewrites, by the table's options."""

    bucketed: bool  # fixed buckets (else bucket-unaware)
    target_size: int
    small_size: int  # compactionFileSize
    min_files: int  # compaction.min.file-num
    open_cost: int  # source.split.open-file-cost

    @classmethod
    def of(cls, options: CoreOptions) -> AppendPicking:
        return cls(
            options.bucket > 0,
            options.target_file_size(False),
            options.compaction_file_size(False),
            options.compaction_min_file_num,
            options.memory(SOURCE_SPLIT_OPEN_FILE_COST),
        )

    def small_bins(self, files: list[DataFileMeta]) -> list[list[DataFileMeta]]:
        """Bucket-unaware: groups of small files to rewrite (``SubCoordinator.pack``)."""
        bins, current, size = [], [], 0
        for f in sorted((f for f in files if f.file_size < self.small_size), key=lambda f: f.file_size):
            current.append(f)
            size += f.file_size + self.open_cost
            if len(current) > 1 and size >= 2 * self.target_size:
                bins.append(current)
                current, size = [], 0
        if len(current) >= self.min_files:
            bins.append(current)
        return bins

    def window(self, queue: list[DataFileMeta]) -> tuple[list[DataFileMeta], list[DataFileMeta]]:
        """Fixed buckets: the next files to rewrite from ``queue`` (sequence order), and the files
        still queued after them (``BucketedAppendCompactManager.pickCompactBefore``)."""
        candidates: list[DataFileMeta] = []
        size = 0
        for i, f in enumerate(queue):
            candidates.append(f)
            size += f.file_size
            if len(candidates) >= self.min_files:
                return candidates, queue[i + 1 :]
            if size >= 2 * self.target_size:
                size -= candidates.pop(0).file_size
        return [], candidates

    def due(self, files: list[DataFileMeta]) -> bool:
        """Whether a compaction of these files of one bucket would rewrite any."""
        if self.bucketed:
            return bool(self.window(_by_sequence(files))[0])
        return bool(self.small_bins(files))


def _by_sequence(files: list[DataFileMeta]) -> list[DataFileMeta]:
    return sorted(files, key=lambda f: (f.min_sequence_number, f.file_name))


class AppendCompactor(BucketFiles):
    """The live files of one append (partition, bucket) and the rewrites of a compaction job;
    the counterpart of :class:`~lakehouse.mergetree.compactor.BucketCompactor` for append tables."""

    deletion_vectors = None  # append rewrites change no deletion vector (see _check_vectors)

    def __init__(
        self,
        table: TableStore,
        layout: FileLayout,
        partition: bytes,
        bucket: int,
        files: list[DataFileMeta],
        has_vectors: bool,
        buffer_size: int,
    ) -> None:
        self.table = table
        self.layout = layout
        self.partition = partition
        self.bucket = bucket
        self.files = list(files)
        self.has_vectors = has_vectors
        self.buffer_size = buffer_size
        self.before: list[DataFileMeta] = []  # committed files this compactor removed
        self.after: list[DataFileMeta] = []  # files it wrote
        self.changelog: list[DataFileMeta] = []  # append tables have none

    @cached_property
    def picking(self) -> AppendPicking:
        """Read from the options only when compacting: a data write never needs it."""
        return AppendPicking.of(self.table.schema.core_options)

    def job_bytes(self) -> int:
        """What a compaction of this bucket holds at most: the row groups being gathered and
        encoded."""
        return 2 * min(ROW_GROUP_BYTES, self.layout.target_size)

    def sort_job_bytes(self) -> int:
        """What a :meth:`sort` of this bucket holds at most: a chunk of ``write-buffer-size``, its
        sorted copy, and the row group being encoded."""
        return 2 * self.buffer_size + min(ROW_GROUP_BYTES, self.layout.target_size)

    def compact(self, full: bool = False) -> bool:
        """Rewrite what Paimon's picking selects (``full``: every file, if there are several).
        Returns whether anything changed."""
        if full:
            groups = [_by_sequence(self.files)] if len(self.files) > 1 else []
        elif not self.picking.bucketed:
            groups = self.picking.small_bins(self.files)
        else:
            return self._compact_windows()
        for group in groups:
            self._rewrite(group, None)
        return bool(groups)

    def _compact_windows(self) -> bool:
        queue = _by_sequence(self.files)
        changed = False
        while True:
            picked, queue = self.picking.window(queue)
            if not picked:
                return changed
            written = self._rewrite(picked, None)
            changed = True
            if written and written[-1].file_size < self.picking.small_size:
                queue = _by_sequence([*queue, written[-1]])

    def sort(self, order: SortOrder) -> bool:
        """Rewrite every file of the bucket with its rows in ``order``: sorted as a whole when they
        fit in ``write-buffer-size``, else in consecutive chunks of that size, each sorted and
        written as files of its own (memory stays bounded; the chunks' ranges may overlap)."""
        if not self.files:
            return False
        self._rewrite(_by_sequence(self.files), order)
        return True

    def _rewrite(self, files: list[DataFileMeta], order: SortOrder | None) -> list[DataFileMeta]:
        """Rewrite ``files`` (sequence order) into new files; ``order``: sorted in chunks."""
        self._check_vectors()
        next_sequence = files[0].min_sequence_number
        written: list[DataFileMeta] = []
        writer: BucketWriter | None = None
        chunks: Iterator[tuple[pa.Table, bool]]  # rows, and whether they start a new file
        try:
            if order is None:  # one Parquet row group per write
                size = min(ROW_GROUP_BYTES, self.layout.target_size)
                chunks = ((rows, False) for rows in gathered(self._batches(files), size))
            else:
                chunks = self._sorted_chunks(files, order)
            for rows, new_file in chunks:
                if writer is None or new_file:
                    if writer is not None:
                        written += file_metas(self.layout, writer.close())
                    writer = self._writer()
                sequence = pa.array(np.arange(next_sequence, next_sequence + rows.num_rows, dtype=np.int64))
                writer.write(rows, sequence, None)
                next_sequence += rows.num_rows
            if writer is not None:
                written += file_metas(self.layout, writer.close())
        except BaseException:
            if writer is not None:
                writer.abort()
            for f in written:
                self.delete(f)
            raise
        removed = set(files)
        self.files = [f for f in self.files if f not in removed] + written
        for f in files:
            if f in self.after:  # written earlier in this job, never committed
                self.after.remove(f)
                self.delete(f)
            else:
                self.before.append(f)
        self.after += written
        return written

    def _writer(self) -> BucketWriter:
        return BucketWriter(self.layout, self.partition, self.bucket, self.directory, 0, FileSource.COMPACT)

    def _batches(self, files: list[DataFileMeta]) -> Iterator[pa.Table]:
        """Every row of ``files`` in order, one batch at a time, under the current schema."""
        fields = list(self.table.schema.fields)
        for f in files:
            yield from iter_data_file(self.table, self.bucket_path, f, fields, [], BATCH_ROWS)

    def _sorted_chunks(self, files: list[DataFileMeta], order: SortOrder) -> Iterator[tuple[pa.Table, bool]]:
        """Chunks of up to ``write-buffer-size`` bytes, each sorted and starting new files."""
        pending: list[pa.Table] = []
        size = 0
        for batch in self._batches(files):
            pending.append(batch)
            size += batch.nbytes
            if size >= self.buffer_size:
                yield _sorted(pending, order), True
                pending, size = [], 0
        if pending:
            yield _sorted(pending, order), True

    def _check_vectors(self) -> None:
        if self.has_vectors:
            raise UnsupportedFeatureError(
                f"table {self.table.name}: bucket {self.bucket_path} has deletion vectors (written by "
                f"Apache Paimon), which this engine's append compaction does not rewrite; compact the "
                f"table with Apache Paimon (Java)"
            )

    def abort(self) -> None:
        """Delete every file this compactor wrote (nothing of it was committed)."""
        for f in self.after:
            self.delete(f)
        self.after = []


def _sorted(pieces: list[pa.Table], order: SortOrder) -> pa.Table:
    rows = pa.concat_tables(pieces)
    return rows.take(pa.array(order.sort_indices(rows)))
