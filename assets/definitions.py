"""The example lakehouse's code location (``workspace.yaml`` loads it): its tables
(:mod:`assets.orders`) as Dagster definitions, daily from the example's first day, with the
resources of :mod:`resources`."""

from __future__ import annotations

from dagster import DailyPartitionsDefinition

from assets.events import START
from assets.orders import TABLES
from dagster_lakehouse.definitions import PIPELINE, build_definitions
from resources import RESOURCES

DAILY = DailyPartitionsDefinition(start_date=START)

defs = build_definitions(TABLES, DAILY, RESOURCES)

__all__ = ["DAILY", "PIPELINE", "defs"]
