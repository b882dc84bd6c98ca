from __future__ import annotations

import pytest

from lakehouse.errors import InvalidOptionError
from lakehouse.options import CoreOptions, parse_bool, parse_duration_ms, parse_memory_size


@pytest.mark.parametrize(
    ("text", "size"),
    [
        ("128 mb", 128 << 20),
        ("500 B", 500),
        ("64kb", 64 << 10),
        ("1 g", 1 << 30),
        ("42", 42),
        (" 8 MB ", 8 << 20),
    ],
)
def test_memory_sizes(text, size):
    assert parse_memory_size(text) == size


@pytest.mark.parametrize(
    ("text", "ms"),
    [
        ("1 h", 3_600_000),
        ("30 min", 1_800_000),
        ("10 s", 10_000),
        ("7 d", 7 * 86_400_000),
        ("250", 250),
        ("5 ms", 5),
    ],
)
def test_durations(text, ms):
    assert parse_duration_ms(text) == ms


@pytest.mark.parametrize("bad", ["1.5mb", "mb", "12 parsecs", ""])
def test_bad_sizes_name_the_option(bad):
    with pytest.raises(InvalidOptionError, match="target-file-size"):
        parse_memory_size(bad, "target-file-size")


def test_booleans_and_defaults():
    assert parse_bool("TRUE") is True
    with pytest.raises(InvalidOptionError):
        parse_bool("yes")
    options = CoreOptions({"bucket": "4"})
    assert options.bucket == 4
    assert options.get("file.format") == "parquet"
    assert options.memory("manifest.target-file-size") == 8 << 20
    assert options.target_file_size(has_primary_key=True) == 128 << 20
    assert options.target_file_size(has_primary_key=False) == 256 << 20
    assert options.duration_ms("commit.timeout") is None


def test_known_options_are_those_the_engine_reads_in_any_case():
    from lakehouse import is_known_option

    assert is_known_option("bucket") and is_known_option("merge-engine")
    assert is_known_option("read.stream.maxfilespertrigger")  # as Spark lowercases it
    assert is_known_option("fields.price.aggregate-function") and is_known_option("file-index.bitmap.columns")
    assert not is_known_option("bukket") and not is_known_option("merge_engine")


def test_option_names_are_the_known_ones():
    from lakehouse import is_known_option, option_names

    names = option_names()
    assert "bucket" in names and "read.stream.maxFilesPerTrigger" in names
    assert all(is_known_option(n) for n in names)
