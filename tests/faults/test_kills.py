"""kill -9 of a writer, a committer, a compaction, an expiration and a file-index rewrite at
crash points drawn from a seeded RNG (see :mod:`.killrun`): after every kill the table opens,
every listed snapshot and tag reads a state of the model (pypaimon reads the same), the table's
verifications pass, the next operation succeeds and orphan cleanup removes exactly what the
killed process left. ``bench/faults.py`` runs the long version."""

from __future__ import annotations

import pytest

from .killrun import kill_series

pytestmark = pytest.mark.interop  # every run ends with pypaimon reading what it left

KILLS = 10  # per table kind
OPERATIONS = 36
SEED = 13


@pytest.mark.parametrize(
    ("kind", "operations"),
    [
        ("append", {"write", "commit", "index", "expire"}),  # append tables have no compaction
        ("pk", {"write", "commit", "compact", "index", "expire"}),
        ("pk_dv", {"write", "commit", "compact", "index", "expire"}),
        ("indexed", {"write", "commit", "index", "expire"}),
        # pyiceberg reads what the Iceberg metadata names, too
        pytest.param("iceberg", {"write", "commit", "index", "expire"}, marks=pytest.mark.iceberg),
        # ... and applies the deletion vectors Iceberg v3 metadata names
        pytest.param(
            "iceberg_dv", {"write", "commit", "compact", "index", "expire"}, marks=pytest.mark.iceberg
        ),
    ],
)
def test_a_process_killed_at_any_crash_point_leaves_a_table_that_reads_its_history(
    tmp_path, kind, operations
):
    report = kill_series(kind, KILLS, OPERATIONS, SEED, str(tmp_path))
    assert report.anomalies == []
    assert sum(report.kills.values()) == KILLS and set(report.kills) == operations
    assert report.orphans_removed == report.orphans_found > 0
