"""Damage to file indexes behind a valid header: whenever it could change the result of a filtered
read, ``verify_file_indexes`` reports it, naming the data file and the column."""

from __future__ import annotations

import pytest

from .index_damage import run_trials


@pytest.mark.parametrize("seed", [1, 2])
def test_every_damage_that_changes_a_result_is_reported(warehouse, seed):
    damage = run_trials(warehouse, seed, trials=24)
    assert damage.harmful > 0  # the damage reached results: the check is not vacuous
    assert damage.reported == damage.harmful, f"{damage.harmful - damage.reported} harmful damages unreported"
