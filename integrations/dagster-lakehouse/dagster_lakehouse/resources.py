"""Dagster resources of the lakehouse: the storage engine (a warehouse's ``Catalog``) and PySpark
(dagster-pyspark's ``PySparkResource`` on a session with the ``paimon`` data source registered:
over Spark Connect, on a cluster or local)."""

from __future__ import annotations

import os
from typing import Any

from dagster import ConfigurableResource, EnvVar, InitResourceContext
from dagster_pyspark import PySparkResource
from pydantic import Field

from dagster_lakehouse.spark_logs import WORKER_LOGGING
from lakehouse import TOKEN, TOKEN_ENV, WAREHOUSE_ENV, Catalog, Table, storage_options
from lakehouse.spark import CONNECT, SPARK_ENV, session


def default_warehouse() -> str:
    """``$LAKEHOUSE_WAREHOUSE``, else ``./warehouse`` (the embedded local warehouse)."""
    return os.environ.get(WAREHOUSE_ENV, "./warehouse")


def default_token() -> EnvVar | None:
    """``$LAKEHOUSE_CATALOG_TOKEN`` (a REST catalog's bearer token) where it is set, as an
    ``EnvVar``: resolved when runs start, never shown in the UI."""
    return EnvVar(TOKEN_ENV) if os.environ.get(TOKEN_ENV) else None


class LakehouseResource(ConfigurableResource):
    """A warehouse of Paimon tables: a local path, a ``file://``, ``s3://``, ``hdfs://`` URI, or the
    ``http://`` URL of a REST catalog server with its bearer ``token``."""

    warehouse: str = default_warehouse()
    catalog_options: dict[str, str] = Field(default_factory=dict)
    token: str | None = Field(default=None, description="a REST catalog's bearer token (give an EnvVar)")

    def options(self) -> dict[str, str]:
        """The catalog options, the token among them."""
        return {**self.catalog_options, **({TOKEN: self.token} if self.token else {})}

    def catalog(self) -> Catalog:
        return Catalog(self.warehouse, options=self.options() or None)

    def storage(self) -> dict[str, str]:
        """The catalog options that reach the warehouse's store (``s3.*`` - from the environment
        too - and ``lock.*``; a REST catalog's token): Spark reads, writes and maintenance jobs
        carry them to their tasks."""
        return storage_options(self.options(), self.warehouse)

    def table(self, identifier: str) -> Table:
        return self.catalog().load_table(identifier)


# Python workers' output collected for the step's log (a runtime setting: over Spark Connect too)
DEFAULT_CONFIG = {"spark.sql.shuffle.partitions": "4", WORKER_LOGGING: "true"}
# settings of sessions the resource starts (a Connect server has its own): Spark's log level,
# and no console progress bars, which would interleave the terminal output of concurrent runs
LOG_LEVEL, PROGRESS = "spark.log.level", "spark.ui.showConsoleProgress"


def default_master() -> str:
    """``$LAKEHOUSE_SPARK`` (a Spark Connect URL ``sc://host:port`` or a master URL), else
    ``local[2]``."""
    return os.environ.get(SPARK_ENV) or "local[2]"


class SparkResource(PySparkResource):
    """A SparkSession for materializations and maintenance jobs: over Spark Connect
    (``master="sc://host:port"``) every run joins one server-side session, so a run connects in
    milliseconds and finds that session's Python workers warm; else a cluster's
    (``spark://host:port``) or a local one (``local[n]``); ``spark_config``: Spark settings
    (``spark.master`` there overrides ``master``)."""

    master: str = Field(default_factory=default_master)
    spark_config: dict[str, Any] = Field(default_factory=lambda: dict(DEFAULT_CONFIG))
    log_level: str | None = None  # Spark's log level in sessions it starts (None: WARN, see LOG_SETTINGS)

    def setup_for_execution(self, context: InitResourceContext) -> None:
        conf = {k: str(v) for k, v in self.spark_config.items()}
        master = conf.pop("spark.master", self.master)
        if not master.startswith(CONNECT):
            level = {LOG_LEVEL: self.log_level} if self.log_level else {}
            conf = {**level, PROGRESS: "false", **conf}
        self._spark_session = session(master=master, conf=conf, shared=True)
