"""Partition specs like ``{"dt": "2024-01-01"}``: validated against the schema, matched against
the serialized partition BinaryRows in manifests. Used by partition overwrites and by maintenance
restricted to some partitions."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakehouse.errors import SchemaMismatchError
from lakehouse.io.pool import map_slices
from lakehouse.manifest import binary_row
from lakehouse.manifest.entries import EMPTY_ROW
from lakehouse.options import PARTITION_DEFAULT_NAME
from lakehouse.predicate import literal
from lakehouse.schema import TableSchema

PartitionFilter = Callable[[bytes], bool]


def partition_spec(schema: TableSchema, table: str, spec: Mapping[str, Any], what: str) -> dict[str, Any]:
    """Partition key -> physical value (None for the default partition); ``what`` names the caller."""
    default = schema.core_options.get(PARTITION_DEFAULT_NAME)
    out: dict[str, Any] = {}
    for key, value in spec.items():
        if key not in schema.partition_keys:
            raise SchemaMismatchError(
                f"{what} names {key!r}, which is not a partition key of table {table} "
                f"(partition keys: {list(schema.partition_keys)})"
            )
        if value is None or value == default:
            out[key] = None
            continue
        atype = schema.arrow_types()[key]
        try:
            scalar = literal(value, atype)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as e:
            raise SchemaMismatchError(
                f"{what} value {value!r} does not fit partition column {key!r} ({atype}) "
                f"of table {table}: {e}"
            ) from None
        out[key] = binary_row.physical_value(scalar, schema.field(key).type)
    return out


Partitions = Mapping[str, Any] | Iterable[Mapping[str, Any]] | None  # one spec, several, None: all


def partition_values(schema: TableSchema, partition: bytes) -> dict[str, Any]:
    """Partition key -> physical value of a serialized partition row."""
    values = binary_row.decode_row(binary_row.deserialize(partition)[1], schema.partition_types())
    return dict(zip(schema.partition_keys, values, strict=True))


def partition_filter(
    schema: TableSchema, table: str, specs: Iterable[Mapping[str, Any]], what: str
) -> PartitionFilter:
    """A test for partitions matching any of ``specs`` (a spec may name only some partition keys)."""
    parsed = [partition_spec(schema, table, s, what) for s in specs]

    def matches(partition: bytes) -> bool:
        values = partition_values(schema, partition)
        return any(all(values[k] == v for k, v in spec.items()) for spec in parsed)

    return matches


def in_partitions(schema: TableSchema, table: str, entries: list, partitions: Partitions, what: str) -> list:
    """The manifest entries in any of ``partitions`` (one spec or several; None: all)."""
    if partitions is None:
        return entries
    specs = [partitions] if isinstance(partitions, Mapping) else list(partitions)
    keep = partition_filter(schema, table, specs, what)
    return [e for e in entries if keep(e.partition)]


@dataclass(frozen=True)
class RowPartitions:
    """The partitions of a batch of rows: a dense id per row, then per partition its serialized
    BinaryRow, its hash and its values (one row per partition, the partition columns)."""

    ids: np.ndarray
    partitions: list[bytes]
    hashes: np.ndarray
    values: pa.Table


PARTITIONED_AT_ONCE = 1 << 22  # rows grouped by partition at once (on all cores together)


def row_partitions(data: pa.Table, schema: TableSchema) -> RowPartitions:
    """Group the rows of ``data`` by partition, vectorized (dictionary codes per key column),
    slices of the rows side by side on the cores; partitions numbered in order of appearance."""
    keys = list(schema.partition_keys)
    if not keys:
        ids, hashes = np.zeros(data.num_rows, dtype=np.int64), binary_row.encode_rows([], [], 1).hash_codes()
        return RowPartitions(ids, [EMPTY_ROW], hashes, pa.table({}).take([]))
    columns = data.select(keys)

    def grouped(start: int, stop: int) -> RowPartitions:
        return _slice_partitions(columns.slice(start, stop - start), schema)

    found = map_slices(grouped, data.num_rows, PARTITIONED_AT_ONCE)
    return found[0] if len(found) == 1 else _joined(found)


def _slice_partitions(columns: pa.Table, schema: TableSchema) -> RowPartitions:
    """:func:`row_partitions` of a slice of the partition ``columns``."""
    keys = columns.column_names
    if len(keys) == 1:
        encoded = pc.dictionary_encode(columns.column(0).combine_chunks(), null_encoding="encode")
        ids, values = np.asarray(encoded.indices, dtype=np.int64), pa.table({keys[0]: encoded.dictionary})
    else:
        codes = np.zeros(columns.num_rows, dtype=np.int64)
        for k in keys:
            encoded = pc.dictionary_encode(columns.column(k).combine_chunks(), null_encoding="encode")
            codes = codes * len(encoded.dictionary) + np.asarray(encoded.indices, dtype=np.int64)
            _, codes = np.unique(codes, return_inverse=True)
        _, first, ids = np.unique(codes, return_index=True, return_inverse=True)
        values = columns.take(pa.array(first))
    rows = binary_row.encode_rows([values.column(k).combine_chunks() for k in keys], schema.partition_types())
    partitions = [binary_row.serialize(rows.row(i), len(keys)) for i in range(len(rows))]
    return RowPartitions(ids.astype(np.int64, copy=False), partitions, rows.hash_codes(), values)


def _joined(slices: list[RowPartitions]) -> RowPartitions:
    """The partitions of consecutive slices' rows as one: a partition met in several slices
    keeps the id of the first."""
    number: dict[bytes, int] = {}
    ids, hashes, values = [], [], []
    for part in slices:
        known = len(number)
        local = np.array([number.setdefault(p, len(number)) for p in part.partitions], dtype=np.int64)
        ids.append(local[part.ids])
        new = np.flatnonzero(local >= known)  # first met here, in the order of their numbers
        hashes.append(part.hashes[new])
        values.append(part.values.take(pa.array(new)))
    return RowPartitions(np.concatenate(ids), list(number), np.concatenate(hashes), pa.concat_tables(values))
