"""The example on a Spark standalone cluster (a master, two workers) with its warehouse on S3, all
on loopback: ``make cluster-demo``, checked, and its Iceberg metadata read by pyiceberg from S3.
Over a minute, hence in ``make e2e``."""

from __future__ import annotations

import pytest

from assets import cluster_demo
from lakehouse import Catalog

pytestmark = pytest.mark.e2e


@pytest.mark.iceberg
def test_the_example_runs_on_a_cluster_over_s3(tmp_path):
    with cluster_demo.demo_on_cluster(str(tmp_path)) as run:
        assert run.exit_code == 0
        # an Iceberg reader reads ods.orders (iceberg=True) from S3 as our engine does
        from pyiceberg.table import StaticTable

        options = run.s3.options
        table = Catalog(run.warehouse, options=options).get_table("ods.orders")
        location = table.iceberg_metadata_location()
        assert location.startswith("s3://")
        properties = {
            "s3.endpoint": options["s3.endpoint"],
            "s3.access-key-id": options["s3.access-key"],
            "s3.secret-access-key": options["s3.secret-key"],
            "s3.region": options["s3.region"],
        }
        ours = table.read()
        theirs = StaticTable.from_metadata(location, properties).scan().to_arrow()
        order = [(c, "ascending") for c in ours.column_names]
        assert theirs.select(ours.column_names).cast(ours.schema).sort_by(order).equals(ours.sort_by(order))
    for worker in ("worker-0", "worker-1"):  # both workers ran executors, in their own directories
        assert list((tmp_path / worker).glob("app-*/*/stderr")), worker
    # the driver ran from an empty directory and wrote no table file there: everything is on S3
    assert {p.name for p in (tmp_path / "driver").iterdir()} == {"dagster_home"}
