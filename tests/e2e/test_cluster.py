"""The example on a Spark standalone cluster (a master, two workers) with its warehouse on S3, all
on loopback: ``make cluster-demo``, checked. Over a minute, hence in ``make e2e``."""

from __future__ import annotations

import pytest

from assets import cluster_demo

pytestmark = pytest.mark.e2e


def test_the_example_runs_on_a_cluster_over_s3(tmp_path):
    assert cluster_demo.main(str(tmp_path)) == 0
    for worker in ("worker-0", "worker-1"):  # both workers ran executors, in their own directories
        assert list((tmp_path / worker).glob("app-*/*/stderr")), worker
    # the driver ran from an empty directory and wrote no table file there: everything is on S3
    assert {p.name for p in (tmp_path / "driver").iterdir()} == {"dagster_home"}
