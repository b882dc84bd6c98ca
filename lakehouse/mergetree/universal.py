"""Which sorted runs of a bucket to compact, and into which level (``UniversalCompaction``).

Runs are ordered newest first. In order of priority: if the runs above the oldest are larger
than ``compaction.max-size-amplification-percent`` of it, everything is compacted into the
highest level; else the newest runs are merged while each next run is no larger than their
sum grown by ``compaction.size-ratio`` percent; else, once there are more than
``num-sorted-run.compaction-trigger`` runs, the newest surplus runs are merged regardless.
Output never stays in level 0: it goes just below the next untouched run, or to the highest
level when every run takes part.
"""

from __future__ import annotations

from dataclasses import dataclass

from lakehouse.manifest.entries import DataFileMeta
from lakehouse.mergetree.levels import SortedRun
from lakehouse.options import (
    COMPACTION_MAX_SIZE_AMPLIFICATION_PERCENT,
    COMPACTION_SIZE_RATIO,
    NUM_SORTED_RUN_COMPACTION_TRIGGER,
    CoreOptions,
)


@dataclass(frozen=True)
class CompactUnit:
    """Files to compact together and the level their output goes to."""

    output_level: int
    files: tuple[DataFileMeta, ...]


@dataclass(frozen=True)
class UniversalCompaction:
    max_size_amp: int  # percent
    size_ratio: int  # percent
    run_trigger: int

    @classmethod
    def from_options(cls, options: CoreOptions) -> UniversalCompaction:
        return cls(
            options.get_int(COMPACTION_MAX_SIZE_AMPLIFICATION_PERCENT),
            options.get_int(COMPACTION_SIZE_RATIO),
            options.get_int(NUM_SORTED_RUN_COMPACTION_TRIGGER),
        )

    def pick(self, num_levels: int, runs: list[SortedRun]) -> CompactUnit | None:
        max_level = num_levels - 1
        if len(runs) < self.run_trigger:
            return None
        return (
            self._size_amplification(max_level, runs)
            or self._size_ratio(max_level, runs, 1, force=False)
            or (
                self._size_ratio(max_level, runs, len(runs) - self.run_trigger + 1, force=True)
                if len(runs) > self.run_trigger
                else None
            )
        )

    def _size_amplification(self, max_level: int, runs: list[SortedRun]) -> CompactUnit | None:
        newer = sum(r.total_size for r in runs[:-1])
        if newer * 100 > self.max_size_amp * runs[-1].total_size:
            return _unit(max_level, runs)
        return None

    def _size_ratio(
        self, max_level: int, runs: list[SortedRun], count: int, force: bool
    ) -> CompactUnit | None:
        size = sum(r.total_size for r in runs[:count])
        triggered = force or count > 1
        while count < len(runs):
            following = runs[count]
            # a too large run stops the pick, unless one is under way and the run is in level 0 or 1
            too_large = size * (100.0 + self.size_ratio) / 100.0 < following.total_size
            if too_large and (not triggered or following.level > 1):
                break
            size += following.total_size
            count += 1
            triggered = True
        return _create_unit(runs, max_level, count) if triggered else None

    def force_level0(self, num_levels: int, runs: list[SortedRun]) -> CompactUnit | None:
        """Every level-0 run pushed up, when :meth:`pick` chose nothing (``ForceUpLevel0Compaction``):
        tables whose readers skip level 0 must not leave data there."""
        count = next((i for i, r in enumerate(runs) if r.level > 0), len(runs))
        return self._size_ratio(num_levels - 1, runs, count, force=True) if count else None


def _unit(level: int, runs: list[SortedRun]) -> CompactUnit:
    return CompactUnit(level, tuple(f for r in runs for f in r.files))


def _create_unit(runs: list[SortedRun], max_level: int, count: int) -> CompactUnit:
    """The first ``count`` runs, output just below the next run (never to level 0)."""
    level = max_level if count == len(runs) else max(0, runs[count].level - 1)
    if level == 0:
        # pull in following runs until one above level 0 sets the output level
        while count < len(runs):
            following = runs[count]
            count += 1
            if following.level != 0:
                level = following.level
                break
    if count == len(runs):
        level = max_level
    return _unit(level, runs[:count])


def pick_full(num_levels: int, runs: list[SortedRun], rewrite_single: bool = False) -> CompactUnit | None:
    """Everything into the highest level; nothing to do when that is already one run there
    (unless ``rewrite_single``, e.g. to fold a file's deletion vector into it)."""
    if not runs:
        return None
    if len(runs) == 1 and runs[0].level == num_levels - 1 and not rewrite_single:
        return None
    return _unit(num_levels - 1, runs)
