"""Reading splits: data files evolved to the current schema, merged per key, filtered, projected.

Every file is read under the schema it was written with and matched to the current columns by
field id: renamed columns keep their data, dropped ones disappear, added ones read as nulls,
widened ones are cast (``SchemaEvolutionUtil``). Primary-key buckets merge all their sorted runs
with the table's merge engine - for deduplicate the row with the highest sequence number wins,
ties going to the later file - and then drop deleted keys; ``changelog-producer=lookup`` tables
that combine versions merge only a key's level-0 rows and its lowest level above 0. The filter
is applied after the merge, so it can never resurrect a stale version of a row.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
from pyroaring import BitMap

from lakehouse.deletionvectors.index_file import DeletionFile
from lakehouse.deletionvectors.vector import DeletionVector
from lakehouse.errors import CorruptFileError, SchemaMismatchError, UnsupportedFeatureError
from lakehouse.format import parquet
from lakehouse.io.pool import map_parallel
from lakehouse.manifest.entries import DataFileMeta
from lakehouse.mergetree.engine import ORDINAL, MergeEngine
from lakehouse.mergetree.groups import drop_retracts
from lakehouse.mergetree.versions import LEVEL, KeyLevels, lookup_merge, with_level
from lakehouse.predicate import Predicate, bind, to_expression
from lakehouse.schema import check_readable
from lakehouse.table.scan import Split
from lakehouse.types import DataField, NewerType, arrow_field

if TYPE_CHECKING:
    from lakehouse.table.table import Table

_SYSTEM = [parquet.SEQUENCE_NUMBER, parquet.VALUE_KIND]


class TableRead:
    """Reads splits of one table with a projection and a filter; picklable, reusable."""

    def __init__(
        self, table: Table, columns: list[str] | None = None, filter: Predicate | None = None
    ) -> None:
        self.table = table
        schema = table.schema
        names = schema.field_names
        columns = list(columns) if columns is not None else names
        unknown = [c for c in columns if c not in names]
        if unknown:
            raise SchemaMismatchError(f"table {table.name} has no columns {unknown}; columns are {names}")
        check_readable(schema, table.name, columns, filter.columns() if isinstance(filter, Predicate) else ())
        self.columns = columns
        self.filter = bind(filter, schema.arrow_types(), table.name) if filter is not None else None
        needed = set(columns) | (self.filter.columns() if self.filter is not None else set())
        self.key = list(schema.trimmed_primary_keys) if schema.primary_keys else []
        self.engine = MergeEngine(schema, table.name) if self.key else None
        self.lookup_merge = lookup_merge(schema)
        if self.engine is not None:
            needed = self.engine.read_columns(needed)
        self.read_fields = [f for f in schema.fields if f.name in needed]
        self.output_schema = pa.schema([arrow_field(n, schema.field(n).type) for n in columns])
        self.keep_kind = False  # audit_log: also return each row's kind (int8) as _VALUE_KIND

    def read(self, splits: list[Split]) -> pa.Table:
        """All rows of ``splits`` in one table (splits read in parallel)."""
        if not splits:
            return self.output_schema.empty_table()
        parts = map_parallel(self.read_split, splits)
        return parts[0] if len(parts) == 1 else pa.concat_tables(parts)

    def read_split(self, split: Split) -> pa.Table:
        selections = split.selections or (None,) * len(split.files)
        deletions = split.deletions or (None,) * len(split.files)
        files = [
            self._read_file(split, f, s, d)
            for f, s, d in zip(split.files, selections, deletions, strict=True)
        ]
        if self.key and not split.raw_convertible:
            data = self._merge(files, split.files)
        else:
            data = pa.concat_tables(files) if len(files) > 1 else files[0]
            if self.key and any(f.delete_row_count != 0 for f in split.files):
                data = drop_retracts(data)
        if self.filter is not None:
            data = data.filter(to_expression(self.filter))
        out = data.select(self.columns).cast(self.output_schema)
        if self.keep_kind:
            kind = data.column(parquet.VALUE_KIND) if self.key else pa.array(np.zeros(len(out), np.int8))
            out = out.append_column(parquet.VALUE_KIND, kind.cast(pa.int8()))
        return out

    def _merge(self, files: list[pa.Table], metas: tuple[DataFileMeta, ...]) -> pa.Table:
        tagged = [
            t.append_column(ORDINAL, pa.array(np.full(t.num_rows, i, np.int32))) for i, t in enumerate(files)
        ]
        versions = pa.concat_tables(tagged)
        if self.lookup_merge:
            versions = pa.concat_tables([with_level(t, m.level) for t, m in zip(tagged, metas, strict=True)])
            versions = versions.filter(pa.array(KeyLevels.of(versions, self.key).lookup_rows()))
            versions = versions.drop_columns([LEVEL])
        return drop_retracts(self.engine.merge(versions))

    def _read_file(
        self, split: Split, meta: DataFileMeta, selection: bytes | None, deletion: DeletionFile | None
    ) -> pa.Table:
        """One data file as current-schema columns (plus sequence and kind for primary keys).

        ``selection``: the rows file indexes kept; the filter still runs after. ``deletion``: the
        file's deletion vector, whose rows are left out.
        """
        rows = None if selection is None else np.asarray(BitMap.deserialize(selection).to_array(), np.int64)
        if deletion is not None:
            kept = deletion.read(self.table.io).kept_rows(meta.row_count)
            rows = kept if rows is None else np.intersect1d(rows, kept, assume_unique=True)
        system = _SYSTEM if self.key else []
        return read_data_file(self.table, split.bucket_path, meta, self.read_fields, system, rows)


def read_data_file(
    table: Table,
    bucket_path: str,
    meta: DataFileMeta,
    fields: list[DataField],
    system: list[str] = (),
    rows: np.ndarray | None = None,
) -> pa.Table:
    """Columns ``fields`` (current schema) of one data file, evolved from the schema it was written
    with, plus the named system columns; ``rows`` limits it to those row positions."""
    path, old_by_id, wanted = _locate(table, bucket_path, meta, fields, system)
    with _reading(table, path):
        raw = parquet.read_columns(table.io, path, wanted, rows)
    return _evolve(raw, fields, old_by_id, list(system), f"table {table.name}: data file {path}")


def iter_data_file(
    table: Table,
    bucket_path: str,
    meta: DataFileMeta,
    fields: list[DataField],
    system: list[str],
    rows: int,
    deletion: DeletionVector | None = None,
    position: str | None = None,
) -> Iterator[pa.Table]:
    """:func:`read_data_file` in batches of ``rows`` rows (bounded memory for compaction).

    ``deletion``: rows it marks are left out; ``position``: name of an added int64 column with
    each row's position in the file.
    """
    path, old_by_id, wanted = _locate(table, bucket_path, meta, fields, system)
    deleted = None if deletion is None else deletion.deleted_mask(meta.row_count)
    start = 0
    with _reading(table, path):
        for raw in parquet.iter_batches(table.io, path, wanted, rows):
            batch = _evolve(raw, fields, old_by_id, list(system), f"table {table.name}: data file {path}")
            n = batch.num_rows
            if position is not None:
                batch = batch.append_column(position, pa.array(np.arange(start, start + n, dtype=np.int64)))
            if deleted is not None and deleted[start : start + n].any():
                batch = batch.filter(pa.array(~deleted[start : start + n]))
            start += n
            yield batch


def _locate(table: Table, bucket_path: str, meta: DataFileMeta, fields: list[DataField], system):
    path = table.paths.data_file(bucket_path, meta.file_name, meta.external_path)
    check_format(table.name, path)
    old_by_id = {f.id: f for f in table.schema_by_id(meta.schema_id).fields}
    wanted = [old_by_id[f.id].name for f in fields if f.id in old_by_id]
    return path, old_by_id, wanted + list(system)


def check_format(table: str, path: str) -> None:
    """Refuse a data file this engine cannot read: its format (the name's extension, as Paimon
    decides it) is not Parquet. The file is valid; a newer or other Paimon wrote it."""
    name = path.rsplit("/", 1)[-1]
    fmt = name.rsplit(".", 1)[-1].lower() if "." in name else ""
    if fmt != "parquet" or ".vector." in name:
        kind = "vector" if ".vector." in name else fmt.upper() or "an unknown"
        raise UnsupportedFeatureError(
            f"table {table}: data file {path} is in {kind} format; this engine reads Parquet data files "
            f"only - read the table with Apache Paimon (Java) or pypaimon"
        )


@contextmanager
def _reading(table: Table, path: str) -> Iterator[None]:
    """Missing or unreadable data files become ``CorruptFileError`` naming the file."""
    try:
        yield
    except FileNotFoundError:
        raise CorruptFileError(
            f"table {table.name}: data file {path} is missing; restore it or roll the table back to a "
            f"snapshot that does not reference it"
        ) from None
    except (OSError, pa.ArrowInvalid) as e:
        raise CorruptFileError(
            f"table {table.name}: data file {path} is unreadable ({e}); restore it or roll the table back "
            f"to a snapshot that does not reference it"
        ) from None


def _evolve(
    raw: pa.Table, fields: list[DataField], old_by_id: dict[int, DataField], system: list[str], where: str
) -> pa.Table:
    n = raw.num_rows
    arrays, out_fields = [], []
    for f in fields:
        target = arrow_field(f.name, f.type)
        old = old_by_id.get(f.id)
        if old is None or old.name not in raw.column_names:
            arrays.append(pa.nulls(n, target.type))
        else:
            col = raw.column(old.name)
            if isinstance(f.type, NewerType) and not _same_layout(col.type, target.type):
                raise UnsupportedFeatureError(
                    f"{where} stores column {f.name!r} ({f.type}) as {col.type}, not as Paimon's plain "
                    f"{target.type} (e.g. a shredded VARIANT), which this engine does not read; read "
                    f"the other columns"
                )
            arrays.append(col if col.type == target.type else col.cast(target.type, safe=False))
        out_fields.append(target)
    for name in system:
        arrays.append(raw.column(name))
        out_fields.append(raw.schema.field(name))
    return pa.Table.from_arrays(arrays, schema=pa.schema(out_fields))


def _same_layout(stored: pa.DataType, expected: pa.DataType) -> bool:
    """Whether ``stored`` holds ``expected``'s values as they are (field names, types; not nullability)."""
    if pa.types.is_struct(stored) and pa.types.is_struct(expected):
        return [(f.name, f.type) for f in stored] == [(f.name, f.type) for f in expected]
    if pa.types.is_fixed_size_list(expected):
        return (pa.types.is_fixed_size_list(stored) or pa.types.is_list(stored)) and (
            stored.value_type == expected.value_type
        )
    return stored == expected
