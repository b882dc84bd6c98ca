"""One step of a compaction's merge: the complete versions of some keys become one row per key,
and, when the compaction writes changelog, the changes of those keys.

The versions carry the level they were read from when it matters: lookup merges take only
level-0 rows and each key's lowest level above (:mod:`lakehouse.mergetree.versions`), lookups in
the levels above the output are made only for keys without such a version among the inputs,
and the changelog compares a key's merged row with its previous version - its top-level row for
``full-compaction``, its newest version above level 0 for ``lookup`` - as Paimon's
``FullChangelogMergeFunctionWrapper``, ``LookupChangelogMergeFunctionWrapper`` and
``FirstRowMergeFunctionWrapper`` do.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from lakehouse.mergetree.changelog import differences
from lakehouse.mergetree.engine import ORDINAL, MergeEngine
from lakehouse.mergetree.lookup import Lookup
from lakehouse.mergetree.versions import LEVEL, KeyLevels
from lakehouse.options import ChangelogProducerKind, MergeEngineKind

_GROUP = "_STEP_GROUP"  # a version's key number, carried through the merge to its merged row


class StepMerge:
    """Merges the steps of one compaction unit (see the module docstring)."""

    def __init__(
        self,
        engine: MergeEngine,
        max_level: int,
        lookup: Lookup | None,
        lookup_merge: bool,
        producer: str,
        compared: tuple[str, ...] | None,
    ) -> None:
        self.engine = engine
        self.max_level = max_level
        self.lookup = lookup
        self.lookup_merge = lookup_merge
        self.producer = producer  # the changelog producer of changelog-writing merges
        self.compared = compared
        self.first_row = engine.kind == MergeEngineKind.FIRST_ROW
        self.merge_old = merges_old_values(engine)

    @property
    def needs_levels(self) -> bool:
        """Whether versions must carry their level even when no changelog is written."""
        return self.lookup is not None or self.lookup_merge

    def merge(
        self, versions: pa.Table, changelog: bool, arrival_order: bool = False
    ) -> tuple[pa.Table, pa.Table | None]:
        """One row per key of ``versions`` (key order), and their changelog when ``changelog``.
        ``arrival_order``: versions without levels come in order (``MergeEngine.merge``)."""
        if LEVEL not in versions.column_names:
            return self.engine.merge(versions, arrival_order), None
        levels = KeyLevels.of(versions, self.engine.key, self.max_level)
        numbered = versions.append_column(_GROUP, pa.array(levels.group))
        if self.lookup_merge:
            numbered = numbered.filter(pa.array(levels.lookup_rows()))
        step = _Step(
            self.engine.merge(numbered).drop_columns([LEVEL]),
            versions.drop_columns([ORDINAL, LEVEL]),
            levels.top if self.producer == ChangelogProducerKind.FULL_COMPACTION else levels.high,
        )
        if self.lookup is not None:
            self._look_up(self.lookup, step, levels, changelog)
        merged = step.merged.drop_columns([_GROUP])
        if not changelog:
            return merged, None
        group = step.group()
        if self.first_row:  # a key new to the table shows its first row
            return merged, merged.filter(pa.array(levels.level0[group] & (levels.high[group] < 0)))
        if (
            self.producer == ChangelogProducerKind.FULL_COMPACTION
        ):  # a key seen only at the top did not change
            emit = ~((levels.count[group] == 1) & (levels.top[group] >= 0))
        else:
            emit = levels.level0[group]
        before = step.before[group]
        has_before = before >= 0
        before_rows = step.previous.take(pa.array(np.where(has_before, before, 0)))
        return merged, differences(before_rows, merged, has_before, emit, self.compared)

    def _look_up(self, lookup: Lookup, step: _Step, levels: KeyLevels, changelog: bool) -> None:
        """Account for the versions above the output of keys without one among the inputs: a
        first-row key keeps its older row, other engines merge it in (when its value matters),
        and ``lookup`` compares with it."""
        group = step.group()
        found = lookup.find(step.merged.drop_columns([_GROUP]), levels.high[group] < 0)
        if found is None:
            return
        rows, old = found
        if changelog and self.producer == ChangelogProducerKind.LOOKUP and not self.first_row:
            step.before = step.before.copy()
            step.before[group[rows]] = step.previous.num_rows + np.arange(len(rows))
            step.previous = pa.concat_tables([step.previous, old.select(step.previous.column_names)])
        if self.first_row:  # the older version came first: the new row goes
            keep = np.ones(step.merged.num_rows, bool)
            keep[rows] = False
            step.merged = step.merged.filter(pa.array(keep))
        elif self.merge_old:
            old = old.append_column(_GROUP, pa.array(group[rows]))
            both = pa.concat_tables(
                [_ordinal(old.select(step.merged.column_names), 0), _ordinal(step.merged, 1)]
            )
            step.merged = self.engine.merge(both.combine_chunks())


def merges_old_values(engine: MergeEngine) -> bool:
    """Whether a key's older version found above changes its merged row: not for first-row (the
    older row wins whole) nor deduplicate without ``sequence.field`` (the newest row wins)."""
    if engine.kind == MergeEngineKind.FIRST_ROW:
        return False
    return engine.kind != MergeEngineKind.DEDUPLICATE or bool(engine.sequence_fields)


@dataclass
class _Step:
    """A step's merged rows (with their key numbers), and per key number the row of
    ``previous`` holding its previous version (-1: none)."""

    merged: pa.Table
    previous: pa.Table
    before: np.ndarray

    def group(self) -> np.ndarray:
        return np.asarray(self.merged.column(_GROUP))


def _ordinal(table: pa.Table, value: int) -> pa.Table:
    return table.append_column(ORDINAL, pa.array(np.full(table.num_rows, value, np.int32)))
