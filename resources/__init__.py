"""The example lakehouse's resources: the warehouse at ``$LAKEHOUSE_WAREHOUSE`` (default
``./warehouse``; an ``s3://`` warehouse takes its endpoint and credentials from the ``AWS_*``
environment variables) and the Spark at ``$LAKEHOUSE_SPARK`` (``make dev`` points it at the Spark
Connect server it starts; default a local ``local[2]`` session). Under ``make dev`` the warehouse is
the REST catalog server it starts, with the token at ``$LAKEHOUSE_CATALOG_TOKEN``."""

from dagster_lakehouse.resources import LakehouseResource, SparkResource, default_token, default_warehouse

RESOURCES = {
    "lakehouse": LakehouseResource(warehouse=default_warehouse(), token=default_token()),
    "spark": SparkResource(),
}

__all__ = ["RESOURCES", "default_warehouse"]
