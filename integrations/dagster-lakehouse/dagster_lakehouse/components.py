"""Dagster components: Paimon tables and their maintenance declared in ``defs.yaml`` files, for
projects that ``dg`` manages (``dg list components``, ``dg scaffold defs``, ``dg check defs``).

- :class:`PaimonTableComponent`: one table; its attributes are the YAML table spec of
  :mod:`dagster_lakehouse.yaml_spec` (a Spark SQL query, or a Python ``transform``), plus the
  first day of its daily partitions.
- :class:`PaimonTableSpecsComponent`: tables declared in Python (a list of :class:`TableSpec`).
- :class:`PaimonMaintenanceComponent`: for the project's tables, the maintenance jobs (compaction,
  file-index rewrite, snapshot and partition expiration, orphan cleanup), the snapshot and
  LSM-shape sensors, the nightly expiration and the daily pipeline with its schedule.
- :class:`LakehouseResourcesComponent`: the warehouse and Spark the tables' runs use, and the
  in-process executor their steps share a Spark session in.

A spec is checked when its component loads, before anything runs: a wrong key, type, option,
query or upstream table is an error naming the ``defs.yaml`` file and line.
"""

from __future__ import annotations

import importlib
from abc import abstractmethod
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal

from dagster import (
    Component,
    ComponentLoadContext,
    DailyPartitionsDefinition,
    Definitions,
    Model,
    Resolvable,
    Scaffolder,
    ScaffoldRequest,
    in_process_executor,
    scaffold_component,
    scaffold_with,
)
from pydantic import BaseModel, PrivateAttr

from dagster_lakehouse.definitions import operations_definitions, table_definitions
from dagster_lakehouse.resources import (
    LakehouseResource,
    SparkResource,
    default_master,
    default_token,
    default_warehouse,
)
from dagster_lakehouse.spec import PARTITION_COLUMN, Inputs, TableSpec
from dagster_lakehouse.yaml_spec import Key, SpecError, table_spec

if TYPE_CHECKING:
    from dagster_shared.yaml_utils.source_position import SourcePositionTree
    from pyspark.sql import DataFrame


def _located(source: SourcePositionTree | None, key: Key, message: str) -> SpecError:
    """``message`` about the attribute at ``key``, prefixed with its file and line."""
    if source is None:
        return SpecError(message, key)
    path = ["attributes", *key]
    # about the whole: the line of its name, where there is one
    position, _ = source.lookup_closest_and_path(path if key else [*path, "name"], trace=None)
    return SpecError(
        f"{position.filename}:{position.start.line} ({'.'.join(map(str, path))}): {message}", key
    )


def _source(context: ComponentLoadContext) -> SourcePositionTree | None:
    return context.resolution_context.source_position_tree


def _named(reference: str) -> Any:
    """What ``package.module:name`` names (imported)."""
    module, _, name = reference.partition(":")
    return getattr(importlib.import_module(module), name)


def _days(first: str | None) -> DailyPartitionsDefinition | None:
    return DailyPartitionsDefinition(start_date=first) if first else None


class PaimonTables(Component):
    """Components that declare Paimon tables: the maintenance component finds them all."""

    @abstractmethod
    def table_specs(self) -> list[TableSpec]:
        """The tables, as specs."""

    @abstractmethod
    def where(self, key: Key, message: str) -> SpecError:
        """An error about the attribute at ``key``, naming its file and line."""

    def check_upstream(self, known: set[str]) -> None:
        """Every upstream table is one the project declares."""
        for spec in self.table_specs():
            for i, name in enumerate(spec.upstream):
                if name not in known:
                    raise self.where(
                        ("upstream", i),
                        f"table {spec.name} reads {name}, which no Paimon table component of the project "
                        f"declares; declared: {sorted(known)}",
                    )


def _project_tables(context: ComponentLoadContext) -> list[PaimonTables]:
    return context.component_tree.get_all_components(of_type=PaimonTables)  # type: ignore[type-abstract]


def _checked_project(context: ComponentLoadContext) -> list[TableSpec]:
    """Every table the project's components declare, their upstream tables among them."""
    components = _project_tables(context)
    specs: dict[str, TableSpec] = {}
    for c in components:
        for spec in c.table_specs():
            if spec.name in specs:
                raise c.where((), f"table {spec.name} is declared by another component too; keep one")
            specs[spec.name] = spec
    for c in components:
        c.check_upstream(set(specs))
    return list(specs.values())


class Column(Model):
    """A column: its Paimon type (``BIGINT NOT NULL``, ``DECIMAL(18, 2)``, ...) and description."""

    name: str
    type: str
    description: str = ""


class MetadataBounds(Model):
    """Inclusive bounds of a number the materializations report."""

    min: float | None = None
    max: float | None = None


class TableChecks(Model):
    """Dagster's ready-made checks of a table: its column schema unchanged since the previous
    materialization, and numbers it reports (metadata keys) within bounds (by default: rows in
    the run's day, or in the table)."""

    schema_changes: bool = True
    bounds: dict[str, MetadataBounds] | None = None


class TableScaffoldParams(BaseModel):
    """``dg scaffold defs dagster_lakehouse.PaimonTableComponent <path> --name db.table``."""

    name: str | None = None


class TableScaffolder(Scaffolder[TableScaffoldParams]):
    """A ``defs.yaml`` declaring a table that materializes as it is: one row from a query."""

    @classmethod
    def get_scaffold_params(cls) -> type[TableScaffoldParams]:
        return TableScaffoldParams

    def scaffold(self, request: ScaffoldRequest[TableScaffoldParams]) -> None:
        name = (request.params.name if request.params else None) or f"default.{request.target_path.name}"
        scaffold_component(
            request,
            {
                "name": name,
                "description": "Replace the query with yours: a Spark SQL SELECT of the columns below",
                "columns": [
                    {"name": "id", "type": "BIGINT NOT NULL", "description": "the key"},
                    {"name": "greeting", "type": "STRING"},
                ],
                "primary_keys": ["id"],
                "partition_keys": [],
                "options": {"bucket": 1},
                "sql": "SELECT CAST(1 AS BIGINT) AS id, 'hello' AS greeting",
            },
        )


@scaffold_with(TableScaffolder)
class PaimonTableComponent(PaimonTables, Resolvable, Model):
    """A Paimon table as a Dagster asset, declared as a YAML table spec: its columns, keys,
    partitioning and options, its upstream tables and a Spark SQL query over them (``{db_table}``
    names one) or a Python ``transform`` (``package.module:function`` of :class:`Inputs`),
    written by upsert or overwrite, directly or audited, its checks and automation. A daily
    table (partitioned by ``dt``) needs ``daily_from``, the first day of its partitions."""

    name: str
    columns: list[Column]
    sql: str | None = None
    transform: str | None = None
    description: str = ""
    owners: list[str] = []
    primary_keys: list[str] = []
    partition_keys: list[str] = [PARTITION_COLUMN]
    options: dict[str, str | int | float | bool] = {}
    upstream: list[str] = []
    write: Literal["upsert", "overwrite"] = "upsert"
    publish: Literal["direct", "audited"] = "direct"
    incremental: bool = False
    index_checks: bool = False
    blocking_checks: bool = False
    fresh_by: str | None = None
    pipes: bool = False
    iceberg: bool = False
    checks: TableChecks | None = None
    daily_from: str | None = None

    _spec: TableSpec | None = PrivateAttr(default=None)
    _source: Any = PrivateAttr(default=None)  # the defs.yaml's SourcePositionTree

    @classmethod
    def load(cls, attributes: BaseModel | None, context: ComponentLoadContext) -> PaimonTableComponent:
        component = super().load(attributes, context)
        component._source = _source(context)
        component._spec = component._build_spec()
        return component

    def _build_spec(self) -> TableSpec:
        if (self.sql is None) == (self.transform is None):
            raise self.where((), "give the table either a sql query or a Python transform")
        doc = self.model_dump(exclude={"transform", "daily_from"}, exclude_none=True)
        doc["columns"] = [c.model_dump() for c in self.columns]
        if self.checks is not None:
            doc["checks"] = self.checks.model_dump(exclude_none=True)
        try:
            spec = table_spec(doc, self._transform())
        except SpecError as e:
            raise self.where(e.key, str(e)) from None
        if spec.daily and self.daily_from is None:
            raise self.where(
                (),
                f"table {self.name} has daily partitions ({PARTITION_COLUMN}): give their first day, "
                f"e.g. daily_from: '2024-01-01'",
            )  # fmt: skip
        return spec

    def _transform(self) -> Callable[[Inputs], DataFrame] | None:
        if self.transform is None:
            return None
        try:
            found = _named(self.transform)
        except (ImportError, AttributeError, ValueError) as e:
            message = f"no function {self.transform!r} ({e}); give package.module:function"
            raise self.where(("transform",), message) from None
        if not callable(found):
            raise self.where(("transform",), f"{self.transform} is not a function of Inputs")
        return found  # type: ignore[no-any-return]

    def table_specs(self) -> list[TableSpec]:
        return [self._spec or self._build_spec()]

    def where(self, key: Key, message: str) -> SpecError:
        return _located(self._source, key, message)

    def build_defs(self, context: ComponentLoadContext) -> Definitions:
        _checked_project(context)
        return table_definitions(self.table_specs(), _days(self.daily_from))


class PaimonTableSpecsComponent(PaimonTables, Resolvable, Model):
    """Paimon tables declared in Python: ``specs`` names a list of :class:`TableSpec`
    (``package.module:TABLES``); ``daily_from`` is the first day of the daily ones."""

    specs: str
    daily_from: str | None = None

    _source: Any = PrivateAttr(default=None)

    @classmethod
    def load(cls, attributes: BaseModel | None, context: ComponentLoadContext) -> PaimonTableSpecsComponent:
        component = super().load(attributes, context)
        component._source = _source(context)
        component.table_specs()  # found and checked now
        return component

    def table_specs(self) -> list[TableSpec]:
        try:
            found = _named(self.specs)
        except (ImportError, AttributeError, ValueError) as e:
            raise _located(
                self._source, ("specs",), f"no {self.specs!r} ({e}); give package.module:ATTRIBUTE"
            ) from None
        if not isinstance(found, Sequence) or not all(isinstance(s, TableSpec) for s in found):
            raise _located(self._source, ("specs",), f"{self.specs} is not a list of TableSpec")
        if self.daily_from is None and any(s.daily for s in found):
            raise _located(self._source, (), f"tables of {self.specs} have daily partitions: give daily_from")
        return list(found)

    def where(self, key: Key, message: str) -> SpecError:
        return _located(self._source, ("specs",), message)

    def build_defs(self, context: ComponentLoadContext) -> Definitions:
        _checked_project(context)
        return table_definitions(self.table_specs(), _days(self.daily_from))


class PaimonMaintenanceComponent(Component, Resolvable, Model):
    """What keeps the project's Paimon tables (``tables``: the names of some; default all)
    healthy and fresh: the compaction, sort-compaction, file-index rewrite, expiration and orphan
    cleanup jobs, the LSM-shape compaction sensor and a snapshot sensor per table, the nightly
    expiration and, with ``pipeline``, the job of every asset, its daily schedule and the
    declarative-automation sensor."""

    tables: list[str] | None = None
    pipeline: bool = True

    _source: Any = PrivateAttr(default=None)

    @classmethod
    def load(cls, attributes: BaseModel | None, context: ComponentLoadContext) -> PaimonMaintenanceComponent:
        component = super().load(attributes, context)
        component._source = _source(context)
        return component

    def build_defs(self, context: ComponentLoadContext) -> Definitions:
        specs = _checked_project(context)
        if self.tables is not None:
            by_name = {s.name: s for s in specs}
            for i, name in enumerate(self.tables):
                if name not in by_name:
                    message = f"no Paimon table component declares {name}; declared: {sorted(by_name)}"
                    raise _located(self._source, ("tables", i), message)
            specs = [by_name[n] for n in self.tables]
        return operations_definitions(specs, pipeline=self.pipeline)


class LakehouseResourcesComponent(Component, Resolvable, Model):
    """The resources every Paimon table and maintenance job of the project runs with: the
    warehouse (default ``$LAKEHOUSE_WAREHOUSE``, else ``./warehouse``) with its catalog options,
    and Spark (default ``$LAKEHOUSE_SPARK``: a Spark Connect URL or a master, else ``local[2]``)
    with its settings; every run executes in one process, its steps sharing one Spark session."""

    warehouse: str | None = None
    catalog_options: dict[str, str] = {}
    spark_master: str | None = None
    spark_config: dict[str, str | int | float | bool] = {}

    def build_defs(self, context: ComponentLoadContext) -> Definitions:
        spark = SparkResource(master=self.spark_master or default_master())
        if self.spark_config:
            spark = SparkResource(
                master=spark.master, spark_config={**spark.spark_config, **self.spark_config}
            )
        lakehouse = LakehouseResource(
            warehouse=self.warehouse or default_warehouse(),
            catalog_options=dict(self.catalog_options),
            token=default_token(),
        )
        return Definitions(resources={"lakehouse": lakehouse, "spark": spark}, executor=in_process_executor)
