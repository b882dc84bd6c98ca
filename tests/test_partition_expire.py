"""Partition expiration on tiny real tables: both strategies, Java timestamp patterns, max-num, dry
runs, automatic expiration after commits and its check interval, refused options."""

from __future__ import annotations

import tempfile
import time
from datetime import datetime, timedelta

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lakehouse import Catalog
from lakehouse.errors import (
    ArgumentTypeError,
    InvalidArgumentError,
    InvalidOptionError,
    UnsupportedFeatureError,
)
from lakehouse.ops.partition_expire import (
    PartitionExpiration,
    expire_partitions,
    expire_partitions_after_commit,
)
from lakehouse.partition_time import DateTimePattern, PartitionTimeExtractor
from lakehouse.snapshot import CommitKind

from .conftest import orders, pk_orders_table, rows

EVENTS = pa.schema(
    [pa.field("id", pa.int64(), nullable=False), pa.field("dt", pa.string()), pa.field("hour", pa.string())]
)


def events(dts: list, hours: list | None = None) -> pa.Table:
    """One row per partition value (``hours`` default "00")."""
    return pa.table({"id": range(len(dts)), "dt": dts, "hour": hours or ["00"] * len(dts)}, schema=EVENTS)


def events_table(catalog: Catalog, keys=("dt",), **options: str):
    return catalog.create_table(
        "db.e", EVENTS, partition_keys=list(keys), options={"bucket": "-1", **options}
    )


def dts(t) -> list:
    return sorted(t.read(columns=["dt"]).column("dt").to_pylist(), key=str)


# ---- timestamps of partition values -----------------------------------------------------------


@pytest.mark.parametrize(
    "formatter, text, expected",
    [
        ("yyyyMMdd", "20240701", datetime(2024, 7, 1)),
        ("yyyy-MM-dd", "2024-07-01", datetime(2024, 7, 1)),
        ("yyyy-MM-dd HH:mm:ss", "2024-07-01 05:06:07", datetime(2024, 7, 1, 5, 6, 7)),
        ("yyyyMMddHH", "2024070105", datetime(2024, 7, 1, 5)),
        ("yyyy-MM-dd HH", "2024-07-01 05", datetime(2024, 7, 1, 5)),
        ("yyyy/M/d", "2024/7/1", datetime(2024, 7, 1)),
        ("yy-MM-dd", "24-07-01", datetime(2024, 7, 1)),
        ("uuuu.MM.dd", "2024.07.01", datetime(2024, 7, 1)),
        ("yyyy-MM-dd'T'HH:mm:ss.SSS", "2024-07-01T05:06:07.123", datetime(2024, 7, 1, 5, 6, 7, 123000)),
        ("'day='yyyyMMdd", "day=20240701", datetime(2024, 7, 1)),
        ("yyyy-MM-dd", "2024-02-30", datetime(2024, 2, 29)),  # SMART: clamped to the month's end
        ("yyyy-MM-dd mm", "2024-07-01 30", datetime(2024, 7, 1)),  # minutes without an hour: midnight
        ("yyyy-MM-dd", "2024-13-01", None),
        ("yyyy-MM-dd", "2024-7-01", None),  # MM takes exactly two digits
        ("yyyyMMdd", "2024070", None),
        ("yyyy-MM-dd HH", "2024-07-01 25", None),
        ("yyyy-MM-dd", "0000-01-01", None),  # year-of-era starts at 1
        ("yyyyMM", "202407", None),  # no day: no date (Paimon never expires such partitions)
        (None, "2024-7-1", datetime(2024, 7, 1)),
        (None, "2024-07-01 5:06:07", datetime(2024, 7, 1, 5, 6, 7)),
        (None, "2024-07-01 05:06:07.5", datetime(2024, 7, 1, 5, 6, 7, 500000)),
        (None, "2024-13-01", datetime(2025, 1, 1)),  # the default formatters are LENIENT
        (None, "2024-02-30 25:00:00", datetime(2024, 3, 2, 1)),
        (None, "20240701", None),
        (None, "2024-07-01T05:00:00", None),
        (None, "not a date", None),
    ],
)
def test_java_timestamp_patterns(formatter, text, expected):
    micros, ok = DateTimePattern.of(formatter).parse(pa.array([text]))
    assert bool(ok[0]) == (expected is not None)
    if expected is not None:
        assert datetime(1970, 1, 1) + timedelta(microseconds=int(micros[0])) == expected


def test_timestamp_pattern_substitutes_the_longest_key_and_skips_nulls():
    extractor = PartitionTimeExtractor("$dt1 $dt:00:00", DateTimePattern.of(None))
    texts = extractor.texts(["dt", "dt1"], [["5", "2024-07-01"], [None, "2024-07-01"]])
    assert texts.to_pylist() == ["2024-07-01 5:00:00", None]
    assert PartitionTimeExtractor(None, DateTimePattern.of(None)).texts(
        ["a", "b"], [["x", "y"]]
    ).to_pylist() == ["x"]


@pytest.mark.parametrize(
    "formatter, error",
    [
        ("yyyy-MM-dd bb", InvalidOptionError),  # not a Java pattern letter
        ("yyyy-MM-ddd", InvalidOptionError),  # too many letters
        ("yyyy-MM-dd'", InvalidOptionError),  # unclosed quote
        ("yyyy-MMM-dd", UnsupportedFeatureError),  # month names
        ("yyyy-MM-dd[ HH]", UnsupportedFeatureError),  # optional sections
    ],
)
def test_bad_formatters_are_refused_when_set(catalog, formatter, error):
    with pytest.raises(error, match="partition.timestamp-formatter"):
        events_table(catalog, **{"partition.timestamp-formatter": formatter})
    assert catalog.list_tables("db") == []


# ---- values-time ------------------------------------------------------------------------------


def test_values_time_drops_old_partitions_in_one_overwrite_snapshot(catalog):
    t = events_table(catalog)
    t.write(events(["2000-01-01", "2000-01-02", "2999-01-01"]))
    t.write(events(["2000-01-01"]))
    result = t.expire_partitions(expiration_time="7 d")
    assert result.partitions == ({"dt": "2000-01-01"}, {"dt": "2000-01-02"})
    assert (result.partitions_expired, result.files, result.rows, result.dry_run) == (2, 3, 3, False)
    snap = t.snapshot()
    assert result.snapshot_id == snap.id == 3
    assert snap.commit_kind == CommitKind.OVERWRITE and snap.delta_record_count == -3
    assert snap.total_record_count == 1
    assert dts(t) == ["2999-01-01"]
    assert t.read(snapshot_id=2).num_rows == 4  # time travel still sees them
    assert t.expire_partitions(expiration_time="7 d").snapshot_id is None  # nothing left to expire
    assert t.latest_snapshot_id() == 3


@pytest.mark.parametrize(
    "keys, pattern, formatter, partitions, expired",
    [
        (("dt",), None, "yyyyMMdd", [["20240701"], ["20240702"], ["20240708"]], [["20240701"]]),
        (("dt",), None, "yyyy-MM-dd", [["2024-07-01"], ["2024-07-02"]], [["2024-07-01"]]),
        (("hour", "dt"), "$dt", "yyyyMMdd", [["01", "20240701"], ["02", "20240705"]], [["01", "20240701"]]),
        (
            ("dt", "hour"),
            "$dt $hour:00:00",
            "yyyy-MM-dd HH:mm:ss",
            [["2024-07-01", "23"], ["2024-07-02", "00"], ["2024-07-02", "01"]],
            [["2024-07-01", "23"]],
        ),
        (
            ("dt", "hour"),
            "$dt $hour:00:00",
            None,
            [["2024-7-1", "23"], ["2024-7-2", "1"]],
            [["2024-7-1", "23"]],
        ),
        (("dt",), None, None, [["2024-07-01"], ["garbage"]], [["2024-07-01"]]),  # garbage never expires
    ],
)
def test_values_time_with_patterns_and_formatters(catalog, keys, pattern, formatter, partitions, expired):
    options = {"partition.timestamp-formatter": formatter, "partition.timestamp-pattern": pattern}
    t = events_table(catalog, keys, **{k: v for k, v in options.items() if v is not None})
    columns = {k: [p[i] for p in partitions] for i, k in enumerate(keys)}
    t.write(events(columns["dt"], columns.get("hour")))
    # now minus 7 days is 2024-07-02 00:00: a partition of exactly that time is not older
    done = expire_partitions(t.store, "7 d", now=datetime(2024, 7, 9))
    assert [list(p.values()) for p in done.partitions] == expired
    assert [list(p) for p in done.partitions] == [list(keys)] * len(expired)


def test_values_are_read_as_java_prints_them(catalog):
    schema = pa.schema([("id", pa.int64()), ("day", pa.int32()), ("date", pa.date32())])
    t = catalog.create_table("db.n", schema, partition_keys=["day", "date"])
    t.write(pa.table({"id": [1, 2], "day": [20000101, 29990101], "date": [0, 0]}, schema=schema))
    done = t.expire_partitions(expiration_time="1 d", timestamp_formatter="yyyyMMdd", dry_run=True)
    assert done.partitions == ({"day": "20000101", "date": "0"},)
    # a DATE is its epoch day count in Java's toString(), which no pattern reads: never expires
    assert (
        t.expire_partitions(expiration_time="1 d", timestamp_pattern="$date", dry_run=True).partitions == ()
    )


def test_nulls_never_expire_by_value_but_do_by_update_time(catalog):
    t = events_table(catalog)
    t.write(events([None, "2000-01-01"]))
    assert t.expire_partitions(expiration_time="1 d").partitions == ({"dt": "2000-01-01"},)
    time.sleep(0.01)
    done = t.expire_partitions(expiration_time="0 ms", strategy="update-time")
    assert done.partitions == ({"dt": "__DEFAULT_PARTITION__"},)
    assert t.read().num_rows == 0


def test_arguments_override_the_table_options(catalog):
    t = events_table(catalog)
    t.write(events(["20000101", "2000-01-02"]))
    t.set_options({"partition.expiration-time": "1 d", "partition.timestamp-formatter": "yyyyMMdd"})
    assert t.expire_partitions(dry_run=True).partitions == ({"dt": "20000101"},)
    assert t.expire_partitions(
        expiration_time=timedelta(days=1), dry_run=True, timestamp_formatter="yyyy-MM-dd"
    ).partitions == ({"dt": "2000-01-02"},)
    assert t.expire_partitions(expiration_time="100000 d", dry_run=True).partitions == ()


# ---- update-time ------------------------------------------------------------------------------


def test_update_time_expires_partitions_whose_newest_file_is_old(catalog):
    t = events_table(catalog, **{"partition.expiration-strategy": "update-time"})
    t.write(events(["a", "b"]))
    time.sleep(0.05)
    t.write(events(["b"]))  # b's newest file is younger
    newest = {e.file.creation_time for e in t.live_entries()}
    assert t.expire_partitions(expiration_time="1 h").partitions == ()
    # one hour after b's newest file: a is older than an hour, b exactly an hour old stays
    now = datetime(1970, 1, 1) + timedelta(milliseconds=max(newest), hours=1)
    done = expire_partitions(t.store, now=now, expiration_time="1 h")
    assert done.partitions == ({"dt": "a"},)
    assert dts(t) == ["b", "b"]


# ---- max-num and dry runs ---------------------------------------------------------------------


def test_max_num_takes_the_first_partitions_by_value(catalog):
    t = events_table(catalog, **{"partition.expiration-max-num": "2"})
    days = ["2000-01-05", "2000-01-01", "2000-01-04", "2000-01-02", "2000-01-03", "2999-01-01"]
    t.write(events(days))
    assert [p["dt"] for p in t.expire_partitions(expiration_time="1 d").partitions] == [
        "2000-01-01",
        "2000-01-02",
    ]
    assert [p["dt"] for p in t.expire_partitions(expiration_time="1 d", max_expires=1).partitions] == [
        "2000-01-03"
    ]
    assert [p["dt"] for p in t.expire_partitions(expiration_time="1 d", max_expires=10).partitions] == [
        "2000-01-04",
        "2000-01-05",
    ]
    assert dts(t) == ["2999-01-01"]


def test_a_dry_run_changes_nothing(catalog):
    t = events_table(catalog)
    t.write(events(["2000-01-01", "2999-01-01"]))
    files = {e.file.file_name for e in t.live_entries()}
    done = t.expire_partitions(expiration_time="1 d", dry_run=True)
    assert done == PartitionExpiration(None, ({"dt": "2000-01-01"},), 1, 1, True)
    assert t.latest_snapshot_id() == 1 and {e.file.file_name for e in t.live_entries()} == files


# ---- refused calls commit nothing -------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs, error",
    [
        ({"expiration_time": "soon"}, InvalidOptionError),
        ({"expiration_time": "1 d", "strategy": "oldest-first"}, InvalidOptionError),
        ({"expiration_time": "1 d", "timestamp_formatter": "yyyy-MMM-dd"}, UnsupportedFeatureError),
        ({"expiration_time": "1 d", "max_expires": 0}, InvalidOptionError),
        ({"expiration_time": "1 d", "max_expires": "3"}, ArgumentTypeError),
        ({"expiration_time": 7}, ArgumentTypeError),
        ({}, InvalidArgumentError),  # no expiration time anywhere
    ],
)
def test_bad_arguments_raise_typed_errors_and_commit_nothing(catalog, kwargs, error):
    t = events_table(catalog)
    t.write(events(["2000-01-01"]))
    with pytest.raises(error, match="db.e"):
        t.expire_partitions(**kwargs)
    assert t.latest_snapshot_id() == 1 and t.read().num_rows == 1


def test_bad_options_are_refused_when_set(catalog):
    t = events_table(catalog)
    for key, value in [
        ("partition.expiration-strategy", "newest"),
        ("partition.expiration-time", "a week"),
        ("partition.expiration-check-interval", "often"),
        ("partition.expiration-max-num", "-1"),
        ("end-input.check-partition-expire", "yes"),
    ]:
        with pytest.raises(InvalidOptionError, match=key):
            t.set_options({key: value})
    assert t.schema.id == 0


def test_an_unpartitioned_table_has_no_partitions_to_expire(catalog):
    t = catalog.create_table("db.u", EVENTS)
    t.write(events(["2000-01-01"]))
    with pytest.raises(InvalidArgumentError, match="no partition keys"):
        t.expire_partitions(expiration_time="1 d")


def test_a_primary_key_table_keeps_reading_right_after_expiration(catalog):
    t = pk_orders_table(catalog, **{"deletion-vectors.enabled": "true"})
    t.write(orders(range(6), dt=["2000-01-01", "2999-01-01"] * 3))
    t.write(orders(range(2), dt="2999-01-01", price=2.0))
    t.compact(full=True)
    expected = [r for r in rows(t.read()) if r["dt"] != "2000-01-01"]
    assert t.expire_partitions(expiration_time="1 d").partitions == ({"dt": "2000-01-01"},)
    assert rows(t.read()) == expected
    assert all(e.partition == t.live_entries()[0].partition for e in t.index_entries())


# ---- after commits ----------------------------------------------------------------------------


def test_writes_expire_partitions_at_most_once_per_check_interval(catalog):
    t = events_table(catalog, **{"partition.expiration-time": "7 d"})
    write = t.write(events(["2000-01-01", "2999-01-01"]), commit_user="me")
    assert write == 1 and t.latest_snapshot_id() == 2  # the first commit in this process checks
    assert t.snapshot().commit_kind == CommitKind.OVERWRITE and t.snapshot().commit_user == "me"
    assert dts(t) == ["2999-01-01"]
    t.write(events(["2000-01-02"]))  # within the hour (the default interval): no check
    assert dts(t) == ["2000-01-02", "2999-01-01"]
    t.set_options({"partition.expiration-check-interval": "100 ms"})
    time.sleep(0.15)
    t.write(events(["2999-01-02"]))
    assert dts(t) == ["2999-01-01", "2999-01-02"]


def test_expiration_after_a_streaming_commit_carries_its_identifier(catalog):
    t = events_table(
        catalog, **{"partition.expiration-time": "7 d", "partition.expiration-check-interval": "0 ms"}
    )
    writer = t.new_write()
    writer.write(events(["2000-01-01", "2999-01-01"]))
    assert t.new_commit(commit_user="query").commit(writer.prepare_commit(), identifier=4) == 1
    assert expire_partitions_after_commit(t.store, "query", 4).snapshot_id == 2
    assert (t.snapshot(2).commit_user, t.snapshot(2).commit_identifier) == ("query", 4)
    assert dts(t) == ["2999-01-01"] and not t.new_commit(commit_user="query").committed(
        5
    )  # batch 5 still lands


def test_end_input_check_expires_after_every_batch_commit(catalog):
    options = {"partition.expiration-time": "7 d", "end-input.check-partition-expire": "true"}
    t = events_table(catalog, **options)
    for day in ["2000-01-01", "2000-01-02"]:
        t.write(events([day, "2999-01-01"]))
        assert dts(t) == ["2999-01-01"] * (1 if day.endswith("1") else 2)


@pytest.mark.parametrize("options", [{}, {"partition.expiration-time": "7 d", "write-only": "true"}])
def test_tables_without_the_option_or_write_only_never_expire_on_commit(catalog, options):
    t = events_table(catalog, **options)
    t.write(events(["2000-01-01"]))
    assert t.latest_snapshot_id() == 1 and dts(t) == ["2000-01-01"]


# ---- against a brute-force model ---------------------------------------------------------------

FORMATS = [("yyyyMMdd", "%Y%m%d"), ("yyyy-MM-dd", "%Y-%m-%d"), ("yyyy/MM/dd HH", "%Y/%m/%d %H")]
DAYS = st.dates(min_value=datetime(2020, 1, 1).date(), max_value=datetime(2020, 12, 31).date())


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    fmt=st.sampled_from(FORMATS),
    days=st.lists(st.tuples(DAYS, st.integers(0, 23)), min_size=1, max_size=8),
    junk=st.lists(st.sampled_from(["x", "2020-02-31x", "20201301", "2020"]), max_size=2),
    now=st.datetimes(min_value=datetime(2020, 1, 1), max_value=datetime(2021, 1, 31)),
    expiration=st.integers(0, 90 * 24),
    max_num=st.integers(1, 10),
)
def test_expired_partitions_match_a_brute_force_model(fmt, days, junk, now, expiration, max_num):
    java, python = fmt
    values = sorted({datetime(d.year, d.month, d.day, h).strftime(python) for d, h in days} | set(junk))
    with tempfile.TemporaryDirectory() as tmp:
        cat = Catalog(tmp)
        cat.create_database("db")
        options = {"partition.timestamp-formatter": java, "partition.expiration-max-num": str(max_num)}
        t = events_table(cat, **options)
        t.write(events(values))
        cutoff = now - timedelta(hours=expiration)

        def expires(value: str) -> bool:
            try:
                return datetime.strptime(value, python) < cutoff
            except ValueError:
                return False

        model = sorted(v for v in values if expires(v))[:max_num]
        planned = expire_partitions(t.store, f"{expiration} h", dry_run=True, now=now)
        assert [p["dt"] for p in planned.partitions] == model
        done = expire_partitions(t.store, f"{expiration} h", now=now)
        assert done.partitions == planned.partitions
        assert sorted(t.read().column("dt").to_pylist()) == sorted(set(values) - set(model))
