"""Paimon data types: their JSON/SQL spelling in schema files and their Arrow equivalents.

Atomic types serialize as their SQL string (``"DECIMAL(10, 2) NOT NULL"``); ARRAY, MAP, MULTISET
and ROW serialize as JSON objects, as ``org.apache.paimon.types.DataTypeJsonParser`` reads them.

Types of a newer Paimon (VARIANT, BLOB, VECTOR, or any other well-formed name) load as a
:class:`NewerType` that keeps its spelling, so the table opens, its other columns read, and schema
changes write the type back unchanged. Two of them read as Paimon lays them out in Parquet:
VARIANT as ``struct<value: binary, metadata: binary>`` (its binary encoding, as pypaimon returns
it) and VECTOR as a fixed-size list; the rest raise :class:`UnsupportedFeatureError` when their
column is read. No newer type is written.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import Field, dataclass, field, replace
from typing import Any, ClassVar, Literal

import pyarrow as pa

from lakehouse.errors import InvalidArgumentError, UnsupportedFeatureError
from lakehouse.options import TYPE

MAX_LENGTH = 2**31 - 1  # VARCHAR/VARBINARY length of STRING/BYTES
MAX_DECIMAL_PRECISION = 38  # Paimon's DecimalType.MAX_PRECISION
MAX_TIME_PRECISION = 9  # TIME and TIMESTAMP: up to nanoseconds

# Roots of atomic types, named as in org.apache.paimon.types.DataTypeRoot where it matters.
INTEGER_ROOTS = ("TINYINT", "SMALLINT", "INT", "BIGINT")
STRING_ROOTS = ("CHAR", "VARCHAR")
BINARY_ROOTS = ("BINARY", "VARBINARY")
TIMESTAMP_ROOTS = ("TIMESTAMP", "TIMESTAMP_LTZ")


class DataType:
    """A Paimon data type; concrete types are the frozen dataclasses below."""

    nullable: bool
    __dataclass_fields__: ClassVar[dict[str, Field[Any]]]  # every concrete type is a dataclass

    @property
    def root(self) -> str:
        raise NotImplementedError

    def copy(self, nullable: bool) -> DataType:
        return replace(self, nullable=nullable)

    def to_json(self) -> Any:
        """The value this type has in a schema file (string or object)."""
        raise NotImplementedError

    def _null_suffix(self) -> str:
        return "" if self.nullable else " NOT NULL"


@dataclass(frozen=True)
class AtomicType(DataType):
    """A non-nested type. ``length`` for CHAR/VARCHAR/BINARY/VARBINARY, ``precision``/``scale``
    for DECIMAL, ``precision`` for TIME/TIMESTAMP/TIMESTAMP_LTZ."""

    name: str
    nullable: bool = True
    length: int | None = None
    precision: int | None = None
    scale: int | None = None

    @property
    def root(self) -> str:
        return self.name

    def __str__(self) -> str:
        n = self.name
        if n == "VARCHAR" and self.length == MAX_LENGTH:
            body = "STRING"
        elif n == "VARBINARY" and self.length == MAX_LENGTH:
            body = "BYTES"
        elif n in STRING_ROOTS or n in BINARY_ROOTS:
            body = f"{n}({self.length})"
        elif n == "DECIMAL":
            body = f"DECIMAL({self.precision}, {self.scale})"
        elif n in ("TIME", "TIMESTAMP"):
            body = f"{n}({self.precision})"
        elif n == "TIMESTAMP_LTZ":
            body = f"TIMESTAMP({self.precision}) WITH LOCAL TIME ZONE"
        else:
            body = n
        return body + self._null_suffix()

    def to_json(self) -> str:
        return str(self)


@dataclass(frozen=True)
class ArrayType(DataType):
    element: DataType
    nullable: bool = True

    @property
    def root(self) -> str:
        return "ARRAY"

    def __str__(self) -> str:
        return f"ARRAY<{self.element}>{self._null_suffix()}"

    def to_json(self) -> dict[str, Any]:
        return {"type": "ARRAY" + self._null_suffix(), "element": self.element.to_json()}


@dataclass(frozen=True)
class MultisetType(DataType):
    element: DataType
    nullable: bool = True

    @property
    def root(self) -> str:
        return "MULTISET"

    def __str__(self) -> str:
        return f"MULTISET<{self.element}>{self._null_suffix()}"

    def to_json(self) -> dict[str, Any]:
        return {"type": "MULTISET" + self._null_suffix(), "element": self.element.to_json()}


@dataclass(frozen=True)
class MapType(DataType):
    key: DataType
    value: DataType
    nullable: bool = True

    @property
    def root(self) -> str:
        return "MAP"

    def __str__(self) -> str:
        return f"MAP<{self.key}, {self.value}>{self._null_suffix()}"

    def to_json(self) -> dict[str, Any]:
        return {
            "type": "MAP" + self._null_suffix(),
            "key": self.key.to_json(),
            "value": self.value.to_json(),
        }


@dataclass(frozen=True)
class DataField:
    """A column: its permanent id (what schema evolution matches on), name and type."""

    id: int
    name: str
    type: DataType
    description: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "name": self.name, "type": self.type.to_json()}
        if self.description is not None:
            out["description"] = self.description
        return out

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> DataField:
        return cls(obj["id"], obj["name"], parse_type(obj["type"]), obj.get("description"))

    def __str__(self) -> str:
        return f"{self.name} {self.type}"


@dataclass(frozen=True)
class RowType(DataType):
    fields: tuple[DataField, ...] = field(default_factory=tuple)
    nullable: bool = True

    @property
    def root(self) -> str:
        return "ROW"

    def __str__(self) -> str:
        return f"ROW<{', '.join(str(f) for f in self.fields)}>{self._null_suffix()}"

    def to_json(self) -> dict[str, Any]:
        return {"type": "ROW" + self._null_suffix(), "fields": [f.to_json() for f in self.fields]}


@dataclass(frozen=True)
class NewerType(DataType):
    """A type of a newer Paimon than this engine, kept as spelled in the schema file."""

    name: str
    spelling: Any = field(compare=False)  # the schema file's value: a string or an object
    nullable: bool = True

    @property
    def root(self) -> str:
        return self.name

    def __str__(self) -> str:
        if isinstance(self.spelling, str):
            return self.spelling
        return f"{self.name}{self._null_suffix()}"

    def copy(self, nullable: bool) -> DataType:
        spelling, suffix = self.spelling, "" if nullable else " NOT NULL"
        if isinstance(spelling, str):
            spelling = re.sub(r"\s+NOT\s+NULL\s*$", "", spelling) + suffix
        else:
            spelling = {**spelling, "type": re.sub(r"\s+NOT\s+NULL\s*$", "", spelling["type"]) + suffix}
            if "nullable" in self.spelling:
                spelling["nullable"] = nullable
        return NewerType(self.name, spelling, nullable)

    def to_json(self) -> Any:
        return self.spelling

    @property
    def readable(self) -> bool:
        """Whether values read as Paimon stores them in Parquet (VARIANT, VECTOR)."""
        return self.name in ("VARIANT", "VECTOR")


VARIANT_ARROW = pa.struct(
    [pa.field("value", pa.binary(), nullable=False), pa.field("metadata", pa.binary(), nullable=False)]
)


def unsupported(dtype: DataType) -> NewerType | None:
    """The newer type ``dtype`` is or holds (None: every part of it is known)."""
    if isinstance(dtype, NewerType):
        return dtype
    if isinstance(dtype, ArrayType | MultisetType):
        return unsupported(dtype.element)
    if isinstance(dtype, MapType):
        return unsupported(dtype.key) or unsupported(dtype.value)
    if isinstance(dtype, RowType):
        return next((found for f in dtype.fields if (found := unsupported(f.type))), None)
    return None


def type_param(dtype: DataType, name: Literal["length", "precision", "scale"]) -> int:
    """The ``length``, ``precision`` or ``scale`` that ``dtype``'s root requires (a parsed type has
    it): of a CHAR or BINARY, a DECIMAL, TIME or TIMESTAMP."""
    value = getattr(dtype, name, None) if isinstance(dtype, AtomicType) else None
    if value is None:
        raise InvalidArgumentError(f"{dtype.root} needs a {name}, e.g. AtomicType({dtype.root!r}, {name}=6)")
    return int(value)


# ---- constructors -------------------------------------------------------------------------


def atomic(name: str, nullable: bool = True, **params: int) -> AtomicType:
    return AtomicType(name, nullable, **params)


STRING = AtomicType("VARCHAR", length=MAX_LENGTH)
BYTES = AtomicType("VARBINARY", length=MAX_LENGTH)
BIGINT = AtomicType("BIGINT")
INT = AtomicType("INT")
TINYINT = AtomicType("TINYINT")


# ---- parsing ------------------------------------------------------------------------------

_ATOMIC = re.compile(
    r"^(?P<name>[A-Z_]+(?: PRECISION)?)\s*(?:\(\s*(?P<a>\d+)\s*(?:,\s*(?P<b>\d+)\s*)?\))?"
    r"(?P<ltz>\s+WITH(?:OUT)?\s+(?:LOCAL\s+)?TIME\s+ZONE)?(?P<nn>\s+NOT\s+NULL)?(?:\s+NULL)?$"
)
_SIMPLE = {
    "BOOLEAN": "BOOLEAN",
    "TINYINT": "TINYINT",
    "SMALLINT": "SMALLINT",
    "INT": "INT",
    "INTEGER": "INT",
    "BIGINT": "BIGINT",
    "FLOAT": "FLOAT",
    "DOUBLE": "DOUBLE",
    "DOUBLE PRECISION": "DOUBLE",
    "DATE": "DATE",
}


_NEWER = re.compile(r"^\s*(?P<name>[A-Z][A-Z0-9_]*)\b[^{}]*$")


def parse_type(value: Any) -> DataType:
    """Parse a type as it appears in a Paimon schema file (SQL string or JSON object); a
    well-formed type this engine does not know parses as a :class:`NewerType`."""
    if isinstance(value, str):
        try:
            return _parse_atomic(value)
        except InvalidArgumentError:
            raise  # a type this engine knows, with parameters out of range
        except ValueError:
            return _newer(value, value) or _raise_unparsable(value)
    if isinstance(value, dict) and isinstance(value.get(TYPE), str):
        kind = value["type"]
        nullable = "NOT NULL" not in kind
        if kind.startswith("ARRAY"):
            return ArrayType(parse_type(value["element"]), nullable)
        if kind.startswith("MULTISET"):
            return MultisetType(parse_type(value["element"]), nullable)
        if kind.startswith("MAP"):
            return MapType(parse_type(value["key"]), parse_type(value["value"]), nullable)
        if kind.startswith("ROW"):
            fields = tuple(DataField.from_json(f) for f in value["fields"])
            return RowType(fields, nullable)
        return _newer(kind, value) or _raise_unparsable(value)
    return _raise_unparsable(value)


def _newer(text: str, spelling: Any) -> NewerType | None:
    match = _NEWER.match(text.upper())
    if match is None or match["name"] in _SIMPLE or match["name"] in ("ARRAY", "MAP", "MULTISET", "ROW"):
        return None
    return NewerType(match["name"], spelling, "NOT NULL" not in text.upper())


def _raise_unparsable(value: Any) -> DataType:
    raise ValueError(f"cannot parse Paimon data type {value!r}")


def _parse_atomic(text: str) -> AtomicType:
    m = _ATOMIC.match(text.strip().upper())
    if not m:
        raise ValueError(f"cannot parse Paimon data type {text!r}")
    name, a, b = m["name"], m["a"], m["b"]
    nullable = m["nn"] is None
    if m["ltz"] and "WITHOUT" not in m["ltz"]:
        if name != "TIMESTAMP":
            raise ValueError(f"cannot parse Paimon data type {text!r}")
        name = "TIMESTAMP_LTZ"
    if name in _SIMPLE:
        return AtomicType(_SIMPLE[name], nullable)
    if name == "STRING":
        return AtomicType("VARCHAR", nullable, length=MAX_LENGTH)
    if name == "BYTES":
        return AtomicType("VARBINARY", nullable, length=MAX_LENGTH)
    if name in STRING_ROOTS or name in BINARY_ROOTS:
        return AtomicType(name, nullable, length=_within(text, "length", a, 1, 1, MAX_LENGTH))
    if name in ("DECIMAL", "NUMERIC", "DEC"):
        precision = _within(text, "precision", a, 10, 1, MAX_DECIMAL_PRECISION)
        return AtomicType(
            "DECIMAL", nullable, precision=precision, scale=_within(text, "scale", b, 0, 0, precision)
        )
    if name == "TIME" or name in TIMESTAMP_ROOTS:
        default = 0 if name == "TIME" else 6
        return AtomicType(
            name, nullable, precision=_within(text, "precision", a, default, 0, MAX_TIME_PRECISION)
        )
    raise ValueError(f"unsupported Paimon data type {text!r}")


def _within(text: str, what: str, given: str | None, default: int, low: int, high: int) -> int:
    """A type's parameter, ``default`` when not given, refused outside ``low..high`` as Paimon does."""
    value = int(given) if given else default
    if not low <= value <= high:
        raise InvalidArgumentError(f"type {text!r}: its {what} must be between {low} and {high}")
    return value


# ---- field ids ----------------------------------------------------------------------------


def assign_ids(dtype: DataType, next_id: Iterator[int]) -> DataType:
    """Give nested ROW fields fresh ids, in the order ``ReassignFieldId`` does (inner first)."""
    if isinstance(dtype, ArrayType):
        return ArrayType(assign_ids(dtype.element, next_id), dtype.nullable)
    if isinstance(dtype, MultisetType):
        return MultisetType(assign_ids(dtype.element, next_id), dtype.nullable)
    if isinstance(dtype, MapType):
        return MapType(assign_ids(dtype.key, next_id), assign_ids(dtype.value, next_id), dtype.nullable)
    if isinstance(dtype, RowType):
        fields = []
        for f in dtype.fields:
            inner = assign_ids(f.type, next_id)
            fields.append(DataField(next(next_id), f.name, inner, f.description))
        return RowType(tuple(fields), dtype.nullable)
    return dtype


def max_field_id(dtype: DataType) -> int:
    """Highest field id used inside a type (-1 when it has no nested fields)."""
    if isinstance(dtype, ArrayType | MultisetType):
        return max_field_id(dtype.element)
    if isinstance(dtype, MapType):
        return max(max_field_id(dtype.key), max_field_id(dtype.value))
    if isinstance(dtype, RowType):
        return max((max(f.id, max_field_id(f.type)) for f in dtype.fields), default=-1)
    return -1


# ---- Arrow --------------------------------------------------------------------------------

_ARROW_SIMPLE = {
    "BOOLEAN": pa.bool_(),
    "TINYINT": pa.int8(),
    "SMALLINT": pa.int16(),
    "INT": pa.int32(),
    "BIGINT": pa.int64(),
    "FLOAT": pa.float32(),
    "DOUBLE": pa.float64(),
    "DATE": pa.date32(),
}


def timestamp_unit(precision: int) -> str:
    """Arrow unit that holds a TIMESTAMP(p)/TIME(p) exactly."""
    return "s" if precision == 0 else "ms" if precision <= 3 else "us" if precision <= 6 else "ns"


def to_arrow(dtype: DataType) -> pa.DataType:
    """The Arrow type that stores values of ``dtype``."""
    if isinstance(dtype, AtomicType):
        n = dtype.name
        if n in _ARROW_SIMPLE:
            return _ARROW_SIMPLE[n]
        if n in STRING_ROOTS:
            return pa.string()
        if n in BINARY_ROOTS:
            return pa.binary()
        if n == "DECIMAL":
            return pa.decimal128(dtype.precision, dtype.scale)
        if n == "TIME":
            return pa.time32("ms")  # Paimon keeps TIME as int millis of day at every precision
        if n == "TIMESTAMP":
            return pa.timestamp(timestamp_unit(type_param(dtype, "precision")))
        if n == "TIMESTAMP_LTZ":
            return pa.timestamp(timestamp_unit(type_param(dtype, "precision")), tz="UTC")
    if isinstance(dtype, ArrayType):
        return pa.list_(arrow_field("element", dtype.element))
    if isinstance(dtype, MultisetType):
        return pa.map_(arrow_field("key", dtype.element.copy(False)), pa.field("value", pa.int32(), False))
    if isinstance(dtype, MapType):
        return pa.map_(arrow_field("key", dtype.key.copy(False)), arrow_field("value", dtype.value))
    if isinstance(dtype, RowType):
        return pa.struct([arrow_field(f.name, f.type) for f in dtype.fields])
    if isinstance(dtype, NewerType) and dtype.name == "VARIANT":
        return VARIANT_ARROW
    if isinstance(dtype, NewerType) and dtype.name == "VECTOR" and isinstance(dtype.spelling, dict):
        return pa.list_(to_arrow(parse_type(dtype.spelling["element"])), int(dtype.spelling["length"]))
    if isinstance(dtype, NewerType):
        raise UnsupportedFeatureError(
            f"Paimon type {dtype} is newer than this engine, which cannot read or write its values"
        )
    raise ValueError(f"no Arrow type for {dtype}")


def arrow_field(name: str, dtype: DataType) -> pa.Field:
    return pa.field(name, to_arrow(dtype), nullable=dtype.nullable)


def arrow_schema(fields: list[DataField] | tuple[DataField, ...]) -> pa.Schema:
    return pa.schema([arrow_field(f.name, f.type) for f in fields])


PAIMON_TYPE_KEY = b"paimon.type"


def from_arrow_field(f: pa.Field) -> DataType:
    """The Paimon type of an Arrow field; field metadata ``paimon.type`` (e.g. ``CHAR(10)``)
    names a type Arrow cannot express, and must store as the field's Arrow type."""
    declared = (f.metadata or {}).get(PAIMON_TYPE_KEY)
    if declared is None:
        return from_arrow(f.type, f.nullable)
    dtype = parse_type(declared.decode())
    if to_arrow(dtype) != to_arrow(from_arrow(f.type)):
        raise ValueError(f"paimon.type {dtype} is stored as {to_arrow(dtype)}, not as {f.type}")
    return dtype.copy(f.nullable and dtype.nullable)


def from_arrow(atype: pa.DataType, nullable: bool = True) -> DataType:
    """The Paimon type for an Arrow type; raises ValueError for types Paimon cannot store."""
    t = pa.types
    for name, candidate in _ARROW_SIMPLE.items():
        if atype == candidate:
            return AtomicType(name, nullable)
    if t.is_uint8(atype):
        return AtomicType("SMALLINT", nullable)
    if t.is_uint16(atype):
        return AtomicType("INT", nullable)
    if t.is_uint32(atype):
        return AtomicType("BIGINT", nullable)
    if t.is_float16(atype):
        return AtomicType("FLOAT", nullable)
    if t.is_string(atype) or t.is_large_string(atype) or t.is_string_view(atype):
        return AtomicType("VARCHAR", nullable, length=MAX_LENGTH)
    if t.is_binary(atype) or t.is_large_binary(atype) or t.is_binary_view(atype):
        return AtomicType("VARBINARY", nullable, length=MAX_LENGTH)
    if t.is_fixed_size_binary(atype):
        return AtomicType("BINARY", nullable, length=atype.byte_width)
    if t.is_decimal(atype):
        if atype.precision > 38:
            raise ValueError(f"DECIMAL precision {atype.precision} exceeds Paimon's maximum of 38")
        return AtomicType("DECIMAL", nullable, precision=atype.precision, scale=atype.scale)
    if t.is_date(atype):
        return AtomicType("DATE", nullable)
    if t.is_time(atype):
        return AtomicType("TIME", nullable, precision=_UNIT_PRECISION[atype.unit])
    if t.is_timestamp(atype):
        name = "TIMESTAMP_LTZ" if atype.tz is not None else "TIMESTAMP"
        return AtomicType(name, nullable, precision=_UNIT_PRECISION[atype.unit])
    if t.is_list(atype) or t.is_large_list(atype) or t.is_fixed_size_list(atype):
        vf = atype.value_field
        return ArrayType(from_arrow(vf.type, vf.nullable), nullable)
    if t.is_map(atype):
        return MapType(
            from_arrow(atype.key_type, False),
            from_arrow(atype.item_type, atype.item_field.nullable),
            nullable,
        )
    if t.is_struct(atype):
        fields = tuple(
            DataField(-1, atype.field(i).name, from_arrow(atype.field(i).type, atype.field(i).nullable))
            for i in range(atype.num_fields)
        )
        return RowType(fields, nullable)
    if t.is_dictionary(atype):
        return from_arrow(atype.value_type, nullable)
    raise ValueError(f"Arrow type {atype} has no Paimon equivalent")


_UNIT_PRECISION = {"s": 0, "ms": 3, "us": 6, "ns": 9}
