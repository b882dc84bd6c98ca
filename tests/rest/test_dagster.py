"""The example's Dagster tables on a warehouse served by the REST catalog server, as ``make dev``
runs them: the resource takes the server's URL and the token from ``$LAKEHOUSE_CATALOG_TOKEN``;
every table commits through the server, and the filesystem catalog reads the same rows."""

from __future__ import annotations

import pytest
from dagster import EnvVar, materialize

from assets.definitions import defs
from dagster_lakehouse.resources import LakehouseResource, SparkResource, default_token
from lakehouse import TOKEN_ENV, Catalog
from tests.rest.server_process import ServerProcess

pytestmark = [pytest.mark.spark, pytest.mark.dagster]

# the first two tables of the example and their checks: the second reads the first through Spark
TABLES = ("ods.orders", "dwd.orders")
KEYS = {name.replace(".", "/") for name in TABLES}
ASSETS = [a for a in defs.assets if {k.to_user_string() for k in a.keys} <= KEYS]
CHECKS = [c for c in defs.asset_checks if {k.asset_key.to_user_string() for k in c.check_keys} <= KEYS]


def test_the_example_materializes_through_the_server(spark, tmp_path, monkeypatch):
    with ServerProcess(str(tmp_path / "warehouse"), tmp_path) as server:
        monkeypatch.setenv(TOKEN_ENV, server.admin)
        assert isinstance(default_token(), EnvVar)
        lakehouse = LakehouseResource(warehouse=server.uri, token=default_token())
        run = materialize([*ASSETS, *CHECKS], partition_key="2026-01-01",
                          resources={"lakehouse": lakehouse, "spark": SparkResource()})  # fmt: skip
        assert run.success
        evaluations = run.get_asset_check_evaluations()
        assert evaluations and all(c.passed for c in evaluations)
        served = Catalog(server.uri, options={"token": server.admin})
        files = Catalog(server.warehouse)
        assert served.list_databases() == files.list_databases() == ["dwd", "ods"]
        for name in TABLES:
            rows = served.load_table(name).read()
            assert rows.num_rows > 0 and rows.equals(files.load_table(name).read()), name
