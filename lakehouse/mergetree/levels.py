"""The LSM tree of one bucket: data files by level, sorted runs, and key-range sections.

Level 0 holds one sorted run per file (newest first); every higher level is a single sorted
run whose files have disjoint key ranges (``Levels``). :func:`sections` splits files into groups
whose key ranges overlap, so that only files that can share a key are merged together
(``IntervalPartition``).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from lakehouse.errors import CorruptFileError
from lakehouse.manifest import binary_row
from lakehouse.manifest.entries import DataFileMeta
from lakehouse.manifest.files import damaged_entry
from lakehouse.mergetree.keyorder import comparable_value, float_width
from lakehouse.options import DELETION_VECTORS_ENABLED, ChangelogProducerKind, MergeEngineKind
from lakehouse.types import DataType


@dataclass(frozen=True)
class SortedRun:
    """Files of one level with disjoint key ranges, in key order (a level-0 run is one file)."""

    level: int
    files: tuple[DataFileMeta, ...]

    @property
    def total_size(self) -> int:
        return sum(f.file_size for f in self.files)


class KeyRanges:
    """Decoded ``min_key``/``max_key`` of files as keys compare, for ordering and overlap tests
    (cached)."""

    def __init__(self, key_types: list[DataType], table: str) -> None:
        self.types = key_types
        self.table = table  # names it in errors
        self.widths = [float_width(t) for t in key_types]
        self._cache: dict[bytes, tuple] = {}

    def key(self, row: bytes) -> tuple:
        found = self._cache.get(row)
        if found is None:
            values = binary_row.decode_row(binary_row.deserialize(row)[1], self.types)
            found = self._cache[row] = tuple(map(comparable_value, values, self.widths))
        return found

    def min(self, f: DataFileMeta) -> tuple:
        try:
            return self.key(f.min_key)
        except CorruptFileError as e:
            raise damaged_entry(self.table, f, e) from None

    def max(self, f: DataFileMeta) -> tuple:
        try:
            return self.key(f.max_key)
        except CorruptFileError as e:
            raise damaged_entry(self.table, f, e) from None


def level0_invisible(schema) -> bool:
    """Whether readers skip level-0 files, so writers must always push them up: first-row tables
    (and deletion-vector tables) only show data once compaction has merged it."""
    options = schema.core_options
    return bool(schema.primary_keys) and (
        options.merge_engine == MergeEngineKind.FIRST_ROW or options.get_bool(DELETION_VECTORS_ENABLED)
    )


def needs_lookup(schema) -> bool:
    """Whether compactions must push level 0 up at every chance and look its keys up in the
    levels above (``CoreOptions.needLookup``): tables whose readers skip level 0, and
    ``changelog-producer=lookup`` tables, whose changelog comes from those lookups."""
    options = schema.core_options
    return level0_invisible(schema) or (
        bool(schema.primary_keys) and options.changelog_producer == ChangelogProducerKind.LOOKUP
    )


class Levels:
    """The files of one bucket arranged as Paimon's LSM levels."""

    def __init__(self, files: list[DataFileMeta], num_levels: int, ranges: KeyRanges) -> None:
        self.num_levels = max(num_levels, max((f.level for f in files), default=0) + 1)
        self.ranges = ranges
        # newest level-0 file first (``Levels.level0`` orders by max sequence number, descending)
        self.level0 = sorted(
            (f for f in files if f.level == 0), key=lambda f: (-f.max_sequence_number, -f.min_sequence_number)
        )
        self.levels: dict[int, list[DataFileMeta]] = {}
        for f in files:
            if f.level > 0:
                self.levels.setdefault(f.level, []).append(f)
        for files_of_level in self.levels.values():
            files_of_level.sort(key=ranges.min)

    @property
    def max_level(self) -> int:
        return self.num_levels - 1

    @cached_property
    def runs(self) -> list[SortedRun]:
        """Level-0 files one run each (newest first), then one run per non-empty higher level."""
        return [SortedRun(0, (f,)) for f in self.level0] + [
            SortedRun(level, tuple(self.levels[level])) for level in sorted(self.levels)
        ]

    def non_empty_highest_level(self) -> int:
        """The highest level holding a file (-1: none)."""
        if self.levels:
            return max(self.levels)
        return 0 if self.level0 else -1


def sections(files: list[DataFileMeta], ranges: KeyRanges) -> list[list[SortedRun]]:
    """Files grouped into sections of overlapping key ranges, in key order; each section's files
    packed into as few sorted runs as possible (``IntervalPartition.partition``), the runs oldest
    first (by their newest row): a merge that concatenates them meets each key's versions mostly in
    sequence order already."""
    ordered = sorted(files, key=lambda f: (ranges.min(f), ranges.max(f)))
    out: list[list[SortedRun]] = []
    section: list[DataFileMeta] = []
    bound: tuple | None = None
    for f in ordered:
        if bound is not None and ranges.min(f) > bound:  # (a bound while the section has files)
            out.append(_pack_runs(section, ranges))
            section, bound = [], None
        section.append(f)
        bound = ranges.max(f) if bound is None or ranges.max(f) > bound else bound
    if section:
        out.append(_pack_runs(section, ranges))
    return out


def _pack_runs(files: list[DataFileMeta], ranges: KeyRanges) -> list[SortedRun]:
    """Greedy: each file (by min key) goes to the run whose last file ends before it starts."""
    runs: list[list[DataFileMeta]] = []
    for f in files:  # already sorted by (min, max) key
        for run in runs:
            if ranges.max(run[-1]) < ranges.min(f):
                run.append(f)
                break
        else:
            runs.append([f])
    runs.sort(key=lambda run: max(f.max_sequence_number for f in run))
    return [SortedRun(min(x.level for x in run), tuple(run)) for run in runs]


def sequenced(section: list[SortedRun]) -> bool:
    """Whether every row of each run of ``section`` (oldest first, as :func:`sections` orders
    them) has a higher sequence number than all rows of the runs before it, as the files' sequence
    ranges record: runs written one commit or compaction after another. Concatenated run after
    run, each key's versions then come oldest first, so a merge needs neither their sequence
    numbers nor the files they came from to order them (concurrent writers' runs may interleave)."""
    newest = -1
    for run in section:
        if min(f.min_sequence_number for f in run.files) <= newest:
            return False
        newest = max(f.max_sequence_number for f in run.files)
    return True
