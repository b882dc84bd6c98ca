"""The shape of each bucket's LSM tree in a snapshot: what decides whether it needs compaction.

Per (partition, bucket): files per level, sorted runs (each level-0 file is one, every higher
non-empty level one more), size amplification as universal compaction measures it - the size of
all runs above the oldest, in percent of the oldest run - and whether the table's universal
compaction would pick the bucket now (``num-sorted-run.compaction-trigger``,
``compaction.max-size-amplification-percent``, ``compaction.size-ratio``). Append buckets are
flat (every file on level 0); they need compaction when append compaction would pick small files
in them (``compaction.min.file-num``, ``target-file-size``, ``compaction.small-file-ratio``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lakehouse.append.compactor import AppendPicking
from lakehouse.manifest.entries import DataFileMeta
from lakehouse.mergetree.levels import SortedRun
from lakehouse.mergetree.universal import UniversalCompaction
from lakehouse.options import CoreOptions
from lakehouse.store.partitions import partition_values

if TYPE_CHECKING:
    from lakehouse.store.table_store import TableStore


@dataclass(frozen=True)
class BucketShape:
    """One bucket's LSM tree."""

    partition: dict[str, Any]
    bucket: int
    files_per_level: dict[int, int]
    sorted_runs: int
    total_bytes: int
    size_amplification: float  # percent; 0 with a single run
    needs_compaction: bool

    @property
    def files(self) -> int:
        return sum(self.files_per_level.values())

    @property
    def level0_files(self) -> int:
        return self.files_per_level.get(0, 0)


def bucket_shape(
    partition: dict[str, Any], bucket: int, files: list[DataFileMeta], options: CoreOptions, keyed: bool
) -> BucketShape:
    """The shape of one bucket's files under the table's compaction options (primary-key buckets
    are LSM trees that universal compaction picks, append buckets flat files)."""
    per_level: dict[int, list[DataFileMeta]] = {}
    for f in files:
        per_level.setdefault(f.level, []).append(f)
    runs = [SortedRun(0, (f,)) for f in sorted(per_level.get(0, []), key=lambda f: -f.max_sequence_number)]
    runs += [SortedRun(level, tuple(fs)) for level, fs in sorted(per_level.items()) if level > 0]
    oldest = runs[-1].total_size if runs else 0
    newer = sum(r.total_size for r in runs[:-1])
    universal = UniversalCompaction.from_options(options)
    if not runs:
        due = False
    elif keyed:
        due = universal.pick(options.num_levels, runs) is not None
    else:
        due = AppendPicking.of(options).due(files)
    return BucketShape(
        partition,
        bucket,
        {level: len(fs) for level, fs in sorted(per_level.items())},
        len(runs),
        newer + oldest,
        100.0 * newer / oldest if oldest else 0.0,
        due,
    )


def lsm_shape(table: TableStore, snapshot_id: int | None = None) -> list[BucketShape]:
    """Every bucket's shape in a snapshot (default latest), ordered by partition and bucket."""
    snapshot = table.snapshot(snapshot_id)
    files: dict[tuple[bytes, int], list[DataFileMeta]] = {}
    for e in table.live_entries(snapshot) if snapshot is not None else []:
        files.setdefault((e.partition, e.bucket), []).append(e.file)
    schema = table.schema
    keyed = bool(schema.primary_keys)
    return [
        bucket_shape(partition_values(schema, partition), bucket, fs, schema.core_options, keyed)
        for (partition, bucket), fs in sorted(files.items())
    ]
