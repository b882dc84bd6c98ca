"""Compaction of one bucket's LSM tree: pick runs, rewrite or upgrade them, track the result.

:class:`BucketCompactor` keeps a bucket's live files while a writer or a compaction job works on
it (``MergeTreeCompactManager`` plus the bookkeeping of ``MergeTreeWriter``). A compaction unit
is executed like ``MergeTreeCompactTask``: its files are split into key-range sections; a section
of one run whose files are large enough is only *upgraded* (same file, new level, no I/O), every
other section is merged by the table's merge engine through the bounded-memory stream merge and
written as rolling files of the output level, with their file indexes. Deleted keys are dropped
when nothing older can exist below the output level.

Tables read without merging levels (deletion vectors, first-row) and ``changelog-producer=lookup``
tables compact as Paimon's lookup compaction: level-0 files are always rewritten and pushed up
even when the universal strategy picks nothing, and their keys are looked up in the levels above
the output (:mod:`lakehouse.mergetree.lookup`). Inputs are read without the rows their deletion
vectors delete, and the vectors of rewritten files are dropped.

With a changelog producer (:mod:`lakehouse.mergetree.changelog`), rewrites into the top level
(``full-compaction``) or of level-0 files (``lookup``) also write changelog files of the output
level; a file upgraded into the top level without a rewrite has its rows read for the changelog.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import pyarrow as pa

from lakehouse.deletionvectors.maintainer import BucketDeletionVectors
from lakehouse.format import parquet
from lakehouse.format.dictionaries import decoded
from lakehouse.io.pool import in_job, spare_core
from lakehouse.io.read_ahead import read_ahead
from lakehouse.manifest.entries import DataFileMeta, FileSource
from lakehouse.mergetree.changelog import ChangelogProducer, changelog_layout
from lakehouse.mergetree.engine import MergeEngine
from lakehouse.mergetree.groups import drop_retracts
from lakehouse.mergetree.levels import KeyRanges, Levels, SortedRun, needs_lookup, sections, sequenced
from lakehouse.mergetree.lookup import Lookup
from lakehouse.mergetree.step import StepMerge, merges_old_values
from lakehouse.mergetree.stream import merge_steps, merged_steps
from lakehouse.mergetree.universal import CompactUnit, UniversalCompaction, pick_full
from lakehouse.mergetree.versions import lookup_merge, with_level
from lakehouse.options import SORT_SPILL_BUFFER_SIZE, ChangelogProducerKind, MergeEngineKind
from lakehouse.store.data_reader import decoded_bytes, iter_data_file
from lakehouse.store.data_writer import BucketWriter, FileLayout, file_metas

if TYPE_CHECKING:
    from lakehouse.store.table_store import TableStore

BATCH_ROWS = 64 * 1024  # rows read per run and step of a streaming merge
ROW_GROUP_BYTES = 64 << 20  # merged rows gathered into one write (one Parquet row group)
# What compacting a small bucket holds, in copies of its decoded files: read, merged, gathered,
# encoded, and what the job's thread freed and its allocator keeps (measured on 16 threads: a
# bucket of 42 MB decoded held 105-115 MB a job with 4 or 5 compacting at once; two buckets of
# 3.25M rows compacting together peaked at 734 MB, within 2 x write-buffer-size + 300 MB)
DATA_COPIES = 3


@dataclass
class CompactResult:
    """Files a compaction removed and the files it added (upgrades appear in both), and the
    changelog files it wrote."""

    before: list[DataFileMeta] = field(default_factory=list)
    after: list[DataFileMeta] = field(default_factory=list)
    changelog: list[DataFileMeta] = field(default_factory=list)


class BucketFiles:
    """Where the files of one (partition, bucket) of a table are, for the compactors that rewrite
    them (set ``table``, ``partition`` and ``bucket``)."""

    table: TableStore
    partition: bytes
    bucket: int

    @functools.cached_property
    def bucket_path(self) -> str:
        """Decoded from the partition once: every file read and written names it."""
        return self.table.bucket_path(self.partition, self.bucket)

    @property
    def directory(self) -> str:
        return f"{self.table.paths.root}/{self.bucket_path}"

    def delete(self, f: DataFileMeta) -> None:
        """Delete a data file and the files kept next to it (a compaction's uncommitted output)."""
        self.table.io.delete_quietly(self.table.paths.data_files(self.bucket_path, f))


class BucketCompactor(BucketFiles):
    """The live files of one (partition, bucket) and the compactions run on them."""

    def __init__(
        self,
        table: TableStore,
        layout: FileLayout,
        engine: MergeEngine,
        partition: bytes,
        bucket: int,
        files: list[DataFileMeta],
        deletion_vectors: BucketDeletionVectors | None = None,
        changelog: ChangelogProducer | None = None,
    ) -> None:
        self.table = table
        self.layout = layout
        self.engine = engine
        self.partition = partition
        self.bucket = bucket
        self.files = list(files)
        self.deletion_vectors = deletion_vectors
        options = table.schema.core_options
        self.num_levels = options.num_levels
        self.universal = UniversalCompaction.from_options(options)
        self.needs_lookup = needs_lookup(table.schema)
        self.lookup_merge = lookup_merge(table.schema)
        self.producer = changelog or ChangelogProducer(ChangelogProducerKind.NONE)  # none while overwriting
        self.changelog_layout = changelog_layout(layout, options)
        self.min_file_size = options.compaction_file_size(True)
        self.merge_bytes = options.memory(SORT_SPILL_BUFFER_SIZE)  # what a merge's reads hold
        self.carried = engine.carried(f.name for f in table.schema.fields)  # read as dictionaries
        self.ranges = KeyRanges([f.type for f in layout.key_fields], table.name)
        self.before: list[DataFileMeta] = []  # committed files this compactor removed
        self.after: list[DataFileMeta] = []  # files it added that are still live
        self.written: set[str] = set()  # names of files this compactor wrote
        self.changelog: list[DataFileMeta] = []  # changelog files of its compactions

    # ---- state ---------------------------------------------------------------------------

    def add(self, new_files: list[DataFileMeta]) -> None:
        """Files a writer just flushed (level 0)."""
        self.files.extend(new_files)

    def levels(self) -> Levels:
        return Levels(self.files, self.num_levels, self.ranges)

    def sorted_runs(self) -> int:
        return len(self.levels().runs)

    def job_bytes(self) -> int:
        """What a compaction of this bucket holds at most (measured): its merge (the runs'
        batches, ``sort-spill-buffer-size`` in all, as much again read ahead, and the steps
        merged from them) and the row groups being gathered and encoded; a bucket whose files
        decode to less holds ``DATA_COPIES`` times their data. Reads the files' footers."""
        most = 4 * self.merge_bytes + 2 * min(ROW_GROUP_BYTES, self.layout.target_size)
        return min(most, DATA_COPIES * decoded_bytes(self.table, self.bucket_path, self.files))

    # ---- compaction ----------------------------------------------------------------------

    def picks(self, full: bool = False) -> bool:
        """Whether :meth:`compact` would compact anything now (reads no file)."""
        return self._pick(self.levels(), full) is not None

    def _pick(self, levels: Levels, full: bool) -> CompactUnit | None:
        """What the strategy compacts (``full``: everything to the top level), None for nothing."""
        vectors = self.deletion_vectors
        if full:
            unit = pick_full(levels.num_levels, levels.runs, rewrite_single=bool(vectors and vectors.vectors))
        else:
            unit = self.universal.pick(levels.num_levels, levels.runs)
            if unit is None and self.needs_lookup:
                unit = self.universal.force_level0(levels.num_levels, levels.runs)
        return unit if unit is not None and unit.files else None

    def compact(self, full: bool = False) -> bool:
        """Run one compaction if the strategy picks one (``full``: everything to the top level).
        Returns whether anything changed."""
        levels = self.levels()
        vectors = self.deletion_vectors
        unit = self._pick(levels, full)
        if unit is None:
            return False
        # with deletion vectors, older versions above the output are deleted by lookup
        drop_delete = unit.output_level != 0 and (
            unit.output_level >= levels.non_empty_highest_level() or vectors is not None
        )
        result = CompactTask(self, levels).run(unit, drop_delete, fold_deletions=full)
        self._apply(result)
        return bool(result.before or result.after)

    def _apply(self, result: CompactResult) -> None:
        removed = set(result.before)
        self.files = [f for f in self.files if f not in removed]
        self.files.extend(result.after)
        kept_names = {f.file_name for f in result.after}
        if self.deletion_vectors is not None:
            self.deletion_vectors.forget(f.file_name for f in result.before if f.file_name not in kept_names)
        for f in result.before:
            if f in self.after:
                # an output of an earlier compaction of this job, never committed: just delete it
                self.after.remove(f)
                if f.file_name not in kept_names:
                    self.delete(f)
            else:
                self.before.append(f)
        self.after.extend(result.after)
        self.changelog.extend(result.changelog)

    def abort(self) -> None:
        """Delete every file written by this compactor's compactions (nothing was committed)."""
        for f in self.after:
            if f.file_name in self.written:
                self.delete(f)
        for f in self.changelog:
            self.delete(f)
        self.after, self.changelog = [], []


class CompactTask:
    """Executes one compaction unit (``MergeTreeCompactTask`` with Paimon's changelog rewriters)."""

    def __init__(self, bucket: BucketCompactor, levels: Levels) -> None:
        self.bucket = bucket
        self.levels = levels
        self.max_level = levels.max_level

    def run(self, unit: CompactUnit, drop_delete: bool, fold_deletions: bool = False) -> CompactResult:
        """Execute ``unit``; ``fold_deletions`` also rewrites files that have a deletion vector.
        On failure every file it wrote is deleted."""
        self.unit, self.drop_delete = unit, drop_delete
        bucket = self.bucket
        producer = bucket.producer
        lookup = None
        if bucket.needs_lookup and any(f.level == 0 for f in unit.files):
            inputs = set(unit.files)
            above = [r for r in self.levels.runs if r.level > unit.output_level and not set(r.files) & inputs]
            engine = bucket.engine
            compares = (
                producer.kind == ChangelogProducerKind.LOOKUP and engine.kind != MergeEngineKind.FIRST_ROW
            )
            lookup = Lookup(bucket, above, BATCH_ROWS, values=merges_old_values(engine) or compares)
        self.step = StepMerge(
            bucket.engine, self.max_level, lookup, bucket.lookup_merge, producer.kind, producer.compared
        )
        self.fold_deletions = fold_deletions
        self.changelog: BucketWriter | None = None
        result = CompactResult()
        try:
            self._run(result)
            if self.changelog is not None:
                result.changelog = file_metas(bucket.changelog_layout, self.changelog.close())
        except BaseException:
            if self.changelog is not None:
                self.changelog.abort()
            moved = {f.file_name for f in result.before}
            for f in result.after:
                if f.file_name not in moved:
                    bucket.delete(f)
            raise
        return result

    def _run(self, result: CompactResult) -> None:
        bucket = self.bucket
        candidate: list[list[SortedRun]] = []
        for section in sections(list(self.unit.files), bucket.ranges):
            if len(section) > 1:
                candidate.append(section)
                continue
            for f in section[0].files:
                if f.file_size < bucket.min_file_size or self._must_rewrite(f):
                    candidate.append([SortedRun(f.level, (f,))])  # rewritten with its neighbours
                else:
                    self._rewrite(candidate, result)
                    self._upgrade(f, result)
        self._rewrite(candidate, result)

    def _must_rewrite(self, f: DataFileMeta) -> bool:
        """Level-0 files whose keys must be looked up, and files whose deletion vector is folded."""
        vectors = self.bucket.deletion_vectors
        return (self.step.lookup is not None and f.level == 0) or (
            self.fold_deletions and vectors is not None and vectors.get(f.file_name) is not None
        )

    def _writes_changelog(self, files: list[DataFileMeta]) -> bool:
        """Whether merging ``files`` writes changelog: into the top level for ``full-compaction``
        (``FullChangelogMergeTreeCompactRewriter``), level-0 files brought up for ``lookup``."""
        kind, level = self.bucket.producer.kind, self.unit.output_level
        if kind == ChangelogProducerKind.FULL_COMPACTION:
            return level == self.max_level
        return kind == ChangelogProducerKind.LOOKUP and level != 0 and any(f.level == 0 for f in files)

    def _upgrade(self, f: DataFileMeta, result: CompactResult) -> None:
        level = self.unit.output_level
        if f.level == level:
            return
        if level != self.max_level or f.delete_row_count == 0:
            if self._writes_changelog([f]):  # its keys are new to the top level: read them for it
                for versions in merge_steps([self._read(f, True)], self.bucket.engine.key):
                    self._write_changelog(self.step.merge(versions, True)[1])
            result.before.append(f)
            result.after.append(replace(f, level=level))
        else:  # deleted rows must not reach the top level: rewrite to drop them
            self._rewrite_now([[SortedRun(f.level, (f,))]], result)

    def _rewrite(self, candidate: list[list[SortedRun]], result: CompactResult) -> None:
        if not candidate:
            return
        if (
            len(candidate) == 1
            and len(candidate[0]) == 1
            and not any(map(self._must_rewrite, candidate[0][0].files))
        ):
            files = candidate[0][0].files
            candidate.clear()
            for f in files:
                self._upgrade(f, result)
            return
        self._rewrite_now(candidate, result)
        candidate.clear()

    def _rewrite_now(self, candidate: list[list[SortedRun]], result: CompactResult) -> None:
        """Merge the candidate sections (key order) into new files of the output level."""
        bucket = self.bucket
        inputs = [f for section in candidate for run in section for f in run.files]
        changelog = self._writes_changelog(inputs)
        levels = changelog or self.step.needs_levels
        writer = BucketWriter(
            bucket.layout,
            bucket.partition,
            bucket.bucket,
            bucket.directory,
            level=self.unit.output_level,
            source=FileSource.COMPACT,
        )
        try:
            size = min(ROW_GROUP_BYTES, bucket.layout.target_size)
            for rows in gathered(self._merged(candidate, changelog, levels), size):
                seq, kinds = rows.column(parquet.SEQUENCE_NUMBER), rows.column(parquet.VALUE_KIND)
                writer.write(bucket.layout.file_rows(rows), seq, kinds)
            written = file_metas(bucket.layout, writer.close())
        except BaseException:
            writer.abort()
            raise
        bucket.written.update(f.file_name for f in written)
        result.before.extend(inputs)
        result.after.extend(written)

    def _merged(self, candidate: list[list[SortedRun]], changelog: bool, levels: bool) -> Iterator[pa.Table]:
        """The merged rows of the candidate sections in key order (their changelog written on the
        side), without deletes when they go to the top level."""
        for section in candidate:
            ordered = not levels and sequenced(section)  # runs newer one after another
            read = functools.partial(self._read, level=levels)
            runs = read_runs(section, read, self.bucket.merge_bytes, ahead_depth(section))
            merge = functools.partial(self.step.merge, changelog=changelog, arrival_order=ordered)
            for merged, changes in merged_steps(runs, self.bucket.engine.key, merge, tagged=not ordered):
                self._write_changelog(changes)
                if self.drop_delete:
                    merged = drop_retracts(merged)
                if merged.num_rows:
                    yield decoded(merged)

    def _write_changelog(self, changes: pa.Table | None) -> None:
        if changes is None or not changes.num_rows:
            return
        bucket = self.bucket
        if self.changelog is None:
            self.changelog = BucketWriter(
                bucket.changelog_layout,
                bucket.partition,
                bucket.bucket,
                bucket.directory,
                self.unit.output_level,
            )
        seq, kinds = changes.column(parquet.SEQUENCE_NUMBER), changes.column(parquet.VALUE_KIND)
        self.changelog.write(bucket.changelog_layout.file_rows(changes), seq, kinds)

    def _read(self, f: DataFileMeta, level: bool, batch_bytes: int | None = None) -> Iterator[pa.Table]:
        """Batches of one input file (without the rows its deletion vector deletes) of at most
        ``BATCH_ROWS`` rows and about ``batch_bytes``, tagged with its level if ``level``."""
        bucket = self.bucket
        fields = list(bucket.table.schema.fields)
        system = [parquet.SEQUENCE_NUMBER, parquet.VALUE_KIND]
        vectors = bucket.deletion_vectors
        deletion = None if vectors is None else vectors.get(f.file_name)
        carried = () if level else bucket.carried  # steps that compare versions read them plain
        batches = iter_data_file(
            bucket.table, bucket.bucket_path, f, fields, system, BATCH_ROWS, deletion,
            batch_bytes=batch_bytes, dictionaries=carried,
        )  # fmt: skip
        for batch in batches:
            yield with_level(batch, f.level) if level else batch


# batches a merge outside bulk jobs (a caller streaming a split) decodes ahead per run: its
# largest run then decodes on while the merge works (a 10M-row table merged split by split on
# 2 cores: 0.84-0.86 s one batch ahead, 0.73-0.79 s two)
STREAMED_DEPTH = 2


def ahead_depth(section: list[SortedRun], batch_rows: int = BATCH_ROWS) -> int:
    """How many batches per run a merge of ``section`` decodes ahead on read-ahead threads
    (:func:`read_runs`): none for a merge of one step (``section`` holds no more rows than a
    batch of ``batch_rows``: reading ahead would only hand it to another thread) or while the
    bulk jobs keep every core busy (:func:`~lakehouse.io.pool.spare_core`); one in a bulk job,
    whose call reserved that much (``TableRead.memory``, :meth:`BucketCompactor.job_bytes`);
    ``STREAMED_DEPTH`` outside."""
    if sum(f.row_count for run in section for f in run.files) <= batch_rows or not spare_core():
        return 0
    return 1 if in_job() else STREAMED_DEPTH


def read_runs(
    section: list[SortedRun],
    read: Callable[..., Iterator[pa.Table]],
    merge_bytes: int,
    depth: int,
) -> list[Iterator[pa.Table]]:
    """Each sorted run of ``section`` as the batches of its files in turn, ``read(file,
    batch_bytes=...)`` with each run's share of the merge's ``merge_bytes``
    (``sort-spill-buffer-size`` in all), up to ``depth`` next batches decoded on a read-ahead
    thread (0: none; see :func:`ahead_depth`)."""
    budget = merge_bytes // len(section)
    return [read_ahead((b for f in run.files for b in read(f, batch_bytes=budget)), depth) for run in section]


def gathered(pieces: Iterator[pa.Table], size: int) -> Iterator[pa.Table]:
    """``pieces`` concatenated into tables of at least ``size`` bytes (but the last): merge steps
    can be small, and each write becomes a Parquet row group."""
    pending: list[pa.Table] = []
    pending_bytes = 0
    for piece in pieces:
        pending.append(piece)
        pending_bytes += piece.nbytes
        if pending_bytes >= size:
            yield pa.concat_tables(pending)
            pending, pending_bytes = [], 0
    if pending:
        yield pa.concat_tables(pending)
