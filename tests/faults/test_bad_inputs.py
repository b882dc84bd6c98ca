"""Every bad input of :mod:`tests.faults.bad_inputs`: a typed error that says what is wrong and what
to do, and the warehouse byte-for-byte as it was."""

from __future__ import annotations

import os

import pyarrow as pa
import pytest

from ..interop import oracle
from .bad_inputs import CASES, ORDERS, Case, orders, picture, run


def test_the_cases_are_many_and_distinct():
    assert len(CASES) >= 30 and len({c.name for c in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_a_bad_input_is_typed_and_changes_nothing(case: Case, warehouse):
    outcome = run(case, warehouse)
    assert outcome.typed(case), (
        f"expected {case.error.__name__} matching {case.match!r}, got {outcome.error!r}"
    )
    assert outcome.unchanged


@pytest.mark.interop
def test_hostile_partition_values_stay_inside_the_table(catalog, warehouse):
    """Partition values that look like paths are escaped into one directory name each (as Paimon
    escapes them), so nothing is written outside the table and every reader finds the rows."""
    around = os.path.dirname(warehouse)
    t = catalog.create_table("db.h", ORDERS, partition_keys=["dt"])
    before = {p for p in picture(around) if not p.startswith("warehouse/")}
    values = ["../../../evil", "/etc/x", "..", "a/b\\\\c", "%2F", "x\n"]
    t.write(pa.concat_tables([orders([i], dt=v) for i, v in enumerate(values)]))
    after = {p for p in picture(around) if not p.startswith("warehouse/")}
    assert after == before  # nothing outside the warehouse
    table_root = os.path.relpath(t.paths.root, around)
    written = [p for p in picture(around) if p.startswith("warehouse/") and not p.endswith("/")]
    assert all(p.startswith(table_root + "/") for p in written if "db.h" in p)
    assert sorted(t.read().column("dt").to_pylist()) == sorted(values)
    assert sorted(oracle.read(warehouse, "db.h").column("dt").to_pylist()) == sorted(values)
