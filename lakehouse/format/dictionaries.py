"""String columns carried as dictionary arrays between a read and a take of its rows.

A Parquet column of repeating strings (a status, a region, a comment of a few words) is stored
as a dictionary of its distinct values and small indexes into it. Read as Arrow dictionary
arrays, its pages decode to those indexes only, and taking rows from it (a merge's winning
versions, the rows a deletion vector leaves) moves 4-byte indexes instead of strings. Readers
that take rows read such columns so (``read_dictionary``; which columns:
:func:`lakehouse.format.parquet.repeating`) and decode them once, after the take, into the
plain type of the table's schema: one copy of each string kept instead of a copy of each string
read and a second of each kept.
"""

from __future__ import annotations

from collections.abc import Collection

import pyarrow as pa


def decoded(table: pa.Table, keep: Collection[str] = ()) -> pa.Table:
    """``table`` with its dictionary columns (but those named in ``keep``) decoded into their
    values' type."""
    schema = table.schema
    plain = [
        f.with_type(f.type.value_type) if pa.types.is_dictionary(f.type) and f.name not in keep else f
        for f in schema
    ]
    return table if plain == list(schema) else table.cast(pa.schema(plain, schema.metadata))


def concat(tables: list[pa.Table]) -> pa.Table:
    """``tables`` in one table. A column some of them hold as a dictionary and others plain (files
    differ in which columns repeat) is decoded in all of them."""
    if len(tables) == 1:
        return tables[0]
    first = tables[0].schema
    if all(t.schema == first for t in tables):
        return pa.concat_tables(tables)
    mixed = {f.name for t in tables for f in t.schema if f.type != first.field(f.name).type}
    keep = [name for name in first.names if name not in mixed]
    return pa.concat_tables([decoded(t, keep) for t in tables])
