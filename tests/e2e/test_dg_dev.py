"""``dg dev`` in the example project serves what ``make dev`` serves from ``workspace.yaml``: the
same assets, checks, jobs, schedules and sensors, its code location loaded from ``defs/``."""

from __future__ import annotations

import pytest

from assets.definitions import PIPELINE
from assets.orders import TABLES
from tests.e2e.server import DagsterServer, dagster_server, dg_dev_commands

pytestmark = pytest.mark.e2e

DEFINITIONS = """
{
  repositoriesOrError { ... on RepositoryConnection { nodes {
    jobs { name } schedules { name } sensors { name }
    assetNodes { assetKey { path } assetChecksOrError { ... on AssetChecks { checks { name } } } }
  } } }
}"""


def served(server: DagsterServer) -> dict[str, set]:
    """What the server's code location defines, by kind."""
    (repository,) = server.graphql(DEFINITIONS)["repositoriesOrError"]["nodes"]
    return {
        "assets": {tuple(n["assetKey"]["path"]) for n in repository["assetNodes"]},
        "checks": {
            (tuple(n["assetKey"]["path"]), c["name"])
            for n in repository["assetNodes"]
            for c in n["assetChecksOrError"]["checks"]
        },
        **{kind: {d["name"] for d in repository[kind]} for kind in ("jobs", "schedules", "sensors")},
    }


def test_dg_dev_serves_the_project_as_the_workspace_does(dagster: DagsterServer, tmp_path):
    with dagster_server(tmp_path, dg_dev_commands) as dg_dev:
        project = served(dg_dev)
    assert project["assets"] == {tuple(spec.key.path) for spec in TABLES}
    assert ("dws", "user_daily") in project["assets"]  # the table declared in YAML only
    assert PIPELINE in project["jobs"] and "compaction_sensor" in project["sensors"]
    assert project == served(dagster)
