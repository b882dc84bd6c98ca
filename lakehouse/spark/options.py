"""The ``paimon`` data source's own options, parsed once; every other option of a read or write is
a dynamic option of the table handle it opens (``Table.copy``), which the engine reads.

- ``path``, ``warehouse``: which table (see :func:`lakehouse.spark.source.open_table`);
- ``filter-pushdown`` (reads): hand Spark's filters to the engine (see :mod:`lakehouse.spark.reader`);
- ``commit.user``: the snapshot's commit user (default: a fresh one, or a streaming query's id);
- ``commit.identifier``: the commit's identifier, committed once per commit user (a replay is dropped);
- ``commit.properties``: the snapshot's properties, a JSON object of strings (a write with them
  always commits);
- ``overwrite.partitions``: the partitions ``mode("overwrite")`` replaces, a JSON list such as
  ``[{"dt": "2024-01-01"}]``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from lakehouse import Overwrite, Table
from lakehouse.errors import ArgumentTypeError, InvalidOptionError

FILTER_PUSHDOWN = "filter-pushdown"
COMMIT_USER = "commit.user"
COMMIT_IDENTIFIER = "commit.identifier"
COMMIT_PROPERTIES = "commit.properties"
OVERWRITE_PARTITIONS = "overwrite.partitions"
# Paimon's read and write options the helpers of lakehouse.spark set
DYNAMIC_PARTITION_OVERWRITE = "dynamic-partition-overwrite"
INCREMENTAL_BETWEEN = "incremental-between"
READ_CHANGELOG = "read.changelog"
SCAN_SNAPSHOT_ID = "scan.snapshot-id"
STREAMING_READ_OVERWRITE = "streaming-read-overwrite"
# the data source's own options: not the table handle's
SPARK_OPTIONS = frozenset(
    [
        "path",
        "warehouse",
        FILTER_PUSHDOWN,
        COMMIT_USER,
        COMMIT_IDENTIFIER,
        COMMIT_PROPERTIES,
        OVERWRITE_PARTITIONS,
    ]
)


def flag(options: Mapping[str, str], key: str) -> bool:
    """A boolean option (default false)."""
    value = options.get(key, "false").strip().lower()
    if value not in ("true", "false"):
        raise InvalidOptionError(f"option {key}={options[key]!r} must be 'true' or 'false'")
    return value == "true"


def commit_identifier(options: Mapping[str, str]) -> int | None:
    """``commit.identifier`` (None: a batch commit, never deduplicated); it needs a ``commit.user``
    to be committed once per user."""
    value = options.get(COMMIT_IDENTIFIER)
    if value is None:
        return None
    if not value.isdigit() or COMMIT_USER not in options:
        raise InvalidOptionError(
            f"write option {COMMIT_IDENTIFIER}={value!r} must be a non-negative integer, given with "
            f"{COMMIT_USER}: the identifier commits once per commit user"
        )
    return int(value)


def commit_properties(options: Mapping[str, str]) -> dict[str, str] | None:
    """``commit.properties``: a JSON object whose values are strings."""
    value = options.get(COMMIT_PROPERTIES)
    if value is None:
        return None
    properties = _json(value)
    if not isinstance(properties, dict) or not all(isinstance(v, str) for v in properties.values()):
        raise InvalidOptionError(
            f"write option {COMMIT_PROPERTIES}={value!r} must be a JSON object of strings, "
            f'such as {{"source.snapshot": "42"}}'
        )
    return properties


def overwrite_mode(table: Table, options: Mapping[str, str]) -> Overwrite:
    """What ``mode("overwrite")`` replaces: the partitions ``overwrite.partitions`` lists, even
    those the data has no rows for (a rerun that produces none empties them); else what the table
    handle's ``dynamic-partition-overwrite`` says (:meth:`Table.overwrite_scope`)."""
    listed = options.get(OVERWRITE_PARTITIONS)
    if listed is None:
        return table.overwrite_scope()
    specs = _json(listed)
    if not isinstance(specs, list):
        raise InvalidOptionError(
            f"write option {OVERWRITE_PARTITIONS} must be a JSON list of partitions such as "
            f'[{{"dt": "2024-01-01"}}], not {listed!r}'
        )
    return specs


def write_options(
    overwrite: Overwrite,
    commit_user: str | None,
    identifier: int | None,
    properties: Mapping[str, str] | None,
) -> dict[str, str]:
    """The write options that say what a write replaces (``overwrite`` as ``Table.write`` takes it)
    and how it commits."""
    options: dict[str, str] = {}
    if overwrite is True:
        options[DYNAMIC_PARTITION_OVERWRITE] = "false"
    elif isinstance(overwrite, str):
        if overwrite != "dynamic":
            raise ArgumentTypeError(
                f"overwrite={overwrite!r}: the only overwrite named by a string is 'dynamic'"
            )
        options[DYNAMIC_PARTITION_OVERWRITE] = "true"
    elif isinstance(overwrite, Mapping):
        options[OVERWRITE_PARTITIONS] = json.dumps([dict(overwrite)])
    elif overwrite is not None and overwrite is not False:
        options[OVERWRITE_PARTITIONS] = json.dumps([dict(p) for p in overwrite])
    if commit_user is not None:
        options[COMMIT_USER] = commit_user
    if identifier is not None:
        options[COMMIT_IDENTIFIER] = str(identifier)
    if properties is not None:
        options[COMMIT_PROPERTIES] = json.dumps(dict(properties))
    return options


def _json(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None
