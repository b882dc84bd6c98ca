"""The warehouse and Spark of the example (:mod:`resources`); every run executes in one process,
its steps sharing one Spark session."""

import dagster as dg

from resources import RESOURCES


@dg.definitions
def lakehouse_resources() -> dg.Definitions:
    return dg.Definitions(resources=RESOURCES, executor=dg.in_process_executor)
