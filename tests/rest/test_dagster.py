"""The example's Dagster graph on a warehouse served by the REST catalog server, as ``make dev``
runs it: the resource takes the server's URL and the token from ``$LAKEHOUSE_CATALOG_TOKEN``;
every table commits through the server, and the filesystem catalog reads the same rows."""

from __future__ import annotations

import pytest
from dagster import EnvVar, materialize

from assets.definitions import defs
from dagster_lakehouse.resources import LakehouseResource, SparkResource, default_token
from lakehouse import TOKEN_ENV, Catalog
from tests.rest.server_process import ServerProcess

pytestmark = [pytest.mark.spark, pytest.mark.dagster]


def test_the_example_materializes_through_the_server(spark, tmp_path, monkeypatch):
    with ServerProcess(str(tmp_path / "warehouse"), tmp_path) as server:
        monkeypatch.setenv(TOKEN_ENV, server.admin)
        assert isinstance(default_token(), EnvVar)
        lakehouse = LakehouseResource(warehouse=server.uri, token=default_token())
        run = materialize([*defs.assets, *defs.asset_checks], partition_key="2026-01-01",
                          resources={"lakehouse": lakehouse, "spark": SparkResource()})  # fmt: skip
        assert run.success
        assert all(c.passed for c in run.get_asset_check_evaluations())
        served = Catalog(server.uri, options={"token": server.admin})
        files = Catalog(server.warehouse)
        assert served.list_databases() == files.list_databases() == ["dwd", "dws", "ods"]
        for name in ("ods.orders", "dwd.orders", "dws.user_daily", "dws.order_wide"):
            rows = served.load_table(name).read()
            assert rows.num_rows > 0 and rows.equals(files.load_table(name).read()), name
