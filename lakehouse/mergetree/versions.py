"""Where each key's versions in a merge come from: level 0, the lowest level above it, the top.

Tables whose compactions look older values up (``changelog-producer=lookup``, deletion vectors,
first-row) merge a key's level-0 rows with its newest version above level 0 only: that version
already holds everything older, which still sits in higher levels (``LookupMergeFunction``). The
changelog producers compare a key's merged row with its previous version, found the same way.
Every level above 0 is one sorted run, so a key has at most one row per such level.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakehouse.mergetree.groups import key_ends
from lakehouse.mergetree.keyorder import comparable_keys
from lakehouse.options import DELETION_VECTORS_ENABLED, ChangelogProducerKind, MergeEngineKind

LEVEL = "_LEVEL"  # column: the LSM level of the file a row was read from


def with_level(table: pa.Table, level: int) -> pa.Table:
    """``table`` with a :data:`LEVEL` column of ``level``."""
    return table.append_column(LEVEL, pa.array(np.full(table.num_rows, level, np.int32)))


@dataclass(frozen=True)
class KeyLevels:
    """Per key of ``versions`` (keys in sorted order): its row count, whether it has level-0 rows,
    and the row (index into ``versions``, -1: none) of its lowest level above 0 and of ``top``.
    ``group`` is every row's key number."""

    group: np.ndarray
    count: np.ndarray
    level0: np.ndarray
    high: np.ndarray
    top: np.ndarray
    row_level: np.ndarray

    @classmethod
    def of(cls, versions: pa.Table, key: list[str], top: int = -1) -> KeyLevels:
        n = versions.num_rows
        levels = np.asarray(versions.column(LEVEL), np.int64)
        if n == 0:
            empty = np.zeros(0, np.int64)
            return cls(empty, empty, empty.astype(bool), empty, empty, levels)
        keys = comparable_keys(versions, key)
        order = pc.sort_indices(keys, sort_keys=[(k, "ascending") for k in key]).to_numpy()
        ends = key_ends(keys, key, order)
        starts = np.concatenate([[0], ends[:-1]])
        count = ends - starts
        sorted_group = np.repeat(np.arange(len(starts)), count)
        group = np.empty(n, np.int64)
        group[order] = sorted_group
        lv = levels[order]
        lowest = np.minimum.reduceat(np.where(lv > 0, lv, np.iinfo(np.int64).max), starts)
        return cls(
            group,
            count,
            np.logical_or.reduceat(lv == 0, starts),
            _row_where((lv > 0) & (lv == lowest[sorted_group]), order, sorted_group, len(starts)),
            _row_where(lv == top, order, sorted_group, len(starts)),
            levels,
        )

    def lookup_rows(self) -> np.ndarray:
        """Mask of the rows a lookup merge sees: level-0 rows and each key's lowest level above."""
        high = np.zeros(len(self.group), bool)
        high[self.high[self.high >= 0]] = True
        return (self.row_level == 0) | high


def _row_where(mask: np.ndarray, order: np.ndarray, group: np.ndarray, count: int) -> np.ndarray:
    """Per key, the original row index of its (single) sorted row where ``mask`` holds (-1: none)."""
    out = np.full(count, -1, np.int64)
    out[group[mask]] = order[mask]
    return out


def lookup_merge(schema) -> bool:
    """Whether merges of ``schema``'s table see only level-0 rows and each key's lowest level above:
    ``changelog-producer=lookup`` tables whose engine combines versions (partial-update,
    aggregation). Deduplicate keeps the newest version either way, and first-row and
    deletion-vector tables have one visible version above level 0."""
    options = schema.core_options
    return (
        bool(schema.primary_keys)
        and options.changelog_producer == ChangelogProducerKind.LOOKUP
        and not options.get_bool(DELETION_VECTORS_ENABLED)
        and options.merge_engine in (MergeEngineKind.PARTIAL_UPDATE, MergeEngineKind.AGGREGATION)
    )
