"""A table's Spark step on a cluster the run does not hold a session of, through Dagster Pipes: the
asset submits :mod:`dagster_lakehouse.pipes_step` with what the step needs (the table, its
transformation, the run's days, the warehouse, the commit user) as Pipes extras; the step reads,
transforms and writes on the cluster and reports its commit and column lineage back; the asset then
reads every other piece of its metadata from the table (the commits are the run's), and the
table's checks run as for any materialization, against the warehouse.

:class:`SparkSubmitPipes` submits with ``spark-submit`` (a standalone or YARN master, Kubernetes);
a managed service's own Pipes client (``PipesEMRClient``, ``PipesDatabricksClient``) runs the same
step script through a subclass overriding :meth:`SparkSubmitPipes.run` (see the README).
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from dagster import (
    AssetExecutionContext,
    ConfigurableResource,
    PipesClientCompletedInvocation,
    PipesSubprocessClient,
)
from pydantic import Field

from dagster_lakehouse.publish import Publish
from dagster_lakehouse.spec import TableSpec
from dagster_lakehouse.yaml_spec import SqlTransform
from lakehouse.errors import InvalidArgumentError

STEP_SCRIPT = str(Path(__file__).with_name("pipes_step.py"))
_SECRETS = ("key", "secret", "token", "password")  # option names the step never gets: the cluster has its own


def _spark_submit() -> str:
    """``spark-submit`` of the installed PySpark."""
    import pyspark

    return str(Path(pyspark.__file__).parent / "bin" / "spark-submit")


class SparkSubmitPipes(ConfigurableResource):
    """Runs Spark steps as ``spark-submit --master <master>`` of the step script, through Dagster
    Pipes; ``conf``: Spark settings (``--conf k=v``), ``args``: more ``spark-submit`` arguments
    (``--py-files``, ``--deploy-mode``), ``env``: the environment of ``spark-submit``."""

    master: str
    spark_submit: str = Field(default_factory=_spark_submit)
    conf: dict[str, str] = Field(default_factory=dict)
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)

    def command(self) -> list[str]:
        conf = [a for k, v in self.conf.items() for a in ("--conf", f"{k}={v}")]
        return [self.spark_submit, "--master", self.master, *conf, *self.args, STEP_SCRIPT]

    def run(
        self, context: AssetExecutionContext, extras: Mapping[str, Any]
    ) -> PipesClientCompletedInvocation:
        """Submit the step with ``extras`` and wait for it."""
        client = PipesSubprocessClient(env=self.env or None)
        return client.run(context=context, command=self.command(), extras=dict(extras))


def check_submittable(spec: TableSpec) -> None:
    """A spec a Pipes step can run: its transformation known by name on the cluster, its writes
    plain (incremental and audited writes commit with the run's state in this process)."""
    if spec.incremental or spec.publish is not Publish.DIRECT:
        raise InvalidArgumentError(
            f"table {spec.name}: a Spark step through Pipes writes directly and not incrementally; "
            f"publish it directly and drop incremental, or run it in-process"
        )
    transform_reference(spec)


def transform_reference(spec: TableSpec) -> dict[str, Any]:
    """How the step finds the spec's transformation: its query, or its function's import path."""
    t = spec.transform
    if isinstance(t, SqlTransform):
        return {"sql": t.query, "upstream": list(t.upstream)}
    module, name = getattr(t, "__module__", None), getattr(t, "__qualname__", "")
    if module is None or "<" in name or not inspect.isfunction(t):
        raise InvalidArgumentError(
            f"table {spec.name}: a Spark step through Pipes imports its transformation on the cluster, "
            f"so it must be a module-level function (not {t!r})"
        )
    return {"function": f"{module}:{name}"}


def step_extras(
    spec: TableSpec, days: Sequence[str] | None, warehouse: str, storage: Mapping[str, str], user: str
) -> dict[str, Any]:
    """What the step gets: the table, its transformation, the run's days, the warehouse and the
    options reaching it (no credentials), how it writes and as whom it commits."""
    return {
        "table": spec.name,
        "transform": transform_reference(spec),
        "days": list(days) if days is not None else None,
        "warehouse": warehouse,
        "storage": {k: v for k, v in storage.items() if not any(s in k.lower() for s in _SECRETS)},
        "mode": "overwrite" if spec.write == "overwrite" else "append",
        "commit_user": user,
    }
