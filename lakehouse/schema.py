"""Table schemas: the ``schema/schema-N`` JSON files and their evolution.

A schema file is immutable; every change (columns or options) writes ``schema-(N+1)`` with
create-if-absent, retrying on a concurrent change (``org.apache.paimon.schema.SchemaManager``).
Columns keep their field id for life, which is how files written under an old schema are read
under a new one.
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import pyarrow as pa

from lakehouse import json_pretty
from lakehouse.errors import (
    CorruptFileError,
    InvalidOptionError,
    SchemaMismatchError,
    TableExistsError,
    TableNotFoundError,
    UnsupportedFeatureError,
)
from lakehouse.fileindex import options as fileindex_options
from lakehouse.format.iceberg_schema import check_iceberg
from lakehouse.format.parquet import KEY_PREFIX, SEQUENCE_NUMBER, VALUE_KIND
from lakehouse.io.fs import FileIO
from lakehouse.manifest.avro import avro_codec
from lakehouse.options import (
    BUCKET,
    BUCKET_KEY,
    COMMIT_MAX_RETRIES,
    DATA_EVOLUTION_ENABLED,
    DATA_FILE_THIN_MODE,
    DELETION_VECTORS_ENABLED,
    DYNAMIC_PARTITION_OVERWRITE,
    FILE_FORMAT,
    MANIFEST_COMPRESSION,
    MANIFEST_MERGE_MIN_COUNT,
    MANIFEST_TARGET_FILE_SIZE,
    MERGE_ENGINE,
    PARTIAL_UPDATE_REMOVE_RECORD_ON_DELETE,
    PARTITION,
    PRIMARY_KEY,
    PRIMARY_KEY_NULLABLE,
    ROW_TRACKING_ENABLED,
    SEQUENCE_FIELD,
    SOURCE_SPLIT_TARGET_SIZE,
    TARGET_FILE_SIZE,
    TYPE,
    CoreOptions,
    MergeEngineKind,
    canonical_name,
    check_values,
)
from lakehouse.paths import TablePaths
from lakehouse.rowkind import ROW_KIND
from lakehouse.types import (
    AtomicType,
    DataField,
    DataType,
    arrow_schema,
    assign_ids,
    from_arrow_field,
    max_field_id,
    to_arrow,
    type_param,
    unsupported,
)

SCHEMA_VERSION = 3
# Names a user column cannot take: Paimon's system fields (``SpecialFields``) and ROW_KIND.
RESERVED_NAMES = (SEQUENCE_NUMBER, VALUE_KIND, "_LEVEL", "_ROW_ID", ROW_KIND)
KEY_DECLARATIONS = {PRIMARY_KEY: "primary_keys", PARTITION: "partition_keys"}
ROW_ID_OPTIONS = (ROW_TRACKING_ENABLED, DATA_EVOLUTION_ENABLED)


@dataclass(frozen=True)
class TableSchema:
    """One version of a table's schema (``org.apache.paimon.schema.TableSchema``)."""

    id: int
    fields: tuple[DataField, ...]
    highest_field_id: int
    partition_keys: tuple[str, ...] = ()
    primary_keys: tuple[str, ...] = ()
    options: Mapping[str, str] = field(default_factory=dict)
    comment: str | None = None
    time_millis: int = 0
    version: int = SCHEMA_VERSION

    # ---- JSON ----------------------------------------------------------------------------

    def to_json(self) -> str:
        out: dict[str, Any] = {
            "version": self.version,
            "id": self.id,
            "fields": [f.to_json() for f in self.fields],
            "highestFieldId": self.highest_field_id,
            "partitionKeys": list(self.partition_keys),
            "primaryKeys": list(self.primary_keys),
            "options": dict(self.options),
        }
        if self.comment is not None:
            out["comment"] = self.comment
        out["timeMillis"] = self.time_millis
        return json_pretty.dumps(out)

    @classmethod
    def from_json(cls, text: str) -> TableSchema:
        """The schema a JSON text describes; ValueError (or KeyError, TypeError) when it is not a
        table schema's JSON: fields with integer ids and distinct names, keys among them."""
        obj = json.loads(text)
        version = obj.get("version", 1)
        options = {k: str(v) for k, v in obj.get("options", {}).items()}
        if version <= 1:
            options.setdefault(BUCKET, "1")
        if version <= 2:
            options.setdefault(FILE_FORMAT, "orc")
        schema = cls(
            id=obj["id"],
            fields=tuple(DataField.from_json(f) for f in obj["fields"]),
            highest_field_id=obj["highestFieldId"],
            partition_keys=tuple(obj.get("partitionKeys", ())),
            primary_keys=tuple(obj.get("primaryKeys", ())),
            options=options,
            comment=obj.get("comment"),
            time_millis=obj.get("timeMillis", 0),
            version=version,
        )
        names = schema.field_names
        numbers = [schema.id, schema.highest_field_id, version, *(f.id for f in schema.fields)]
        if not all(type(n) is int for n in numbers) or not all(isinstance(n, str) for n in names):
            raise ValueError("an id or a name has the wrong type")
        if len(set(names)) < len(names) or not {*schema.partition_keys, *schema.primary_keys} <= set(names):
            raise ValueError("field names repeat, or a key is no field")
        return schema

    # ---- views ---------------------------------------------------------------------------

    @property
    def field_names(self) -> list[str]:
        return [f.name for f in self.fields]

    def field(self, name: str) -> DataField:
        for f in self.fields:
            if f.name == name:
                return f
        raise KeyError(name)

    def fields_named(self, names: list[str] | tuple[str, ...]) -> list[DataField]:
        return [self.field(n) for n in names]

    @property
    def core_options(self) -> CoreOptions:
        return CoreOptions(self.options)

    @property
    def trimmed_primary_keys(self) -> list[str]:
        """Primary key without the partition keys: the key stored in files and manifests."""
        return [k for k in self.primary_keys if k not in self.partition_keys]

    @property
    def cross_partition_update(self) -> bool:
        """Whether the primary key lacks a partition key, so a key can move between partitions."""
        return bool(self.primary_keys) and any(p not in self.primary_keys for p in self.partition_keys)

    @property
    def bucket_keys(self) -> list[str]:
        """``bucket-key`` if set, else the trimmed primary key (``TableSchema.bucketKeys``)."""
        explicit = self.core_options.names(BUCKET_KEY)
        return explicit or self.trimmed_primary_keys

    @property
    def dynamic_buckets(self) -> bool:
        """Whether keys get their buckets from the dynamic-bucket assigner (``bucket = -1`` with
        a primary key)."""
        return self.core_options.bucket == -1 and bool(self.primary_keys) and not self.cross_partition_update

    @property
    def arrow_schema(self) -> pa.Schema:
        return arrow_schema(self.fields)

    def arrow_types(self) -> dict[str, pa.DataType]:
        """Arrow type of every column that has one (not those of a newer Paimon type it cannot read)."""
        return {f.name: to_arrow(f.type) for f in self.fields if not _unreadable(f.type)}

    def partition_types(self) -> list[DataType]:
        return [f.type for f in self.fields_named(self.partition_keys)]


# ---- creation -------------------------------------------------------------------------------


def new_schema(
    table: str,
    schema: pa.Schema,
    primary_keys: list[str],
    partition_keys: list[str],
    options: Mapping[str, Any],
    comment: str | None = None,
) -> TableSchema:
    """Build and validate schema 0 of a new table from an Arrow schema."""
    counter = itertools.count()
    fields = []
    for f in schema:
        dtype = column_type(table, f.name, f, new=False)
        field_id = next(counter)
        description = (f.metadata or {}).get(b"description")
        fields.append(
            DataField(
                field_id, f.name, assign_ids(dtype, counter), description.decode() if description else None
            )
        )
    return define_schema(table, fields, primary_keys, partition_keys, options, comment)


def define_schema(
    table: str,
    fields: Sequence[DataField],
    primary_keys: list[str],
    partition_keys: list[str],
    options: Mapping[str, Any],
    comment: str | None = None,
) -> TableSchema:
    """Build and validate schema 0 of a new table from its columns, their field ids kept (as a
    REST catalog client sends them; ``SchemaManager.createTable``)."""
    opts = {str(k): option_string(v) for k, v in (options or {}).items()}
    declared = {"primary_keys": list(primary_keys or []), "partition_keys": list(partition_keys or [])}
    for option, argument in KEY_DECLARATIONS.items():
        if option in opts:
            if declared[argument]:
                raise InvalidOptionError(
                    f"table {table}: keys are declared twice, as {argument}={declared[argument]} and as "
                    f"option {option}={opts[option]!r}; declare them one way only"
                )
            declared[argument] = [p.strip() for p in opts.pop(option).split(",") if p.strip()]
    primary_keys, partition_keys = declared["primary_keys"], declared["partition_keys"]
    check_format(opts, table)
    names = [f.name for f in fields]
    for name in names:
        check_column_name(name, table)
    if len(set(names)) != len(names):
        dupes = sorted({n for n in names if names.count(n) > 1})
        raise SchemaMismatchError(f"table {table}: duplicate column names {dupes}")
    ids = [f.id for f in fields]
    if len(set(ids)) != len(ids) or min(ids, default=0) < 0:
        raise SchemaMismatchError(f"table {table}: field ids {ids} must be distinct and not negative")
    for kind, keys in (("primary key", primary_keys), ("partition key", partition_keys)):
        unknown = [k for k in keys if k not in names]
        if unknown:
            raise SchemaMismatchError(f"table {table}: {kind} {unknown} not among the columns {names}")
    if not CoreOptions(opts).get_bool(PRIMARY_KEY_NULLABLE):
        fields = [replace(f, type=f.type.copy(False)) if f.name in primary_keys else f for f in fields]
    highest = max([f.id for f in fields] + [max_field_id(f.type) for f in fields], default=-1)
    result = TableSchema(
        id=0,
        fields=tuple(fields),
        highest_field_id=highest,
        partition_keys=tuple(partition_keys),
        primary_keys=tuple(primary_keys),
        options=opts,
        comment=comment,
        time_millis=int(time.time() * 1000),
    )
    validate(result, table)
    return result


def option_string(value: Any) -> str:
    """An option value as stored (Python's booleans as Paimon's ``true``/``false``)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def check_writable_keys(schema: TableSchema, table: str) -> None:
    """A primary key without every partition key moves rows between partitions (cross-partition
    upsert): Paimon allows it only with dynamic buckets and without ``sequence.field``."""

    if not schema.cross_partition_update:
        return
    pk = list(schema.primary_keys)
    missing = [p for p in schema.partition_keys if p not in pk]
    if schema.core_options.bucket > 0:
        raise SchemaMismatchError(
            f"table {table}: with fixed buckets the primary key {pk} must contain every "
            f"partition key; add {missing} to it, or set 'bucket'='-1' for cross-partition upserts"
        )
    if schema.core_options.names(SEQUENCE_FIELD):
        raise InvalidOptionError(
            f"table {table}: sequence.field cannot order the rows of a cross-partition upsert table "
            f"(its primary key {pk} lacks the partition keys {missing}); remove 'sequence.field' or add "
            f"{missing} to the primary key"
        )


def check_format(options: Mapping[str, str], table: str) -> None:
    """Refuse a ``file.format`` other than Parquet for data this engine would write."""
    fmt = (options.get(FILE_FORMAT) or "parquet").strip().lower()
    if fmt != "parquet":
        raise UnsupportedFeatureError(
            f"table {table}: file.format={fmt!r}: this engine writes Parquet data files only; use "
            f"'parquet', or write the table with Apache Paimon (Java) or pypaimon"
        )


def check_writable(schema: TableSchema, table: str) -> None:
    """Refuse to write a table this engine cannot keep correct for Paimon: data files of another
    format, columns of a newer Paimon type, row tracking or data evolution (row ids it does not
    assign)."""
    check_format(schema.options, table)
    for f in schema.fields:
        newer = unsupported(f.type)
        if newer is not None:
            raise UnsupportedFeatureError(
                f"table {table}: column {f.name!r} has type {newer}, newer than this engine, which does "
                f"not write it; write the table with Apache Paimon (Java) or pypaimon"
            )
    for option in ROW_ID_OPTIONS:
        if schema.core_options.get_bool(option):
            raise UnsupportedFeatureError(
                f"table {table}: {option}=true - this engine does not assign Paimon's row ids, so it "
                f"does not write such tables; write it with Apache Paimon (Java) or pypaimon"
            )


def check_readable(schema: TableSchema, table: str, columns: Iterable[str], filtered: Iterable[str]) -> None:
    """Refuse a read this engine would get wrong: of a data-evolution table (rows merged by row id
    over files), of a column of a newer Paimon type that does not read as it is stored, or a
    filter on any column of a newer type."""
    if schema.core_options.get_bool(DATA_EVOLUTION_ENABLED):
        raise UnsupportedFeatureError(
            f"table {table}: data-evolution.enabled=true - its rows are spread over files merged by row "
            f"id, which this engine does not read; read it with Apache Paimon (Java) or pypaimon"
        )
    filtered = set(filtered)
    for name in dict.fromkeys([*columns, *filtered]):
        newer = unsupported(schema.field(name).type) if name in schema.field_names else None
        if newer is None:
            continue
        if name in filtered or not newer.readable:
            what = "filter on" if name in filtered else "read"
            raise UnsupportedFeatureError(
                f"table {table}: column {name!r} has type {newer}, newer than this engine, which cannot "
                f"{what} it; leave it out (columns=[...]) or use Apache Paimon (Java) or pypaimon"
            )


def _unreadable(dtype: DataType) -> bool:
    newer = unsupported(dtype)
    return newer is not None and not newer.readable


def check_column_name(name: str, table: str) -> None:
    """Refuse a column name that is empty or reserved (:data:`RESERVED_NAMES`, ``_KEY_*``)."""
    if not name or not name.strip():
        raise SchemaMismatchError(f"table {table}: a column needs a name; {name!r} is empty")
    if name in RESERVED_NAMES or name.startswith(KEY_PREFIX):
        raise SchemaMismatchError(
            f"table {table}: column name {name!r} is reserved (Paimon's system fields {RESERVED_NAMES[:4]}, "
            f"'{KEY_PREFIX}*' key copies, and {ROW_KIND!r}, which gives written rows their kind); "
            f"choose another name"
        )


def validate(schema: TableSchema, table: str) -> None:
    """Reject schemas Paimon or this engine cannot serve, with a message saying what to change."""
    check_values(schema.options, table)
    check_iceberg(schema.fields, schema.partition_keys, schema.core_options, table)
    opts = schema.core_options
    try:
        avro_codec(opts.required(MANIFEST_COMPRESSION))
    except InvalidOptionError as e:
        raise InvalidOptionError(f"table {table}: {e}") from None
    pk, parts = list(schema.primary_keys), list(schema.partition_keys)
    if pk and set(pk) == set(parts):
        raise SchemaMismatchError(
            f"table {table}: the primary key {pk} must not equal the partition keys; add a column to the key"
        )
    for name in pk + parts:
        dtype = schema.field(name).type
        if not isinstance(dtype, AtomicType):
            raise SchemaMismatchError(
                f"table {table}: key column {name!r} has nested type {dtype}; keys must be atomic types"
            )
    for name in parts:
        if schema.field(name).type.root in ("BINARY", "VARBINARY"):
            raise SchemaMismatchError(
                f"table {table}: partition column {name!r} is binary, which cannot name a directory"
            )
    bucket = opts.bucket
    bucket_key = opts.names(BUCKET_KEY)
    unknown = [k for k in bucket_key if k not in schema.field_names]
    if unknown:
        raise InvalidOptionError(
            f"table {table}: bucket-key {unknown} names unknown columns; the columns are {schema.field_names}"
        )
    if set(bucket_key) & set(parts):
        raise InvalidOptionError(f"table {table}: bucket-key {bucket_key} must not contain partition keys")
    if pk and bucket_key and not set(bucket_key) <= set(pk):
        raise InvalidOptionError(
            f"table {table}: bucket-key {bucket_key} must be part of the primary key {pk}"
        )
    if bucket == -1 and bucket_key:
        raise InvalidOptionError(
            f"table {table}: bucket-key needs a fixed bucket count; set 'bucket' to N > 0"
        )
    if bucket == 0 or bucket < -1:
        raise InvalidOptionError(f"table {table}: bucket={bucket}; use a positive count or -1")
    if not pk and bucket > 0 and not bucket_key:
        raise InvalidOptionError(
            f"table {table}: a bucketed append table needs 'bucket-key' naming the columns to hash"
        )
    check_writable_keys(schema, table)
    for name in opts.names(SEQUENCE_FIELD):
        if name not in schema.field_names:
            raise InvalidOptionError(f"table {table}: sequence.field names unknown column {name!r}")
    for key in (TARGET_FILE_SIZE, MANIFEST_TARGET_FILE_SIZE, SOURCE_SPLIT_TARGET_SIZE):
        if opts.get(key) is not None:
            opts.memory(key)
    for key in ("bucket", COMMIT_MAX_RETRIES, MANIFEST_MERGE_MIN_COUNT):
        opts.get_int(key)
    for key in (DYNAMIC_PARTITION_OVERWRITE, DATA_FILE_THIN_MODE, PRIMARY_KEY_NULLABLE):
        opts.get_bool(key)
    fileindex_options.validate(schema.options, schema.fields, table)
    if pk and opts.get_bool(DELETION_VECTORS_ENABLED) and opts.merge_engine == MergeEngineKind.FIRST_ROW:
        raise InvalidOptionError(
            f"table {table}: merge-engine first-row never deletes older rows, so it takes no deletion "
            f"vectors; remove 'deletion-vectors.enabled' (first-row tables are read without merging anyway)"
        )
    # the merge engine, changelog producer and automatic tags: lakehouse/table/validation.py


# ---- evolution ------------------------------------------------------------------------------

# Options that cannot change once a table has data (CoreOptions @Immutable, plus bucket).
IMMUTABLE_OPTIONS = (
    BUCKET,
    BUCKET_KEY,
    MERGE_ENGINE,
    PRIMARY_KEY,
    PARTITION,
    TYPE,
    SEQUENCE_FIELD,
    PARTIAL_UPDATE_REMOVE_RECORD_ON_DELETE,
)
_INTEGER_WIDTH = {"TINYINT": 1, "SMALLINT": 2, "INT": 3, "BIGINT": 4}


def is_widening(old: DataType, new: DataType) -> bool:
    """Whether every value of ``old`` is exactly representable in ``new``."""
    if not (isinstance(old, AtomicType) and isinstance(new, AtomicType)):
        return old == new.copy(old.nullable)
    a, b = old.root, new.root
    if a == b:
        if a in ("CHAR", "VARCHAR", "BINARY", "VARBINARY"):
            return type_param(new, "length") >= type_param(old, "length")
        if a == "DECIMAL":
            wider_scale = type_param(new, "scale") >= type_param(old, "scale")
            return wider_scale and _integer_digits(new) >= _integer_digits(old)
        if a in ("TIME", "TIMESTAMP", "TIMESTAMP_LTZ"):
            return type_param(new, "precision") >= type_param(old, "precision")
        return True
    if a in _INTEGER_WIDTH and b in _INTEGER_WIDTH:
        return _INTEGER_WIDTH[b] > _INTEGER_WIDTH[a]
    if a in _INTEGER_WIDTH and b == "DECIMAL":
        digits = {"TINYINT": 3, "SMALLINT": 5, "INT": 10, "BIGINT": 19}[a]
        return _integer_digits(new) >= digits
    if b == "DOUBLE":
        return a in ("TINYINT", "SMALLINT", "INT", "FLOAT")
    if b == "FLOAT":
        return a in ("TINYINT", "SMALLINT")
    if (a, b) in (("CHAR", "VARCHAR"), ("BINARY", "VARBINARY")):
        return type_param(new, "length") >= type_param(old, "length")
    return False


def _integer_digits(decimal: AtomicType) -> int:
    return type_param(decimal, "precision") - type_param(decimal, "scale")


def next_version(base: TableSchema, changed: TableSchema, table: str) -> TableSchema:
    """``changed`` as the schema after ``base``: id + 1, a fresh timestamp, validated."""
    result = replace(changed, id=base.id + 1, time_millis=int(time.time() * 1000), version=SCHEMA_VERSION)
    validate(result, table)
    return result


def set_options(schema: TableSchema, table: str, updates: Mapping[str, Any], has_data: bool) -> TableSchema:
    new = {k: option_string(v) for k, v in updates.items()}
    if FILE_FORMAT in new:
        check_format(new, table)
    declared = [k for k in KEY_DECLARATIONS if k in new]
    if declared:
        raise SchemaMismatchError(
            f"table {table}: options {declared} declare keys, which are fixed when the table is created; "
            f"create a new table with the keys you want and copy the data"
        )
    if has_data:
        for key in IMMUTABLE_OPTIONS:
            if key in new and new[key] != schema.options.get(key):
                raise SchemaMismatchError(
                    f"table {table}: option {key!r} cannot change once the table holds data; "
                    f"create a new table and copy the data"
                )
    return replace(schema, options={**schema.options, **new})


def with_dynamic_options(schema: TableSchema, table: str, options: Mapping[str, Any]) -> TableSchema:
    """``schema`` seen with ``options`` over its own, for one handle of the table and never stored
    (Paimon's dynamic options, ``FileStoreTable.copy``): a read's snapshot or buffer sizes, say.
    Keys and the options fixed at creation (:data:`IMMUTABLE_OPTIONS`) cannot differ."""
    new = {canonical_name(k): option_string(v) for k, v in options.items()}
    fixed = [
        k for k in (*KEY_DECLARATIONS, *IMMUTABLE_OPTIONS) if k in new and new[k] != schema.options.get(k)
    ]
    if fixed:
        raise InvalidOptionError(
            f"table {table}: options {fixed} are fixed when the table is created and cannot be given for "
            f"one read or write; drop them from the options"
        )
    merged = replace(schema, options={**schema.options, **new})
    check_values(merged.options, table)
    return merged


def remove_options(schema: TableSchema, table: str, keys: list[str], has_data: bool) -> TableSchema:
    if has_data:
        fixed = [k for k in keys if k in IMMUTABLE_OPTIONS and k in schema.options]
        if fixed:
            raise SchemaMismatchError(
                f"table {table}: options {fixed} cannot be removed once the table holds data"
            )
    return replace(schema, options={k: v for k, v in schema.options.items() if k not in keys})


def column_type(table: str, name: str, atype: pa.DataType | pa.Field, *, new: bool) -> DataType:
    """The Paimon type a column (``new``: one being added) of Arrow type ``atype`` gets
    (``SchemaMismatchError`` for a type Paimon lacks)."""
    try:
        return from_arrow_field(atype if isinstance(atype, pa.Field) else pa.field(name, atype))
    except ValueError as e:
        raise SchemaMismatchError(f"table {table}, {'new ' if new else ''}column {name!r}: {e}") from None


def add_column(
    schema: TableSchema, table: str, name: str, dtype: DataType, comment: str | None = None
) -> TableSchema:
    check_column_name(name, table)
    if name in schema.field_names:
        raise SchemaMismatchError(f"table {table}: column {name!r} already exists; choose another name")
    if not dtype.nullable:
        raise SchemaMismatchError(
            f"table {table}, new column {name!r}: a new column must be nullable: existing rows have no "
            f"value for it"
        )
    counter = itertools.count(schema.highest_field_id + 1)
    field_id = next(counter)
    dtype = assign_ids(dtype, counter)
    new_field = DataField(field_id, name, dtype, comment)
    highest = max(schema.highest_field_id, field_id, max_field_id(dtype))
    return replace(schema, fields=(*schema.fields, new_field), highest_field_id=highest)


def rename_column(schema: TableSchema, table: str, old: str, new: str) -> TableSchema:
    _require_column(schema, table, old)
    check_column_name(new, table)
    if old in schema.partition_keys:
        raise SchemaMismatchError(f"table {table}: partition column {old!r} cannot be renamed")
    if new in schema.field_names:
        raise SchemaMismatchError(f"table {table}: cannot rename {old!r} to {new!r}, which already exists")
    fields = tuple(replace(f, name=new) if f.name == old else f for f in schema.fields)
    pks = tuple(new if k == old else k for k in schema.primary_keys)
    return replace(
        schema, fields=fields, primary_keys=pks, options=_rename_in_options(schema.options, old, new)
    )


def _rename_in_options(options: Mapping[str, str], old: str, new: str) -> dict[str, str]:
    """Rewrite options that name the column (``fields.<col>.*``, key and index lists)."""

    def names(text: str) -> str:
        return ",".join(new if p.strip() == old else p.strip() for p in text.split(","))

    out = {}
    for key, value in options.items():
        parts = key.split(".")
        if key in (BUCKET_KEY, SEQUENCE_FIELD) or (
            key.startswith("file-index.") and key.endswith(".columns")
        ):
            value = names(value)
        elif parts[0] == "fields" and len(parts) >= 3:
            parts[1] = names(parts[1])
            if key.endswith(".sequence-group"):
                value = names(value)
        elif parts[0] == "file-index" and len(parts) >= 4 and parts[2] == old:
            parts[2] = new
        out[".".join(parts)] = value
    return out


def drop_column(schema: TableSchema, table: str, name: str) -> TableSchema:
    _require_column(schema, table, name)
    if name in schema.partition_keys or name in schema.primary_keys:
        raise SchemaMismatchError(f"table {table}: cannot drop {name!r}, a partition or primary key column")
    if name in schema.core_options.names(BUCKET_KEY):
        raise SchemaMismatchError(f"table {table}: cannot drop {name!r}, a bucket-key column")
    if len(schema.fields) == 1:
        raise SchemaMismatchError(f"table {table}: cannot drop {name!r}, the only column; drop the table")
    return replace(schema, fields=tuple(f for f in schema.fields if f.name != name))


def alter_column_type(schema: TableSchema, table: str, name: str, dtype: DataType) -> TableSchema:
    """The column's type widened to ``dtype`` (its nullability kept)."""
    current = _require_column(schema, table, name)
    if name in schema.partition_keys or name in schema.primary_keys:
        raise SchemaMismatchError(f"table {table}: cannot change the type of key column {name!r}")
    target = dtype.copy(current.type.nullable)
    if not is_widening(current.type, target):
        raise SchemaMismatchError(
            f"table {table}: column {name!r} cannot change from {current.type} to {target} without "
            f"losing information; only widening changes are allowed (e.g. INT -> BIGINT)"
        )
    fields = tuple(replace(f, type=target) if f.name == name else f for f in schema.fields)
    return replace(schema, fields=fields)


def _require_column(schema: TableSchema, table: str, name: str) -> DataField:
    try:
        return schema.field(name)
    except KeyError:
        raise SchemaMismatchError(
            f"table {table} has no column {name!r}; columns are {schema.field_names}"
        ) from None


# ---- storage --------------------------------------------------------------------------------


class SchemaManager:
    """Reads and commits the schema files of one table."""

    def __init__(self, io: FileIO, paths: TablePaths, table: str) -> None:
        self.io = io
        self.paths = paths
        self.table = table

    def schema_ids(self) -> list[int]:
        return self.io.list_numbered(self.paths.schema_dir, "schema-")

    def latest(self) -> TableSchema | None:
        ids = self.schema_ids()
        return self.schema(ids[-1]) if ids else None

    def current(self) -> TableSchema:
        """The latest schema of a table known to exist; TableNotFoundError when it was dropped."""
        latest = self.latest()
        if latest is None:
            raise TableNotFoundError(
                f"table {self.table} has no schema files under {self.paths.schema_dir}: it was dropped; "
                f"create it again or load another table"
            )
        return latest

    def schema(self, schema_id: int) -> TableSchema:
        path = self.paths.schema(schema_id)
        try:
            data = self.io.read_bytes(path)
        except FileNotFoundError:
            raise CorruptFileError(
                f"table {self.table}: schema file {path} is missing; restore it from a backup"
            ) from None
        try:
            return TableSchema.from_json(data.decode("utf-8"))
        except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as e:  # Unicode errors too
            raise CorruptFileError(
                f"table {self.table}: schema file {path} is unreadable ({e}); restore it from a backup"
            ) from None

    def create(self, schema: TableSchema) -> None:
        if not self.io.try_create(self.paths.schema(schema.id), schema.to_json().encode()):
            raise TableExistsError(
                f"table {self.table} already exists (found {self.paths.schema(schema.id)})"
            )

    def commit_change(self, build: Callable[[TableSchema], TableSchema]) -> TableSchema:
        """Write the schema ``build(latest)``, retrying on a concurrent schema change."""
        while True:
            latest = self.current()
            new = build(latest)
            if self.io.try_create(self.paths.schema(new.id), new.to_json().encode()):
                return new
