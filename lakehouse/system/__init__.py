"""System tables: ``db.t$<name>`` (metadata of one table) and ``sys.<name>`` (of the catalog).

Names, columns and column types follow Paimon's ``org.apache.paimon.table.system`` classes.
Each is read as one Arrow table; ``scan.snapshot-id`` / ``scan.tag-name`` options choose the
snapshot of the snapshot-dependent ones (``$files``, ``$manifests``, ``$partitions``, ...).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pyarrow as pa

from lakehouse.errors import TableNotFoundError
from lakehouse.system import files, global_tables, metadata, rows

if TYPE_CHECKING:
    from lakehouse.store.table_store import TableStore
    from lakehouse.system.catalog_view import CatalogView

SYSTEM_DATABASE = "sys"


@dataclass(frozen=True)
class SystemTable:
    """A read-only system table; :meth:`read` computes it from the table's current files."""

    name: str
    build: Callable[[Mapping[str, str]], pa.Table] = field(repr=False)
    options: Mapping[str, str] = field(default_factory=dict)

    def with_options(self, options: Mapping[str, str]) -> SystemTable:
        """This table with more options (e.g. ``{"scan.snapshot-id": "3"}``)."""
        return SystemTable(self.name, self.build, {**self.options, **options})

    def read(self) -> pa.Table:
        return self.build(self.options)


def is_system_name(identifier: str) -> bool:
    """Whether ``identifier`` names a system table (``db.t$name`` or ``sys.name``)."""
    return "$" in identifier or identifier.split(".", 1)[0] == SYSTEM_DATABASE


def table_system_names() -> list[str]:
    return sorted(_table_builders())


def _table_builders() -> dict[str, Callable[[TableStore, Mapping[str, str]], pa.Table]]:
    return {**metadata.TABLES, **files.TABLES, **rows.TABLES}


def load(catalog: CatalogView, identifier: str, options: Mapping[str, str] | None = None) -> SystemTable:
    """The system table ``identifier`` names: ``db.t$name`` or ``sys.name``."""
    options = dict(options or {})
    if "$" not in identifier:
        name = identifier.split(".", 1)[1] if "." in identifier else ""
        build = global_tables.TABLES.get(name)
        if build is None:
            raise TableNotFoundError(
                f"catalog {catalog.warehouse} has no system table {identifier}; "
                f"global ones are {sorted(global_tables.TABLES)}"
            )
        return SystemTable(identifier, lambda opts: build(catalog, opts), options)
    base, name = identifier.split("$", 1)
    builders = _table_builders()
    build = builders.get(name.lower())
    if build is None:
        raise TableNotFoundError(
            f"table {base} has no system table ${name}; system tables are {sorted(builders)}"
        )
    table = catalog.get_table(base)
    return SystemTable(identifier, lambda opts: build(table.refresh().store, opts), options)
