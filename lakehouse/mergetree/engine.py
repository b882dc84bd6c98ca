"""Merge engines: how the versions of one primary key become one row (``merge-engine``).

* ``deduplicate``: the last version wins; a -U/-D as last version deletes the key.
* ``partial-update``: every column takes its last non-null value. ``fields.<g>.sequence-group``
  makes columns follow their own sequence field(s) (null group sequence: the group is untouched;
  a retract nulls the group), optionally with aggregate functions inside a group.
  ``partial-update.remove-record-on-delete`` lets -D remove the row (a later version starts
  from nothing); otherwise deletes must be ignored (``ignore-delete``) or are refused. With
  groups, ``partial-update.remove-record-on-sequence-group`` names sequence fields whose -D
  removes the whole row when it does not lose to the group's sequence: the row becomes the -D's
  values, deleted unless later versions follow (they apply on top of it).
* ``aggregation``: every value column is reduced by ``fields.<f>.aggregate-function``
  (default ``fields.default-aggregate-function``, else ``last_non_null_value``).
* ``first-row``: the first version wins; later versions and deletes are ignored.

Versions are ordered by ``sequence.field`` (if set), then the sequence number, then the file
(later wins). :meth:`MergeEngine.merge` returns one row per key with the merged kind: +I, or -D
when the key ends deleted (readers drop those; compaction keeps them unless nothing older can
exist below its output).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakehouse import nulls_first
from lakehouse.errors import InvalidOptionError, SchemaMismatchError
from lakehouse.format.parquet import SEQUENCE_NUMBER, VALUE_KIND
from lakehouse.mergetree.aggregate import FieldAgg
from lakehouse.mergetree.groups import KeyGroups, positions_of, take_or_null
from lakehouse.options import (
    AGGREGATION_REMOVE_RECORD_ON_DELETE,
    FIELDS_DEFAULT_AGGREGATE_FUNCTION,
    IGNORE_DELETE,
    PARTIAL_UPDATE_REMOVE_RECORD_ON_DELETE,
    PARTIAL_UPDATE_REMOVE_RECORD_ON_SEQUENCE_GROUP,
    SEQUENCE_FIELD,
    CoreOptions,
    MergeEngineKind,
)
from lakehouse.rowkind import RowKind, is_retract

ORDINAL = "_FILE_ORDINAL"  # optional tiebreak column: files read later win ties
_SEQUENCE_GROUP = ".sequence-group"
# With remove-record-on-delete (or on sequence group), a merged row whose history restarted
# after a delete is stored as +U: it replaces older versions instead of updating them (written +U
# rows become +I).
COMPLETE = 2


@dataclass(frozen=True)
class SequenceGroup:
    """Columns ``fields`` ordered by their own sequence columns ``sequence``."""

    sequence: tuple[str, ...]
    fields: tuple[str, ...]


class MergeEngine:
    """The merge engine of a primary-key table, configured from its schema's options."""

    def __init__(self, schema, table: str) -> None:
        options: CoreOptions = schema.core_options
        self.table = table
        try:
            self.kind = options.merge_engine
        except InvalidOptionError as e:
            raise InvalidOptionError(f"table {table}: {e}") from None
        self.key = list(schema.trimmed_primary_keys)
        self.sequence_fields = options.names(SEQUENCE_FIELD)
        self.ignore_delete = options.get_bool(IGNORE_DELETE)
        fields = [f for f in schema.fields if f.name not in schema.primary_keys]
        self.value_fields = fields
        self.groups: list[SequenceGroup] = []
        self.aggs: dict[str, FieldAgg] = {}
        self.remove_on_delete = False
        self.removing: list[SequenceGroup] = []  # groups whose -D removes the row
        if self.kind == MergeEngineKind.FIRST_ROW and self.sequence_fields:
            raise InvalidOptionError(f"table {table}: merge-engine first-row does not support sequence.field")
        if self.kind == MergeEngineKind.PARTIAL_UPDATE:
            self.remove_on_delete = options.get_bool(PARTIAL_UPDATE_REMOVE_RECORD_ON_DELETE)
            self._partial_update_options(schema, options)
        elif self.kind == MergeEngineKind.AGGREGATION:
            self.remove_on_delete = options.get_bool(AGGREGATION_REMOVE_RECORD_ON_DELETE)
            default = options.get(FIELDS_DEFAULT_AGGREGATE_FUNCTION) or "last_non_null_value"
            for f in fields:
                explicit = options.get(f"fields.{f.name}.aggregate-function")
                function = "last_value" if f.name in self.sequence_fields else explicit or default
                self.aggs[f.name] = FieldAgg.of(f, function, options, table)
        if self.remove_on_delete and self.ignore_delete:
            raise InvalidOptionError(
                f"table {table}: ignore-delete and {self.kind}.remove-record-on-delete contradict "
                f"each other; set only one"
            )
        if self.removing and self.ignore_delete:
            raise InvalidOptionError(
                f"table {table}: ignore-delete and {PARTIAL_UPDATE_REMOVE_RECORD_ON_SEQUENCE_GROUP} "
                f"contradict each other; set only one"
            )

    @property
    def restarts(self) -> bool:
        """Whether a delete can restart a key's history (merged rows may be stored complete)."""
        return self.remove_on_delete or bool(self.removing)

    def _partial_update_options(self, schema, options: CoreOptions) -> None:
        names = set(schema.field_names)
        seen: dict[str, str] = {}
        for option in sorted(options.raw):
            if not (option.startswith("fields.") and option.endswith(_SEQUENCE_GROUP)):
                continue
            sequence = tuple(option[len("fields.") : -len(_SEQUENCE_GROUP)].split(","))
            protected = tuple(options.names(option))
            for name in sequence + protected:
                if name not in names:
                    raise InvalidOptionError(f"table {self.table}: {option} names unknown column {name!r}")
                if name in schema.primary_keys:
                    raise InvalidOptionError(
                        f"table {self.table}: {option} puts primary key column {name!r} in a sequence group; "
                        f"key columns cannot be in sequence groups"
                    )
                if name in seen and seen[name] != option:
                    raise InvalidOptionError(
                        f"table {self.table}: column {name!r} is in two sequence groups "
                        f"({seen[name]}, {option})"
                    )
                seen[name] = option
            self.groups.append(SequenceGroup(sequence, protected))
        if self.groups and self.remove_on_delete:
            raise InvalidOptionError(
                f"table {self.table}: sequence groups and partial-update.remove-record-on-delete contradict "
                f"each other; use sequence groups to retract columns, or remove the groups"
            )
        removing = set(options.names(PARTIAL_UPDATE_REMOVE_RECORD_ON_SEQUENCE_GROUP))
        sequences = {s for g in self.groups for s in g.sequence}
        if removing - sequences:
            raise InvalidOptionError(
                f"table {self.table}: {PARTIAL_UPDATE_REMOVE_RECORD_ON_SEQUENCE_GROUP} names "
                f"{sorted(removing - sequences)}, which are not sequence fields of sequence groups; "
                f"name fields <f> of 'fields.<f>.sequence-group' options"
            )
        self.removing = [g for g in self.groups if removing & set(g.sequence)]
        default = options.get(FIELDS_DEFAULT_AGGREGATE_FUNCTION)
        for f in self.value_fields:
            function = options.get(f"fields.{f.name}.aggregate-function") or default
            if function and f.name in seen and f.name not in {s for g in self.groups for s in g.sequence}:
                self.aggs[f.name] = FieldAgg.of(f, function, options, self.table)

    # ---- writing -------------------------------------------------------------------------

    def accept(self, data: pa.Table, kinds: pa.Array) -> tuple[pa.Table, pa.Array]:
        """The rows the table takes: deletes dropped under ``ignore-delete``; refuses (before
        anything is written) retracts the engine cannot apply."""
        retract = is_retract(kinds.to_numpy(zero_copy_only=False))
        if retract.any():
            if self.ignore_delete:
                keep = pa.array(~retract)
                data, kinds = data.filter(keep), kinds.filter(keep)
            else:
                self._check_retracts(kinds)
        return data, kinds

    def stored(self, data: pa.Table, kinds: pa.Array) -> tuple[pa.Table, pa.Array]:
        """Accepted rows as the engine stores them: counts as ones, complete rows as +I."""
        if self.restarts:
            kinds = pc.if_else(pc.equal(kinds, COMPLETE), pa.scalar(0, kinds.type), kinds)
        for name, agg in self.aggs.items():
            if agg.function == "count":
                i = data.schema.get_field_index(name)
                data = data.set_column(i, data.schema.field(i), agg.prepare_input(data.column(i)))
        return data, kinds

    def _check_retracts(self, kinds: pa.Array) -> None:
        why = None
        if self.kind == MergeEngineKind.FIRST_ROW:
            why = "merge-engine first-row keeps the first version and cannot apply -U/-D rows"
        elif self.kind == MergeEngineKind.PARTIAL_UPDATE and not self.groups and not self.remove_on_delete:
            why = "merge-engine partial-update cannot apply -U/-D rows by default"
        elif self.kind == MergeEngineKind.AGGREGATION:
            if self.remove_on_delete and not pc.any(pc.equal(kinds, 1)).as_py():
                return
            stuck = [a.field.name for a in self.aggs.values() if not a.retractable]
            if stuck:
                why = f"the aggregate functions of columns {stuck} cannot retract -U/-D rows"
        if why:
            raise SchemaMismatchError(
                f"table {self.table}: {why}; set 'ignore-delete'='true' to drop them"
                + (
                    ", 'partial-update.remove-record-on-delete'='true' or sequence groups"
                    if self.kind == MergeEngineKind.PARTIAL_UPDATE
                    else ", or 'fields.<column>.ignore-retract'='true' for those columns"
                    if self.kind == MergeEngineKind.AGGREGATION
                    else ""
                )
            )

    # ---- merging -------------------------------------------------------------------------

    def read_columns(self, wanted: set[str]) -> set[str]:
        """Columns a merge needs to produce ``wanted``: for deduplicate and first-row the same
        plus the sequence fields; the other engines combine columns, so all of them."""
        if self.kind in (MergeEngineKind.DEDUPLICATE, MergeEngineKind.FIRST_ROW):
            return set(wanted) | set(self.key) | set(self.sequence_fields)
        return set(wanted) | set(self.key) | {f.name for f in self.value_fields}

    def merge(self, table: pa.Table, arrival_order: bool = False) -> pa.Table:
        """One row per key (sorted by key) from all versions in ``table``.

        Deduplicate and first-row keep the winning version's kind; the other engines give +I,
        or -D when the key ends deleted.

        ``table`` holds the value columns, the key, ``_SEQUENCE_NUMBER``, ``_VALUE_KIND`` and
        optionally the file ordinal tiebreak; the result has the same columns but the ordinal.
        ``arrival_order``: each key's versions come oldest first in table order (a write
        buffer's rows, runs newer one after another concatenated), so a stable sort needs no
        sequence number column nor ordinal.
        """
        groups = self._groups(table, arrival_order)
        kept = KEPT.get(self.kind)
        return groups.rows(kept(groups)) if kept is not None else MERGES[self.kind](self, groups)

    @property
    def keeps_versions(self) -> bool:
        """Whether a merge keeps one version of each key as it is (deduplicate, first-row), so
        that :meth:`winners` can pick them from the columns that decide."""
        return self.kind in KEPT

    @property
    def deciding_columns(self) -> list[str]:
        """The columns (besides sequence number and kind) that decide which version wins."""
        return [*self.key, *(f for f in self.sequence_fields if f not in self.key)]

    def carried(self, names: Iterable[str]) -> list[str]:
        """Those of columns ``names`` that a merge only carries along with the version it keeps
        (engines that :attr:`keeps_versions`; none for the others): not the
        :attr:`deciding_columns`. Merges read them as dictionaries where they repeat
        (:mod:`lakehouse.format.dictionaries`)."""
        if not self.keeps_versions:
            return []
        deciding = set(self.deciding_columns)
        return [name for name in names if name not in deciding]

    def winners(self, table: pa.Table, arrival_order: bool = False) -> np.ndarray:
        """The positions in ``table`` of the versions a merge keeps, in key order, for engines
        that :attr:`keeps_versions`: ``table`` needs only the :attr:`deciding_columns`, the
        sequence number (unless ``arrival_order``) and the kind (and the ordinal, if any)."""
        groups = self._groups(table, arrival_order)
        return groups.positions(KEPT[self.kind](groups))

    def _groups(self, table: pa.Table, arrival_order: bool) -> KeyGroups:
        order = [*self.sequence_fields] if arrival_order else [*self.sequence_fields, SEQUENCE_NUMBER]
        tiebreak = ORDINAL if ORDINAL in table.column_names else None
        return KeyGroups.of(table, self.key, order, VALUE_KIND, tiebreak=tiebreak)

    def _aggregation(self, g: KeyGroups) -> pa.Table:
        n = len(g.kinds)
        retract = is_retract(g.kinds)
        rows = np.ones(n, bool)
        deleted = complete = np.zeros(g.count, bool)
        if self.remove_on_delete:
            resets = g.kinds == RowKind.DELETE
            begin = g.history_starts(resets, g.kinds == COMPLETE)
            rows = np.arange(n) >= begin
            deleted = resets[g.ends - 1]
            complete = _restarted(g, begin)
        columns = {name: agg.reduce(g.column(name), g, rows, retract) for name, agg in self.aggs.items()}
        return _assemble(g, g.ends - 1, columns, deleted, complete)

    def _partial_update(self, g: KeyGroups) -> pa.Table:
        n = len(g.kinds)
        update_before = g.kinds == 1
        retract = is_retract(g.kinds)
        if not self.groups:
            resets = g.kinds == RowKind.DELETE if self.remove_on_delete else np.zeros(n, bool)
            begin = g.history_starts(resets, g.kinds == COMPLETE)
            rows = (np.arange(n) >= begin) & ~retract
            # -U changes nothing, and a -D only with remove-record-on-delete
            last_event = g.last_where(~update_before & (resets | ~retract))
            keep = np.flatnonzero(last_event >= 0)
            deleted = resets[last_event[keep]] | (g.last_where(rows)[keep] < 0)
            columns = {}
            for f in self.value_fields:
                columns[f.name] = g.take(f.name, g.last_where(rows & g.valid(f.name))[keep])
            complete = _restarted(g, begin)[keep]
            return _assemble(g, last_event[keep], columns, deleted, complete)
        # each key's history counts from its last base (a removing -D or a complete row), which
        # stands in as a row of all its values; nothing but retracts in it: the key is deleted
        last = self._last_base(g)
        sizes = g.ends - g.starts
        active = np.arange(n) >= np.repeat(np.maximum(last, g.starts), sizes)
        base = np.zeros(n, bool)
        base[last[last >= 0]] = True
        inserts = (~retract | base) & active
        retract = retract & active & ~base
        columns = {}
        grouped = set()
        for group in self.groups:
            columns.update(self._sequence_group(g, group, retract, active, base))
            grouped |= set(group.sequence) | set(group.fields)
        for f in self.value_fields:
            if f.name in grouped:
                continue
            agg = self.aggs.get(f.name)
            if agg is not None:
                columns[f.name] = agg.reduce(g.column(f.name), g, inserts, np.zeros(n, bool))
            else:
                columns[f.name] = g.take(f.name, g.last_where(inserts & g.valid(f.name)))
        removed = np.zeros(g.count, bool)
        removed[last >= 0] = g.kinds[last[last >= 0]] == RowKind.DELETE
        deleted = (last == g.ends - 1) & removed  # the last version removed the row
        deleted |= g.last_where(~is_retract(g.kinds)) < 0
        return _assemble(g, g.ends - 1, columns, deleted, ~deleted & (last >= 0))

    def _last_base(self, g: KeyGroups) -> np.ndarray:
        """Per key, the last row that replaced the whole row (-1: none): a complete row, or a -D
        with a removing group of its own that does not lose to the row's sequence of that group
        (Paimon's ``remove-record-on-sequence-group``). The row's sequence of a group is the
        highest among the versions since the key's previous base, that base's own included, so
        one pass finds every removing -D when one group removes; with several, a removal can
        lower another group's sequence, and each round settles the next removal of every key.
        Only the keys with a -D are looked into: the others' last base is their last complete row."""
        last = g.last_where(g.kinds == COMPLETE)
        if not self.removing or not len(g.kinds):
            return last
        removing = np.flatnonzero(np.logical_or.reduceat(g.kinds == RowKind.DELETE, g.starts))
        if len(removing):
            sub, rows = g.subset(removing)
            found = self._removals(sub)
            last[removing] = np.where(found >= 0, rows[np.maximum(found, 0)], -1)
        return last

    def _removals(self, g: KeyGroups) -> np.ndarray:
        """:meth:`_last_base` of keys that hold a -D (``g``: their rows alone)."""
        n = len(g.kinds)
        bases = g.kinds == COMPLETE
        last = g.last_where(bases)
        ranks = [_sequence_rank(g, group) for group in self.removing]
        candidates = (g.kinds == RowKind.DELETE) & np.any([r >= 0 for r in ranks], axis=0)
        starts = np.zeros(n, bool)
        starts[g.starts] = True
        sizes = g.ends - g.starts
        while True:
            segment = np.cumsum(starts | bases)
            wins = np.zeros(n, bool)
            for rank in ranks:
                # the highest rank before each row in its segment (< 0 at a segment's start)
                running = np.maximum.accumulate(segment * (n + 2) + rank + 1)
                before = np.full(n, -1, np.int64)
                before[1:] = running[:-1] - segment[1:] * (n + 2) - 1
                wins |= (rank >= 0) & (rank >= before)
            hits = candidates & wins & (np.arange(n) > np.repeat(last, sizes))
            if len(self.removing) == 1:
                return np.maximum(last, g.last_where(hits))
            first = g.first_where(hits)
            found = first >= 0
            if not found.any():
                return last
            bases[first[found]] = True
            last[found] = first[found]

    def _sequence_group(
        self, g: KeyGroups, group: SequenceGroup, retract: np.ndarray, active: np.ndarray, base: np.ndarray
    ) -> dict[str, pa.Array]:
        """The group's columns: taken from its latest row by its own sequence (retract: nulled),
        aggregated columns folded over every row of the group in that order. Only ``active`` rows
        count; a ``base`` row counts even with a null sequence (the row starts as its values)."""
        seq = [g.column(s) for s in group.sequence]
        eligible = np.zeros(len(g.kinds), bool)
        for s in seq:
            eligible |= np.asarray(s.is_valid())
        eligible = (eligible & active) | base
        # order every key's eligible rows by the group's sequence (nulls first), then merge order
        ids = g.group_ids()
        columns = {"__g": ids, **{f"__s{i}": s for i, s in enumerate(seq)}, "__pos": np.arange(len(ids))}
        table = pa.table(columns).filter(pa.array(eligible))
        positions = table.column("__pos").to_numpy()
        if len(seq) != 1 or not _in_sequence(table.column("__g").to_numpy(), table.column("__s0")):
            positions = positions[nulls_first.sort_indices(table, list(columns)).to_numpy()]
        sub, owners = _regroup(g, positions, ids[positions])
        # each key's winner is its last row in that order
        winner = np.full(g.count, -1, np.int64)
        winner[owners] = positions[sub.ends - 1]
        won_by_retract = (winner >= 0) & retract[np.maximum(winner, 0)]
        out = {s: g.take(s, winner) for s in group.sequence}
        for name in group.fields:
            if name in self.aggs:
                values = g.take(name, positions)
                everything = np.ones(len(positions), bool)
                reduced = self.aggs[name].reduce(values, sub, everything, retract[positions])
                out[name] = take_or_null(reduced, positions_of(owners, g.count))
            elif name not in out:
                out[name] = g.take(name, np.where(won_by_retract, -1, winner))
        return out


# The merge function of each engine: one row per key from a key's versions.
def _deduplicate(g: KeyGroups) -> np.ndarray:
    # deletes stored before ``ignore-delete`` was set still apply: it only drops new ones
    return g.ends - 1


def _first_row(g: KeyGroups) -> np.ndarray:
    first = g.first_where(~is_retract(g.kinds))
    return first[first >= 0]


# the engines that keep one version per key as it is: the sorted positions they keep
KEPT: dict[MergeEngineKind, Callable[[KeyGroups], np.ndarray]] = {
    MergeEngineKind.DEDUPLICATE: _deduplicate,
    MergeEngineKind.FIRST_ROW: _first_row,
}
# the engines that combine versions
MERGES: dict[MergeEngineKind, Callable[[MergeEngine, KeyGroups], pa.Table]] = {
    MergeEngineKind.PARTIAL_UPDATE: MergeEngine._partial_update,
    MergeEngineKind.AGGREGATION: MergeEngine._aggregation,
}


def _sequence_rank(g: KeyGroups, group: SequenceGroup) -> np.ndarray:
    """Every row's dense rank by the group's sequence fields in order (nulls lowest), -1 where
    they are all null (the row leaves the group alone)."""
    ranks = [nulls_first.dense_rank(g.column(s)).to_numpy().astype(np.int64) for s in group.sequence]
    rank = ranks[0] if len(ranks) == 1 else np.unique(np.stack(ranks, axis=1), axis=0, return_inverse=True)[1]
    empty = np.ones(len(g.kinds), bool)
    for s in group.sequence:
        empty &= np.asarray(g.column(s).is_null())
    return np.where(empty, -1, rank.reshape(-1))


def _in_sequence(ids: np.ndarray, sequence: pa.ChunkedArray) -> bool:
    """Whether the rows of each key (``ids``, ascending) already come in the order of their
    ``sequence`` values, nulls first: versions mostly arrive so, and need no sort."""
    same = ids[1:] == ids[:-1]
    if not same.any():
        return True
    a, b = sequence.slice(0, len(sequence) - 1), sequence.slice(1)
    ordered = pc.or_kleene(a.is_null(), pc.and_kleene(b.is_valid(), pc.less_equal(a, b)))
    return bool(np.asarray(ordered.fill_null(False))[same].all())


def _regroup(g: KeyGroups, positions: np.ndarray, owner: np.ndarray) -> tuple[KeyGroups, np.ndarray]:
    """Ranges over a subset of ``g``'s rows already sorted by owning key, and each range's key."""
    change = np.flatnonzero(np.diff(owner)) + 1
    starts = np.concatenate([[0], change]).astype(np.int64) if len(owner) else np.zeros(0, np.int64)
    ends = np.append(change, len(owner)).astype(np.int64) if len(owner) else starts
    return KeyGroups(g.table, None, starts, ends, g.kinds[positions]), owner[starts]


def _restarted(g: KeyGroups, begin: np.ndarray) -> np.ndarray:
    """Keys whose counted history starts after their first row: a delete (or a complete row)
    cut off what came before, or it starts at a complete row merged earlier: the merged row must
    replace older versions, not update them."""
    if not g.count:
        return np.zeros(0, bool)
    first = begin[g.starts]
    inside = first < g.ends  # a key ending with a delete counts nothing
    complete = np.zeros(g.count, bool)
    complete[inside] = g.kinds[first[inside]] == COMPLETE
    return (first > g.starts) | complete


def _assemble(
    g: KeyGroups,
    rows: np.ndarray,
    columns: dict[str, pa.Array],
    deleted: np.ndarray,
    complete: np.ndarray | None = None,
) -> pa.Table:
    """The rows at sorted positions ``rows`` (a key's last, say) with merged value ``columns``
    and kinds: -D for deleted keys (which keep their deleting row as it came), +U for complete
    rows, else +I. A merged column is taken from ``rows`` only where some key is deleted."""
    schema = g.table.schema
    base = g.rows(rows, [name for name in schema.names if name not in columns])
    mask = pa.array(deleted) if deleted.any() else None
    out = []
    for field in schema:
        if field.name not in columns:
            out.append(base.column(field.name))
            continue
        values = columns[field.name].cast(field.type)
        if mask is not None:
            values = pc.if_else(mask, g.rows(rows, [field.name]).column(0).combine_chunks(), values)
        out.append(values)
    kinds = np.where(deleted, RowKind.DELETE, RowKind.INSERT)
    if complete is not None:
        kinds = np.where(~deleted & complete, COMPLETE, kinds)
    out[schema.get_field_index(VALUE_KIND)] = pa.array(kinds.astype(np.int8))
    return pa.Table.from_arrays(out, schema=schema)
