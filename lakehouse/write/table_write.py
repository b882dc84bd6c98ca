"""The first phase of a write: Arrow data in, data files and picklable commit messages out.

A :class:`TableWrite` can run in any process (a Spark task, a thread); it never touches table
metadata. Rows are split by partition and bucket with vectorized group ids. Append tables
stream each (partition, bucket) into rolling Parquet files. Primary-key tables buffer up to
``write-buffer-size``, then flush every bucket as one sorted, key-unique run (duplicate keys of
the buffer folded by the deduplicate engine), numbering rows with sequence numbers that continue
after the bucket's existing files (``MergeTreeWriter``). With ``changelog-producer=input`` each
flush also writes the buffer's rows, with their kinds, as changelog files; the compaction
producers' changelog files come from the buckets' compactors. A buffer whose flushes need not
be as large as it is - an append table's, whose files stay open across flushes, or a spillable
one's, whose spilled runs are merged at the end - is flushed a half at a time on another thread
while the caller fills the other half, as long as each bucket's share of a half is not a sliver:
the routing, sorting and files of one half overlap the caller producing the next, in the same
memory.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakehouse.append.compactor import AppendCompactor
from lakehouse.bucket.channels import AssignerSplit
from lakehouse.bucket.fixed import fixed_buckets
from lakehouse.errors import ArgumentTypeError, InvalidOptionError, SchemaMismatchError
from lakehouse.format import parquet
from lakehouse.io.cores import usable_cores
from lakehouse.io.memory import JobMemory, release_freed
from lakehouse.io.pool import map_parallel, process_pool
from lakehouse.mergetree.changelog import input_rows
from lakehouse.mergetree.compactor import BucketCompactor, gathered
from lakehouse.mergetree.engine import MergeEngine
from lakehouse.mergetree.spill import SpillDir, consumed
from lakehouse.options import FULL_COMPACTION_DELTA_COMMITS, ChangelogProducerKind
from lakehouse.paths import FileNamer, index_file_namer
from lakehouse.rowkind import RowKind
from lakehouse.snapshot import CommitKind
from lakehouse.store.data_writer import BucketWriter, FileLayout
from lakehouse.store.partitions import row_partitions
from lakehouse.write.bucket_assigner import DynamicBuckets
from lakehouse.write.bucket_write import BucketKey, Buckets, BucketWrite, rewrite_parallel
from lakehouse.write.conform import conform_pieces
from lakehouse.write.cross_partition import KeyLocations
from lakehouse.write.message import CommitMessage
from lakehouse.write.rows import BLOCK_BYTES, Pieces, take_rows
from lakehouse.write.scope import WriteScope
from lakehouse.write.settings import WriteSettings
from lakehouse.write.sorted_runs import buffered_run, merged_runs

if TYPE_CHECKING:
    from lakehouse.store.table_store import TableStore

SLICE_BYTES = 16 << 20  # buffered rows copied and merged at a time, and rows per write of a run
# What a bucket's flush job holds per slice of its rows, in slices (measured): the slice taken
# from the buffer, its merge, the one in flight to the Parquet encoder, the encoder's buffers,
# and what the job's thread freed and its allocator keeps
SLICE_COPIES = 6
SPILLED_APPEND_JOB = SLICE_COPIES * SLICE_BYTES  # spilled append rows gathered into slices, written
# a bucket's share of half a buffer below which the buffer is flushed whole (2,000 partitions in
# halves of 128 MB: 7% slower, each flush paying for a spilled run per partition)
SMALLEST_SHARE = 1 << 20


class TableWrite:
    """Writes data files for one table; ``prepare_commit`` returns what the committer needs.

    ``assigner``: for dynamic-bucket tables written by several writers at once, the split of this
    writer (see :mod:`lakehouse.write.bucket_assigner`); it must receive exactly the rows
    ``RowRouter.route`` sends to it. ``names``: this writer's file names in its write's scope
    (:meth:`WriteScope.namer`; default: a write of its own). ``compact=False``: the writer leaves
    compaction to someone else (``Table.write`` under ``compaction.async``).
    """

    def __init__(
        self,
        table: TableStore,
        *,
        overwrite: bool = False,
        assigner: AssignerSplit | None = None,
        names: FileNamer | None = None,
        compact: bool = True,
    ) -> None:
        self.table = table
        self.names = names or WriteScope().namer()
        self.settings = settings = WriteSettings.of(table, self.names, overwrite)
        if not compact:  # someone else compacts what it writes (as for write-only)
            self.settings = settings = replace(settings, write_only=True)
        self.schema = settings.schema
        if assigner is not None and not self.schema.dynamic_buckets:
            raise InvalidOptionError(
                f"table {table.name} has no dynamic buckets (bucket = -1 with a primary key): "
                f"its writers take no assigner split"
            )
        self.assigner = assigner
        self.primary_key = settings.primary_key
        self.engine = settings.engine
        self.buckets = Buckets(table, settings)
        self._dynamic: DynamicBuckets | None = None
        self._locations: KeyLocations | None = None
        self._pending = Pieces(BLOCK_BYTES)
        self._spill: SpillDir | None = None  # the buffer's spilled runs (write-buffer-spillable)
        # whether the buffer may be flushed a half at a time (see the module and _flush_limit)
        self._halves = not self.primary_key or settings.spill.spillable
        self._flushed_buckets = 0  # the buckets the last flush wrote to
        self._flushing: Future[None] | None = None  # the half of the buffer being flushed
        self.sorted_runs = 0  # after prepare_commit: the most sorted runs a bucket it wrote holds

    # ---- public --------------------------------------------------------------------------

    def write(self, data: pa.Table | pa.RecordBatch | pa.RecordBatchReader) -> None:
        """Write rows; for primary-key tables they are upserts (see ``_row_kind``).

        Rows wait in one buffer of ``write-buffer-size`` shared by all buckets (in two halves,
        one filling while the other is flushed, see the module); input larger than what the
        buffer has left is taken a slice at a time. An error of a background flush is raised by
        the next flush (here, or in :meth:`prepare_commit`)."""
        for batch in _batches(data, self.table.name):
            while batch.num_rows:
                limit = self._flush_limit()
                room = limit - self._pending.nbytes
                rows = max(1, room * batch.num_rows // max(1, batch.nbytes))
                piece, batch = batch.slice(0, rows), batch.slice(rows)
                self._pending.add(piece)
                if self._pending.nbytes >= limit:
                    self._flush(final=False, background=limit < self.settings.buffer_size)

    def _flush_limit(self) -> int:
        """What the buffer takes before it is flushed: half of it, flushed in the background while
        the other half fills, unless its flushes must be whole (a primary-key buffer that
        cannot spill) or its rows go to so many buckets that each would get a sliver of a half
        (a bucket's flush costs as much whatever its rows: spilled runs, jobs); then the whole
        buffer, once the flush of the last half ended."""
        half = max(1, self.settings.buffer_size // 2)
        if self._halves and self._flushed_buckets * SMALLEST_SHARE <= half:
            return half
        self._await_flush()
        return self.settings.buffer_size

    def prepare_commit(self) -> list[CommitMessage]:
        """Finish every file and return one commit message per (partition, bucket) written.

        Primary-key buckets are then compacted as Paimon's batch writers do (unless
        ``write-only``): universal compaction, or full compaction every
        ``full-compaction.delta-commits`` commits; its changes ride along in the messages.
        """
        try:
            self._flush(final=True)
        finally:
            self._close_spill()
        if not self.primary_key:
            self.buckets.finish_files(list(self.buckets.writes.values()))
            return self.buckets.messages()
        written = [w for w in self.buckets.writes.values() if w.new_files]
        if not self.settings.write_only and written:
            full = self._full_compaction_due()
            due = [w for w in written if _lsm(w).picks(full)]
            compact, job_bytes = (lambda w: _lsm(w).compact(full=full)), (lambda w: _lsm(w).job_bytes())
            rewrite_parallel(self.table, due, compact, job_bytes)
        self.sorted_runs = max((_lsm(w).sorted_runs() for w in written), default=0)
        hashes = {}
        if self._dynamic is not None:
            hashes = self._dynamic.write_changes(index_file_namer(self.names))
        keys_at = None
        if self._locations is not None and not self.settings.overwrite:
            keys_at = self._locations.snapshot_id
        return self.buckets.messages(hashes, keys_at)

    def abort(self) -> None:
        """Delete every file this writer produced (nothing of it was committed), and the
        directories it created for them that are now empty."""
        with contextlib.suppress(Exception):  # a failed flush's error was raised, or no longer matters
            self._await_flush()
        self.buckets.abort()
        self._pending.take()
        self._close_spill()

    def _await_flush(self) -> None:
        """Wait for the background flush of the buffer's other half, raising its error."""
        flushing, self._flushing = self._flushing, None
        if flushing is not None:
            flushing.result()

    def _close_spill(self) -> None:
        if self._spill is not None:
            self._spill.close()
            self._spill = None

    def compactor(self, partition: bytes, bucket: int) -> BucketCompactor | AppendCompactor:
        """The compactor of a bucket as this writer sees it: the LSM tree of a primary-key
        bucket, the files of an append bucket."""
        return self.buckets.get(partition, bucket).compactor

    def _key_engine(self) -> MergeEngine:
        """The merge engine; only primary-key tables, which have one, buffer sorted runs."""
        assert self.engine is not None, f"table {self.table.name} has no primary key"
        return self.engine

    def _full_compaction_due(self) -> bool:
        """Whether this commit is the ``full-compaction.delta-commits``-th since the last compaction."""
        options = self.schema.core_options
        if options.get(FULL_COMPACTION_DELTA_COMMITS) is not None:
            every = options.get_int(FULL_COMPACTION_DELTA_COMMITS)
        elif self.settings.produces(ChangelogProducerKind.FULL_COMPACTION):
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

    def _flush(self, final: bool, background: bool = False) -> None:
        """Turn the buffer into one sorted run per bucket: level-0 files, or a spilled run when
        the buffer is spillable, this is not the ``final`` flush and the disk allows
        (``write-buffer-spill.max-disk-size``). A flush to files first spills the runs of the
        buckets that spilled before, releases the buffer, then merges each such bucket's spilled
        runs into its files: the merges never hold the buffer. An append table spills only
        once it has written more buckets than ``write-max-writers-to-spill``
        (:meth:`_append_jobs`); the final flush writes what is spilled. What the flush freed goes back
        to the system (:func:`~lakehouse.io.memory.release_freed`): the allocators would
        otherwise keep it, and the next buffer fills fresh memory.

        A ``background`` flush (of half the buffer, see :meth:`_flush_limit`) runs on the
        process's flush pool, whose tasks wait on none of its others, after the writer's flush
        before it (one at a time: bucket files, spilled runs and sequence numbers see the rows in
        order); the caller goes on filling the other half."""
        self._await_flush()
        pending = self._pending.take()
        if background:
            self._flushing = process_pool("lakehouse-flush", usable_cores()).submit(
                self._flush_pieces, pending, False
            )
        else:
            self._flush_pieces(pending, final)

    def _flush_pieces(self, pending: list[pa.Table], final: bool) -> None:
        """:meth:`_flush` of the buffered ``pending`` pieces."""
        spilling = not final and self.settings.spill.spillable
        if spilling and self._spill is not None and self._spill.bytes >= self.settings.spill.max_disk:
            spilling = False
        self._flush_buffer(pending, spilling, final)
        if self.primary_key and not spilling:
            self._merge_spilled()
        elif not self.primary_key and final:
            self._write_spilled_appends()
        release_freed()

    def _flush_buffer(self, pending: list[pa.Table], spilling: bool, final: bool) -> None:
        """Write the buffered rows: append files (see :meth:`_append_jobs`), or one run per
        primary-key bucket, spilled if ``spilling`` or if the bucket has spilled runs."""
        if not pending:
            return
        data, kinds = conform_pieces(pending, self.schema, self.table.name)
        pending.clear()  # conforming may have copied the pieces: they go before the flush writes
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
            data, kinds = self._key_engine().accept(data, kinds)
            if self.schema.cross_partition_update:
                data, kinds, buckets = self._key_locations().route(data, kinds)
            if self.settings.produces(ChangelogProducerKind.INPUT):
                inputs = (data, kinds)
            data, kinds = self._key_engine().stored(data, kinds)
        if data.num_rows == 0:
            return
        groups, locations = self._group_ids(data, buckets)
        targets = [self.buckets.get(*key) for key in locations]
        self._flushed_buckets = len(targets)
        order, bounds = _group_order(groups, len(targets))
        del groups
        if self.primary_key:
            jobs = self._run_jobs(data, kinds, order, bounds, targets, inputs, spilling)
        else:
            jobs = self._append_jobs(data, order, bounds, targets, spilling, final)
        replays = not self.primary_key and any(w.spilled for w in targets)
        memory = self._flush_memory(data, np.diff(bounds), inputs is not None, replays)
        map_parallel(lambda job: job(), jobs, memory)

    def _flush_memory(self, data: pa.Table, rows: np.ndarray, changelog: bool, replays: bool) -> JobMemory:
        """What the flush job of the largest of buckets of ``rows`` rows of ``data`` holds: its
        slices, for a primary key the bucket's keys sorted and their order, with ``changelog``
        the slices of its rows as given, and when it ``replays`` an append bucket's spilled rows
        the slices they are gathered in; the jobs run beside the buffer."""
        largest = int(rows.max())
        job = SLICE_COPIES * min(SLICE_BYTES, data.nbytes * largest // max(1, data.num_rows))
        if self.primary_key:
            key_bytes = data.select(self.primary_key).nbytes // max(1, data.num_rows)
            job += largest * (2 * key_bytes + 16)
        if changelog:
            job *= 2
        if replays:
            job = max(job, SPILLED_APPEND_JOB)
        return JobMemory(job, self.schema.core_options.jobs_budget(beside_buffer=True))

    def _merge_spilled(self) -> None:
        """Merge the spilled runs of every bucket into its files, then finish the files of the
        flush as level-0 runs."""
        spilled = [w for w in self.buckets.writes.values() if w.spilled]
        # a merge reads sort-spill-buffer-size of its runs, merges steps of them, writes slices
        job = 2 * self.settings.spill.buffer_size + SLICE_COPIES * SLICE_BYTES
        map_parallel(self._write_spilled, spilled, JobMemory(job, self.schema.core_options.jobs_budget()))
        self._finish_runs()

    def _spill_dir(self) -> SpillDir:
        if self._spill is None:
            spill = self.settings.spill
            self._spill = SpillDir(spill.buffer_size // spill.threshold)
        return self._spill

    def _write_spilled(self, target: BucketWrite) -> None:
        """Write the merge of ``target``'s spilled runs as files, and delete the runs."""
        runs = [r.batches() for r in target.spilled]
        merged = merged_runs(self._key_engine(), runs, self.settings.spill.threshold, self._spill_dir)
        _write_run(target.data_writer(self.settings.layout), self.settings.layout, merged)
        target.close_writers()
        for r in target.spilled:
            self._spill_dir().remove(r)
        target.spilled = []

    def _finish_runs(self) -> None:
        """A flush is one sorted run per bucket: finish its files (level 0) and hand them to the
        bucket's compactor; a bucket past ``num-sorted-run.stop-trigger`` compacts right away."""
        added = self.buckets.finish_files([w for w in self.buckets.writes.values() if w.writing])
        for w, metas in added:
            _lsm(w).add(metas)
        if self.settings.write_only:
            return
        for w, _ in added:
            lsm = _lsm(w)
            while lsm.sorted_runs() > self.settings.stop_trigger and lsm.compact():
                pass

    def _group_ids(
        self, data: pa.Table, buckets: np.ndarray | None = None
    ) -> tuple[np.ndarray, list[BucketKey]]:
        """A dense (partition, bucket) group id per row, and each group's partition and bucket
        (``buckets``: already assigned, as cross-partition routing does)."""
        parts = row_partitions(data, self.schema)
        part_ids, partitions = parts.ids, parts.partitions
        if buckets is None and self.settings.bucket_count > 0:
            keys = [data.column(k) for k in self.schema.bucket_keys]
            buckets = fixed_buckets(keys, self.settings.bucket_types, self.settings.bucket_count)
        elif buckets is None and self.primary_key:
            buckets = self._dynamic_buckets().assign(data, part_ids, partitions, parts.hashes)
        elif buckets is None:
            return part_ids, [(p, 0) for p in partitions]  # bucket-unaware append table
        buckets = np.asarray(buckets, np.int64)
        width = int(buckets.max()) + 1
        code = part_ids * width + buckets
        del buckets
        if len(partitions) * width <= max(1024, len(code)):  # dense: a lookup table, no sort
            used = np.bincount(code) > 0
            present, groups = np.flatnonzero(used), (np.cumsum(used) - 1)[code]
        else:
            present, groups = np.unique(code, return_inverse=True)
        return groups, [(partitions[int(u) // width], int(u) % width) for u in present]

    def _key_locations(self) -> KeyLocations:
        if self._locations is None:
            self._locations = KeyLocations(self.table, self.buckets.base.snapshot)
        return self._locations

    def _dynamic_buckets(self) -> DynamicBuckets:
        if self._dynamic is None:
            self._dynamic = DynamicBuckets(self.table, self.buckets.base.hash_files, self.assigner)
        return self._dynamic

    # ---- jobs: one per (partition, bucket), run in worker threads --------------------------

    def _append_jobs(
        self,
        data: pa.Table,
        order: np.ndarray,
        bounds: np.ndarray,
        targets: list[BucketWrite],
        spilling: bool,
        final: bool,
    ) -> list[Callable[[], None]]:
        """Append-table rows of each group (``order[bounds[i]:bounds[i + 1]]``), numbered in
        arrival order, into their buckets' files, which stay open for the next flush's rows.

        Once a write has written more buckets than ``write-max-writers-to-spill`` (Paimon's
        batch writers switch to spillable buffers then), it keeps no more files open: each
        bucket's rows of a flush are spilled to local disk (``spilling``: not the ``final``
        flush, and ``write-buffer-spillable`` with disk to spare), else written and their files
        finished; a bucket's spilled rows go first into the files its next written rows go to.
        An open writer holds its output buffer (up to 1 MB; an object store's upload part): a
        write of 2,000 partitions in 64 MB flushes peaked at 1.2 GB with one open per partition,
        0.34 GB so, 0.5 GB for 10 partitions."""
        many = len(self.buckets.writes) > self.settings.max_open_writers
        step = max(1024, SLICE_BYTES * data.num_rows // max(1, data.nbytes))
        jobs: list[Callable[[], None]] = []
        for target, start, end in zip(targets, bounds[:-1].tolist(), bounds[1:].tolist(), strict=True):
            base = target.claim(end - start)
            numbered = _numbered(data, None if end - start == len(order) else order[start:end], base, step)
            jobs.append(
                partial(self._append_bucket, target, numbered, spilling and many, not (final or many))
            )
        return jobs

    def _append_bucket(
        self, target: BucketWrite, numbered: Iterator[pa.Table], spill: bool, keep_open: bool
    ) -> None:
        """One append bucket's rows with their sequence numbers: spilled as a run if ``spill``,
        else written after the bucket's spilled runs (oldest first, so that the rows keep their
        order; gathered with them into larger row groups), the files finished unless ``keep_open``."""
        if spill:  # a slice holds a few rows of each batch the buffer was given: one IPC batch, not hundreds
            run = self._spill_dir().write(rows.combine_chunks() for rows in numbered)
            if run is not None:
                target.spilled.append(run)
            return
        writer = target.data_writer(self.settings.layout)
        spilled, target.spilled = target.spilled, []
        if spilled:
            runs = [consumed(self._spill_dir(), r) for r in spilled]
            numbered = gathered(itertools.chain(*runs, numbered), SLICE_BYTES)
        for rows in numbered:
            seq = rows.column(parquet.SEQUENCE_NUMBER)
            writer.write(rows.drop_columns([parquet.SEQUENCE_NUMBER]), seq, None)
        if not keep_open:
            target.close_writers()

    def _write_spilled_appends(self) -> None:
        """At the end of a write, the spilled rows of the append buckets its last flush did not
        write, into their files."""
        spilled = [w for w in self.buckets.writes.values() if w.spilled]
        memory = JobMemory(SPILLED_APPEND_JOB, self.schema.core_options.jobs_budget())
        map_parallel(lambda w: self._append_bucket(w, iter(()), False, False), spilled, memory)

    def _run_jobs(
        self,
        data: pa.Table,
        kinds: pa.Array,
        order: np.ndarray,
        bounds: np.ndarray,
        targets: list[BucketWrite],
        inputs: tuple[pa.Table, pa.Array] | None,
        spill: bool,
    ) -> list[Callable[[], None]]:
        """One sorted, key-unique run per primary-key bucket (see :mod:`.sorted_runs`), spilled
        if ``spill`` or if the bucket has spilled runs (merged into its files later), else
        written as files. ``inputs``: the rows as given, written to changelog files too."""
        jobs: list[Callable[[], None]] = []
        for target, start, end in zip(targets, bounds[:-1].tolist(), bounds[1:].tolist(), strict=True):
            base = target.claim(data.num_rows)
            changelog = (
                None if inputs is None else target.changelog_file_writer(self.settings.changelog_layout)
            )
            rows = order[start:end]
            run = buffered_run(self._key_engine(), data, kinds, rows, base, SLICE_BYTES)
            spilled = spill or bool(target.spilled)
            jobs.append(partial(self._write_bucket_run, target, run, spilled, changelog, inputs, rows, base))
        return jobs

    def _write_bucket_run(
        self,
        target: BucketWrite,
        run: Iterator[pa.Table],
        spill: bool,
        changelog: BucketWriter | None,
        inputs: tuple[pa.Table, pa.Array] | None,
        rows: np.ndarray,
        base: int,
    ) -> None:
        """One bucket's job of :meth:`_run_jobs`: its run spilled or written as files, and its
        rows of ``inputs`` as given into its ``changelog`` files."""
        if spill:
            spilled = self._spill_dir().write(run)
            if spilled is not None:
                target.spilled.append(spilled)
        else:
            _write_run(target.data_writer(self.settings.layout), self.settings.layout, run)
        if changelog is not None and inputs is not None:
            self._write_inputs(changelog, inputs, rows, base)
        target.close_writers()

    def _write_inputs(
        self, changelog: BucketWriter, inputs: tuple[pa.Table, pa.Array], rows: np.ndarray, base: int
    ) -> None:
        """The rows ``rows`` of ``inputs`` as given, with their kinds, as changelog files."""
        layout = self.settings.changelog_layout
        step = max(1024, SLICE_BYTES * inputs[0].num_rows // max(1, inputs[0].nbytes))
        for start in range(0, len(rows), step):
            part = rows[start : start + step]
            given = take_rows(inputs[0], part).append_column(parquet.SEQUENCE_NUMBER, pa.array(part + base))
            given = given.append_column(parquet.VALUE_KIND, inputs[1].take(pa.array(part)))
            given = input_rows(given, self.primary_key, self._key_engine().sequence_fields)
            seq, given_kinds = given.column(parquet.SEQUENCE_NUMBER), given.column(parquet.VALUE_KIND)
            changelog.write(layout.file_rows(given), seq, given_kinds)


def _lsm(write: BucketWrite) -> BucketCompactor:
    """The LSM tree of a bucket of a primary-key table."""
    compactor = write.compactor
    assert isinstance(compactor, BucketCompactor), "only primary-key buckets have sorted runs"
    return compactor


def _numbered(data: pa.Table, rows: np.ndarray | None, base: int, step: int) -> Iterator[pa.Table]:
    """Rows ``rows`` of ``data`` (None: all, at once) with their sequence numbers from ``base`` as a
    last ``_SEQUENCE_NUMBER`` column, a slice of ``step`` rows copied at a time."""
    if rows is None:
        yield data.append_column(parquet.SEQUENCE_NUMBER, pa.array(np.arange(base, base + data.num_rows)))
        return
    step = parquet.even_step(len(rows), step)
    for start in range(0, len(rows), step):
        part = take_rows(data, rows[start : start + step])
        seq = pa.array(np.arange(base + start, base + start + part.num_rows))
        yield part.append_column(parquet.SEQUENCE_NUMBER, seq)


def _write_run(writer: BucketWriter, layout: FileLayout, run: Iterator[pa.Table]) -> None:
    """A sorted run's slices into a bucket's data files."""
    for part in gathered(run, SLICE_BYTES):
        seq, kinds = part.column(parquet.SEQUENCE_NUMBER), part.column(parquet.VALUE_KIND)
        writer.write(layout.file_rows(part), seq, kinds)


def _group_order(groups: np.ndarray, count: int) -> tuple[np.ndarray, np.ndarray]:
    """The rows ordered by group, in arrival order within a group (a radix sort for the usual
    few groups), and where each of the ``count`` groups starts and ends in that order."""
    narrow = groups.astype(np.int16) if count <= np.iinfo(np.int16).max else groups
    order = np.argsort(narrow, kind="stable")
    bounds = np.concatenate([[0], np.cumsum(np.bincount(groups, minlength=count))])
    return order, bounds


def _batches(data: object, table: str) -> Iterator[pa.Table]:
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
