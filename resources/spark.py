"""The Spark resource: dagster-pyspark's ``PySparkResource`` on a session whose Python workers run
this interpreter and this code, with the ``paimon`` data source registered (``local[2]`` unless
``spark.master`` says otherwise)."""

from __future__ import annotations

from typing import Any

from dagster import InitResourceContext
from dagster_pyspark import PySparkResource
from pydantic import Field

DEFAULT_CONFIG = {"spark.master": "local[2]", "spark.sql.shuffle.partitions": "4"}


class SparkResource(PySparkResource):
    """A SparkSession for materializations and maintenance jobs."""

    spark_config: dict[str, Any] = Field(default_factory=lambda: dict(DEFAULT_CONFIG))

    def setup_for_execution(self, context: InitResourceContext) -> None:
        from lakehouse.spark import session

        conf = {k: str(v) for k, v in self.spark_config.items()}
        master = conf.pop("spark.master", DEFAULT_CONFIG["spark.master"])
        self._spark_session = session(master=master, conf=conf)
