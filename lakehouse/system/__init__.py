"""System tables: ``db.t$<name>`` (metadata of one table), ``db.t$branch_<b>$<name>`` (of its
branch ``b``) and ``sys.<name>`` (of the catalog).

Names, columns and column types follow Paimon's ``org.apache.paimon.table.system`` classes.
Each is read as one Arrow table; ``scan.snapshot-id`` / ``scan.tag-name`` options choose the
snapshot of the snapshot-dependent ones (``$files``, ``$manifests``, ``$partitions``, ...).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pyarrow as pa

from lakehouse.errors import InvalidArgumentError, TableNotFoundError
from lakehouse.system import files, global_tables, metadata, rows

if TYPE_CHECKING:
    from lakehouse.store.table_store import TableStore
    from lakehouse.system.catalog_view import CatalogView

SYSTEM_DATABASE = "sys"
BRANCH_PREFIX = "branch_"  # of a branch in a table identifier (Identifier.SYSTEM_BRANCH_PREFIX)


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


def split_identifier(identifier: str) -> tuple[str, str | None, str | None]:
    """``db.t[$branch_<b>][$<name>]`` as (``db.t``, branch, system table), the absent ones None
    (``Identifier.splitObjectName``)."""
    base, *parts = identifier.split("$")
    if len(parts) > 2 or (len(parts) == 2 and not parts[0].startswith(BRANCH_PREFIX)):
        raise InvalidArgumentError(
            f"table identifier {identifier!r} must look like 'db.t', 'db.t$branch_<branch>', "
            f"'db.t$<system table>' or 'db.t$branch_<branch>$<system table>'"
        )
    branch = parts.pop(0)[len(BRANCH_PREFIX) :] if parts and parts[0].startswith(BRANCH_PREFIX) else None
    return base, branch, parts[0] if parts else None


def is_system_name(identifier: str) -> bool:
    """Whether ``identifier`` names a system table (``db.t$name``, ``db.t$branch_b$name`` or
    ``sys.name``); ``db.t$branch_b`` is a table on a branch."""
    if not isinstance(identifier, str):
        return False
    return split_identifier(identifier)[2] is not None or identifier.split(".", 1)[0] == SYSTEM_DATABASE


def table_system_names() -> list[str]:
    return sorted(_table_builders())


def _table_builders() -> dict[str, Callable[[TableStore, Mapping[str, str]], pa.Table]]:
    return {**metadata.TABLES, **files.TABLES, **rows.TABLES}


def load(catalog: CatalogView, identifier: str, options: Mapping[str, str] | None = None) -> SystemTable:
    """The system table ``identifier`` names: ``db.t$name``, ``db.t$branch_b$name`` or ``sys.name``."""
    options = dict(options or {})
    if "$" not in identifier:
        name = identifier.split(".", 1)[1] if "." in identifier else ""
        build_global = global_tables.TABLES.get(name)
        if build_global is None:
            raise TableNotFoundError(
                f"catalog {catalog.warehouse} has no system table {identifier}; "
                f"global ones are {sorted(global_tables.TABLES)}"
            )
        return SystemTable(identifier, lambda opts: build_global(catalog, opts), options)
    base, name = identifier.rsplit("$", 1)
    builders = _table_builders()
    build = builders.get(name.lower())
    if build is None:
        raise TableNotFoundError(
            f"table {base} has no system table ${name}; system tables are {sorted(builders)}"
        )
    table = catalog.load_table(base)
    return SystemTable(identifier, lambda opts: build(table.refresh().store, opts), options)
