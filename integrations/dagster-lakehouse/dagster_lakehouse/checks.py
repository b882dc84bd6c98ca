"""Asset checks: after every write, the table's indexes and keys are proven against its data, per
partition on daily tables (a backfill run evaluates each of its days: the UI shows every day's
status, and a failing day names itself).

- ``indexes_match_data`` (indexed tables): the file indexes of the files the run wrote (of every
  file when it wrote none; bloom filters without false negatives, bitmap and bit-slice row sets
  equal to the data), deletion vectors within their files, and
  every row in its bucket (the dynamic-bucket hash index consistent with where each key's rows
  are);
- ``primary_key_unique`` (primary-key tables): no key visible twice;
- over the metadata every materialization reports (WARN severity, never blocking): Dagster's
  ``column_schema_change`` (the columns unchanged since the previous materialization), and each
  number a spec bounds (by default the rows of the run's day) within its bounds, evaluated per
  day like the checks above.

An audited table (``publish=Publish.AUDITED``) is checked in one step on the run's branch, which
reaches main only if every evaluation passed; a run that does not select the checks leaves its
data on the branch (see :mod:`dagster_lakehouse.publish`).

A failing check carries its problems as metadata; a blocking one stops downstream assets. Files
that only lack an index configured after they were written are stale, not wrong: the index check
then fails with WARN severity (downstream assets still run) and shows the coverage, until
``rewrite_file_index`` builds the missing indexes.
"""

import warnings
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from dagster import (
    AssetCheckEvaluation,
    AssetCheckExecutionContext,
    AssetCheckResult,
    AssetChecksDefinition,
    AssetCheckSeverity,
    AssetCheckSpec,
    AssetRecordsFilter,
    DagsterError,
    DailyPartitionsDefinition,
    MetadataValue,
    Output,
    PreviewWarning,
    build_column_schema_change_checks,
    multi_asset_check,
)

# the evaluation's link to the materialization it checked, without which the UI counts a
# partition's check as not evaluated for its latest materialization; Dagster builds it only for
# results of single-partition steps, so a ranged run's per-day evaluations build it here
from dagster._core.definitions.asset_checks.asset_check_evaluation import (
    AssetCheckEvaluationTargetMaterializationData,
)

from dagster_lakehouse.factory import materialization_user
from dagster_lakehouse.publish import Publish, audit_branch, publish
from dagster_lakehouse.resources import LakehouseResource
from dagster_lakehouse.spec import PARTITION_COLUMN, Bounds, TableSpec
from lakehouse import IndexReport, Table
from lakehouse.errors import InvalidArgumentError

_PROBLEMS_SHOWN = 50
INDEX_CHECK = "indexes_match_data"
PRIMARY_KEY_CHECK = "primary_key_unique"

Partitions = Mapping[str, Any] | None  # the partition a check evaluates (None: the whole table)
# a check of a table (as the run committed it: its commit user) in a partition, given the metadata
# of the materialization it checks
Evaluate = Callable[[Table, str | None, Partitions, Mapping[str, Any]], AssetCheckResult]


def _result(reports: dict[str, IndexReport]) -> AssetCheckResult:
    problems = [f"{name}: {p}" for name, report in reports.items() for p in report.problems]
    missing = [f"{name}: {m}" for name, report in reports.items() for m in report.missing]
    metadata: dict[str, MetadataValue] = {
        f"{name}_checked": MetadataValue.int(r.files_checked) for name, r in reports.items()
    }
    metadata["problems"] = MetadataValue.json(problems[:_PROBLEMS_SHOWN])
    metadata["problem_count"] = MetadataValue.int(len(problems))
    for name, report in reports.items():
        if report.indexes_expected:
            metadata[f"{name}_coverage"] = MetadataValue.float(report.coverage)
            metadata[f"{name}_missing"] = MetadataValue.json(report.missing[:_PROBLEMS_SHOWN])
    severity = AssetCheckSeverity.ERROR if problems else AssetCheckSeverity.WARN
    return AssetCheckResult(passed=not problems and not missing, severity=severity, metadata=metadata)


def index_result(table: Table, user: str | None = None, partitions: Partitions = None) -> AssetCheckResult:
    """File indexes (of the files ``user`` wrote there, else of every file), deletion vectors and
    bucket placement of ``partitions`` (default all)."""
    indexes = table.verify_file_indexes(commit_user=user, partitions=partitions) if user else None
    if indexes is None or not indexes.files_checked:  # the run wrote nothing there: check every file
        indexes = table.verify_file_indexes(partitions=partitions)
    return _result(
        {
            "file_indexes": indexes,
            "deletion_vectors": table.verify_deletion_vectors(partitions=partitions),
            "buckets": table.verify_buckets(partitions=partitions),
        }
    )


def primary_key_result(
    table: Table, user: str | None = None, partitions: Partitions = None
) -> AssetCheckResult:
    """Every primary key of ``partitions`` (default all) visible once."""
    return _result({"primary_key": table.verify_primary_key(partitions=partitions)})


def _run_commit_user(context: AssetCheckExecutionContext, spec: TableSpec) -> str | None:
    """The commit user of ``spec``'s materialization in the run the check executes in (None when
    invoked outside a run)."""
    try:
        return materialization_user(spec, context.run.run_id)
    except DagsterError:  # a direct invocation has no run
        return None


def bounds_result(key: str, bounds: Bounds, metadata: Mapping[str, Any]) -> AssetCheckResult:
    """Whether the number the materialization reported under ``key`` is within ``bounds``."""
    reported = metadata.get(key)
    value = getattr(reported, "value", reported)
    if not isinstance(value, int | float) or isinstance(value, bool):
        return AssetCheckResult(
            passed=False, severity=AssetCheckSeverity.WARN,
            description=f"the materialization reported no number under {key}",
        )  # fmt: skip
    passed = (bounds.min is None or value >= bounds.min) and (bounds.max is None or value <= bounds.max)
    return AssetCheckResult(
        passed=passed, severity=AssetCheckSeverity.WARN, metadata={key: MetadataValue.float(float(value))},
        description=f"{key} is {value}, {'within' if passed else 'outside'} {_range(bounds)}",
    )  # fmt: skip


def _range(bounds: Bounds) -> str:
    low = "-inf" if bounds.min is None else f"{bounds.min:g}"
    high = "inf" if bounds.max is None else f"{bounds.max:g}"
    return f"[{low}, {high}]"


@dataclass(frozen=True)
class Check:
    """One check of a table: its name, what it proves, and how a partition is evaluated."""

    name: str
    description: str
    evaluate: Evaluate


def _table_check(
    spec: TableSpec,
    partitions: DailyPartitionsDefinition | None,
    checks: list[Check],
    *,
    audited: bool = False,
    blocking: bool = False,
) -> AssetChecksDefinition:
    """One step evaluating ``checks`` of a table: an evaluation per check and partition of the run
    (one in all on an unpartitioned table), each linked to the materialization it checked; a
    failed ``blocking`` one stops downstream steps. An ``audited`` table's checks run against the
    run's branch, which is published to main only when every evaluation passed."""
    with warnings.catch_warnings():  # partitioned checks are a preview feature: chosen, not news
        warnings.simplefilter("ignore", PreviewWarning)
        specs = {
            c.name: AssetCheckSpec(
                c.name,
                asset=spec.key,
                description=c.description,
                blocking=blocking or audited,
                partitions_def=partitions if spec.daily else None,
            )  # fmt: skip
            for c in checks
        }
    step = "audit" if audited else checks[0].name

    @multi_asset_check(
        specs=list(specs.values()), name=f"{spec.name.replace('.', '_')}_{step}", can_subset=True
    )
    def _check(context: AssetCheckExecutionContext, lakehouse: LakehouseResource) -> Iterator:
        table, user = lakehouse.table(spec.name), _run_commit_user(context, spec)
        branch = audit_branch(context.run.run_id) if audited else None
        checked = table.on_branch(branch) if branch else table
        days = context.op_execution_context.partition_keys if spec.daily else [None]
        selected = [c for c in checks if specs[c.name].key in context.selected_asset_check_keys]
        materialized = {day: _materialization(context, spec, day) for day in days}
        results = [(c, day, c.evaluate(checked, user, {PARTITION_COLUMN: day} if day else None,
                                       _metadata(materialized[day])))
                   for c in selected for day in days]  # fmt: skip
        published = {}
        if branch and all(r.passed for _, _, r in results):
            publish(table, branch)
            published = {"published_from": MetadataValue.text(branch)}
        elif branch:  # left for inspection: its name goes with every evaluation
            published = {"unpublished_branch": MetadataValue.text(branch)}
        for check, day, result in results:
            yield AssetCheckEvaluation(
                asset_key=spec.key, check_name=check.name, passed=result.passed,
                metadata={**result.metadata, **published},
                target_materialization_data=_target(materialized[day]),
                severity=result.severity, description=check.description,
                blocking=specs[check.name].blocking, partition=day,
            )  # fmt: skip
        # the checks' outputs, so that downstream steps gated on them see them delivered (a failed
        # blocking evaluation fails this step before them)
        for check in selected:
            yield Output(None, output_name=specs[check.name].get_python_identifier())

    return _check


def _materialization(context: AssetCheckExecutionContext, spec: TableSpec, day: str | None) -> Any:
    """The latest materialization record of the table (of ``day``), which an evaluation checks."""
    records = context.instance.fetch_materializations(
        AssetRecordsFilter(asset_key=spec.key, asset_partitions=[day] if day else None), limit=1
    ).records
    return records[0] if records else None


def _metadata(record: Any) -> Mapping[str, Any]:
    return dict(record.asset_materialization.metadata) if record is not None else {}


def _target(record: Any) -> AssetCheckEvaluationTargetMaterializationData | None:
    if record is None:
        return None
    return AssetCheckEvaluationTargetMaterializationData(
        storage_id=record.storage_id, run_id=record.run_id, timestamp=record.timestamp
    )


def table_checks(
    spec: TableSpec, partitions: DailyPartitionsDefinition | None
) -> list[AssetChecksDefinition]:
    """The checks a table gets from its spec: a step per check, or one step auditing an audited
    table's run branch with all of them; then the checks of its metadata."""
    return [*_data_checks(spec, partitions), *_metadata_checks(spec, partitions)]


def _data_checks(
    spec: TableSpec, partitions: DailyPartitionsDefinition | None
) -> list[AssetChecksDefinition]:
    checks = []
    if spec.index_checks:
        description = "File indexes, deletion vectors and the bucket index agree with the data"
        checks.append(Check(INDEX_CHECK, description, lambda t, user, p, _: index_result(t, user, p)))
    if spec.primary_keys:
        description = "Every primary key is visible once"
        checks.append(
            Check(PRIMARY_KEY_CHECK, description, lambda t, user, p, _: primary_key_result(t, user, p))
        )
    if spec.publish is Publish.AUDITED:
        if not checks:
            raise InvalidArgumentError(
                f"table {spec.name} is published audited but has no checks to audit it with; give it "
                f"index_checks=True or primary keys, or publish it directly"
            )
        return [_table_check(spec, partitions, checks, audited=True)]
    return [_table_check(spec, partitions, [c], blocking=spec.blocking_checks) for c in checks]


def _metadata_checks(
    spec: TableSpec, partitions: DailyPartitionsDefinition | None
) -> list[AssetChecksDefinition]:
    """Dagster's check that the column schema did not change since the previous materialization
    (of the table as a whole), and a check per bounded number, in one step evaluating each day
    of the run (Dagster's bounds checks see only the latest materialization of a daily table)."""
    checks = list(build_column_schema_change_checks(assets=[spec.key])) if spec.schema_changes else []
    bounded = [_bounds_check(key, b) for key, b in spec.metadata_bounds.items()]
    return [*checks, _table_check(spec, partitions, bounded)] if bounded else checks


def _bounds_check(key: str, bounds: Bounds) -> Check:
    """The check of one bounded number, named as Dagster's bounds checks are."""
    return Check(
        f"{key.replace('/', '_')}_bounds_check",
        f"{key} within {_range(bounds)}",
        lambda _table, _user, _partitions, metadata: bounds_result(key, bounds, metadata),
    )
