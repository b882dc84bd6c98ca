"""Table options: Apache Paimon's names and defaults (``org.apache.paimon.CoreOptions``), typed.

Options are stored as strings in the schema file; :class:`CoreOptions` reads them with Paimon's
parsing rules for memory sizes (``"128 mb"``) and durations (``"1 h"``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from functools import partial
from typing import TypeVar

from lakehouse.errors import InvalidOptionError, UnsupportedFeatureError
from lakehouse.partition_time import DateTimePattern

_MEMORY_UNITS = {
    "": 1, "b": 1, "bytes": 1,
    "k": 1 << 10, "kb": 1 << 10, "kibibytes": 1 << 10,
    "m": 1 << 20, "mb": 1 << 20, "mebibytes": 1 << 20,
    "g": 1 << 30, "gb": 1 << 30, "gibibytes": 1 << 30,
    "t": 1 << 40, "tb": 1 << 40, "tebibytes": 1 << 40,
}  # fmt: skip
_DURATION_UNITS_MS = {
    "d": 86_400_000, "day": 86_400_000, "days": 86_400_000,
    "h": 3_600_000, "hour": 3_600_000, "hours": 3_600_000,
    "min": 60_000, "m": 60_000, "minute": 60_000, "minutes": 60_000,
    "s": 1000, "sec": 1000, "secs": 1000, "second": 1000, "seconds": 1000,
    "": 1, "ms": 1, "milli": 1, "millis": 1, "millisecond": 1, "milliseconds": 1,
}  # fmt: skip


class MergeEngineKind(StrEnum):
    """``merge-engine``: how the versions of one primary key become one row."""

    DEDUPLICATE = "deduplicate"
    PARTIAL_UPDATE = "partial-update"
    AGGREGATION = "aggregation"
    FIRST_ROW = "first-row"


class ChangelogProducerKind(StrEnum):
    """``changelog-producer``: which files a primary-key table's changelog comes from."""

    NONE = "none"
    INPUT = "input"
    FULL_COMPACTION = "full-compaction"
    LOOKUP = "lookup"


class StartupMode(StrEnum):
    """``scan.mode``: where a streaming read starts (the modes of Paimon's ``StartupMode`` it streams).

    ``latest-full``: the latest snapshot's rows, then the changes of the snapshots after it;
    ``latest``: only the changes after the latest snapshot; ``from-snapshot``: the changes from
    ``scan.snapshot-id`` (or ``scan.tag-name``'s snapshot) on; ``from-snapshot-full``: that
    snapshot's rows, then the changes after it; ``from-timestamp``: the changes of the snapshots
    committed at ``scan.timestamp-millis`` or later; ``default``: ``from-snapshot`` when a snapshot
    or tag is given, ``from-timestamp`` when a time is, else ``latest-full``.
    """

    DEFAULT = "default"
    LATEST_FULL = "latest-full"
    LATEST = "latest"
    FROM_SNAPSHOT = "from-snapshot"
    FROM_SNAPSHOT_FULL = "from-snapshot-full"
    FROM_TIMESTAMP = "from-timestamp"


class PartitionExpireStrategyKind(StrEnum):
    """``partition.expiration-strategy``: where the age of a partition comes from."""

    VALUES_TIME = "values-time"  # its values, read as a time
    UPDATE_TIME = "update-time"  # the creation time of its newest file


class IcebergStorage(StrEnum):
    """``metadata.iceberg.storage``: where Iceberg-compatible metadata of the table is kept."""

    DISABLED = "disabled"
    TABLE_LOCATION = "table-location"  # <table>/metadata, loaded by its path
    HADOOP_CATALOG = "hadoop-catalog"  # <warehouse>/iceberg/<db>/<table>/metadata
    HIVE_CATALOG = "hive-catalog"  # also registered in a Hive metastore
    REST_CATALOG = "rest-catalog"  # also registered in an Iceberg REST catalog


class IcebergLocation(StrEnum):
    """``metadata.iceberg.storage-location``: the table's directory or the catalog's."""

    TABLE_LOCATION = "table-location"
    CATALOG_LOCATION = "catalog-location"


_AMOUNT = re.compile(r"^\s*(\d+)\s*([a-zA-Z]*)\s*$")

# Catalog options that are secrets, never shown (``sys.catalog_options``): a REST catalog's bearer
# token, an object store's secret key, the catalog lock's password
TOKEN = "token"
# A REST catalog's client options (Paimon's): how to reach and authenticate to its server
TOKEN_PROVIDER = "token.provider"
REST_PREFIX = "prefix"
HEADER_PREFIX = "header."
REST_CLIENT_OPTIONS = (TOKEN, TOKEN_PROVIDER, REST_PREFIX)
# Where the example and ``lakehouse rest-catalog -- COMMAND`` say the warehouse is, and its token
WAREHOUSE_ENV = "LAKEHOUSE_WAREHOUSE"
TOKEN_ENV = "LAKEHOUSE_CATALOG_TOKEN"
S3_SECRET_KEY = "s3.secret-key"
LOCK_PASSWORD = "lock.password"
SECRET_CATALOG_OPTIONS = (TOKEN, S3_SECRET_KEY, LOCK_PASSWORD)
SECRET_MASK = "******"

# The options this engine reads, by Paimon's names (their defaults: DEFAULTS).
AGGREGATION_REMOVE_RECORD_ON_DELETE = "aggregation.remove-record-on-delete"
BUCKET = "bucket"
BUCKET_KEY = "bucket-key"
CHANGELOG_FILE_COMPRESSION = "changelog-file.compression"
CHANGELOG_FILE_FORMAT = "changelog-file.format"
CHANGELOG_FILE_PREFIX = "changelog-file.prefix"
CHANGELOG_FILE_STATS_MODE = "changelog-file.stats-mode"
CHANGELOG_NUM_RETAINED_MAX = "changelog.num-retained.max"
CHANGELOG_NUM_RETAINED_MIN = "changelog.num-retained.min"
CHANGELOG_PRODUCER = "changelog-producer"
METADATA_ICEBERG_STORAGE = "metadata.iceberg.storage"
METADATA_ICEBERG_STORAGE_LOCATION = "metadata.iceberg.storage-location"
METADATA_ICEBERG_FORMAT_VERSION = "metadata.iceberg.format-version"
METADATA_ICEBERG_MANIFEST_COMPRESSION = "metadata.iceberg.manifest-compression"
METADATA_ICEBERG_DELETE_AFTER_COMMIT = "metadata.iceberg.delete-after-commit.enabled"
METADATA_ICEBERG_PREVIOUS_VERSIONS_MAX = "metadata.iceberg.previous-versions-max"
METADATA_ICEBERG_COMPACTION_MIN_FILE_NUM = "metadata.iceberg.compaction.min.file-num"
METADATA_ICEBERG_COMPACTION_MAX_FILE_NUM = "metadata.iceberg.compaction.max.file-num"
CHANGELOG_PRODUCER_ROW_DEDUPLICATE = "changelog-producer.row-deduplicate"
CHANGELOG_PRODUCER_ROW_DEDUPLICATE_IGNORE_FIELDS = "changelog-producer.row-deduplicate-ignore-fields"
CHANGELOG_TIME_RETAINED = "changelog.time-retained"
COMMIT_MAX_RETRIES = "commit.max-retries"
COMMIT_MAX_RETRY_WAIT = "commit.max-retry-wait"
COMMIT_MIN_RETRY_WAIT = "commit.min-retry-wait"
COMMIT_TIMEOUT = "commit.timeout"
COMMIT_USER_PREFIX = "commit.user-prefix"
# this engine's own: Table.write commits, then compacts on a background thread (see Table.write)
COMPACTION_ASYNC = "compaction.async"
COMPACTION_MAX_SIZE_AMPLIFICATION_PERCENT = "compaction.max-size-amplification-percent"
COMPACTION_MIN_FILE_NUM = "compaction.min.file-num"
COMPACTION_SIZE_RATIO = "compaction.size-ratio"
COMPACTION_SMALL_FILE_RATIO = "compaction.small-file-ratio"
CONSUMER_EXPIRATION_TIME = "consumer.expiration-time"
CONSUMER_ID = "consumer-id"
CONSUMER_IGNORE_PROGRESS = "consumer.ignore-progress"
CROSS_PARTITION_UPSERT_INDEX_TTL = "cross-partition-upsert.index-ttl"
DATA_EVOLUTION_ENABLED = "data-evolution.enabled"
DATA_FILE_PREFIX = "data-file.prefix"
DATA_FILE_THIN_MODE = "data-file.thin-mode"
DELETION_VECTORS_BITMAP64 = "deletion-vectors.bitmap64"
DELETION_VECTORS_ENABLED = "deletion-vectors.enabled"
DYNAMIC_BUCKET_ASSIGNER_PARALLELISM = "dynamic-bucket.assigner-parallelism"
DYNAMIC_BUCKET_INITIAL_BUCKETS = "dynamic-bucket.initial-buckets"
DYNAMIC_BUCKET_MAX_BUCKETS = "dynamic-bucket.max-buckets"
DYNAMIC_BUCKET_TARGET_ROW_NUM = "dynamic-bucket.target-row-num"
DYNAMIC_PARTITION_OVERWRITE = "dynamic-partition-overwrite"
END_INPUT_CHECK_PARTITION_EXPIRE = "end-input.check-partition-expire"
FIELDS_DEFAULT_AGGREGATE_FUNCTION = "fields.default-aggregate-function"
FILE_COMPRESSION = "file.compression"
FILE_COMPRESSION_ZSTD_LEVEL = "file.compression.zstd-level"
FILE_FORMAT = "file.format"
FULL_COMPACTION_DELTA_COMMITS = "full-compaction.delta-commits"
IGNORE_DELETE = "ignore-delete"
MANIFEST_COMPRESSION = "manifest.compression"
MANIFEST_FULL_COMPACTION_THRESHOLD_SIZE = "manifest.full-compaction-threshold-size"
MANIFEST_MERGE_MIN_COUNT = "manifest.merge-min-count"
MANIFEST_TARGET_FILE_SIZE = "manifest.target-file-size"
MERGE_ENGINE = "merge-engine"
METADATA_STATS_DENSE_STORE = "metadata.stats-dense-store"
METADATA_STATS_MODE = "metadata.stats-mode"
NUM_LEVELS = "num-levels"
NUM_SORTED_RUN_COMPACTION_TRIGGER = "num-sorted-run.compaction-trigger"
NUM_SORTED_RUN_STOP_TRIGGER = "num-sorted-run.stop-trigger"
PAGE_SIZE = "page-size"
PARTIAL_UPDATE_REMOVE_RECORD_ON_DELETE = "partial-update.remove-record-on-delete"
PARTIAL_UPDATE_REMOVE_RECORD_ON_SEQUENCE_GROUP = "partial-update.remove-record-on-sequence-group"
PARTITION = "partition"
PARTITION_DEFAULT_NAME = "partition.default-name"
PARTITION_EXPIRATION_CHECK_INTERVAL = "partition.expiration-check-interval"
PARTITION_EXPIRATION_MAX_NUM = "partition.expiration-max-num"
PARTITION_EXPIRATION_STRATEGY = "partition.expiration-strategy"
PARTITION_EXPIRATION_TIME = "partition.expiration-time"
PARTITION_TIMESTAMP_FORMATTER = "partition.timestamp-formatter"
PARTITION_TIMESTAMP_PATTERN = "partition.timestamp-pattern"
PRIMARY_KEY = "primary-key"
PRIMARY_KEY_NULLABLE = "primary-key.nullable"
ROW_TRACKING_ENABLED = "row-tracking.enabled"
INCREMENTAL_BETWEEN = "incremental-between"  # read option: "start,end", the changes of start+1..end
SCAN_MODE = "scan.mode"
SCAN_SNAPSHOT_ID = "scan.snapshot-id"
SCAN_TAG_NAME = "scan.tag-name"
SCAN_TIMESTAMP_MILLIS = "scan.timestamp-millis"
SEQUENCE_FIELD = "sequence.field"
SNAPSHOT_EXPIRE_AFTER_COMMIT = "snapshot.expire.after-commit"
SNAPSHOT_EXPIRE_LIMIT = "snapshot.expire.limit"
SNAPSHOT_NUM_RETAINED_MAX = "snapshot.num-retained.max"
SNAPSHOT_NUM_RETAINED_MIN = "snapshot.num-retained.min"
SNAPSHOT_TIME_RETAINED = "snapshot.time-retained"
SOURCE_SPLIT_OPEN_FILE_COST = "source.split.open-file-cost"
SOURCE_SPLIT_TARGET_SIZE = "source.split.target-size"
TAG_AUTOMATIC_COMPLETION = "tag.automatic-completion"
TAG_AUTOMATIC_CREATION = "tag.automatic-creation"
SORT_SPILL_BUFFER_SIZE = "sort-spill-buffer-size"
SORT_SPILL_THRESHOLD = "sort-spill-threshold"
TAG_CREATION_DELAY = "tag.creation-delay"
TAG_CREATION_PERIOD = "tag.creation-period"
TAG_CREATION_PERIOD_DURATION = "tag.creation-period-duration"
TAG_DEFAULT_TIME_RETAINED = "tag.default-time-retained"
TAG_NUM_RETAINED_MAX = "tag.num-retained-max"
TAG_PERIOD_FORMATTER = "tag.period-formatter"
TARGET_FILE_SIZE = "target-file-size"
TYPE = "type"
STREAMING_READ_OVERWRITE = "streaming-read-overwrite"  # changes of overwrites: their new files
WRITE_BUFFER_SIZE = "write-buffer-size"
WRITE_BUFFER_SPILLABLE = "write-buffer-spillable"
WRITE_BUFFER_MAX_DISK_SIZE = "write-buffer-spill.max-disk-size"
WRITE_MAX_WRITERS_TO_SPILL = "write-max-writers-to-spill"
WRITE_HEARTBEAT_INTERVAL = "write.heartbeat-interval"
WRITE_HEARTBEAT_TIMEOUT = "write.heartbeat-timeout"
WRITE_ONLY = "write-only"
ZORDER_VAR_LENGTH_CONTRIBUTION = "zorder.var-length-contribution"

# Read options of Paimon's Spark connector (``SparkConnectorOptions``)
READ_CHANGELOG = "read.changelog"  # rows with their kind: a _row_kind column
READ_STREAM_MAX_BYTES_PER_TRIGGER = "read.stream.maxBytesPerTrigger"
READ_STREAM_MAX_FILES_PER_TRIGGER = "read.stream.maxFilesPerTrigger"
READ_STREAM_MAX_ROWS_PER_TRIGGER = "read.stream.maxRowsPerTrigger"

DEFAULTS: dict[str, str] = {
    BUCKET: "-1",
    FILE_FORMAT: "parquet",
    FILE_COMPRESSION: "zstd",
    FILE_COMPRESSION_ZSTD_LEVEL: "1",
    MANIFEST_TARGET_FILE_SIZE: "8 mb",
    MANIFEST_MERGE_MIN_COUNT: "30",
    MANIFEST_FULL_COMPACTION_THRESHOLD_SIZE: "16 mb",
    MANIFEST_COMPRESSION: "zstd",
    METADATA_STATS_MODE: "truncate(16)",
    METADATA_STATS_DENSE_STORE: "true",
    PARTITION_DEFAULT_NAME: "__DEFAULT_PARTITION__",
    PARTITION_EXPIRATION_CHECK_INTERVAL: "1 h",
    PARTITION_EXPIRATION_MAX_NUM: "100",
    PARTITION_EXPIRATION_STRATEGY: PartitionExpireStrategyKind.VALUES_TIME.value,
    END_INPUT_CHECK_PARTITION_EXPIRE: "false",
    DATA_FILE_PREFIX: "data-",
    DATA_FILE_THIN_MODE: "false",
    COMMIT_MAX_RETRIES: "10",
    COMMIT_MIN_RETRY_WAIT: "10 ms",
    COMMIT_MAX_RETRY_WAIT: "10 s",
    DYNAMIC_PARTITION_OVERWRITE: "true",
    MERGE_ENGINE: MergeEngineKind.DEDUPLICATE.value,
    SOURCE_SPLIT_TARGET_SIZE: "128 mb",
    SOURCE_SPLIT_OPEN_FILE_COST: "4 mb",
    PRIMARY_KEY_NULLABLE: "false",
    "file-index.read.enabled": "true",
    NUM_SORTED_RUN_COMPACTION_TRIGGER: "5",
    COMPACTION_MAX_SIZE_AMPLIFICATION_PERCENT: "200",
    COMPACTION_SIZE_RATIO: "1",
    COMPACTION_MIN_FILE_NUM: "5",
    COMPACTION_SMALL_FILE_RATIO: "0.7",
    ZORDER_VAR_LENGTH_CONTRIBUTION: "8",
    WRITE_ONLY: "false",
    WRITE_BUFFER_SPILLABLE: "true",
    WRITE_MAX_WRITERS_TO_SPILL: "10",
    SORT_SPILL_BUFFER_SIZE: "64 mb",
    DELETION_VECTORS_ENABLED: "false",
    SNAPSHOT_NUM_RETAINED_MIN: "10",
    SNAPSHOT_NUM_RETAINED_MAX: str(2**31 - 1),
    SNAPSHOT_TIME_RETAINED: "1 h",
    SNAPSHOT_EXPIRE_LIMIT: "50",
    CHANGELOG_PRODUCER: ChangelogProducerKind.NONE.value,
    METADATA_ICEBERG_STORAGE: IcebergStorage.DISABLED.value,
    METADATA_ICEBERG_FORMAT_VERSION: "2",
    METADATA_ICEBERG_MANIFEST_COMPRESSION: "snappy",
    METADATA_ICEBERG_DELETE_AFTER_COMMIT: "true",
    METADATA_ICEBERG_PREVIOUS_VERSIONS_MAX: "0",
    METADATA_ICEBERG_COMPACTION_MIN_FILE_NUM: "10",
    METADATA_ICEBERG_COMPACTION_MAX_FILE_NUM: "50",
    CHANGELOG_FILE_PREFIX: "changelog-",
    CHANGELOG_PRODUCER_ROW_DEDUPLICATE: "false",
}


def _amount(text: str, units: dict[str, int], key: str, what: str, example: str) -> int:
    """``<integer><optional spaces><unit>`` as Paimon's MemorySize and TimeUtils parse it."""
    m = _AMOUNT.match(text)
    unit = m[2].lower() if m else None
    if not m or unit not in units:
        raise InvalidOptionError(f"{key}={text!r} is not a {what}; write e.g. {example}")
    return int(m[1]) * units[unit]


def parse_memory_size(text: str, key: str = "option") -> int:
    """Bytes of a Paimon MemorySize string (``"128 mb"``, ``"500 B"``, ``"64kb"``)."""
    return _amount(text, _MEMORY_UNITS, key, "memory size", "'128 mb' or '64 kb'")


def parse_duration_ms(text: str, key: str = "option") -> int:
    """Milliseconds of a Paimon duration string (``"1 h"``, ``"10 s"``; no unit = ms)."""
    return _amount(text, _DURATION_UNITS_MS, key, "duration", "'1 h', '30 min' or '10 s'")


def parse_bool(text: str, key: str = "option") -> bool:
    low = text.strip().lower()
    if low not in ("true", "false"):
        raise InvalidOptionError(f"{key}={text!r} must be 'true' or 'false'")
    return low == "true"


def parse_int(text: str, key: str = "option", minimum: int | None = None) -> int:
    """A whole number, at least ``minimum`` when given."""
    try:
        value = int(text.strip())
    except ValueError:
        raise InvalidOptionError(f"{key}={text!r} is not a whole number") from None
    if minimum is not None and value < minimum:
        raise InvalidOptionError(f"{key}={text!r} must be at least {minimum}")
    return value


def parse_ratio(text: str, key: str = "option") -> float:
    """A fraction between 0 and 1 (``compaction.small-file-ratio``)."""
    try:
        value = float(text.strip())
    except ValueError:
        raise InvalidOptionError(f"{key}={text!r} is not a number") from None
    if not 0 < value <= 1:
        raise InvalidOptionError(f"{key}={text!r} must be above 0 and at most 1")
    return value


PARQUET_CODECS = ("none", "uncompressed", "snappy", "gzip", "brotli", "lz4", "zstd")  # Paimon's, but lzo


def parse_codec(text: str, key: str, codecs: tuple[str, ...]) -> str:
    codec = text.strip().lower()
    if codec not in codecs:
        raise InvalidOptionError(
            f"{key}={text!r} is not a compression this engine writes; use one of {', '.join(codecs)}"
        )
    return codec


def parse_file_prefix(text: str, key: str) -> str:
    """A file name prefix (``data-file.prefix``): part of a name, never a path that leaves the bucket."""
    if not text or any(c in text for c in "/\\\0") or text.startswith("."):
        raise InvalidOptionError(
            f"{key}={text!r} must be the start of a file name, without '/', '\\' or a leading '.'"
        )
    return text


_Choice = TypeVar("_Choice", bound=StrEnum)
ICEBERG_CODECS = ("null", "deflate", "snappy", "zstd")  # Avro codecs of Iceberg manifests


def parse_iceberg_storage(text: str, key: str) -> IcebergStorage:
    """Where Iceberg metadata goes; the catalogs this engine cannot reach are refused."""
    storage = parse_choice(text, key, IcebergStorage)
    if storage in (IcebergStorage.HIVE_CATALOG, IcebergStorage.REST_CATALOG):
        service = "a Hive metastore" if storage == IcebergStorage.HIVE_CATALOG else "an Iceberg REST catalog"
        raise UnsupportedFeatureError(
            f"{key}={text!r} registers the table in {service}, which this engine does not reach; use "
            f"'{IcebergStorage.HADOOP_CATALOG}' (a Hadoop catalog under the warehouse) or "
            f"'{IcebergStorage.TABLE_LOCATION}' and register the metadata with your catalog"
        )
    return storage


def parse_iceberg_format_version(text: str, key: str) -> int:
    """The Iceberg format version of the metadata: 2, or 3 (nanosecond timestamps, row lineage)."""
    version = parse_int(text, key)
    if version not in (2, 3):
        raise InvalidOptionError(f"{key}={text!r} is no Iceberg format version; use 2 or 3")
    return version


def parse_choice(text: str, key: str, kind: type[_Choice]) -> _Choice:
    """A member of ``kind`` by its value, case and surrounding spaces ignored."""
    try:
        return kind(text.strip().lower())
    except ValueError:
        choices = ", ".join(k.value for k in kind)
        raise InvalidOptionError(f"unknown {key} {text!r}; use one of {choices}") from None


def _counts(minimum: int, *keys: str) -> dict[str, Callable[[str, str], object]]:
    return _kind(partial(parse_int, minimum=minimum), *keys)


def _kind(parse: Callable[[str, str], object], *keys: str) -> dict[str, Callable[[str, str], object]]:
    return dict.fromkeys(keys, parse)


# How the values of the options Paimon types are checked when a table is created or altered, so
# that a value no writer or maintenance job could use is refused at once, not days later.
VALUE_CHECKS: dict[str, Callable[[str, str], object]] = {
    **_counts(1, SNAPSHOT_NUM_RETAINED_MIN, SNAPSHOT_NUM_RETAINED_MAX, SNAPSHOT_EXPIRE_LIMIT,
              CHANGELOG_NUM_RETAINED_MIN, CHANGELOG_NUM_RETAINED_MAX, TAG_NUM_RETAINED_MAX,
              NUM_SORTED_RUN_COMPACTION_TRIGGER, NUM_SORTED_RUN_STOP_TRIGGER, NUM_LEVELS,
              FULL_COMPACTION_DELTA_COMMITS, DYNAMIC_BUCKET_TARGET_ROW_NUM,
              DYNAMIC_BUCKET_INITIAL_BUCKETS, DYNAMIC_BUCKET_ASSIGNER_PARALLELISM,
              MANIFEST_MERGE_MIN_COUNT, PARTITION_EXPIRATION_MAX_NUM,
              COMPACTION_MIN_FILE_NUM, ZORDER_VAR_LENGTH_CONTRIBUTION),
    **_counts(2, SORT_SPILL_THRESHOLD),
    **_counts(0, COMMIT_MAX_RETRIES, COMPACTION_MAX_SIZE_AMPLIFICATION_PERCENT, COMPACTION_SIZE_RATIO,
              WRITE_MAX_WRITERS_TO_SPILL),
    **_counts(-1, BUCKET),
    **_counts(-131072, FILE_COMPRESSION_ZSTD_LEVEL),
    **_kind(parse_duration_ms, SNAPSHOT_TIME_RETAINED, CHANGELOG_TIME_RETAINED, COMMIT_TIMEOUT,
            COMMIT_MIN_RETRY_WAIT, COMMIT_MAX_RETRY_WAIT, CONSUMER_EXPIRATION_TIME,
            PARTITION_EXPIRATION_TIME, PARTITION_EXPIRATION_CHECK_INTERVAL, TAG_CREATION_DELAY,
            TAG_DEFAULT_TIME_RETAINED, TAG_CREATION_PERIOD_DURATION, CROSS_PARTITION_UPSERT_INDEX_TTL,
            WRITE_HEARTBEAT_INTERVAL, WRITE_HEARTBEAT_TIMEOUT),
    **_kind(parse_memory_size, TARGET_FILE_SIZE, WRITE_BUFFER_SIZE, MANIFEST_TARGET_FILE_SIZE,
            MANIFEST_FULL_COMPACTION_THRESHOLD_SIZE, SOURCE_SPLIT_TARGET_SIZE, SOURCE_SPLIT_OPEN_FILE_COST,
            "file-index.in-manifest-threshold", PAGE_SIZE, SORT_SPILL_BUFFER_SIZE,
            WRITE_BUFFER_MAX_DISK_SIZE),
    **_kind(parse_bool, WRITE_ONLY, DELETION_VECTORS_ENABLED, DELETION_VECTORS_BITMAP64, DATA_FILE_THIN_MODE,
            DYNAMIC_PARTITION_OVERWRITE, PRIMARY_KEY_NULLABLE, CHANGELOG_PRODUCER_ROW_DEDUPLICATE,
            SNAPSHOT_EXPIRE_AFTER_COMMIT, TAG_AUTOMATIC_COMPLETION, METADATA_STATS_DENSE_STORE,
            "file-index.read.enabled", PARTIAL_UPDATE_REMOVE_RECORD_ON_DELETE,
            AGGREGATION_REMOVE_RECORD_ON_DELETE, IGNORE_DELETE, WRITE_BUFFER_SPILLABLE,
            ROW_TRACKING_ENABLED, DATA_EVOLUTION_ENABLED, END_INPUT_CHECK_PARTITION_EXPIRE,
            CONSUMER_IGNORE_PROGRESS, COMPACTION_ASYNC),
    **_kind(lambda text, key: parse_codec(text, key, PARQUET_CODECS), FILE_COMPRESSION,
            CHANGELOG_FILE_COMPRESSION),
    **_kind(parse_file_prefix, DATA_FILE_PREFIX, CHANGELOG_FILE_PREFIX),
    COMPACTION_SMALL_FILE_RATIO: parse_ratio,
    MERGE_ENGINE: lambda text, key: parse_choice(text, key, MergeEngineKind),
    CHANGELOG_PRODUCER: lambda text, key: parse_choice(text, key, ChangelogProducerKind),
    PARTITION_EXPIRATION_STRATEGY: lambda text, key: parse_choice(text, key, PartitionExpireStrategyKind),
    METADATA_ICEBERG_STORAGE: parse_iceberg_storage,
    METADATA_ICEBERG_STORAGE_LOCATION: lambda text, key: parse_choice(text, key, IcebergLocation),
    METADATA_ICEBERG_FORMAT_VERSION: parse_iceberg_format_version,
    METADATA_ICEBERG_MANIFEST_COMPRESSION: lambda text, key: parse_codec(text, key, ICEBERG_CODECS),
    METADATA_ICEBERG_DELETE_AFTER_COMMIT: parse_bool,
    **_counts(0, METADATA_ICEBERG_PREVIOUS_VERSIONS_MAX),
    **_counts(2, METADATA_ICEBERG_COMPACTION_MIN_FILE_NUM, METADATA_ICEBERG_COMPACTION_MAX_FILE_NUM),
    PARTITION_TIMESTAMP_FORMATTER: DateTimePattern.of,
}  # fmt: skip


# every option name above, by its lowercase spelling
_NAMES = {v.lower(): v for k, v in dict(globals()).items() if k.isupper() and isinstance(v, str)}


def canonical_name(key: str) -> str:
    """An option's name as Paimon spells it (``read.stream.maxFilesPerTrigger``), whatever its
    case: engines such as Spark hand over option names lowercased."""
    return _NAMES.get(key.lower(), key)


# option families with a column or an index type in their names: fields.<column>.aggregate-function,
# file-index.<type>.columns, file-index.bloom-filter.<column>.fpp, ...
_FAMILIES = ("fields.", "file-index.")


def option_names() -> list[str]:
    """The name of every option this engine reads, but the families of per-column and per-index
    options (``fields.``, ``file-index.``): to suggest the one a misspelled name meant."""
    return sorted(_NAMES.values())


def is_known_option(key: str) -> bool:
    """Whether this engine reads the option ``key`` (in any case): a declaration can refuse a
    misspelled one, which Paimon itself stores and ignores."""
    return key.lower() in _NAMES or key.startswith(_FAMILIES)


def check_values(options: Mapping[str, str], table: str) -> None:
    """Refuse an option whose value Paimon would not parse, naming the table and the option."""
    for key, value in options.items():
        check = VALUE_CHECKS.get(key)
        if check is None:
            continue
        try:
            check(value, key)
        except InvalidOptionError as e:
            raise InvalidOptionError(f"table {table}: {e}; fix the option and try again", key) from None
        except UnsupportedFeatureError as e:
            raise UnsupportedFeatureError(f"table {table}: {e}; fix the option and try again") from None


class CoreOptions:
    """Typed, read-only view of a table's options with Paimon's defaults."""

    def __init__(self, options: Mapping[str, str]) -> None:
        self.raw = dict(options)

    def get(self, key: str) -> str | None:
        return self.raw.get(key, DEFAULTS.get(key))

    def required(self, key: str) -> str:
        """The option or its default, for a key that has one or that the caller found set."""
        value = self.get(key)
        if value is None:
            raise InvalidOptionError(f"option {key} is not set and has no default; set it")
        return value

    def get_int(self, key: str) -> int:
        value = self.required(key)
        try:
            return int(value)
        except ValueError:
            raise InvalidOptionError(f"{key}={value!r} must be an integer") from None

    def get_bool(self, key: str) -> bool:
        return parse_bool(self.get(key) or "false", key)

    def memory(self, key: str) -> int:
        return parse_memory_size(self.required(key), key)

    def duration_ms(self, key: str) -> int | None:
        value = self.get(key)
        return None if value is None else parse_duration_ms(value, key)

    def required_duration_ms(self, key: str) -> int:
        return parse_duration_ms(self.required(key), key)

    def names(self, key: str) -> list[str]:
        """A comma-separated list of column names ([] when unset)."""
        value = self.get(key)
        return [p.strip() for p in value.split(",") if p.strip()] if value else []

    @property
    def num_levels(self) -> int:
        """``num-levels``: by default one more than the sorted-run compaction trigger."""
        if self.get(NUM_LEVELS) is not None:
            return self.get_int(NUM_LEVELS)
        return self.get_int(NUM_SORTED_RUN_COMPACTION_TRIGGER) + 1

    @property
    def stop_trigger(self) -> int:
        """``num-sorted-run.stop-trigger``: sorted runs at which writing waits for compaction."""
        if self.get(NUM_SORTED_RUN_STOP_TRIGGER) is not None:
            return self.get_int(NUM_SORTED_RUN_STOP_TRIGGER)
        return self.get_int(NUM_SORTED_RUN_COMPACTION_TRIGGER) + 3

    @property
    def sort_spill_threshold(self) -> int:
        """``sort-spill-threshold``: the most sorted runs merged at once (default: one more than the
        stop trigger); more are first merged into spilled runs (``CoreOptions.sortSpillThreshold``)."""
        if self.get(SORT_SPILL_THRESHOLD) is not None:
            return self.get_int(SORT_SPILL_THRESHOLD)
        return self.stop_trigger + 1

    @property
    def merge_engine(self) -> MergeEngineKind:
        return parse_choice(self.required(MERGE_ENGINE), MERGE_ENGINE, MergeEngineKind)

    @property
    def iceberg(self) -> IcebergSettings:
        """The Iceberg-compatible metadata settings (``metadata.iceberg.*``)."""
        return IcebergSettings.of(self)

    @property
    def changelog_producer(self) -> ChangelogProducerKind:
        return parse_choice(self.required(CHANGELOG_PRODUCER), CHANGELOG_PRODUCER, ChangelogProducerKind)

    @property
    def bucket(self) -> int:
        return self.get_int(BUCKET)

    @property
    def write_buffer_size(self) -> int:
        """``write-buffer-size`` (Paimon's default: 256 mb)."""
        value = self.get(WRITE_BUFFER_SIZE)
        return parse_memory_size(value, WRITE_BUFFER_SIZE) if value else 256 << 20

    def jobs_budget(self, beside_buffer: bool = False) -> int:
        """What the process's parallel jobs on this table (flushes, merges, compactions, reads of
        buckets) may hold together (:mod:`lakehouse.io.memory`): 2 x ``write-buffer-size``, one
        of it when they run beside a write buffer (a flush's, a background compaction's), so
        that a write's buffer and jobs stay within 2 x ``write-buffer-size``."""
        return self.write_buffer_size * (1 if beside_buffer else 2)

    def target_file_size(self, has_primary_key: bool) -> int:
        if self.get(TARGET_FILE_SIZE) is not None:
            return self.memory(TARGET_FILE_SIZE)
        return (128 if has_primary_key else 256) << 20  # CoreOptions.targetFileSize

    def compaction_file_size(self, has_primary_key: bool) -> int:
        """Files smaller than this are rewritten by compaction (``CoreOptions.compactionFileSize``:
        ``target-file-size`` times ``compaction.small-file-ratio``)."""
        ratio = parse_ratio(self.required(COMPACTION_SMALL_FILE_RATIO), COMPACTION_SMALL_FILE_RATIO)
        return int(self.target_file_size(has_primary_key) * ratio)

    @property
    def compaction_min_file_num(self) -> int:
        """``compaction.min.file-num``: the fewest small files an append compaction rewrites."""
        return parse_int(self.required(COMPACTION_MIN_FILE_NUM), COMPACTION_MIN_FILE_NUM, 1)


@dataclass(frozen=True)
class IcebergSettings:
    """``metadata.iceberg.*`` parsed: where the metadata goes and how its files are written."""

    storage: IcebergStorage
    location: IcebergLocation
    format_version: int
    codec: str  # Avro codec of manifests and manifest lists
    delete_after_commit: bool  # older metadata JSON files are deleted after each commit
    previous_versions_max: int  # ... but this many of them
    compaction_min_files: int  # small manifests a snapshot may merge
    compaction_max_files: int  # small manifests a snapshot merges whatever their size

    @classmethod
    def of(cls, options: CoreOptions) -> IcebergSettings:
        storage = parse_iceberg_storage(options.required(METADATA_ICEBERG_STORAGE), METADATA_ICEBERG_STORAGE)
        location = options.get(METADATA_ICEBERG_STORAGE_LOCATION)
        return cls(
            storage,
            parse_choice(location, METADATA_ICEBERG_STORAGE_LOCATION, IcebergLocation)
            if location is not None
            else IcebergLocation.TABLE_LOCATION
            if storage == IcebergStorage.TABLE_LOCATION
            else IcebergLocation.CATALOG_LOCATION,
            parse_iceberg_format_version(
                options.required(METADATA_ICEBERG_FORMAT_VERSION), METADATA_ICEBERG_FORMAT_VERSION
            ),
            parse_codec(
                options.required(METADATA_ICEBERG_MANIFEST_COMPRESSION),
                METADATA_ICEBERG_MANIFEST_COMPRESSION,
                ICEBERG_CODECS,
            ),
            options.get_bool(METADATA_ICEBERG_DELETE_AFTER_COMMIT),
            options.get_int(METADATA_ICEBERG_PREVIOUS_VERSIONS_MAX),
            options.get_int(METADATA_ICEBERG_COMPACTION_MIN_FILE_NUM),
            options.get_int(METADATA_ICEBERG_COMPACTION_MAX_FILE_NUM),
        )

    @property
    def enabled(self) -> bool:
        return self.storage != IcebergStorage.DISABLED
