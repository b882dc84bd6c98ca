"""The example lakehouse's resources: the warehouse at ``$LAKEHOUSE_WAREHOUSE`` (default
``./warehouse``; an ``s3://`` warehouse takes its endpoint and credentials from the ``AWS_*``
environment variables) and the Spark at ``$LAKEHOUSE_SPARK`` (``make dev`` points it at the Spark
Connect server it starts; default a local ``local[2]`` session)."""

from dagster_lakehouse.resources import LakehouseResource, SparkResource, default_warehouse

RESOURCES = {"lakehouse": LakehouseResource(warehouse=default_warehouse()), "spark": SparkResource()}

__all__ = ["RESOURCES", "default_warehouse"]
