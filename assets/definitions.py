"""The one ``Definitions`` object Dagster loads (``workspace.yaml``)."""

from __future__ import annotations

from dagster import Definitions

from resources import LakehouseResource

defs = Definitions(resources={"lakehouse": LakehouseResource()})
