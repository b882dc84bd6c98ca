"""Scan planning: from a snapshot's manifests to the splits a read has to open.

Live files are the ADD entries no DELETE cancelled (``AbstractFileStoreScan``). A filter prunes
them in three steps: partition values (exact), buckets (when it fixes every bucket key:
:mod:`lakehouse.bucket.select`), then file statistics - every column for append tables, key
columns only for primary-key tables, since an old version of a row must never be
hidden from the merge that decides it is stale. Files are grouped per (partition, bucket) into
splits: primary-key buckets are merged as a whole, append files are packed up to
``source.split.target-size``.

Deletion-vector and first-row tables are read without merging: their readers skip level 0, and
compaction keeps one visible version per key above it (older versions are deleted by deletion
vectors, or never written for first-row). There every column may prune files and index rows,
as in append tables, and each split carries its files' deletion vectors.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, TypedDict, TypeVar

import pyarrow as pa

from lakehouse.bucket.select import BucketSelector
from lakehouse.deletionvectors.index_file import DeletionFile, deletion_files
from lakehouse.errors import CorruptFileError, UnsupportedFeatureError
from lakehouse.fileindex import format as fileindex_format
from lakehouse.fileindex import options as fileindex_options
from lakehouse.fileindex import roaring
from lakehouse.fileindex.build import INDEX_SUFFIX
from lakehouse.fileindex.evaluate import FileIndexes
from lakehouse.fileindex.result import REMAIN, IndexResult, RowSet
from lakehouse.io.pool import map_reads
from lakehouse.manifest import binary_row, stats
from lakehouse.manifest.entries import DataFileMeta, ManifestEntry, ManifestFileMeta
from lakehouse.manifest.files import damaged_entry
from lakehouse.mergetree.levels import level0_invisible
from lakehouse.options import SOURCE_SPLIT_OPEN_FILE_COST, SOURCE_SPLIT_TARGET_SIZE
from lakehouse.predicate import ColumnStats, Predicate, bind, may_match, only_columns
from lakehouse.schema import TableSchema
from lakehouse.snapshot import Snapshot
from lakehouse.types import TIMESTAMP_ROOTS, AtomicType, DataType, timestamp_unit, type_param

T = TypeVar("T")

if TYPE_CHECKING:
    from lakehouse.store.table_store import TableStore

_UNIT_SCALE = {"s": 1, "ms": 1000, "us": 1_000_000, "ns": 1_000_000_000}


@dataclass(frozen=True)
class Split:
    """One unit of read work: files of one (partition, bucket) of one snapshot."""

    snapshot_id: int
    partition: bytes
    bucket: int
    bucket_path: str
    files: tuple[DataFileMeta, ...]
    raw_convertible: bool
    selections: tuple[bytes | None, ...] = ()  # per file: rows the indexes kept (roaring), None = all
    deletions: tuple[DeletionFile | None, ...] = ()  # per file: its deletion vector, None = none

    @property
    def row_count(self) -> int:
        return sum(f.row_count for f in self.files)

    @property
    def merged_row_count(self) -> int | None:
        """The rows a read of the split returns, when the metadata alone tells: a raw-convertible
        split whose deletion vectors record their cardinality (Java's ``DataSplit.mergedRowCount``);
        None when only merging the files would tell."""
        if not self.raw_convertible or self.selections and any(s is not None for s in self.selections):
            return None
        deleted = 0
        for d in self.deletions:
            if d is not None:
                if d.range.cardinality is None:
                    return None
                deleted += d.range.cardinality
        return self.row_count - deleted

    def by_file(self) -> list[Split]:
        """This split as one split per file when its files are read independently (no key
        merge): a reader then holds one file's rows at a time."""
        return file_by_file(self)


@dataclass(frozen=True)
class Plan:
    """The splits of a scan, the schema to read them with, and what pruning achieved (file counts);
    ``target_size`` and ``open_file_cost``: the table's ``source.split.target-size`` and
    ``source.split.open-file-cost``, which :meth:`groups` sizes groups of splits by."""

    snapshot_id: int | None
    schema_id: int
    splits: list[Split]
    stats: dict[str, int] = field(default_factory=dict)
    target_size: int = 128 << 20
    open_file_cost: int = 4 << 20

    def groups(
        self, parallelism: int | None = None, splits: Sequence[Split] | None = None
    ) -> list[list[Split]]:
        """The splits (default: the plan's) in groups, each read by one reader one split after the
        other, as Spark's file sources and Paimon's connectors size them for ``parallelism``
        readers: the files of merge-free splits packed in order into groups of at most
        ``min(target_size, max(open_file_cost, total / parallelism))`` bytes (each file weighing
        at least ``open_file_cost``), each split that merges keys a group of its own. Without
        ``parallelism``: a group per split, its files one by one."""
        splits = self.splits if splits is None else list(splits)
        if parallelism is None:
            return [file_by_file(split) for split in splits]
        files = [part for split in splits if split.raw_convertible for part in file_by_file(split)]
        weights = [max(part.files[0].file_size, self.open_file_cost) for part in files]
        size = min(self.target_size, max(self.open_file_cost, sum(weights) // max(parallelism, 1)))
        return pack_ordered(files, weights, size) + [[split] for split in splits if not split.raw_convertible]


class SplitSizes(TypedDict):
    """The split sizes of a :class:`Plan`, as its keyword arguments."""

    target_size: int
    open_file_cost: int


def target_sizes(schema: TableSchema) -> SplitSizes:
    """A plan's split sizes from the table's options (see :class:`Plan`)."""
    options = schema.core_options
    return {
        "target_size": options.memory(SOURCE_SPLIT_TARGET_SIZE),
        "open_file_cost": options.memory(SOURCE_SPLIT_OPEN_FILE_COST),
    }


def plan(table: TableStore, snapshot: Snapshot | None, filter: Predicate | None = None) -> Plan:
    """Plan a batch read of ``snapshot`` under ``filter``.

    Manifests whose partition range cannot match are not even opened. Every DELETE in a
    snapshot's manifests cancels an ADD among them, so ``added - deleted`` summed over the
    manifest list is the exact number of live files, opened or not.
    """
    counts = dict(
        files_total=0,
        pruned_by_partition=0,
        pruned_by_bucket=0,
        pruned_by_stats=0,
        pruned_by_index=0,
        files_selected=0,
    )
    if snapshot is None:
        return Plan(None, table.schema.id, [], counts, **target_sizes(table.schema))
    schema = table.schema
    store = table.manifests()
    manifests = store.data_manifests(snapshot)
    counts["files_total"] = sum(m.num_added_files - m.num_deleted_files for m in manifests)
    merge_free = level0_invisible(schema)
    pruner = _Pruner(table, filter, merge_free)
    opened = [m for m in manifests if pruner.manifest_matches(m)]
    keep = pruner.partition_matches if pruner.partition_pred is not None else None
    matching = store.live_entries(opened, keep)
    if merge_free:
        visible = [e for e in matching if e.file.level > 0]
        counts["files_total"] -= len(matching) - len(visible)
        matching = visible
    counts["pruned_by_partition"] = counts["files_total"] - len(matching)
    if pruner.buckets is not None:
        in_buckets = [e for e in matching if pruner.buckets.matches(e.bucket, e.total_buckets)]
        counts["pruned_by_bucket"] = len(matching) - len(in_buckets)
        matching = in_buckets
    candidates = [e for e in matching if pruner.stats_match(e)]
    counts["pruned_by_stats"] = len(matching) - len(candidates)
    selected, selections = [], {}
    for e, result in zip(candidates, pruner.index_results(candidates), strict=True):
        if not result.remain():
            continue
        if isinstance(result, RowSet) and pruner.row_level and len(result.rows) < e.file.row_count:
            selections[e.file.file_name] = roaring.serialize(result.rows)
        selected.append(e)
    counts["pruned_by_index"] = len(candidates) - len(selected)
    counts["files_selected"] = len(selected)
    deletions = deletion_files(table.paths, table.index_entries(snapshot)) if merge_free else {}
    merged = bool(schema.primary_keys) and not merge_free
    splits = _splits(table, snapshot.id, selected, merged, selections, deletions)
    return Plan(snapshot.id, schema.id, splits, counts, **target_sizes(schema))


class _Pruner:
    """Evaluates a bound filter on partitions, file stats and file indexes.

    Merged primary-key tables only use key columns for both stats and indexes: every version of
    a key shares its key, so skipping on it can never hide the newest version behind a stale one.
    """

    def __init__(self, table: TableStore, filter: Predicate | None, merge_free: bool = False) -> None:
        self.table = table
        schema = table.schema
        types = {f.name: f.type for f in schema.fields}
        self.types = types
        bound = bind(filter, schema.arrow_types(), table.name) if filter is not None else None
        parts = set(schema.partition_keys)
        self.partition_pred = only_columns(bound, parts) if bound is not None else None
        self.buckets = BucketSelector.of(schema, bound)
        self.key_stats = bool(schema.primary_keys) and not merge_free
        self.row_level = not self.key_stats  # index row selections are safe: no merge follows
        keys = set(schema.trimmed_primary_keys)
        stats_columns = keys if self.key_stats else set(schema.field_names) - parts
        self.stats_pred = only_columns(bound, stats_columns) if bound is not None else None
        read_indexes = schema.core_options.get_bool(fileindex_options.READ_ENABLED)
        self.index_pred = self.stats_pred if read_indexes else None
        self._stats_columns = self.stats_pred.columns() if self.stats_pred is not None else set()
        self._partitions: dict[bytes, bool] = {}
        self._physical: dict[tuple[str, Any], Any] = {}
        self._stats_layouts: dict[tuple[int, tuple[str, ...] | None], _StatsLayout] = {}
        self._index_columns: dict[int, dict[str, tuple[str, DataType]]] = {}

    def physical(self, column: str, literal: Any) -> Any:
        key = (column, literal)
        if key not in self._physical:
            scalar = literal if isinstance(literal, pa.Scalar) else pa.scalar(literal)
            self._physical[key] = binary_row.physical_value(scalar, self.types[column])
        return self._physical[key]

    def manifest_matches(self, m: ManifestFileMeta) -> bool:
        """Whether a manifest's partition range (``_PARTITION_STATS``) can hold a matching file."""
        types = self.table.schema.partition_types()
        if self.partition_pred is None or not types:
            return True
        rows = m.num_added_files + m.num_deleted_files
        decoded = stats.decode(m.partition_stats, types, rows)
        by_name = dict(zip(self.table.schema.partition_keys, decoded, strict=True))
        return may_match(self.partition_pred, by_name.get, self.physical)

    def partition_matches(self, partition: bytes) -> bool:
        if self.partition_pred is None:
            return True
        hit = self._partitions.get(partition)
        if hit is None:
            schema = self.table.schema
            values = binary_row.decode_row(binary_row.deserialize(partition)[1], schema.partition_types())
            exact = {
                k: ColumnStats(v, v, int(v is None), 1)
                for k, v in zip(schema.partition_keys, values, strict=True)
            }
            hit = may_match(self.partition_pred, exact.get, self.physical)
            self._partitions[partition] = hit
        return hit

    def stats_match(self, entry: ManifestEntry) -> bool:
        if self.stats_pred is None:
            return True
        try:
            stats_of = self._file_stats(entry.file)
        except CorruptFileError as e:
            raise damaged_entry(self.table.name, entry.file, e) from None
        except KeyError as e:  # its stats columns name one its schema does not have
            problem = f"its stats name column {e}, which its schema lacks"
            raise damaged_entry(self.table.name, entry.file, problem) from None
        return may_match(self.stats_pred, stats_of.get, self.physical)

    def index_results(self, entries: list[ManifestEntry]) -> list[IndexResult]:
        """What each file's indexes say about the filter (index files fetched in parallel)."""
        pred = self.index_pred
        if pred is None:
            return [REMAIN] * len(entries)
        return map_reads(lambda e: self._index_result(e, pred), entries, parallel=not self.table.io.is_local)

    def _index_result(self, entry: ManifestEntry, pred: Predicate) -> IndexResult:
        """What ``entry``'s file indexes say about ``pred`` (REMAIN: the file has none)."""
        f = entry.file
        name = next((n for n in f.extra_files if n.endswith(INDEX_SUFFIX)), None)
        if f.embedded_index is None and name is None:
            return REMAIN
        mapped = self._columns(f.schema_id)
        wanted = {mapped[c][0] for c in pred.columns() if c in mapped}
        table = self.table
        where = None  # the index file, if not embedded
        try:
            if f.embedded_index is not None:
                data = f.embedded_index
                container = fileindex_format.read_columns(lambda at, n: data[at : at + n], wanted)
            else:
                assert name is not None  # a file with neither index returned above
                bucket_path = table.bucket_path(entry.partition, entry.bucket)
                where = table.paths.extra_file(bucket_path, name, f.external_path)
                with table.io.open_ranges(where) as read:
                    container = fileindex_format.read_columns(read, wanted)
            result = FileIndexes(container, mapped).evaluate(pred)
            if isinstance(result, RowSet) and result.rows and result.rows.max() >= f.row_count:
                raise CorruptFileError(f"it selects row {result.rows.max()} of a file of {f.row_count} rows")
            return result
        except UnsupportedFeatureError:
            return REMAIN  # a newer container: read the file unpruned, an index only ever skips
        except FileNotFoundError:
            raise CorruptFileError(
                f"table {table.name}: index file {where} of data file {f.file_name} is missing; "
                f"run rewrite_file_index() to rebuild it"
            ) from None
        except CorruptFileError as e:
            if where is None:
                bucket_path = table.bucket_path(entry.partition, entry.bucket)
                data_file = table.paths.data_file(bucket_path, f.file_name, f.external_path)
                where = f"the manifest entry of {data_file}"
            raise CorruptFileError(
                f"table {table.name}: file index in {where} is unusable ({e}); run rewrite_file_index() "
                f"to rebuild it, or set {fileindex_options.READ_ENABLED}=false"
            ) from None

    def _columns(self, schema_id: int) -> dict[str, tuple[str, DataType]]:
        """Current column -> (its name and type in files of ``schema_id``), for unchanged types."""
        if schema_id not in self._index_columns:
            file_fields = {f.id: f for f in self.table.schema_by_id(schema_id).fields}
            out = {}
            for current in self.table.schema.fields:
                old = file_fields.get(current.id)
                if old is not None and old.type.copy(True) == current.type.copy(True):
                    out[current.name] = (old.name, old.type)
            self._index_columns[schema_id] = out
        return self._index_columns[schema_id]

    def _file_stats(self, f: DataFileMeta) -> dict[str, ColumnStats]:
        """Current-schema column name -> stats of that column in file ``f`` (the filter's columns)."""
        cols = None if self.key_stats else f.stats_columns
        key = (f.schema_id, cols)
        layout = self._stats_layouts.get(key)
        if layout is None:
            layout = self._stats_layouts[key] = self._stats_layout(f.schema_id, cols)
        simple = f.key_stats if self.key_stats else f.value_stats
        out = {}
        if layout.positions:
            decoded = stats.decode(simple, layout.stored_types, f.row_count, layout.positions)
            for (name, old, new), st in zip(layout.evolve, decoded, strict=True):
                out[name] = _evolve_stats(st, old, new)
        for name in layout.added:
            out[name] = ColumnStats(None, None, f.row_count, f.row_count)  # added later: all null
        return out

    def _stats_layout(self, schema_id: int, cols: tuple[str, ...] | None) -> _StatsLayout:
        """Where the filter's columns sit in the stats of files of ``schema_id`` (matched by field id)."""
        file_schema = self.table.schema_by_id(schema_id)
        if self.key_stats:
            stored = file_schema.fields_named(file_schema.trimmed_primary_keys)
        else:
            stored = list(file_schema.fields) if cols is None else file_schema.fields_named(list(cols))
        position = {s.id: i for i, s in enumerate(stored)}
        file_ids = {s.id for s in file_schema.fields}
        layout = _StatsLayout([s.type for s in stored], [], [], [])
        for current in self.table.schema.fields:
            if current.name not in self._stats_columns:
                continue
            if current.id in position:
                i = position[current.id]
                layout.positions.append(i)
                layout.evolve.append((current.name, stored[i].type, current.type))
            elif current.id not in file_ids:
                layout.added.append(current.name)
        return layout


@dataclass
class _StatsLayout:
    """The stats columns a filter needs in files of one schema: positions, types, evolution."""

    stored_types: list[DataType]
    positions: list[int]
    evolve: list[tuple[str, DataType, DataType]]  # (current name, type written, current type)
    added: list[str]  # columns added after the files were written: all null there


def _evolve_stats(s: ColumnStats, old: DataType, new: DataType) -> ColumnStats:
    """Stats of a column written under ``old`` expressed in the physical values of ``new``."""
    timestamps = old.root in TIMESTAMP_ROOTS and new.root in TIMESTAMP_ROOTS
    if timestamps and isinstance(old, AtomicType) and isinstance(new, AtomicType):
        a = _UNIT_SCALE[timestamp_unit(type_param(old, "precision"))]
        b = _UNIT_SCALE[timestamp_unit(type_param(new, "precision"))]
        if a != b:
            lo, hi = (None if v is None else v * b // a for v in (s.min, s.max))
            return ColumnStats(lo, hi, s.null_count, s.row_count)
    if old.root != new.root and {old.root, new.root} & {"FLOAT", "DOUBLE", "DECIMAL"}:
        return ColumnStats(None, None, s.null_count, s.row_count)  # cross-type bounds: keep counts only
    return s


def bucket_splits(table: TableStore, snapshot: Snapshot, entries: list[ManifestEntry]) -> list[Split]:
    """One merged split per (partition, bucket) of ``entries``, every file included (level 0 too)
    with its deletion vector: a read gives each bucket's live keys however its rows were written
    and compacted (deletion-vector compactions delete old versions in vectors, not in files)."""
    deletions = deletion_files(table.paths, table.index_entries(snapshot))
    groups: dict[tuple[bytes, int], list[DataFileMeta]] = {}
    for e in entries:
        groups.setdefault((e.partition, e.bucket), []).append(e.file)
    splits = []
    for (partition, bucket), files in groups.items():
        vectors = tuple(deletions.get(f.file_name) for f in files)
        path = table.bucket_path(partition, bucket)
        splits.append(
            Split(
                snapshot.id,
                partition,
                bucket,
                path,
                tuple(files),
                False,
                (),
                vectors if any(v is not None for v in vectors) else (),
            )  # fmt: skip
        )
    return splits


def _splits(
    table: TableStore,
    snapshot_id: int,
    entries: list[ManifestEntry],
    merged: bool,
    selections: dict[str, bytes],
    deletions: dict[str, DeletionFile],
) -> list[Split]:
    """Merged primary-key buckets are one split each; other files are packed into splits of about
    ``source.split.target-size`` (append files in sequence order)."""
    groups: dict[tuple[bytes, int], list[DataFileMeta]] = {}
    for e in entries:
        groups.setdefault((e.partition, e.bucket), []).append(e.file)
    sizes = target_sizes(table.schema)
    target, open_cost = sizes["target_size"], sizes["open_file_cost"]
    splits = []
    for (partition, bucket), files in groups.items():
        path = table.bucket_path(partition, bucket)
        if merged:
            # MergeTreeSplitGenerator: only files above level 0 with no retract rows skip the merge
            raw = len(files) == 1 and files[0].level > 0 and files[0].delete_row_count == 0
            splits.append(Split(snapshot_id, partition, bucket, path, tuple(files), raw))
            continue
        files.sort(key=lambda f: f.min_sequence_number)
        for pack in pack_ordered(files, [max(f.file_size, open_cost) for f in files], target):
            chosen = tuple(selections.get(f.file_name) for f in pack)
            vectors = tuple(deletions.get(f.file_name) for f in pack)
            splits.append(
                Split(
                    snapshot_id,
                    partition,
                    bucket,
                    path,
                    tuple(pack),
                    True,
                    chosen if any(c is not None for c in chosen) else (),
                    vectors if any(v is not None for v in vectors) else (),
                )
            )
    return splits


def pack_ordered(items: Sequence[T], weights: Sequence[int], target: int) -> list[list[T]]:
    """``BinPacking.packForOrdered``: items in order into bins, a bin closed when the next item's
    weight would take it past ``target``."""
    bins: list[list[T]] = []
    current: list[T] = []
    weight = 0
    for item, w in zip(items, weights, strict=True):
        if current and weight + w > target:
            bins.append(current)
            current, weight = [], 0
        current.append(item)
        weight += w
    if current:
        bins.append(current)
    return bins


def file_by_file(split: Split) -> list[Split]:
    """A split whose files are read independently (no key merge) as one split per file: a task
    holds one file's rows at a time, and Spark converts them while the next file is read."""
    if len(split.files) == 1 or not split.raw_convertible:
        return [split]
    return [
        replace(split, files=(f,), selections=_one(split.selections, i), deletions=_one(split.deletions, i))
        for i, f in enumerate(split.files)
    ]


def _one(per_file: tuple[T | None, ...], i: int) -> tuple[T, ...]:
    """The ``i``-th entry of a split's per-file tuple (empty tuple: nothing for any file)."""
    value = per_file[i] if per_file else None
    return () if value is None else (value,)
