"""Table specs from YAML: the example's dws.user_daily is one (its SQL runs in the graph tests);
a bad file is refused at load, naming the file and what to fix."""

from pathlib import Path

import pyarrow as pa
import pytest

from assets.orders import TABLES
from dagster_lakehouse.publish import Publish
from dagster_lakehouse.yaml_spec import load_table_spec, load_table_specs
from lakehouse.errors import InvalidArgumentError

EXAMPLE = Path(__file__).parents[2] / "assets" / "defs" / "dws_user_daily" / "defs.yaml"

GOOD = """
name: db.t
columns:
  - {name: id, type: BIGINT NOT NULL, description: the key}
  - {name: dt, type: STRING NOT NULL}
  - {name: amount, type: "DECIMAL(18, 2)"}
primary_keys: [id, dt]
options: {bucket: 2}
upstream: [db.source]
sql: SELECT id, dt, amount FROM {db_source}
"""


def test_the_example_declares_a_table_in_yaml():
    """As a table component's defs.yaml, whose attributes are the spec."""
    spec = load_table_spec(EXAMPLE)
    assert spec.name == "dws.user_daily" and spec.name in {t.name for t in TABLES}
    assert spec.primary_keys == ("user_id", "dt") and spec.incremental
    assert spec.options["merge-engine"] == "aggregation" and spec.options["bucket"] == "2"
    assert spec.schema.field("total_amount").type == pa.decimal128(18, 2)
    assert not spec.schema.field("user_id").nullable
    assert spec.schema.field("user_id").metadata == {b"description": b"the user"}


def test_a_spec_loads_with_defaults(tmp_path):
    path = tmp_path / "t.yaml"
    path.write_text(GOOD)
    spec = load_table_spec(path)
    assert [s.name for s in load_table_specs(tmp_path)] == ["db.t"]
    assert spec.partition_keys == ("dt",) and spec.write == "upsert" and spec.upstream == ("db.source",)
    assert spec.options == {"bucket": "2"} and spec.publish is Publish.DIRECT
    path.write_text(GOOD + "publish: audited\n")
    assert load_table_spec(path).publish is Publish.AUDITED and not spec.incremental


@pytest.mark.iceberg
def test_a_spec_flag_gives_the_table_iceberg_metadata_its_asset_shows(tmp_path):
    from dagster_lakehouse.metadata import ICEBERG_METADATA, table_metadata
    from lakehouse import Catalog

    path = tmp_path / "t.yaml"
    path.write_text(GOOD + "iceberg: true\n")
    spec = load_table_spec(path)
    table = spec.ensure(Catalog(str(tmp_path / "wh")))
    assert table.options["metadata.iceberg.storage"] == "table-location"
    assert ICEBERG_METADATA not in table_metadata(table)  # nothing committed yet
    table.write(pa.Table.from_pylist([{"id": 1, "dt": "2024-01-01", "amount": 1}], schema=spec.schema))
    location = table_metadata(table)[ICEBERG_METADATA].value
    assert location == table.iceberg_metadata_location() and Path(location).exists()


@pytest.mark.parametrize(
    "edit, error, match",
    [
        (lambda s: s.replace("sql: SELECT", "query: SELECT"), InvalidArgumentError, "missing \\['sql'\\]"),
        (lambda s: s.replace("BIGINT NOT NULL", "BIGNUM"), InvalidArgumentError, "column 'id'"),
        (lambda s: s + "write: merge\n", InvalidArgumentError, "write is 'merge'"),
        (lambda s: s + "publish: reviewed\n", InvalidArgumentError, "publish is 'reviewed'"),
        (lambda s: s.replace("[id, dt]", "[id, day]"), InvalidArgumentError, "primary_keys.1: .* 'day'"),
        (
            lambda s: s.replace("bucket: 2", "bukket: 2"),
            InvalidArgumentError,
            "'bukket'; did you mean 'bucket'",
        ),
        (
            lambda s: s.replace("bucket: 2", "bucket: two"),
            InvalidArgumentError,
            "options.bucket: .*whole number",
        ),
        (lambda s: s.replace("{db_source}", "{db_sauce}"), InvalidArgumentError, "sql: .*reads {db_sauce}"),
        (
            lambda s: s.replace("{db_source}", "{this}"),
            InvalidArgumentError,
            "only an incremental table reads",
        ),
    ],
)
def test_a_bad_spec_is_refused_naming_the_file(tmp_path, edit, error, match):
    path = tmp_path / "bad.yaml"
    path.write_text(edit(GOOD))
    with pytest.raises(error, match=match) as raised:
        load_table_spec(path)
    assert "bad.yaml" in str(raised.value) or "db.t" in str(raised.value)
