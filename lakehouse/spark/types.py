"""Paimon types as Spark sees them, and the Arrow layout Spark expects for each.

The mapping follows Paimon's Spark connector (``SparkTypeUtils``): CHAR/VARCHAR are strings,
TIMESTAMP is ``timestamp_ntz``, TIMESTAMP WITH LOCAL TIME ZONE is ``timestamp``, MULTISET is a map
from element to count. Spark keeps microseconds: TIMESTAMP(7..9) values are truncated to them,
and TIME keeps its millisecond values. Nullability is carried over, also inside nested types.
"""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql import types as st
from pyspark.sql.pandas.types import to_arrow_schema

from lakehouse import (
    ArrayType,
    AtomicType,
    DataField,
    DataType,
    MapType,
    MultisetType,
    RowType,
    from_arrow_field,
    type_param,
)
from lakehouse.errors import UnsupportedFeatureError

_ATOMIC = {
    "BOOLEAN": st.BooleanType(),
    "TINYINT": st.ByteType(),
    "SMALLINT": st.ShortType(),
    "INT": st.IntegerType(),
    "BIGINT": st.LongType(),
    "FLOAT": st.FloatType(),
    "DOUBLE": st.DoubleType(),
    "CHAR": st.StringType(),
    "VARCHAR": st.StringType(),
    "BINARY": st.BinaryType(),
    "VARBINARY": st.BinaryType(),
    "DATE": st.DateType(),
    "TIMESTAMP": st.TimestampNTZType(),
    "TIMESTAMP_LTZ": st.TimestampType(),
}
SPARK_TIME_PRECISION = 6  # TimeType holds at most microseconds


def spark_type(dtype: DataType) -> st.DataType:
    """The Spark type of a Paimon type."""
    if isinstance(dtype, AtomicType):
        if dtype.name in _ATOMIC:
            return _ATOMIC[dtype.name]
        if dtype.name == "DECIMAL":
            return st.DecimalType(type_param(dtype, "precision"), type_param(dtype, "scale"))
        if dtype.name == "TIME":
            return st.TimeType(min(type_param(dtype, "precision"), SPARK_TIME_PRECISION))
    elif isinstance(dtype, ArrayType):
        return st.ArrayType(spark_type(dtype.element), dtype.element.nullable)
    elif isinstance(dtype, MultisetType):
        return st.MapType(spark_type(dtype.element), st.IntegerType(), valueContainsNull=False)
    elif isinstance(dtype, MapType):
        return st.MapType(spark_type(dtype.key), spark_type(dtype.value), dtype.value.nullable)
    elif isinstance(dtype, RowType):
        return spark_schema(dtype.fields)
    raise UnsupportedFeatureError(f"Paimon type {dtype} has no Spark equivalent")


def spark_schema(fields: tuple[DataField, ...] | list[DataField]) -> st.StructType:
    """The Spark schema of a table's (or a row type's) fields."""
    out = []
    for f in fields:
        try:
            out.append(st.StructField(f.name, spark_type(f.type), f.type.nullable))
        except UnsupportedFeatureError as e:
            raise UnsupportedFeatureError(f"column {f.name!r}: {e}") from None
    return st.StructType(out)


def spark_schema_of_arrow(schema: pa.Schema) -> st.StructType:
    """The Spark schema of Arrow data (system tables), through the Paimon type of each field."""
    return spark_schema([DataField(i, f.name, from_arrow_field(f)) for i, f in enumerate(schema)])


def arrow_layout(schema: st.StructType) -> pa.Schema:
    """The exact Arrow schema Spark accepts for batches of ``schema`` (timestamps in UTC)."""
    return to_arrow_schema(schema, timezone="UTC")


def to_spark_batches(data: pa.Table, layout: pa.Schema) -> list[pa.RecordBatch]:
    """``data`` cast column by column to ``layout`` (units, time zones, nested nullability)."""
    if data.schema != layout:
        columns = zip(data.columns, layout, strict=True)
        data = pa.Table.from_arrays(
            [c if c.type == f.type else c.cast(f.type, safe=False) for c, f in columns], schema=layout
        )
    return data.to_batches()


def as_nullable(dtype: st.DataType) -> st.DataType:
    """``dtype`` with every level nullable, as Spark's file sources read columns."""
    if isinstance(dtype, st.StructType):
        return st.StructType([st.StructField(f.name, as_nullable(f.dataType), True) for f in dtype.fields])
    if isinstance(dtype, st.ArrayType):
        return st.ArrayType(as_nullable(dtype.elementType), True)
    if isinstance(dtype, st.MapType):
        return st.MapType(as_nullable(dtype.keyType), as_nullable(dtype.valueType), True)
    return dtype
