"""Random histories of upserts on ``main`` and a branch, compactions, expirations, orphan
cleanups and fast-forwards against a dict per branch: each branch reads its dict, and no
cleanup deletes a file some branch still references."""

from __future__ import annotations

import tempfile
import time

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lakehouse import Catalog

from .conftest import orders, pk_orders_table, rows
from .test_branches import on_disk, used_files

BRANCHES = st.sampled_from(["main", "b"])
step = st.one_of(
    st.tuples(st.just("write"), BRANCHES, st.integers(0, 12), st.integers(1, 5)),
    st.tuples(st.just("compact"), BRANCHES),
    st.tuples(st.just("expire"), BRANCHES),
    st.tuples(st.just("clean"), BRANCHES),
    st.tuples(st.just("fast_forward")),
)


def expected(model: dict[int, float]) -> list[dict]:
    return rows(orders(sorted(model), price=[model[k] for k in sorted(model)]))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(step, min_size=1, max_size=10))
def test_branches_follow_their_model_through_fast_forwards_and_cleanups(steps):
    with tempfile.TemporaryDirectory() as d:
        cat = Catalog(d)
        cat.create_database("db")
        main = pk_orders_table(cat)
        main.write(orders(range(5), price=0.0))
        main.create_tag("base")
        main.create_branch("b", tag="base")
        tables = {"main": main, "b": main.on_branch("b")}
        model = {"main": dict.fromkeys(range(5), 0.0), "b": dict.fromkeys(range(5), 0.0)}
        for price, (op, *args) in enumerate(steps, start=1):
            if op == "write":
                branch, start, n = args
                tables[branch].write(orders(range(start, start + n), price=float(price)))
                model[branch].update(dict.fromkeys(range(start, start + n), float(price)))
            elif op == "compact":
                tables[args[0]].compact(full=True)
            elif op == "expire":
                tables[args[0]].expire_snapshots(retain_min=1, older_than_ms=2**62)
            elif op == "clean":
                time.sleep(0.002)
                tables[args[0]].remove_orphan_files(older_than_ms=int(time.time() * 1000) - 1)
            else:
                main.fast_forward("b")
                model["main"] = dict(model["b"])
            for branch, table in tables.items():
                assert rows(table.read()) == expected(model[branch]), f"{branch} after {op}"
            assert used_files(main) <= on_disk(main)
        time.sleep(0.002)
        main.remove_orphan_files(older_than_ms=int(time.time() * 1000) - 1)
        assert on_disk(main) == used_files(main)
