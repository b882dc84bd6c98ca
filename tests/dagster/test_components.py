"""Tables as Dagster components in a ``dg`` project: ``dg`` lists and scaffolds them, ``dg check
defs`` passes on the example and refuses a bad spec naming its file and line, and a scaffolded
table materializes with its checks."""

from __future__ import annotations

import itertools
import os
import re
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest
import yaml
from dagster import AssetCheckSeverity, DagsterInstance, load_from_defs_folder, materialize

from lakehouse import Catalog

ROOT = Path(__file__).parents[2]
DG = str(Path(sys.executable).with_name("dg"))
_names = itertools.count()

TABLE = {
    "type": "dagster_lakehouse.PaimonTableComponent",
    "attributes": {
        "name": "shop.orders",
        "columns": [
            {"name": "id", "type": "BIGINT NOT NULL"},
            {"name": "dt", "type": "STRING NOT NULL"},
            {"name": "amount", "type": "DECIMAL(18, 2)"},
        ],
        "primary_keys": ["id", "dt"],
        "daily_from": "2026-01-01",
        "options": {"bucket": 2},
        "upstream": ["shop.events"],
        "sql": "SELECT id, dt, amount FROM {shop_events}",
    },
}
SOURCE = {
    "type": "dagster_lakehouse.PaimonTableComponent",
    "attributes": {
        "name": "shop.events",
        "columns": [{"name": "id", "type": "BIGINT"}, {"name": "amount", "type": "DECIMAL(18, 2)"}],
        "partition_keys": [],
        "sql": "SELECT CAST(1 AS BIGINT) AS id, CAST(2.5 AS DECIMAL(18, 2)) AS amount",
    },
}


def _dg(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "VIRTUAL_ENV": str(Path(sys.executable).parents[1])}
    return subprocess.run([DG, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def _project(root: Path, defs: dict[str, object]) -> str:
    """A dg project under ``root`` (its root module named uniquely: each test imports its own),
    with ``defs`` as ``defs/<folder>/defs.yaml`` files; its root module's name."""
    module = f"dg_project_{next(_names)}"
    (root / "pyproject.toml").write_text(
        f'[project]\nname = "{module}"\nversion = "0"\n\n[tool.dg]\ndirectory_type = "project"\n\n'
        f'[tool.dg.project]\nroot_module = "{module}"\n'
    )
    package = root / module
    (package / "defs").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "defs" / "__init__.py").write_text("")
    (package / "definitions.py").write_text(
        "from pathlib import Path\n\nfrom dagster import load_from_defs_folder\n\n"
        "defs = load_from_defs_folder(path_within_project=Path(__file__).parent)\n"
    )
    for folder, doc in defs.items():
        (package / "defs" / folder).mkdir()
        (package / "defs" / folder / "defs.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    return module


def _load(root: Path, monkeypatch):
    monkeypatch.syspath_prepend(str(root))
    return load_from_defs_folder(path_within_project=root)


def test_dg_lists_the_components(tmp_path):
    listed = _dg("list", "components", "--json", cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    names = {c["key"] for c in yaml.safe_load(listed.stdout)["items"]}
    assert {
        "dagster_lakehouse.PaimonTableComponent",
        "dagster_lakehouse.PaimonTableSpecsComponent",
        "dagster_lakehouse.PaimonMaintenanceComponent",
        "dagster_lakehouse.LakehouseResourcesComponent",
    } <= names


def test_dg_check_defs_passes_on_the_example():
    checked = _dg("check", "defs", cwd=ROOT)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "All definitions loaded successfully" in checked.stdout + checked.stderr


def test_dg_check_defs_refuses_a_bad_spec_naming_file_and_line(tmp_path):
    bad = yaml.safe_load(yaml.safe_dump(TABLE))
    bad["attributes"]["options"] = {"bukket": 2}
    module = _project(tmp_path, {"orders": bad, "events": SOURCE})
    checked = _dg("check", "defs", cwd=tmp_path)
    assert checked.returncode != 0
    path = tmp_path / module / "defs" / "orders" / "defs.yaml"
    line = next(i for i, text in enumerate(path.read_text().splitlines(), 1) if "bukket" in text)
    assert (
        f"{path}:{line} (attributes.options.bukket): no table option is named 'bukket'; did you mean 'bucket'"
        in (checked.stdout + checked.stderr)
    )


@pytest.mark.parametrize(
    "edit, where, message",
    [
        (lambda a: a["columns"][2].update(type="DECIMAL(18, 20)"), "columns.2.type", "scale must be between"),
        (lambda a: a["columns"][1].update(type="STRNG"), "columns.1.type", "column 'dt'"),
        (lambda a: a.update(options={"bucket": "two"}), "options.bucket", "whole number"),
        (
            lambda a: a.update(options={"merge-engine": "dedupe"}),
            "options.merge-engine",
            "unknown merge-engine",
        ),
        (lambda a: a.update(primary_keys=["id", "day"]), "primary_keys.1", "'day', which is not a column"),
        (
            lambda a: a.update(upstream=["shop.none"], sql="SELECT * FROM {shop_none}"),
            "upstream.0",
            "reads shop.none",
        ),
        (lambda a: a.update(sql="SELECT * FROM {shop_evnts}"), "sql", "reads {shop_evnts}, which is not"),
        (lambda a: a.update(sql="SELECT * FROM {this}"), "sql", "only an incremental table reads"),
        (lambda a: a.pop("daily_from"), "", "give their first day"),
        (lambda a: a.update(transform="shop.transforms:orders"), "", "either a sql query or a Python"),
    ],
)
def test_a_bad_spec_names_its_file_line_and_key(tmp_path, monkeypatch, edit, where, message):
    bad = yaml.safe_load(yaml.safe_dump(TABLE))
    edit(bad["attributes"])
    module = _project(tmp_path, {"orders": bad, "events": SOURCE})
    located = re.search(
        r"(\S+defs\.yaml):(\d+) \(attributes\.?([^)]*)\): (.*)", _load_error(tmp_path, monkeypatch)
    )
    assert located
    file, line, key, said = located.groups()
    assert file == str(tmp_path / module / "defs" / "orders" / "defs.yaml") and int(line) > 1
    assert key == where and message in said


def _load_error(root: Path, monkeypatch) -> str:
    """What loading the project raised: Dagster's error about the component, caused by ours."""
    with pytest.raises(Exception) as raised:
        _load(root, monkeypatch)
    error: BaseException | None = raised.value
    messages = []
    while error is not None:
        messages.append(str(error))
        error = error.__cause__
    return "\n".join(messages)


def test_maintenance_of_an_undeclared_table_names_its_line(tmp_path, monkeypatch):
    maintenance = {
        "type": "dagster_lakehouse.PaimonMaintenanceComponent",
        "attributes": {"tables": ["shop.order"]},
    }
    _project(tmp_path, {"orders": TABLE, "events": SOURCE, "maintenance": maintenance})
    assert re.search(
        r"maintenance/defs\.yaml:\d+ \(attributes\.tables\.0\): no Paimon table component declares "
        r"shop\.order; declared: \['shop\.events', 'shop\.orders'\]",
        _load_error(tmp_path, monkeypatch),
    )


def test_a_table_declared_twice_is_refused(tmp_path, monkeypatch):
    _project(tmp_path, {"orders": TABLE, "again": TABLE, "events": SOURCE})
    assert re.search(
        r"(again|orders)/defs\.yaml:\d+ \(attributes\): table shop\.orders is declared by another component",
        _load_error(tmp_path, monkeypatch),
    )


def test_the_project_maintains_the_tables_of_every_component(tmp_path, monkeypatch):
    maintenance = {"type": "dagster_lakehouse.PaimonMaintenanceComponent"}
    resources = {"type": "dagster_lakehouse.LakehouseResourcesComponent"}
    _project(
        tmp_path, {"orders": TABLE, "events": SOURCE, "maintenance": maintenance, "lakehouse": resources}
    )
    defs = _load(tmp_path, monkeypatch)
    repo = defs.get_repository_def()
    assert {s.name for s in repo.sensor_defs} >= {
        "compaction_sensor",
        "shop_orders_snapshots",
        "shop_events_snapshots",
    }
    assert {s.name for s in repo.schedule_defs} == {"lakehouse_pipeline_schedule", "nightly_expiration"}
    orders = repo.asset_graph.get(
        next(k for k in repo.asset_graph.get_all_asset_keys() if k.path == ["shop", "orders"])
    )
    assert (
        orders.partitions_def is not None and orders.partitions_def.start.strftime("%Y-%m-%d") == "2026-01-01"
    )
    assert [p.to_user_string() for p in orders.parent_keys] == ["shop/events"]


@pytest.mark.spark
def test_a_scaffolded_table_materializes_with_its_checks(spark, tmp_path, monkeypatch):
    module = _project(tmp_path, {})
    for args in (
        ("dagster_lakehouse.PaimonTableComponent", "greetings", "--name", "demo.greetings"),
        ("dagster_lakehouse.LakehouseResourcesComponent", "lakehouse"),
    ):
        made = _dg("scaffold", "defs", *args, cwd=tmp_path)
        assert made.returncode == 0, made.stdout + made.stderr
    assert (tmp_path / module / "defs" / "greetings" / "defs.yaml").exists()
    warehouse = str(tmp_path / "warehouse")
    monkeypatch.setenv("LAKEHOUSE_WAREHOUSE", warehouse)
    defs = _load(tmp_path, monkeypatch)
    selection, resources = [*defs.assets, *defs.asset_checks], dict(defs.resources)
    instance = DagsterInstance.ephemeral()  # both runs: the schema check compares them
    run = materialize(selection, resources=resources, instance=instance)
    assert run.success
    assert {e.check_name: e.passed for e in run.get_asset_check_evaluations()} == {
        "primary_key_unique": True, "column_schema_change": True, "dagster_row_count_bounds_check": True,
    }  # fmt: skip
    table = Catalog(warehouse).get_table("demo.greetings")
    assert table.read().to_pylist() == [{"id": 1, "greeting": "hello"}]

    # a column added to the table and its query: the columns changed since the last run
    table.add_column("note", pa.string())
    spec_file = tmp_path / module / "defs" / "greetings" / "defs.yaml"
    doc = yaml.safe_load(spec_file.read_text())
    doc["attributes"]["columns"].append({"name": "note", "type": "STRING"})
    doc["attributes"]["sql"] += ", 'hi' AS note"
    spec_file.write_text(yaml.safe_dump(doc))
    defs = _load(tmp_path, monkeypatch)
    run = materialize([*defs.assets, *defs.asset_checks], resources=resources, instance=instance)
    evaluations = {e.check_name: e for e in run.get_asset_check_evaluations()}
    assert run.success and evaluations["column_schema_change"].passed is False
    assert evaluations["column_schema_change"].severity is AssetCheckSeverity.WARN


@pytest.mark.spark
def test_a_table_without_rows_fails_its_bounds_and_bounds_come_from_yaml(spark, tmp_path, monkeypatch):
    empty = yaml.safe_load(yaml.safe_dump(SOURCE))
    empty["attributes"]["sql"] += " WHERE 1 = 0"
    bounded = yaml.safe_load(yaml.safe_dump(SOURCE))
    bounds = {"dagster/row_count": {"max": 0}, "bytes": {"min": 1}}
    bounded["attributes"].update(name="shop.bounded", checks={"schema_changes": False, "bounds": bounds})
    resources = {"type": "dagster_lakehouse.LakehouseResourcesComponent",
                 "attributes": {"warehouse": str(tmp_path / "warehouse")}}  # fmt: skip
    _project(tmp_path, {"events": empty, "bounded": bounded, "lakehouse": resources})
    defs = _load(tmp_path, monkeypatch)
    run = materialize([*defs.assets, *defs.asset_checks], resources=dict(defs.resources))
    passed = {
        (e.asset_key.to_user_string(), e.check_name): e.passed for e in run.get_asset_check_evaluations()
    }
    assert passed == {
        ("shop/events", "column_schema_change"): True,
        ("shop/events", "dagster_row_count_bounds_check"): False,  # no rows
        ("shop/bounded", "dagster_row_count_bounds_check"): False,  # one row, above its max 0
        ("shop/bounded", "bytes_bounds_check"): True,
    }
