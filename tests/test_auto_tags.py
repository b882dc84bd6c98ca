"""Automatic tags after commits (``tag.automatic-creation``), with commit times from a fake clock."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from lakehouse.errors import InvalidOptionError, UnsupportedFeatureError
from lakehouse.ops.orphans import candidate_files, referenced_files

from .conftest import orders, pk_orders_table, rows


def millis(text: str, offset_hours: int = 0) -> int:
    """Epoch millis of ``YYYY-MM-DD HH:MM`` at UTC+``offset_hours``."""
    local = datetime.strptime(text, "%Y-%m-%d %H:%M").replace(tzinfo=UTC)
    return int(local.timestamp() * 1000) - offset_hours * 3_600_000


def commit_at(t, when: str, watermark: int | None = None, i: int = 0) -> int:
    """Write one row, committed at ``when`` (UTC) by the committer's clock."""
    writer = t.new_write()
    writer.write(orders([i], price=float(i)))
    return t.new_commit(clock=lambda: millis(when)).commit(writer.prepare_commit(), watermark=watermark)


def auto_table(catalog, **options: str):
    base = {"tag.automatic-creation": "process-time", "sink.process-time-zone": "UTC", "write-only": "true"}
    return pk_orders_table(catalog, **{**base, **options})


def test_daily_tags_name_the_day_before_the_first_snapshot_after_it(catalog):
    t = auto_table(catalog)
    assert commit_at(t, "2024-01-02 10:00") == 1
    assert t.tags() == {"2024-01-01": 1}  # the first snapshot is tagged at once
    commit_at(t, "2024-01-02 23:59")
    assert t.tags() == {"2024-01-01": 1}
    commit_at(t, "2024-01-03 00:00")
    assert t.tags() == {"2024-01-01": 1, "2024-01-02": 3}
    commit_at(t, "2024-01-06 08:00")  # days without commits get no tag
    assert t.tags() == {"2024-01-01": 1, "2024-01-02": 3, "2024-01-05": 4}


def test_automatic_completion_names_the_period_expected_next(catalog):
    t = auto_table(catalog, **{"tag.automatic-completion": "true"})
    commit_at(t, "2024-01-02 10:00")
    commit_at(t, "2024-01-06 08:00")
    commit_at(t, "2024-01-06 09:00")
    commit_at(t, "2024-01-07 09:00")
    # each later snapshot takes the next missing day, not its own
    assert t.tags() == {"2024-01-01": 1, "2024-01-02": 2, "2024-01-03": 3, "2024-01-04": 4}


@pytest.mark.parametrize(
    "options,first,second",
    [
        ({"tag.creation-period": "hourly"}, "2024-01-02 09", "2024-01-02 11"),
        (
            {"tag.creation-period": "hourly", "tag.period-formatter": "without_dashes"},
            "20240102 09",
            "20240102 11",
        ),
        (
            {"tag.creation-period": "hourly", "tag.period-formatter": "without_dashes_and_spaces"},
            "2024010209",
            "2024010211",
        ),
        ({"tag.creation-period": "two-hours"}, "2024-01-02 08", "2024-01-02 10"),
        ({"tag.period-formatter": "without_dashes"}, "20240101", None),
        ({"tag.creation-period-duration": "30 min"}, "202401021000", "202401021130"),
    ],
)
def test_periods_and_name_formats(catalog, options, first, second):
    t = auto_table(catalog, **options)
    commit_at(t, "2024-01-02 10:40")
    commit_at(t, "2024-01-02 12:05")  # tagged after the period before its own
    names = list(t.tags())
    assert names[0] == first
    assert (names[1] if len(names) > 1 else None) == second


def test_creation_delay_waits_for_late_data(catalog):
    t = auto_table(catalog, **{"tag.creation-delay": "1 h"})
    commit_at(t, "2024-01-02 00:30")
    commit_at(t, "2024-01-03 00:30")  # within the delay after the day ended
    assert t.tags() == {"2024-01-01": 1}
    commit_at(t, "2024-01-03 01:00")
    assert t.tags() == {"2024-01-01": 1, "2024-01-02": 3}


def test_process_time_zone_decides_the_day(catalog):
    t = auto_table(catalog, **{"sink.process-time-zone": "GMT+08:00"})
    commit_at(t, "2024-01-01 16:00")  # midnight of January 2nd in UTC+8
    assert list(t.tags()) == ["2024-01-01"]


def test_watermark_tags_follow_the_watermark(catalog):
    t = auto_table(
        catalog, **{"tag.automatic-creation": "watermark", "sink.watermark-time-zone": "Asia/Shanghai"}
    )
    commit_at(t, "2024-03-01 00:00")  # no watermark: no time, no tag
    assert t.tags() == {}
    commit_at(t, "2024-03-01 00:00", watermark=millis("2024-01-02 01:00", offset_hours=8))
    assert t.tags() == {"2024-01-01": 2}
    commit_at(t, "2024-03-01 00:00", watermark=millis("2024-01-01 20:00", offset_hours=8))
    assert t.snapshots.latest().watermark == millis("2024-01-02 01:00", offset_hours=8)  # never goes back
    commit_at(t, "2024-03-01 00:00", watermark=millis("2024-01-03 00:00", offset_hours=8))
    assert t.tags() == {"2024-01-01": 2, "2024-01-02": 4}


def test_retained_max_deletes_the_oldest_automatic_tags_and_their_files(catalog):
    t = auto_table(catalog, **{"tag.num-retained-max": "2", "write-only": "false"})
    t.create_tag("manual", snapshot_id=commit_at(t, "2024-01-02 10:00", i=0))
    seen = {}
    for day in range(3, 7):
        commit_at(t, f"2024-01-0{day} 10:00", i=day)
        for sid in t.snapshots.snapshot_ids():
            seen.setdefault(sid, rows(t.read(snapshot_id=sid)))
        t.expire_snapshots(retain_min=1, older_than_ms=2**62)
    assert list(t.tags()) == ["manual", "2024-01-04", "2024-01-05"]
    for name, sid in t.tags().items():
        if name != "manual":
            assert rows(t.read(tag=name)) == seen[sid]
    assert {f.path for f in candidate_files(t)} == referenced_files(t).all()


def test_restarts_from_the_newest_automatic_tag(catalog):
    t = auto_table(catalog)
    commit_at(t, "2024-01-02 10:00")
    t.delete_tag("2024-01-01")
    t.create_tag("2024-01-04", snapshot_id=1)  # a tag named like a period counts as automatic
    commit_at(t, "2024-01-05 10:00")
    assert t.tags() == {"2024-01-04": 1}
    commit_at(t, "2024-01-06 10:00")
    assert t.tags() == {"2024-01-04": 1, "2024-01-05": 3}


def test_unusable_tag_options_are_refused(catalog):
    bad = [
        ({"tag.automatic-creation": "hourly"}, InvalidOptionError, "unknown tag.automatic-creation"),
        ({"tag.automatic-creation": "batch"}, UnsupportedFeatureError, "batch"),
        ({"tag.creation-period": "weekly"}, InvalidOptionError, "tag.creation-period"),
        ({"tag.period-formatter": "slashes"}, InvalidOptionError, "tag.period-formatter"),
        ({"tag.creation-delay": "1 d"}, InvalidOptionError, "shorter than"),
        ({"tag.num-retained-max": "0"}, InvalidOptionError, "at least 1"),
        ({"sink.process-time-zone": "Mars/Olympus"}, InvalidOptionError, "time zone"),
    ]
    for options, error, match in bad:
        with pytest.raises(error, match=match):
            auto_table(catalog, **options)
