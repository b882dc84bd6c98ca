"""The Spark step of a table, run on a cluster by ``spark-submit`` (or a managed service's Pipes
client) as a Dagster Pipes process: the extras :func:`dagster_lakehouse.pipes.step_extras` made
say what to read, transform and write; it reports the column lineage back."""

from __future__ import annotations

import importlib
from typing import Any

from dagster_pipes import PipesContext, open_dagster_pipes

from dagster_lakehouse.lineage import column_lineage
from dagster_lakehouse.spec import Inputs, asset_key
from dagster_lakehouse.yaml_spec import SqlTransform

LINEAGE = "column_lineage"  # the reported lineage, {column: [[asset key, column], ...]}


def run_step(pipes: PipesContext) -> None:
    """Read, transform and write as the extras say; report the columns each written column was
    computed from (the rest of the materialization's metadata is read from the table's commits)."""
    from pyspark.sql import SparkSession

    from lakehouse.spark import register, write

    extras: dict[str, Any] = dict(pipes.extras)
    spark = SparkSession.builder.getOrCreate()
    register(spark)
    table = extras["table"]
    days = tuple(extras["days"]) if extras["days"] is not None else None
    inputs = Inputs(spark, days, extras["warehouse"], extras["storage"], table)
    frame = _transform(extras["transform"])(inputs)
    write(frame, table, mode=extras["mode"], warehouse=extras["warehouse"], options=extras["storage"],
          commit_user=extras["commit_user"])  # fmt: skip
    lineage = column_lineage(frame, [(asset_key(t), f) for t, f in inputs.reads if t != table])
    traced = {c: [[d.asset_key.to_user_string(), d.column_name] for d in deps]
              for c, deps in lineage.deps_by_column.items()}  # fmt: skip
    pipes.report_asset_materialization(metadata={LINEAGE: {"raw_value": traced, "type": "json"}})


def _transform(reference: dict[str, Any]) -> Any:
    if "sql" in reference:
        return SqlTransform(reference["sql"], tuple(reference["upstream"]))
    module, _, name = reference["function"].partition(":")
    found: Any = importlib.import_module(module)
    for part in name.split("."):
        found = getattr(found, part)
    return found


if __name__ == "__main__":
    with open_dagster_pipes() as context:
        run_step(context)
