"""Asset checks: after every write, the table's indexes and keys are proven against its data.

- ``indexes_match_data`` (indexed tables): the file indexes of the files the run wrote (of every
  file when it wrote none; bloom filters without false negatives, bitmap and bit-slice row sets
  equal to the data), deletion vectors within their files, and
  every row in its bucket (the dynamic-bucket hash index consistent with where each key's rows
  are);
- ``primary_key_unique`` (primary-key tables): no key visible twice.

A failing check carries its problems as metadata; a blocking one stops downstream assets. Files
that only lack an index configured after they were written are stale, not wrong: the index check
then fails with WARN severity (downstream assets still run) and shows the coverage, until
``rewrite_file_index`` builds the missing indexes.
"""

from dagster import (
    AssetCheckExecutionContext,
    AssetCheckResult,
    AssetChecksDefinition,
    AssetCheckSeverity,
    DagsterError,
    MetadataValue,
    asset_check,
)

from lakehouse.dagster.factory import commit_user
from lakehouse.dagster.resources import LakehouseResource
from lakehouse.dagster.spec import TableSpec
from lakehouse.ops.file_index import IndexReport

_PROBLEMS_SHOWN = 50


def _result(reports: dict[str, IndexReport]) -> AssetCheckResult:
    problems = [f"{name}: {p}" for name, report in reports.items() for p in report.problems]
    missing = [f"{name}: {m}" for name, report in reports.items() for m in report.missing]
    metadata = {f"{name}_checked": MetadataValue.int(r.files_checked) for name, r in reports.items()}
    metadata["problems"] = MetadataValue.json(problems[:_PROBLEMS_SHOWN])
    metadata["problem_count"] = MetadataValue.int(len(problems))
    for name, report in reports.items():
        if report.indexes_expected:
            metadata[f"{name}_coverage"] = MetadataValue.float(report.coverage)
            metadata[f"{name}_missing"] = MetadataValue.json(report.missing[:_PROBLEMS_SHOWN])
    severity = AssetCheckSeverity.ERROR if problems else AssetCheckSeverity.WARN
    return AssetCheckResult(passed=not problems and not missing, severity=severity, metadata=metadata)


def _run_commit_user(context: AssetCheckExecutionContext) -> str | None:
    """The commit user of the run the check executes in (None when invoked outside a run)."""
    try:
        return commit_user(context.run.run_id)
    except DagsterError:  # a direct invocation has no run
        return None


def index_check(spec: TableSpec) -> AssetChecksDefinition:
    @asset_check(
        asset=spec.key,
        name="indexes_match_data",
        blocking=spec.blocking_checks,
        description="File indexes, deletion vectors and the bucket index agree with the data",
    )
    def _check(context: AssetCheckExecutionContext, lakehouse: LakehouseResource) -> AssetCheckResult:
        table = lakehouse.table(spec.name)
        user = _run_commit_user(context)
        indexes = table.verify_file_indexes(commit_user=user) if user else None
        if indexes is None or not indexes.files_checked:  # the run wrote nothing: check every file
            indexes = table.verify_file_indexes()
        return _result(
            {
                "file_indexes": indexes,
                "deletion_vectors": table.verify_deletion_vectors(),
                "buckets": table.verify_buckets(),
            }
        )

    return _check


def primary_key_check(spec: TableSpec) -> AssetChecksDefinition:
    @asset_check(
        asset=spec.key,
        name="primary_key_unique",
        blocking=spec.blocking_checks,
        description="Every primary key is visible once",
    )
    def _check(lakehouse: LakehouseResource) -> AssetCheckResult:
        return _result({"primary_key": lakehouse.table(spec.name).verify_primary_key()})

    return _check


def table_checks(spec: TableSpec) -> list[AssetChecksDefinition]:
    """The checks a table gets from its spec."""
    return [
        *([index_check(spec)] if spec.index_checks else []),
        *([primary_key_check(spec)] if spec.primary_keys else []),
    ]
