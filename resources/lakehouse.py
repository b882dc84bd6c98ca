"""The storage-engine resource: hands Dagster ops and assets the engine's ``Catalog``."""

from __future__ import annotations

import os

from dagster import ConfigurableResource
from pydantic import Field

from lakehouse import Catalog, Table


def default_warehouse() -> str:
    """``$LAKEHOUSE_WAREHOUSE``, else ``./warehouse`` (the embedded local warehouse)."""
    return os.environ.get("LAKEHOUSE_WAREHOUSE", "./warehouse")


class LakehouseResource(ConfigurableResource):
    """A warehouse of Paimon tables (local path or ``file://``, ``s3://``, ``hdfs://`` URI)."""

    warehouse: str = default_warehouse()
    catalog_options: dict[str, str] = Field(default_factory=dict)

    def catalog(self) -> Catalog:
        return Catalog(self.warehouse, self.catalog_options or None)

    def table(self, identifier: str) -> Table:
        return self.catalog().get_table(identifier)
