"""Declarative automation as the schedule's alternative, and the dws tables' freshness checks."""

import datetime as dt

from dagster import AssetKey, evaluate_automation_conditions, instance_for_test

from assets.definitions import defs
from dagster_lakehouse.definitions import AUTOMATION

EVERY_TABLE = {("ods", "orders"), ("dwd", "orders"), ("dws", "user_daily"), ("dws", "order_wide")}


def _requested(result) -> dict[tuple[str, ...], set[str]]:
    return {
        tuple(r.key.path): {p.partition_key for p in r.true_subset.expensively_compute_asset_partitions()}
        for r in result.results
        if r.true_subset.size and isinstance(r.key, AssetKey)
    }


def test_the_cron_tick_requests_yesterday_for_the_whole_graph():
    before = dt.datetime(2026, 11, 24, 0, 30, tzinfo=dt.UTC)
    with instance_for_test() as instance:
        first = evaluate_automation_conditions(defs=defs, instance=instance, evaluation_time=before)
        assert first.total_requested == 0  # nothing before the 01:00 tick
        after = evaluate_automation_conditions(defs=defs, instance=instance, cursor=first.cursor,
                                               evaluation_time=before + dt.timedelta(hours=1))  # fmt: skip
    # the source layer on cron, every table below it along with the days it reads
    assert _requested(after) == {key: {"2026-11-23"} for key in EVERY_TABLE}


def test_automation_is_an_alternative_to_the_schedule():
    repo = defs.get_repository_def()
    sensor = next(s for s in repo.sensor_defs if s.name == AUTOMATION)
    assert sensor.default_status.value == "STOPPED"  # the user starts one of the two


def test_the_dws_tables_have_freshness_policies():
    fresh = {
        key.to_user_string(): spec.freshness_policy
        for a in defs.assets
        for key, spec in a.specs_by_key.items()
        if spec.freshness_policy is not None
    }
    assert set(fresh) == {"dws/user_daily", "dws/order_wide"}
    assert all(p.deadline_cron == "0 3 * * *" for p in fresh.values())
