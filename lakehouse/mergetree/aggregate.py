"""Field aggregate functions of the aggregation and partial-update merge engines.

Each function reduces every key's range of rows (:class:`KeyGroups`) to one value. The rows a
function sees are given by a mask (the part of a key's history that counts) and come in merge
order; retract rows (-U/-D) subtract where the function supports it (``sum``, ``product``,
``count``, ``last_value``, ``last_non_null_value``, ``collect``, ``merge_map``,
``nested_update``) and are skipped under ``fields.<f>.ignore-retract``. Reductions run as Arrow
hash aggregations or numpy ``reduceat``; only the functions whose values are opaque objects
(roaring bitmaps, theta sketches) or whose retraction is order dependent (``collect``,
``merge_map``, ``nested_update`` of rows that hold a retract) fold values in Python.

``count`` stores partial counts: the writer turns each input value into 1 (see
:func:`prepare_input`), so merging any mix of raw and already merged rows is a sum.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyroaring import BitMap, BitMap64

from lakehouse.errors import InvalidOptionError, SchemaMismatchError
from lakehouse.mergetree.groups import KeyGroups, positions_of, take_or_null
from lakehouse.types import ArrayType, DataField, RowType, to_arrow

RETRACTABLE = frozenset(
    {"sum", "product", "count", "last_value", "last_non_null_value", "collect", "merge_map", "nested_update"}
)
_NUMERIC = frozenset({"TINYINT", "SMALLINT", "INT", "BIGINT", "FLOAT", "DOUBLE", "DECIMAL"})
_COMPARABLE = _NUMERIC | {"CHAR", "VARCHAR", "DATE", "TIME", "TIMESTAMP", "TIMESTAMP_LTZ"}
_TYPES: dict[str, frozenset[str] | None] = {  # None: any type
    "sum": _NUMERIC,
    "product": _NUMERIC,
    "count": frozenset({"INT", "BIGINT"}),
    "max": _COMPARABLE,
    "min": _COMPARABLE,
    "last_value": None,
    "last_non_null_value": None,
    "first_value": None,
    "first_non_null_value": None,
    "listagg": frozenset({"CHAR", "VARCHAR"}),
    "bool_and": frozenset({"BOOLEAN"}),
    "bool_or": frozenset({"BOOLEAN"}),
    "rbm32": frozenset({"BINARY", "VARBINARY"}),
    "rbm64": frozenset({"BINARY", "VARBINARY"}),
    "theta_sketch": frozenset({"BINARY", "VARBINARY"}),
    "collect": frozenset({"ARRAY"}),
    "nested_update": frozenset({"ARRAY"}),
    "merge_map": frozenset({"MAP"}),
}
FUNCTIONS = frozenset(_TYPES)


@dataclass(frozen=True)
class FieldAgg:
    """The aggregate function of one value column and its per-field options."""

    function: str
    field: DataField
    ignore_retract: bool = False
    delimiter: str = ","
    distinct: bool = False
    nested_key: tuple[str, ...] = ()

    @classmethod
    def of(cls, field: DataField, function: str, options, table: str) -> FieldAgg:
        """Validate ``function`` for ``field`` and read its ``fields.<f>.*`` options."""
        function = function.strip().lower()
        allowed = _TYPES.get(function, frozenset())
        if function not in _TYPES:
            raise InvalidOptionError(
                f"table {table}: unknown aggregate function {function!r} for column {field.name}; "
                f"use one of {sorted(FUNCTIONS)}"
            )
        if allowed is not None and field.type.root not in allowed:
            raise InvalidOptionError(
                f"table {table}: aggregate function {function} cannot aggregate column {field.name} of "
                f"type {field.type}; it takes {sorted(allowed)}"
            )
        prefix = f"fields.{field.name}."
        nested = tuple(options.names(prefix + "nested-key"))
        if nested:
            element = field.type.element if isinstance(field.type, ArrayType) else None
            names = [f.name for f in element.fields] if isinstance(element, RowType) else []
            if function != "nested_update" or any(n not in names for n in nested):
                raise InvalidOptionError(
                    f"table {table}: {prefix}nested-key={','.join(nested)} needs nested_update on an "
                    f"ARRAY<ROW> column whose rows have those fields"
                )
        return cls(
            function,
            field,
            options.get_bool(prefix + "ignore-retract"),
            options.get(prefix + "list-agg-delimiter") or ",",
            options.get_bool(prefix + "distinct"),
            nested,
        )

    @property
    def retractable(self) -> bool:
        return self.ignore_retract or self.function in RETRACTABLE

    def prepare_input(self, values: pa.ChunkedArray) -> pa.ChunkedArray:
        """What a written value contributes: a count of one for ``count``, the value otherwise."""
        if self.function != "count":
            return values
        one = pa.scalar(1, to_arrow(self.field.type))
        return pc.if_else(pc.is_null(values), pa.scalar(None, one.type), one)

    def reduce(self, values: pa.Array, groups: KeyGroups, rows: np.ndarray, retract: np.ndarray) -> pa.Array:
        """One value per key from the ``rows`` (mask) of its range; ``retract`` marks -U/-D rows."""
        if self.ignore_retract:
            rows, retract = rows & ~retract, np.zeros_like(retract)
        target = to_arrow(self.field.type)
        out = _REDUCERS[self.function](self, values, groups, rows, retract & rows)
        try:
            return out if out.type == target else out.cast(target)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
            raise SchemaMismatchError(
                f"aggregate {self.function} of column {self.field.name} does not fit {self.field.type} ({e})"
            ) from None


# ---- reductions -----------------------------------------------------------------------------


def _hash(values: pa.Array, groups: KeyGroups, rows: np.ndarray, function: str, options=None) -> pa.Array:
    """An Arrow hash aggregation over the selected rows, one value per key."""
    table = pa.table({"g": groups.group_ids()[rows], "v": values.filter(pa.array(rows))})
    return _by_key(table, "v", function, groups.count, options)


def _by_key(table: pa.Table, column: str, function: str, count: int, options=None) -> pa.Array:
    """``function`` of ``column`` per key id ``g`` of ``table``, for all ``count`` keys (null: no row)."""
    result = table.group_by("g", use_threads=False).aggregate([(column, function, options)])
    where = positions_of(result.column("g").to_numpy(), count)
    return take_or_null(result.column(f"{column}_{function}"), where)


def _elements(lists: pa.Array, groups: KeyGroups, rows: np.ndarray) -> pa.Table:
    """Every element of the selected rows' lists with its key id ``g`` and position ``pos``."""
    chosen = lists.filter(pa.array(rows))
    flat = pc.list_flatten(chosen)
    owner = groups.group_ids()[rows][np.asarray(pc.list_parent_indices(chosen))]
    return pa.table({"g": owner, "e": flat, "pos": np.arange(len(flat))})


def _first_of_each(elements: pa.Table) -> pa.Table:
    """``elements`` without repeats of an element within a key, in order of first appearance."""
    firsts = elements.group_by(["g", "e"], use_threads=False).aggregate([("pos", "min")])
    return firsts.sort_by("pos_min")


def _valid(values: pa.Array) -> np.ndarray:
    return np.asarray(values.is_valid())


def _sum(agg, values, groups, rows, retract):
    signed = values
    if retract.any():
        signed = pc.if_else(pa.array(retract), pc.negate_checked(values), values)
    return _hash(signed, groups, rows & _valid(values), "sum")


def _product(agg, values, groups, rows, retract):
    valid = _valid(values)
    made = _hash(values, groups, rows & valid & ~retract, "product")
    if not retract.any():
        return made
    undone = _hash(values, groups, rows & valid & retract, "product")
    if pa.types.is_integer(made.type):
        quotient = pc.divide(made, undone)  # integer division truncates like Java's
    else:
        quotient = pc.divide(made.cast(pa.float64()), undone.cast(pa.float64()))
    return pc.if_else(pc.is_null(undone), made, quotient.cast(made.type))


def _extreme(function: str) -> Callable:
    def reduce(agg, values, groups, rows, retract):
        return _hash(values, groups, rows & _valid(values) & ~retract, function)

    return reduce


def _bool(function: str) -> Callable:
    def reduce(agg, values, groups, rows, retract):
        options = pc.ScalarAggregateOptions(skip_nulls=True, min_count=1)
        return _hash(values, groups, rows & _valid(values) & ~retract, function, options)

    return reduce


def _last_value(agg, values, groups, rows, retract):
    last = groups.last_where(rows)
    return take_or_null(values, np.where((last >= 0) & retract[np.maximum(last, 0)], -1, last))


def _last_non_null(agg, values, groups, rows, retract):
    last = groups.last_where(rows & _valid(values))
    return take_or_null(values, np.where((last >= 0) & retract[np.maximum(last, 0)], -1, last))


def _first_value(agg, values, groups, rows, retract):
    return take_or_null(values, groups.first_where(rows & ~retract))


def _first_non_null(agg, values, groups, rows, retract):
    return take_or_null(values, groups.first_where(rows & ~retract & _valid(values)))


def _listagg(agg, values, groups, rows, retract):
    text = values.cast(pa.string())
    blank = np.asarray(pc.equal(pc.utf8_trim_whitespace(text), "").fill_null(True))
    keep = rows & ~retract & ~blank
    if not agg.distinct:
        return pc.binary_join(_hash(text, groups, keep, "list"), agg.delimiter)
    # distinct: every token once per key, in order of first appearance
    tokens = _elements(pc.split_pattern(text, agg.delimiter), groups, keep)
    tokens = tokens.filter(pc.not_equal(pc.utf8_trim_whitespace(tokens.column("e")), ""))
    return pc.binary_join(_by_key(_first_of_each(tokens), "e", "list", groups.count), agg.delimiter)


def _folded(fold: Callable[[FieldAgg, list, list], object]) -> Callable:
    """A reduction folding Python values of the keys with several rows (or a retract)."""

    def reduce(agg, values, groups, rows, retract):
        last = groups.last_where(rows)
        out = take_or_null(values, last).to_pylist()  # one row per key: its value as it is
        counts = np.add.reduceat(rows.astype(np.int64), groups.starts) if groups.count else np.zeros(0)
        has_retract = np.add.reduceat(retract.astype(np.int64), groups.starts) if groups.count else counts
        busy = np.flatnonzero((counts > 1) | (has_retract > 0))
        for g in busy.tolist():
            idx = np.flatnonzero(rows[groups.starts[g] : groups.ends[g]]) + groups.starts[g]
            out[g] = fold(agg, values.take(pa.array(idx)).to_pylist(), retract[idx].tolist())
        return pa.array(out, type=values.type)

    return reduce


def _union_bitmaps(bitmap: type) -> Callable:
    def fold(agg, items, retracts):
        present = [bitmap.deserialize(v) for v in items if v is not None]
        if not present:
            return None
        result = bitmap()
        for b in present:
            result |= b
        return result.serialize()

    return fold


def _theta_union(agg, items, retracts):
    from datasketches import compact_theta_sketch, theta_union

    present = [v for v in items if v is not None]
    if not present:
        return None
    union = theta_union()
    for v in present:
        union.update(compact_theta_sketch.deserialize(v))
    return union.get_result().serialize()


def _collect_fold(agg, items, retracts):
    acc = None
    for value, is_retract in zip(items, retracts, strict=True):
        if is_retract:
            if acc is not None and value is not None:
                acc = _remove_each(acc, value)
        elif value is not None:
            merged = (acc or []) + list(value)
            acc = _distinct(merged) if agg.distinct else merged
        elif agg.distinct and acc is not None:
            acc = _distinct(acc)
    return acc


def _remove_each(items: list, gone: list) -> list:
    """``items`` with one occurrence of each element of ``gone`` removed (a retraction)."""
    out = list(items)
    for element in gone:
        if element in out:
            out.remove(element)
    return out


def _distinct(items: list) -> list:
    out = []
    for item in items:
        if item not in out:
            out.append(item)
    return out


def _collect(agg, values, groups, rows, retract):
    if retract[rows].any():
        return _folded(_collect_fold)(agg, values, groups, rows, retract)
    keep = rows & _valid(values)
    elements = _elements(values, groups, keep)
    out = _by_key(_first_of_each(elements) if agg.distinct else elements, "e", "list", groups.count)
    # a key whose rows were all empty lists keeps an empty list (not null)
    listed = groups.last_where(keep) >= 0
    return pc.if_else(pc.and_(pc.is_null(out), pa.array(listed)), pa.scalar([], out.type), out)


def _map_fold(agg, items, retracts):
    acc = None
    for value, is_retract in zip(items, retracts, strict=True):
        if is_retract:
            if acc is None or value is None:
                continue
            gone = {k for k, _ in value}
            acc = [(k, v) for k, v in acc if k not in gone]
        elif value is not None:
            merged = dict(acc or [])
            merged.update(dict(value))
            acc = list(merged.items())
    return acc


def _merge_map(agg, values, groups, rows, retract):
    if retract[rows].any():
        return _folded(_map_fold)(agg, values, groups, rows, retract)
    return _merged_entries(values, groups, rows, lambda entries: [entries.field(0)])


def _nested_update(agg, values, groups, rows, retract):
    if retract[rows].any():
        return _folded(_nested_fold)(agg, values, groups, rows, retract)
    keys = agg.nested_key
    identity = (lambda entries: [entries.field(k) for k in keys]) if keys else None
    return _merged_entries(values, groups, rows, identity)


def _merged_entries(
    values: pa.Array, groups: KeyGroups, rows: np.ndarray, identity: Callable[[pa.Array], list] | None
) -> pa.Array:
    """Lists or maps of each key's rows merged into one: entries whose ``identity`` columns are
    equal keep the last row's entry, in the place of their first appearance (no ``identity``:
    all entries, concatenated). Keys whose rows are all null stay null; a key's only row is
    taken as it is (Paimon merges values only when there are two)."""
    keep = rows & _valid(values)
    chosen = values.filter(pa.array(keep))
    if pa.types.is_map(chosen.type):  # a map is a list of key-value structs
        chosen = pa.ListArray.from_arrays(chosen.offsets, chosen.values)
    entries = pc.list_flatten(chosen)
    owner = groups.group_ids()[keep][np.asarray(pc.list_parent_indices(chosen))]
    if identity is not None:
        ids = {f"i{n}": column for n, column in enumerate(identity(entries))}
        table = pa.table({"g": owner, "pos": np.arange(len(entries)), **ids})
        merged = table.group_by(["g", *ids], use_threads=False).aggregate([("pos", "min"), ("pos", "max")])
        merged = merged.sort_by("pos_min")
        owner = merged.column("g").to_numpy()
        entries = entries.take(merged.column("pos_max").combine_chunks())
    offsets = np.zeros(groups.count + 1, np.int32)
    np.cumsum(np.bincount(owner, minlength=groups.count), out=offsets[1:])
    null = np.append(groups.last_where(keep) < 0, False)
    offsets = pa.array(offsets, mask=null)
    if pa.types.is_map(values.type):
        merged = pa.MapArray.from_arrays(offsets, entries.field(0), entries.field(1), type=values.type)
    else:
        merged = pa.ListArray.from_arrays(offsets, entries, type=values.type)
    single = np.add.reduceat(rows.astype(np.int64), groups.starts) == 1 if groups.count else np.zeros(0, bool)
    if not single.any():
        return merged
    return pc.if_else(pa.array(single), take_or_null(values, groups.last_where(rows)), merged)


def _nested_fold(agg, items, retracts):
    acc = None
    keys = agg.nested_key
    for value, is_retract in zip(items, retracts, strict=True):
        if value is None:
            continue
        if is_retract:
            if acc is None:
                continue
            if keys:
                gone = {tuple(e[k] for k in keys) for e in value}
                acc = [e for e in acc if tuple(e[k] for k in keys) not in gone]
            else:
                acc = _remove_each(acc, value)
        elif keys:
            merged = {tuple(e[k] for k in keys): e for e in (acc or [])}
            merged.update({tuple(e[k] for k in keys): e for e in value})
            acc = list(merged.values())
        else:
            acc = (acc or []) + list(value)
    return acc


_REDUCERS: dict[str, Callable] = {
    "sum": _sum,
    "count": _sum,
    "product": _product,
    "max": _extreme("max"),
    "min": _extreme("min"),
    "bool_and": _bool("all"),
    "bool_or": _bool("any"),
    "last_value": _last_value,
    "last_non_null_value": _last_non_null,
    "first_value": _first_value,
    "first_non_null_value": _first_non_null,
    "listagg": _listagg,
    "collect": _collect,
    "merge_map": _merge_map,
    "nested_update": _nested_update,
    "rbm32": _folded(_union_bitmaps(BitMap)),
    "rbm64": _folded(_union_bitmaps(BitMap64)),
    "theta_sketch": _folded(_theta_union),
}
