"""Dagster resources of the lakehouse: the storage engine (and, with the Spark layer, PySpark)."""

from resources.lakehouse import LakehouseResource, default_warehouse

__all__ = ["LakehouseResource", "default_warehouse"]
