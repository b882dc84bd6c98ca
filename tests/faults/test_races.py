"""Processes committing to one table at once (see :mod:`.racing`): every write lands exactly once
and each snapshot reads exactly the writes committed up to it; full compactions racing writers
commit or fail with ``CommitConflictError``, and nothing they wrote stays behind either way.
``bench/faults.py`` runs them at full size (4 x 50 commits, 2 writers x 50 and 2 x 50 compactions)."""

from __future__ import annotations

import pytest

from .racing import race

pytestmark = pytest.mark.interop  # every run ends with pypaimon reading what it left

COMMITS = 25


@pytest.mark.parametrize("kind", ["append", "pk"])
def test_four_writers_each_land_every_commit_once(tmp_path, kind):
    result = race(kind, writers=4, commits=COMMITS, compactors=0, rounds=0, workdir=str(tmp_path))
    assert result.anomalies == []
    assert result.commits == 4 * COMMITS


def test_writers_racing_full_compactions(tmp_path):
    result = race("pk", writers=2, commits=COMMITS, compactors=2, rounds=COMMITS, workdir=str(tmp_path))
    assert result.anomalies == []
    assert result.commits == 2 * COMMITS
    assert set(result.compactions) <= {"committed", "conflict", "nothing"}
