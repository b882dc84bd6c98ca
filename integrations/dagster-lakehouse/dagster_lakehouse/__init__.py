"""Paimon tables as Dagster assets, on the lakehouse engine's public API and its PySpark data source.

Declare tables once (:class:`TableSpec`, in Python or YAML) and :func:`build_definitions` makes
their assets, checks, jobs, schedules and sensors, or declare them as components in a ``dg``
project's ``defs.yaml`` files (:mod:`dagster_lakehouse.components`); :class:`PaimonIOManager`
stores any asset's Arrow, pandas, Polars or Spark output in a Paimon table.
"""

from dagster_lakehouse.checks import table_checks
from dagster_lakehouse.components import (
    LakehouseResourcesComponent,
    PaimonMaintenanceComponent,
    PaimonTableComponent,
    PaimonTableSpecsComponent,
)
from dagster_lakehouse.definitions import build_definitions, operations_definitions, table_definitions
from dagster_lakehouse.factory import table_asset
from dagster_lakehouse.io_manager import PaimonIOManager
from dagster_lakehouse.maintenance import maintenance_jobs
from dagster_lakehouse.pipes import SparkSubmitPipes
from dagster_lakehouse.publish import Publish
from dagster_lakehouse.resources import LakehouseResource, SparkResource
from dagster_lakehouse.sensors import compaction_sensor, snapshot_sensor
from dagster_lakehouse.spec import Inputs, TableSpec
from dagster_lakehouse.yaml_spec import load_table_spec, load_table_specs

__all__ = [
    "Inputs",
    "LakehouseResource",
    "LakehouseResourcesComponent",
    "PaimonIOManager",
    "PaimonMaintenanceComponent",
    "PaimonTableComponent",
    "PaimonTableSpecsComponent",
    "Publish",
    "SparkResource",
    "SparkSubmitPipes",
    "TableSpec",
    "build_definitions",
    "compaction_sensor",
    "load_table_spec",
    "load_table_specs",
    "maintenance_jobs",
    "operations_definitions",
    "snapshot_sensor",
    "table_asset",
    "table_checks",
    "table_definitions",
]
