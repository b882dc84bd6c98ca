"""The example lakehouse's resources: the warehouse at ``$LAKEHOUSE_WAREHOUSE`` (default
``./warehouse``) and a local Spark session (``local[2]``)."""

from lakehouse.dagster.resources import LakehouseResource, SparkResource, default_warehouse

RESOURCES = {"lakehouse": LakehouseResource(warehouse=default_warehouse()), "spark": SparkResource()}

__all__ = ["RESOURCES", "default_warehouse"]
