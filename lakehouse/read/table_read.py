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

from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
from pyroaring import BitMap

from lakehouse.deletionvectors.index_file import DeletionFile
from lakehouse.errors import SchemaMismatchError
from lakehouse.format import parquet
from lakehouse.io.pool import map_parallel
from lakehouse.manifest.entries import DataFileMeta
from lakehouse.mergetree.engine import ORDINAL, MergeEngine
from lakehouse.mergetree.groups import drop_retracts
from lakehouse.mergetree.versions import LEVEL, KeyLevels, lookup_merge, with_level
from lakehouse.predicate import Predicate, bind, to_expression
from lakehouse.read.scan import Split
from lakehouse.rowkind import ROW_KIND_FIELD, short_strings
from lakehouse.schema import check_readable
from lakehouse.store.data_reader import read_data_file
from lakehouse.types import arrow_field

if TYPE_CHECKING:
    from lakehouse.store.table_store import TableStore

_SYSTEM = [parquet.SEQUENCE_NUMBER, parquet.VALUE_KIND]


class TableRead:
    """Reads splits of one table with a projection and a filter; picklable, reusable."""

    def __init__(
        self,
        table: TableStore,
        columns: list[str] | None = None,
        filter: Predicate | None = None,
        row_kinds: bool = False,
    ) -> None:
        """``row_kinds``: also return each row's kind (``+I``, ``+U``: the kind of the version
        that won the merge) as a last ``_row_kind`` column, as ``$audit_log`` shows it."""
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
        self.columns_schema = pa.schema([arrow_field(n, schema.field(n).type) for n in columns])
        self.row_kinds = row_kinds
        self.output_schema = self.columns_schema.append(ROW_KIND_FIELD) if row_kinds else self.columns_schema

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
        out = data.select(self.columns).cast(self.columns_schema)
        if not self.row_kinds:
            return out
        if not self.key:
            return out.append_column(ROW_KIND_FIELD, pa.array(["+I"] * out.num_rows, pa.string()))
        return out.append_column(ROW_KIND_FIELD, short_strings(data.column(parquet.VALUE_KIND)))

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
