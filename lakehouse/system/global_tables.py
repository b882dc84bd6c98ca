"""Global system tables of a catalog, in the ``sys`` database: ``sys.all_table_options`` and
``sys.catalog_options`` (``AllTableOptionsTable``, ``CatalogOptionsTable``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import pyarrow as pa

from lakehouse.options import SECRET_CATALOG_OPTIONS, SECRET_MASK
from lakehouse.system.metadata import OPTIONS
from lakehouse.system.values import schema_of, table_of

if TYPE_CHECKING:
    from lakehouse.system.catalog_view import CatalogView

ALL_TABLE_OPTIONS = schema_of(
    ("database_name", pa.string(), True),
    ("table_name", pa.string(), True),
    ("key", pa.string(), True),
    ("value", pa.string(), True),
)


def all_table_options(catalog: CatalogView, options: Mapping[str, str]) -> pa.Table:
    rows = []
    for db in catalog.list_databases():
        for name in catalog.list_tables(db):
            table = catalog.load_table(f"{db}.{name}")
            rows += [
                dict(database_name=db, table_name=name, key=k, value=v)
                for k, v in sorted(table.schema.options.items())
            ]
    return table_of(ALL_TABLE_OPTIONS, rows)


def catalog_options(catalog: CatalogView, options: Mapping[str, str]) -> pa.Table:
    """The catalog's options, ``warehouse`` included; secrets (tokens, keys, passwords) masked."""
    merged = {"warehouse": catalog.warehouse, **catalog.options}
    merged.update({k: SECRET_MASK for k in SECRET_CATALOG_OPTIONS if k in merged})
    return table_of(OPTIONS, [dict(key=k, value=str(v)) for k, v in sorted(merged.items())])


TABLES = {"all_table_options": all_table_options, "catalog_options": catalog_options}
