"""Bad inputs through the public API, as data: each must raise a typed ``LakehouseError`` whose
message names the table, column or file and says what to do, and leave the warehouse
byte-for-byte as it was (same latest snapshot, same files with the same bytes).

``tests/faults/test_bad_inputs.py`` runs every case; ``bench/faults.py`` counts them. A case
builds one of a few small tables (:data:`TABLES`), optionally damages it (``prepare``: the
"before" picture is taken after that), then makes the bad call.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

import numpy as np
import pyarrow as pa

from lakehouse import Catalog, col
from lakehouse.errors import (
    ArgumentTypeError,
    CorruptFileError,
    InvalidArgumentError,
    InvalidOptionError,
    LakehouseError,
    SchemaMismatchError,
    SnapshotNotFoundError,
    TableExistsError,
    TableNotFoundError,
    TagExistsError,
    UnsupportedFeatureError,
)
from lakehouse.manifest import files as manifest_files
from lakehouse.table.table import Table

ORDERS = pa.schema(
    [
        pa.field("order_id", pa.int64(), nullable=False),
        pa.field("dt", pa.string(), nullable=False),
        pa.field("user_id", pa.int32()),
        pa.field("price", pa.decimal128(10, 2)),
        pa.field("status", pa.string()),
        pa.field("ts", pa.timestamp("us")),
    ]
)


def orders(ids, dt: str = "2024-01-01", **columns) -> pa.Table:
    ids = list(ids)
    data = {
        "order_id": ids,
        "dt": [dt] * len(ids),
        "user_id": [i % 7 for i in ids],
        "price": [Decimal("9.99")] * len(ids),
        "status": ["PAID"] * len(ids),
        "ts": [np.datetime64("2024-01-01T10:00:00", "us")] * len(ids),
    }
    data.update({k: v if isinstance(v, list | pa.Array) else [v] * len(ids) for k, v in columns.items()})
    return pa.table(data, schema=ORDERS)


def _pk(catalog: Catalog, writes: int = 2, **options: str) -> Table:
    t = catalog.create_table(
        "db.orders",
        ORDERS,
        primary_keys=["order_id", "dt"],
        partition_keys=["dt"],
        options={"bucket": "2", "file-index.bloom-filter.columns": "user_id", **options},
    )
    for i in range(writes):
        t.write(orders(range(i * 5, i * 5 + 10), status=f"S{i}"))
    t.create_tag("first", snapshot_id=1)
    return t


def _append(catalog: Catalog) -> Table:
    t = catalog.create_table("db.orders", ORDERS, partition_keys=["dt"])
    t.write(orders(range(10)))
    t.write(orders(range(10, 20), dt="2024-01-02"))
    return t


TABLES: dict[str, Callable[[Catalog], Table]] = {
    "pk": _pk,
    "dv": lambda c: _pk(c, writes=3, **{"deletion-vectors.enabled": "true"}),
    "dynamic": lambda c: _pk(c, bucket="-1"),
    "append": _append,
}


@dataclass(frozen=True)
class Case:
    """One bad input: ``call`` must raise ``error`` with a message matching ``match``."""

    name: str
    call: Callable[[Catalog, Table], object]
    error: type[LakehouseError]
    match: str
    table: str = "pk"
    prepare: Callable[[Table], None] | None = None


@dataclass(frozen=True)
class Outcome:
    """What a case did: the exception raised (None: none) and whether the warehouse is unchanged."""

    error: BaseException | None
    unchanged: bool

    def typed(self, case: Case) -> bool:
        return isinstance(self.error, case.error) and re.search(case.match, str(self.error)) is not None


def run(case: Case, warehouse: str) -> Outcome:
    """Run ``case`` on a fresh warehouse directory; "unchanged" covers the directory around it
    too (nothing may be written or deleted outside the warehouse)."""
    catalog = Catalog(warehouse)
    catalog.create_database("db")
    table = TABLES[case.table](catalog)
    if case.prepare is not None:
        case.prepare(table)
    manifest_files._CACHE.clear()  # damage must be seen, not a cached copy
    around = os.path.dirname(os.path.abspath(warehouse))
    before = picture(around)
    error = None
    try:
        case.call(catalog, table)
    except Exception as e:
        error = e
    return Outcome(error, picture(around) == before)


def picture(root: str) -> dict[str, str]:
    """Every file under ``root`` (relative path -> sha256 of its bytes), directories as ``/``."""
    out = {}
    for directory, dirs, files in os.walk(root):
        for d in dirs:
            out[os.path.relpath(os.path.join(directory, d), root) + "/"] = ""
        for f in files:
            path = os.path.join(directory, f)
            out[os.path.relpath(path, root)] = hashlib.sha256(Path(path).read_bytes()).hexdigest()
    return out


# ---- damage -----------------------------------------------------------------------------


def _latest_manifest(t: Table) -> str:
    snap = t.snapshots.latest()
    return t.paths.manifest(t.manifests().read_list(snap.delta_manifest_list)[0].file_name)


def _a_data_file(t: Table) -> str:
    e = t.live_entries()[0]
    return t.paths.data_file(t.bucket_path(e.partition, e.bucket), e.file.file_name)


def _an_index_file(kind: str) -> Callable[[Table], str]:
    def find(t: Table) -> str:
        entry = next(e for e in t.index_entries() if e.index_file.index_type == kind)
        return t.paths.index_file(entry.index_file.file_name)

    return find


def _truncate(where: Callable[[Table], str]) -> Callable[[Table], None]:
    def damage(t: Table) -> None:
        path = where(t)
        data = Path(path).read_bytes()
        Path(path).write_bytes(data[: len(data) // 2])

    return damage


def _overwrite(where: Callable[[Table], str], content: bytes) -> Callable[[Table], None]:
    def damage(t: Table) -> None:
        Path(where(t)).write_bytes(content)

    return damage


def _delete(where: Callable[[Table], str]) -> Callable[[Table], None]:
    return lambda t: os.remove(where(t))


def _snapshot(n: int) -> Callable[[Table], str]:
    return lambda t: t.paths.snapshot(n)


def _schema_file(t: Table) -> str:
    return t.paths.schema(0)


def _edit_schema(edit: Callable[[dict], None]) -> Callable[[Table], None]:
    def damage(t: Table) -> None:
        path = Path(t.paths.schema(0))
        schema = json.loads(path.read_text())
        edit(schema)
        path.write_text(json.dumps(schema))

    return damage


def _expire_first(t: Table) -> None:
    t.expire_snapshots(retain_min=1, retain_max=1, older_than_ms=2**62)


def _drop(t: Table) -> None:
    Catalog(os.path.dirname(os.path.dirname(t.paths.root))).drop_table("db.orders")


# ---- the cases --------------------------------------------------------------------------


def _write(data: pa.Table, **kwargs) -> Callable[[Catalog, Table], object]:
    return lambda c, t: t.write(data, **kwargs)


def _create(**kwargs) -> Callable[[Catalog, Table], object]:
    return lambda c, t: c.create_table("db.x", ORDERS, **kwargs)


def _reopened(t: Table) -> Table:
    """The table read afresh from its files (its schema included)."""
    return Catalog(os.path.dirname(os.path.dirname(t.paths.root))).get_table("db.orders")


def _set(column: str, values: pa.Array, nullable: bool = True) -> pa.Table:
    data = orders([1])
    i = data.schema.get_field_index(column)
    return data.set_column(i, pa.field(column, values.type, nullable), values)


def _latest_list(t: Table) -> str:
    return t.paths.manifest(t.snapshots.latest().delta_manifest_list)


_HUGE_DECIMAL = pa.array([Decimal("123456789012.5")])
_YEAR_12000 = pa.array([np.datetime64("12000-01-01T00:00:00", "us")])
CASES: list[Case] = [
    # data that does not fit the table
    Case("missing column", _write(orders([1]).drop_columns(["status"])), SchemaMismatchError,
         r"db\.orders.*missing columns \['status'\]"),
    Case("extra column", _write(orders([1]).append_column("x", pa.array([1]))), SchemaMismatchError,
         r"db\.orders.*unknown columns \['x'\].*add_column"),
    Case("string into a decimal", _write(_set("price", pa.array(["cheap"]))), SchemaMismatchError,
         r"column 'price' of table db\.orders"),
    Case("int overflow", _write(_set("user_id", pa.array([2**40]))), SchemaMismatchError,
         r"column 'user_id' of table db\.orders"),
    Case("float into an int", _write(_set("user_id", pa.array([1.5]))), SchemaMismatchError,
         r"column 'user_id' of table db\.orders.*cannot be cast"),
    Case("null primary key", _write(_set("order_id", pa.array([None], pa.int64()))), SchemaMismatchError,
         r"column 'order_id' of table db\.orders.*null"),
    Case("null partition key", _write(_set("dt", pa.array([None], pa.string()))), SchemaMismatchError,
         r"column 'dt' of table db\.orders.*null", table="append"),
    Case("unknown row kind", _write(orders([1]).append_column("_row_kind", pa.array(["+X"]))),
         SchemaMismatchError, r"_row_kind .*db\.orders holds '\+X'.*use"),
    Case("delete into an append table", _write(orders([1]).append_column("_row_kind", pa.array(["-D"]))),
         SchemaMismatchError, r"db\.orders is an append table.*primary key", table="append"),
    Case("decimal beyond its precision", _write(_set("price", _HUGE_DECIMAL)), SchemaMismatchError,
         r"column 'price' of table db\.orders"),
    Case("timestamp beyond year 9999", _write(_set("ts", _YEAR_12000)), SchemaMismatchError,
         r"column 'ts' of table db\.orders.*9999"),
    Case("write a list", lambda c, t: t.write([{"order_id": 1}]), ArgumentTypeError,
         r"db\.orders.*pyarrow Table"),
    Case("write a dict", lambda c, t: t.write({"order_id": [1]}), ArgumentTypeError,
         r"db\.orders.*pyarrow Table"),
    # overwrites
    Case("overwrite spelled as a string", _write(orders([1]), overwrite="everything"), ArgumentTypeError,
         r"overwrite of table db\.orders must be"),
    Case("overwrite naming a non-partition column", _write(orders([1]), overwrite={"status": "PAID"}),
         SchemaMismatchError, r"not a partition key of table db\.orders"),
    Case("overwrite with rows of another partition",
         _write(orders([1], dt="2024-02-02"), overwrite={"dt": "2024-01-01"}),
         SchemaMismatchError, r"db\.orders got rows of partition"),
    # options
    Case("bucket not a number", _create(options={"bucket": "many"}), InvalidOptionError,
         r"db\.x.*bucket='many'"),
    Case("unknown merge engine", _create(primary_keys=["order_id"], options={"merge-engine": "best"}),
         InvalidOptionError, r"db\.x.*merge-engine"),
    Case("duration that is not one", _create(options={"snapshot.time-retained": "forever"}),
         InvalidOptionError, r"db\.x.*snapshot\.time-retained.*'forever'"),
    Case("count that is not one", _create(options={"snapshot.num-retained.min": "ten"}),
         InvalidOptionError, r"db\.x.*snapshot\.num-retained\.min.*'ten'"),
    Case("unknown compression", _create(options={"file.compression": "zip9"}), InvalidOptionError,
         r"db\.x.*file\.compression.*'zip9'"),
    Case("unknown compression set later", lambda c, t: t.set_options({"file.compression": "zip9"}),
         InvalidOptionError, r"db\.orders.*file\.compression.*'zip9'"),
    Case("primary key given twice", _create(primary_keys=["order_id"], options={"primary-key": "user_id"}),
         InvalidOptionError, r"db\.x.*primary-key"),
    Case("partition given twice", _create(partition_keys=["dt"], options={"partition": "status"}),
         InvalidOptionError, r"db\.x.*partition"),
    Case("keys declared by setting an option", lambda c, t: t.set_options({"primary-key": "user_id"}),
         SchemaMismatchError, r"db\.orders.*declare keys"),
    Case("data file prefix climbing out", _create(options={"data-file.prefix": "../../../../outside-"}),
         InvalidOptionError, r"db\.x.*data-file\.prefix.*'/'"),
    Case("changelog prefix climbing out", lambda c, t: t.set_options({"changelog-file.prefix": "../x-"}),
         InvalidOptionError, r"db\.orders.*changelog-file\.prefix.*'/'"),
    Case("bucket key of an unknown column", _create(options={"bucket": "2", "bucket-key": "nope"}),
         InvalidOptionError, r"db\.x.*bucket-key.*nope"),
    # reads
    Case("filter given as a string", lambda c, t: t.read(filter="order_id > 1"), ArgumentTypeError,
         r"db\.orders.*col\("),
    Case("filter on an unknown column", lambda c, t: t.read(filter=col("nope") == 1), SchemaMismatchError,
         r"db\.orders.*unknown column 'nope'"),
    Case("unknown column to read", lambda c, t: t.read(columns=["nope"]), SchemaMismatchError,
         r"db\.orders has no columns \['nope'\]"),
    Case("snapshot id and tag at once", lambda c, t: t.read(snapshot_id=1, tag="first"),
         InvalidArgumentError, r"db\.orders.*at most one"),
    Case("snapshot id that is a path", lambda c, t: t.read(snapshot_id="1/../1"), ArgumentTypeError,
         r"db\.orders.*snapshot_id must be an integer"),
    Case("snapshot that never existed", lambda c, t: t.read(snapshot_id=99), SnapshotNotFoundError,
         r"db\.orders.*99"),
    Case("expired snapshot", lambda c, t: t.read(snapshot_id=1), SnapshotNotFoundError, r"db\.orders.*1",
         prepare=_expire_first),
    Case("unknown tag", lambda c, t: t.read(tag="nope"), SnapshotNotFoundError, r"db\.orders.*nope"),
    Case("tag name climbing out", lambda c, t: t.read(tag="../../x"), InvalidArgumentError,
         r"db\.orders.*tag name"),
    # catalog and names
    Case("unknown table", lambda c, t: c.get_table("db.nope"), TableNotFoundError, r"db\.nope.*create"),
    Case("unknown database", lambda c, t: c.get_table("nodb.orders"), TableNotFoundError,
         r"nodb\.orders.*no database 'nodb'.*create"),
    Case("dropped table", lambda c, t: c.get_table("db.orders").read(), TableNotFoundError, r"db\.orders",
         prepare=_drop),
    Case("table created twice", lambda c, t: c.create_table("db.orders", ORDERS), TableExistsError,
         r"db\.orders"),
    Case("table name climbing out", lambda c, t: c.create_table("db.../x", ORDERS), InvalidArgumentError,
         r"\.\./x"),
    Case("table name with a slash", lambda c, t: c.create_table("db.a/b", ORDERS), InvalidArgumentError,
         r"a/b"),
    Case("table name missing", lambda c, t: c.create_table("db.", ORDERS), InvalidArgumentError, r"db\."),
    Case("database name with a newline", lambda c, t: c.create_database("db\n"), InvalidArgumentError,
         r"letters, digits"),
    Case("database named sys", lambda c, t: c.create_database("sys"), InvalidArgumentError,
         r"'sys'.*reserved"),
    Case("system database as a table", lambda c, t: c.get_table("sys"), TableNotFoundError,
         r"no system table sys.*all_table_options"),
    Case("tag name too long", lambda c, t: t.create_tag("t" * 300), InvalidArgumentError,
         r"db\.orders.*tag name"),
    Case("tag created twice", lambda c, t: t.create_tag("first"), TagExistsError, r"db\.orders.*first"),
    Case("partition value too long", _write(orders([1], dt="d" * 300)), InvalidArgumentError,
         r"db\.orders.*partition column 'dt'"),
    Case("consumer id too long", lambda c, t: t.read_changes(0, consumer_id="c" * 300), InvalidArgumentError,
         r"db\.orders.*consumer id"),
    # schema changes
    Case("add an existing column", lambda c, t: t.add_column("status", pa.string()), SchemaMismatchError,
         r"db\.orders.*status"),
    Case("add a reserved column", lambda c, t: t.add_column("_KEY_order_id", pa.int64()),
         SchemaMismatchError, r"db\.orders.*'_KEY_order_id' is reserved"),
    Case("create with a reserved column",
         lambda c, t: c.create_table("db.x", pa.schema([("_SEQUENCE_NUMBER", pa.int64())])),
         SchemaMismatchError, r"db\.x.*reserved"),
    Case("rename to nothing", lambda c, t: t.rename_column("status", ""), SchemaMismatchError,
         r"db\.orders.*empty"),
    Case("rename to the row kind column", lambda c, t: t.rename_column("status", "_row_kind"),
         SchemaMismatchError, r"db\.orders.*'_row_kind' is reserved"),
    Case("drop a primary key column", lambda c, t: t.drop_column("order_id"), SchemaMismatchError,
         r"db\.orders.*order_id"),
    Case("narrowing type change", lambda c, t: t.alter_column_type("status", pa.int32()),
         SchemaMismatchError, r"db\.orders.*status"),
    # maintenance and two-phase commits
    Case("commit of something that is not a message", lambda c, t: t.new_commit().commit(["not a message"]),
         ArgumentTypeError, r"commit to table db\.orders takes the commit messages"),
    Case("retain nothing", lambda c, t: t.expire_snapshots(retain_min=0), InvalidArgumentError,
         r"db\.orders.*retain"),
    Case("orphans younger than now", lambda c, t: t.remove_orphan_files(older_than_ms=2**62),
         InvalidArgumentError, r"db\.orders.*past"),
    Case("roll back to a snapshot that never was", lambda c, t: t.rollback_to(snapshot_id=99),
         SnapshotNotFoundError, r"db\.orders.*99"),
    Case("cluster a primary-key table", lambda c, t: t.sort_compact(["price"], strategy="zorder"),
         UnsupportedFeatureError, r"db\.orders.*primary-key table.*bucket-unaware append"),
    Case("cluster by an unknown column", lambda c, t: t.sort_compact(["nope"], strategy="order"),
         SchemaMismatchError, r"db\.orders.*no column 'nope'", table="append"),
    Case("cluster along an unknown curve", lambda c, t: t.sort_compact(["price"], strategy="spiral"),
         InvalidArgumentError, r"db\.orders.*unknown strategy 'spiral'", table="append"),
    # damaged files
    Case("truncated snapshot", lambda c, t: t.read(), CorruptFileError, r"snapshot-2",
         prepare=_truncate(_snapshot(2))),
    Case("snapshot of garbage", lambda c, t: t.read(), CorruptFileError, r"snapshot-2",
         prepare=_overwrite(_snapshot(2), b"\x00\x01garbage")),
    Case("truncated manifest list", lambda c, t: t.read(), CorruptFileError, r"manifest-list",
         prepare=_truncate(_latest_list)),
    Case("truncated manifest", lambda c, t: t.read(), CorruptFileError, r"manifest-",
         prepare=_truncate(_latest_manifest)),
    Case("missing manifest", lambda c, t: t.read(), CorruptFileError, r"manifest-.*missing",
         prepare=_delete(_latest_manifest)),
    Case("truncated data file", lambda c, t: t.read(), CorruptFileError, r"data-.*\.parquet",
         prepare=_truncate(_a_data_file)),
    Case("missing data file", lambda c, t: t.read(), CorruptFileError, r"data-.*\.parquet",
         prepare=_delete(_a_data_file)),
    Case("truncated deletion vectors", lambda c, t: t.read(), CorruptFileError, r"index-", table="dv",
         prepare=_truncate(_an_index_file("DELETION_VECTORS"))),
    Case("truncated hash index", _write(orders(range(100, 110))), CorruptFileError, r"index-",
         table="dynamic", prepare=_truncate(_an_index_file("HASH"))),
    Case("schema file of garbage", lambda c, t: _reopened(t).read(), CorruptFileError, r"schema-0",
         prepare=_overwrite(_schema_file, b"{not json")),
    Case("schema file that is not UTF-8", lambda c, t: _reopened(t).read(), CorruptFileError, r"schema-0",
         prepare=_overwrite(_schema_file, b"\xff\xfe")),
    Case("schema field without a type", lambda c, t: _reopened(t).read(), CorruptFileError, r"schema-0",
         prepare=_edit_schema(lambda s: s["fields"][0].pop("type"))),
    Case("LATEST hint of garbage, then a bad call", lambda c, t: t.read(snapshot_id=99),
         SnapshotNotFoundError, r"db\.orders.*99",
         prepare=_overwrite(lambda t: os.path.join(t.paths.snapshot_dir, "LATEST"), b"zz")),
]  # fmt: skip
