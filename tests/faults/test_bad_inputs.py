"""Every bad input of :mod:`tests.faults.bad_inputs`: a typed error that says what is wrong and what
to do, and the warehouse byte-for-byte as it was."""

from __future__ import annotations

import pytest

from .bad_inputs import CASES, Case, run


def test_the_cases_are_many_and_distinct():
    assert len(CASES) >= 30 and len({c.name for c in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_a_bad_input_is_typed_and_changes_nothing(case: Case, warehouse):
    outcome = run(case, warehouse)
    assert outcome.typed(case), (
        f"expected {case.error.__name__} matching {case.match!r}, got {outcome.error!r}"
    )
    assert outcome.unchanged
