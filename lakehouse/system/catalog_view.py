"""What system tables need of a catalog (``Catalog`` has it): the system tables sit above the
catalog that hands them out, so they name this view of it, not the class."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from lakehouse.table.table import Table


class CatalogView(Protocol):
    warehouse: str

    @property
    def options(self) -> Mapping[str, str]: ...

    def list_databases(self) -> list[str]: ...

    def list_tables(self, database: str) -> list[str]: ...

    def load_table(self, identifier: str) -> Table: ...
