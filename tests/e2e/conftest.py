"""One webserver and daemon for all end-to-end tests of a session (starting them takes a while)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.e2e.server import DagsterServer, dagster_server


@pytest.fixture(scope="session")
def dagster(tmp_path_factory) -> Iterator[DagsterServer]:
    with dagster_server(tmp_path_factory.mktemp("dagster")) as server:
        yield server
