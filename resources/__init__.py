"""Dagster resources of the lakehouse: the storage engine and PySpark."""

from resources.lakehouse import LakehouseResource, default_warehouse
from resources.spark import SparkResource

__all__ = ["LakehouseResource", "SparkResource", "default_warehouse"]
