"""What Dagster records about a table: its definition (schema, name, URI) on the asset, and what
each run did to it from the run's own snapshots, under Dagster's standard keys
(``dagster/row_count``, ``dagster/partition_row_count``, ``dagster/column_schema``,
``dagster/table_name``, ``dagster/uri``) next to ours: numbers, so the UI plots them over time."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from dagster import (
    MetadataValue,
    TableColumn,
    TableColumnConstraints,
    TableConstraints,
    TableSchema,
)

from lakehouse import CommitKind, FileKind, ManifestEntry, Snapshot, Table, col
from lakehouse import TableSchema as PaimonSchema

ROW_COUNT = "dagster/row_count"
PARTITION_ROW_COUNT = "dagster/partition_row_count"
ICEBERG_METADATA = "iceberg_metadata"
COLUMN_SCHEMA = "dagster/column_schema"
COLUMN_LINEAGE = "dagster/column_lineage"
TABLE_NAME = "dagster/table_name"
URI = "dagster/uri"
PartitionCounts = dict[tuple[Any, ...], int]  # Table.partition_row_counts: values in key order -> rows


def column_schema(schema: PaimonSchema) -> TableSchema:
    """A Paimon schema as Dagster's column schema: Paimon types, comments, NOT NULL, and the
    primary and partition keys as column and table constraints."""
    roles = {k: "primary key" for k in schema.primary_keys}
    for k in schema.partition_keys:
        roles[k] = f"{roles[k]}, partition key" if k in roles else "partition key"
    columns = [
        TableColumn(
            f.name,
            str(f.type.copy(True)),
            description=f.description,
            constraints=TableColumnConstraints(
                nullable=f.type.nullable, other=[roles[f.name]] if f.name in roles else []
            ),
        )
        for f in schema.fields
    ]
    declared = (("primary key", schema.primary_keys), ("partitioned by", schema.partition_keys))
    keys = [f"{name}: {', '.join(k)}" for name, k in declared if k]
    return TableSchema(columns, TableConstraints(other=keys))


def definition_metadata(name: str, schema: PaimonSchema, uri: str | None = None) -> dict[str, Any]:
    """What an asset page shows before the first run: the table's name, schema and location."""
    return {
        TABLE_NAME: MetadataValue.text(name),
        COLUMN_SCHEMA: MetadataValue.table_schema(column_schema(schema)),
        **({URI: MetadataValue.url(uri)} if uri else {}),
    }


def partitions_touched(table: Table, snapshot: Snapshot) -> list[dict[str, Any]]:
    """The partitions whose files a snapshot added or removed."""
    seen = {e.partition for e in table.delta_entries(snapshot)}
    return [table.partition_spec(p) for p in sorted(seen)]


def run_snapshots(table: Table, user: str, since: int) -> list[Snapshot]:
    """The snapshots after ``since`` that ``user`` committed: one run's own, even when other runs
    committed in between."""
    return [s for s in table.list_snapshots(after=since) if s.commit_user == user]


@dataclass(frozen=True)
class RunCommits:
    """What a materialization reports from, read once: the run's own snapshots and the exact rows
    of each partition as of the last of them (the latest if none; counting merges the splits
    that need it)."""

    own: list[Snapshot]
    counts: PartitionCounts


def run_commits(table: Table, user: str, since: int) -> RunCommits:
    """:class:`RunCommits` of the run committing as ``user`` after snapshot ``since``."""
    own = run_snapshots(table, user, since)
    snapshot = table.snapshot(own[-1].id if own else None)
    counts = {} if snapshot is None else table.partition_row_counts(snapshot_id=snapshot.id)
    return RunCommits(own, counts)


def run_metadata(table: Table, user: str, since: int, run: RunCommits | None = None) -> dict[str, Any]:
    """What one run (commit user ``user``) did to ``table`` after snapshot ``since``, then the
    table as of the run's last snapshot: the data snapshot's kind, the rows it wrote, whether a
    compaction followed, the partitions it touched. ``run``: its :func:`run_commits`, if read."""
    own = run.own if run is not None else run_snapshots(table, user, since)
    counts = run.counts if run is not None else None
    if not own:
        return {**table_metadata(table, counts=counts), "rows_written": MetadataValue.int(0)}
    data = [s for s in own if s.commit_kind != CommitKind.COMPACT]
    touched = {str(p): p for s in own for p in partitions_touched(table, s)}
    return {
        **table_metadata(table, own[-1].id, counts),
        "commit_kind": MetadataValue.text(data[0].commit_kind.value if data else CommitKind.COMPACT.value),
        "rows_written": MetadataValue.int(sum(e.file.row_count for e in _added(table, data))),
        "compacted": MetadataValue.bool(len(data) < len(own)),
        "partitions_touched": MetadataValue.json(list(touched.values())),
    }


def partition_metadata(
    table: Table, keys: Sequence[str], user: str, since: int, run: RunCommits | None = None
) -> dict[str, dict[str, Any]]:
    """Per partition key of a run (a value of the table's single partition key): the rows the run
    (commit user ``user``, after snapshot ``since``) wrote there, and the partition's exact rows
    (``run``: its :func:`run_commits`, if read); none for a run without partition keys (of a
    table without daily partitions)."""
    if not keys:
        return {}
    (column,) = table.partition_keys
    if run is None:
        run = RunCommits(
            run_snapshots(table, user, since), table.partition_row_counts(filter=col(column).isin(list(keys)))
        )
    rows = {str(values[0]): n for values, n in run.counts.items()}
    data = [s for s in run.own if s.commit_kind != CommitKind.COMPACT]
    written: Counter[str] = Counter()
    for e in _added(table, data):
        written[str(table.partition_spec(e.partition)[column])] += e.file.row_count
    return {
        k: {
            "rows_written": MetadataValue.int(written[k]),
            PARTITION_ROW_COUNT: MetadataValue.int(rows.get(k, 0)),
        }
        for k in keys
    }


def _added(table: Table, snapshots: Sequence[Snapshot]) -> list[ManifestEntry]:
    return [e for s in snapshots for e in table.delta_entries(s) if e.kind == FileKind.ADD]


def table_metadata(
    table: Table, snapshot_id: int | None = None, counts: PartitionCounts | None = None
) -> dict[str, Any]:
    """The table as of a snapshot (default latest): its exact row count (the sum of ``counts``,
    its partitions' rows as of that snapshot, if known), files, bytes, LSM shape, schema, name
    and URI. No per-snapshot deltas: observations of maintenance runs share these series with
    materializations, so they plot the table's state, never a compaction's negative row delta."""
    snapshot = table.snapshot(snapshot_id)
    identity = {TABLE_NAME: MetadataValue.text(table.name), URI: MetadataValue.url(table.uri)}
    if snapshot is None:
        return {**identity, "snapshot_id": MetadataValue.int(0), ROW_COUNT: MetadataValue.int(0)}
    entries = table.live_entries(snapshot)
    shapes = table.lsm_shape(snapshot_id=snapshot.id)
    levels: Counter[int] = Counter()
    for shape in shapes:
        levels.update(shape.files_per_level)
    return {
        **identity,
        COLUMN_SCHEMA: MetadataValue.table_schema(column_schema(table.schema_by_id(snapshot.schema_id))),
        "snapshot_id": MetadataValue.int(snapshot.id),
        ROW_COUNT: MetadataValue.int(
            sum(counts.values()) if counts is not None else table.row_count(snapshot_id=snapshot.id)
        ),
        "data_files": MetadataValue.int(len(entries)),
        "bytes": MetadataValue.int(sum(e.file.file_size for e in entries)),
        "max_sorted_runs": MetadataValue.int(max((s.sorted_runs for s in shapes), default=0)),
        "level0_files": MetadataValue.int(levels.get(0, 0)),
        "files_per_level": MetadataValue.json({str(k): v for k, v in sorted(levels.items())}),
        **iceberg_metadata(table),
    }


def iceberg_metadata(table: Table) -> dict[str, Any]:
    """Where Iceberg readers (DuckDB, Polars, Trino, pyiceberg) find the table, if it has
    Iceberg-compatible metadata."""
    location = table.iceberg_metadata_location()
    return {} if location is None else {ICEBERG_METADATA: MetadataValue.path(location)}
