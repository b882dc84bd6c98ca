"""Dagster resources of the lakehouse: the storage engine (a warehouse's ``Catalog``) and PySpark
(dagster-pyspark's ``PySparkResource`` on a session whose Python workers run this interpreter and
this code, with the ``paimon`` data source registered; ``local[2]`` unless ``spark.master`` says
otherwise)."""

from __future__ import annotations

import os
from typing import Any

from dagster import ConfigurableResource, InitResourceContext
from dagster_pyspark import PySparkResource
from pydantic import Field

from lakehouse import Catalog, Table
from lakehouse.spark import session


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


DEFAULT_CONFIG = {"spark.master": "local[2]", "spark.sql.shuffle.partitions": "4"}


class SparkResource(PySparkResource):
    """A SparkSession for materializations and maintenance jobs."""

    spark_config: dict[str, Any] = Field(default_factory=lambda: dict(DEFAULT_CONFIG))

    def setup_for_execution(self, context: InitResourceContext) -> None:
        conf = {k: str(v) for k, v in self.spark_config.items()}
        master = conf.pop("spark.master", DEFAULT_CONFIG["spark.master"])
        self._spark_session = session(master=master, conf=conf)
