"""Reading splits: data files evolved to the current schema, merged per key, filtered, projected.

Every file is read under the schema it was written with and matched to the current columns by
field id: renamed columns keep their data, dropped ones disappear, added ones read as nulls,
widened ones are cast (``SchemaEvolutionUtil``). Primary-key buckets merge all their sorted runs
with the table's merge engine - for deduplicate the row with the highest sequence number wins,
ties going to the later file - and then drop deleted keys; ``changelog-producer=lookup`` tables
that combine versions merge only a key's level-0 rows and its lowest level above 0. The filter
is applied after the merge, so it can never resurrect a stale version of a row.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Generator, Iterator, Sequence
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
from pyroaring import BitMap

from lakehouse.errors import SchemaMismatchError
from lakehouse.format import parquet
from lakehouse.format.dictionaries import concat, decoded
from lakehouse.io.cores import usable_cores
from lakehouse.io.memory import JobMemory
from lakehouse.io.pool import map_parallel, map_reads, map_streams, parallel_workers
from lakehouse.io.read_ahead import map_ahead
from lakehouse.manifest.entries import DataFileMeta
from lakehouse.mergetree.compactor import DATA_COPIES, ahead_depth, read_runs
from lakehouse.mergetree.engine import ORDINAL, MergeEngine
from lakehouse.mergetree.groups import drop_retracts
from lakehouse.mergetree.keyorder import float_width
from lakehouse.mergetree.levels import KeyRanges, SortedRun, sections, sequenced
from lakehouse.mergetree.stream import merge_steps
from lakehouse.mergetree.versions import LEVEL, KeyLevels, lookup_merge, with_level
from lakehouse.options import SORT_SPILL_BUFFER_SIZE
from lakehouse.predicate import Predicate, bind, to_expression
from lakehouse.read.changes import read_changed
from lakehouse.read.raw_files import RawFile, deleted_rows, raw_files
from lakehouse.read.scan import Split
from lakehouse.rowkind import ROW_KIND, ROW_KIND_FIELD, inserts, short_strings
from lakehouse.schema import check_readable
from lakehouse.store.data_reader import file_decoded_bytes, iter_data_file
from lakehouse.types import arrow_field

if TYPE_CHECKING:
    from lakehouse.store.table_store import TableStore

_SYSTEM = [parquet.SEQUENCE_NUMBER, parquet.VALUE_KIND]
# rows of a batch read from a file (fewer: sort-spill-buffer-size), straight or by a merge: a
# streamed read of 10M rows in files of 2.5M peaked at 279 / 300 MB RSS (1 / 2 threads) with
# batches of 1M rows, 185 / 200 MB with these, and took as long on 2 threads, 4-7% less on 1. A
# merge's steps take 4x compaction's (BATCH_ROWS) as splits merge side by side (``stream``): each
# step's Python between Arrow's kernels holds the GIL, for which the splits' threads queued with
# the smaller ones (10M rows, 16 buckets of 2 runs on 2 cores: 0.49 s against 0.67-0.70 s)
READ_BATCH_ROWS = 1 << 18
# what a streamed merge holds at most, in shares of sort-spill-buffer-size: a batch per sorted run,
# as much again read ahead, and the two steps being merged from them
MERGE_COPIES = 4
# what it holds at its peak, in its runs' batches, measured (Arrow's allocator): a split of a 64k-row
# batch of 4.2 MB and a run of 6k rows held 27-29 MB; one of 64k-row batches of two runs of 500k and
# 50k rows (6.8 MB), 30 MB; one of 256k-row batches of a run of 625k rows (15.8 MB) and one of 6k, 45 MB
MERGE_PEAK = 6


class TableRead:
    """Reads splits of one table with a projection and a filter; picklable, reusable (Paimon's
    ``TableRead``)."""

    def __init__(
        self,
        table: TableStore,
        columns: list[str] | None = None,
        filter: Predicate | None = None,
        row_kinds: bool = False,
        changes: bool = False,
    ) -> None:
        """``row_kinds``: also return each row's kind (``+I``, ``+U``: the kind of the version
        that won the merge) as a last ``_row_kind`` column, as ``$audit_log`` shows it.
        ``changes``: the splits are changed files (an incremental read's), read as they were
        written, each row with the kind it was committed with."""
        self.table = table
        schema = table.schema
        names = schema.field_names
        columns = list(columns) if columns is not None else names
        unknown = [c for c in columns if c not in names]
        if unknown:
            raise SchemaMismatchError(f"table {table.name} has no columns {unknown}; columns are {names}")
        check_readable(schema, table.name, columns, filter.columns() if isinstance(filter, Predicate) else ())
        self.columns = columns
        self.filter = bind(filter, schema.arrow_types(), table.name) if filter is not None else None
        needed = set(columns) | (self.filter.columns() if self.filter is not None else set())
        self.key = list(schema.trimmed_primary_keys) if schema.primary_keys else []
        self.engine = MergeEngine(schema, table.name) if self.key else None
        self.lookup_merge = lookup_merge(schema)
        self.key_ranges = KeyRanges([schema.field(k).type for k in self.key], table.name)
        # other writers (pypaimon) may order NaN and signed zeros otherwise: such keys merge whole
        self.streams_merge = not any(float_width(t) for t in self.key_ranges.types)
        self.merge_bytes = schema.core_options.memory(SORT_SPILL_BUFFER_SIZE)
        if self.engine is not None:
            needed = self.engine.read_columns(needed)
        self.read_fields = [f for f in schema.fields if f.name in needed]
        self.carried = self.engine.carried(f.name for f in self.read_fields) if self.engine else []
        self.columns_schema = pa.schema([arrow_field(n, schema.field(n).type) for n in columns])
        self.row_kinds = row_kinds
        self.changes = changes
        self.output_schema = self.columns_schema.append(ROW_KIND_FIELD) if row_kinds else self.columns_schema

    def to_arrow(self, splits: list[Split]) -> pa.Table:
        """All rows of ``splits`` in one table (splits read in parallel)."""
        if not splits:
            return self.output_schema.empty_table()
        parts = map_parallel(self.read_split, splits, self.memory(splits))
        return parts[0] if len(parts) == 1 else pa.concat_tables(parts)

    def memory(self, splits: list[Split], beside_buffer: bool = False, ahead: int = 0) -> JobMemory:
        """What reading one of ``splits`` holds beside the rows it returns (and ``ahead`` bytes
        of them made before they are taken), and what all such reads of the process may hold
        together (``beside_buffer``: beside a write buffer, see ``CoreOptions.jobs_budget``). At
        most ``MERGE_COPIES`` x ``sort-spill-buffer-size`` (a batch per sorted run, each run's
        share of the buffer); less where the splits' files decode to less, as their footers
        record it, which are read only when that bound would leave cores idle (many splits on
        many cores: 16 buckets of 600k rows read 2 at a time under the bound). Splits merged
        whole (keyed by floating-point columns) may hold more."""
        bound = MERGE_COPIES * self.merge_bytes
        budget = self.table.schema.core_options.jobs_budget(beside_buffer)
        if budget // (bound + ahead) >= min(len(splits), usable_cores()):
            return JobMemory(bound + ahead, budget)
        sizes = map_reads(self._split_bytes, splits, parallel=not self.table.io.is_local)
        return JobMemory(min(bound, max(sizes, default=0)) + ahead, budget)

    def _split_bytes(self, split: Split) -> int:
        """What reading ``split`` holds (:meth:`memory`), from its files' footers: ``DATA_COPIES``
        batches of a file read straight (or of the whole split, merged whole), ``MERGE_PEAK``
        batches of each run of a streamed merge's widest section."""
        system = _SYSTEM if self.key else []
        table, path = self.table, split.bucket_path
        decoded = {id(f): file_decoded_bytes(table, path, f, self.read_fields, system) for f in split.files}

        def batch(f: DataFileMeta, most: int) -> int:
            return min(most, decoded[id(f)] * min(f.row_count, READ_BATCH_ROWS) // max(1, f.row_count))

        merges = self._merges(split)
        if self.changes or merges and not self.streams_merge:
            return DATA_COPIES * sum(decoded.values())
        if not merges:
            return DATA_COPIES * max(batch(f, self.merge_bytes) for f in split.files)
        held = 0
        for section in sections(list(split.files), self.key_ranges):
            share = self.merge_bytes // len(section)
            held = max(held, sum(max(batch(f, share) for f in run.files) for run in section))
        return MERGE_PEAK * held

    def to_arrow_batch_reader(self, splits: list[Split]) -> pa.RecordBatchReader:
        """The rows of ``splits``, split after split, a batch at a time (see :meth:`stream`)."""
        batches = (b for part in self.stream(splits) for b in part.to_batches())
        return pa.RecordBatchReader.from_batches(self.output_schema, batches)

    def stream(self, splits: Sequence[Split]) -> Iterator[pa.Table]:
        """The rows of ``splits``, split after split, a batch at a time (:meth:`batches`).

        Splits merged by key are read side by side, one per usable core as far as the memory
        budget affords (:meth:`memory`), each up to ``sort-spill-buffer-size`` of its rows ahead
        of the caller (:func:`map_streams`): a split's merge is a chain of steps that each wait
        on the last, which read-ahead threads overlap only in part (a 10M-row table of 16 buckets
        of two runs each, on 2 cores: 0.46-0.51 s so, 0.60-0.65 s a split at a time, 0.83-0.89 s
        on one core). Splits read whole decode their columns side by side on Arrow's threads
        instead, a split at a time: once a split has given its first batch, the next one is
        opened, so that its first batch is decoded by the time it is wanted."""
        if any(self._merges(split) for split in splits):
            ahead = self.merge_bytes
            memory = self.memory(list(splits), ahead=ahead)
            workers = parallel_workers(len(splits), memory)
            if workers > 1:
                yield from map_streams(self.batches, splits, memory, workers, _nbytes, ahead)
                return
        upcoming = iter(splits)
        first = next(upcoming, None)
        opened = None if first is None else self.batches(first)
        current: Generator[pa.Table] | None = None
        try:
            while opened is not None:
                current, opened = opened, None
                after = next(upcoming, None)
                for batch in current:
                    if opened is None and after is not None:
                        opened = self.batches(after)
                    yield batch
                if opened is None and after is not None:  # the split had no row
                    opened = self.batches(after)
        finally:
            for started in (current, opened):
                if started is not None:
                    started.close()

    def raw_files(self, split: Split) -> list[RawFile] | None:
        """The files of ``split`` for readers of other engines, None when its files are merged by
        key (:func:`~lakehouse.read.raw_files.raw_files`)."""
        return raw_files(self.table, split)

    def deleted_rows(self, file: RawFile) -> np.ndarray:
        """The positions of the rows of a raw file that its deletion vector deletes."""
        return deleted_rows(self.table, file)

    def read_split(self, split: Split, read_ahead: bool = True) -> pa.Table:
        """All rows of one split in one table (see :meth:`batches`)."""
        parts = list(self.batches(split, read_ahead))
        if not parts:
            return self.output_schema.empty_table()
        return parts[0] if len(parts) == 1 else pa.concat_tables(parts)

    def batches(self, split: Split, read_ahead: bool = True) -> Generator[pa.Table]:
        """The rows of one split a batch at a time, in bounded memory whatever the split's size:
        files are read a batch at a time, and a primary-key bucket's sorted runs are merged step
        by step in key order (:func:`merge_steps`), holding about one batch per run of a
        section (``sort-spill-buffer-size`` in all, as compaction's merges). Buckets keyed by
        floating-point columns are merged whole: a file another writer sorted may not follow
        this engine's order of NaN and signed zeros, which a streaming merge relies on.
        ``read_ahead``: a merge decodes the next batches and merges the next step on other
        threads while the caller uses the current one (:mod:`lakehouse.io.read_ahead`), as long
        as a core is spare (:func:`~lakehouse.io.pool.spare_core`: splits read in parallel may
        keep them all busy; how far: :func:`~lakehouse.mergetree.compactor.ahead_depth`);
        False: on the caller's thread alone."""
        return self._outputs(self._versions(split, read_ahead))

    def _merges(self, split: Split) -> bool:
        """Whether ``split`` is read by merging its files' versions of keys."""
        return bool(self.key) and not self.changes and not split.raw_convertible

    def _versions(self, split: Split, read_ahead: bool) -> Iterator[pa.Table]:
        """The rows of ``split`` before the filter and projection; a streamed merge's first runs
        start decoding at once."""
        if self.changes:
            return self._changed(split)
        if not self._merges(split):
            return self._raw(split)
        if self.streams_merge:
            return self._merged(split, read_ahead)
        return self._merged_whole(split)

    def _changed(self, split: Split) -> Iterator[pa.Table]:
        yield read_changed(self.table, split, self.read_fields)

    def _outputs(self, versions: Iterator[pa.Table]) -> Generator[pa.Table]:
        for data in versions:
            if self.filter is not None:
                data = data.filter(to_expression(self.filter))
            if data.num_rows:
                yield self._output(data)

    def _output(self, data: pa.Table) -> pa.Table:
        out = data.select(self.columns).cast(self.columns_schema)
        if self.changes:
            return out.append_column(ROW_KIND_FIELD, data.column(ROW_KIND)) if self.row_kinds else out
        if not self.row_kinds:
            return out
        if not self.key:
            return out.append_column(ROW_KIND_FIELD, inserts(out.num_rows))
        return out.append_column(ROW_KIND_FIELD, short_strings(data.column(parquet.VALUE_KIND)))

    def _raw(self, split: Split) -> Iterator[pa.Table]:
        """The rows of each file in turn; a primary-key file's retracts left out."""
        for i, meta in enumerate(split.files):
            retracts = self.key and meta.delete_row_count != 0
            for batch in self._file_batches(split, i):
                yield drop_retracts(batch) if retracts else batch

    def _merged(self, split: Split, read_ahead: bool) -> Iterator[pa.Table]:
        """The bucket's rows merged per key, a step at a time: each section of files with
        overlapping keys (``IntervalPartition``) is merged as sorted runs; a version's file
        position breaks sequence ties (later files win). Runs newer one after another
        (:func:`sequenced`: commits one after another) merge in the order they come, without
        reading sequence numbers. The first section's runs start decoding at once (a reader
        opens a split before it reads it: :meth:`stream`), the others' when they come."""
        position = {id(meta): i for i, meta in enumerate(split.files)}

        def read(meta: DataFileMeta, batch_bytes: int, ordered: bool) -> Iterator[pa.Table]:
            return self._file_batches(split, position[id(meta)], batch_bytes, ordered)

        def merged(section: list[SortedRun]) -> Iterator[pa.Table]:
            ordered = not self.lookup_merge and sequenced(section)
            depth = ahead_depth(section, READ_BATCH_ROWS) if read_ahead else 0
            runs = read_runs(section, functools.partial(read, ordered=ordered), self.merge_bytes, depth)
            merge = functools.partial(self._merge, arrival_order=ordered)
            return map_ahead(merge, merge_steps(runs, self.key, tagged=not ordered), depth > 0)

        parts = sections(list(split.files), self.key_ranges)
        if not parts:
            return iter(())
        rest = (batch for section in parts[1:] for batch in merged(section))
        return itertools.chain(merged(parts[0]), rest)

    def _merged_whole(self, split: Split) -> Iterator[pa.Table]:
        """The bucket's rows merged per key in one merge of all its versions."""
        files = range(len(split.files))
        batches = [b for i in files for b in self._file_batches(split, i, self.merge_bytes)]
        if batches:
            yield self._merge(concat(batches))

    def _merge(self, versions: pa.Table, arrival_order: bool = False) -> pa.Table:
        """One row per key of complete versions (their file positions, and levels for lookup
        merges, attached), deletes dropped. ``arrival_order``: each key's versions come oldest
        first, without sequence numbers or file positions (``MergeEngine.merge``)."""
        assert self.engine is not None, "only primary-key splits are merged"
        if self.lookup_merge:
            versions = versions.filter(pa.array(KeyLevels.of(versions, self.key).lookup_rows()))
            versions = versions.drop_columns([LEVEL])
        if self.engine.keeps_versions:  # the winners' columns but sequence numbers and file positions
            read = [*(f.name for f in self.read_fields), parquet.VALUE_KIND]
            winners = self.engine.winners(versions, arrival_order)
            return decoded(drop_retracts(versions.select(read).take(winners)))
        return drop_retracts(self.engine.merge(versions, arrival_order))

    def _file_batches(
        self, split: Split, i: int, batch_bytes: int | None = None, ordered: bool = False
    ) -> Iterator[pa.Table]:
        """File ``i`` of ``split`` as current-schema columns (plus, for primary keys, each row's
        kind and, in a merge, its sequence number), a batch at a time. Rows the file indexes did
        not select, or its deletion vector deletes, are left out (the filter still runs after).
        Batches of a merge carry the file's position (``ORDINAL``) and, for lookup merges, its
        level; those of a merge whose runs come ``ordered`` (:func:`sequenced`) neither position
        nor sequence number."""
        meta = split.files[i]
        selection = split.selections[i] if split.selections else None
        deletion = split.deletions[i] if split.deletions else None
        rows = None if selection is None else np.asarray(BitMap.deserialize(selection).to_array(), np.int64)
        if deletion is not None:
            kept = deletion.read(self.table.io).kept_rows(meta.row_count)
            rows = kept if rows is None else np.intersect1d(rows, kept, assume_unique=True)
        merging = batch_bytes is not None
        # a merge orders versions by sequence number; rows read straight need only their kinds
        system = (_SYSTEM if merging and not ordered else [parquet.VALUE_KIND]) if self.key else []
        batches = iter_data_file(
            self.table, split.bucket_path, meta, self.read_fields, system, READ_BATCH_ROWS,
            batch_bytes=batch_bytes or self.merge_bytes, kept=rows,
            dictionaries=self.carried if merging else (),
        )  # fmt: skip
        for batch in batches:
            if merging and not ordered:
                batch = batch.append_column(ORDINAL, pa.array(np.full(batch.num_rows, i, np.int32)))
                if self.lookup_merge:
                    batch = with_level(batch, meta.level)
            yield batch


def _nbytes(table: pa.Table) -> int:
    return int(table.nbytes)
