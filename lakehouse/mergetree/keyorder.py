"""How primary keys compare: as Paimon's key comparators do, so that a key means the same here as
in Java and in pypaimon.

FLOAT and DOUBLE keys follow ``Float.compare`` / ``Double.compare``: every NaN is one key, above
+Infinity, and -0.0 is a key of its own, below 0.0. Arrow's sorts, comparisons and joins take NaN
as unequal to itself and -0.0 as equal to 0.0, so floating-point key columns are compared through
an order-preserving integer image of their bits; every other type compares as Arrow does.
"""

from __future__ import annotations

import struct
from typing import Any

import numpy as np
import pyarrow as pa

from lakehouse.types import DataType

# per width: integer type, the canonical NaN's bits (Float/Double.floatToIntBits), struct format
_WIDTHS: dict[int, tuple[type[np.signedinteger[Any]], int, str, str]] = {
    32: (np.int32, 0x7FC00000, "f", "i"),
    64: (np.int64, 0x7FF8000000000000, "d", "q"),
}


def comparable(column: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
    """``column`` as it compares as a key: an integer image of floating-point values, which
    sorts and equals as Java compares them (nulls stay null); any other column unchanged."""
    if not pa.types.is_floating(column.type):
        return column
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    int_type, nan_bits, _, _ = _WIDTHS[column.type.bit_width]
    values = column.fill_null(0).to_numpy()
    bits = values.view(int_type).copy()
    bits[np.isnan(values)] = nan_bits
    image = bits ^ ((bits >> (bits.dtype.itemsize * 8 - 1)) & np.iinfo(int_type).max)
    return pa.array(
        image, mask=column.is_null().to_numpy(zero_copy_only=False) if column.null_count else None
    )


def comparable_keys(table: pa.Table, key: list[str]) -> pa.Table:
    """The key columns of ``table`` as they compare (see :func:`comparable`)."""
    return pa.table({k: comparable(table.column(k)) for k in key})


def comparable_value(value: Any, bit_width: int | None) -> Any:
    """One key value as it compares: the image of a float of ``bit_width`` bits (None: not a
    floating-point key, returned as it is)."""
    if bit_width is None or value is None:
        return value
    int_type, nan_bits, float_format, int_format = _WIDTHS[bit_width]
    bits = nan_bits if value != value else struct.unpack(int_format, struct.pack(float_format, value))[0]
    return bits ^ (np.iinfo(int_type).max if bits < 0 else 0)


def float_width(dtype: DataType) -> int | None:
    """The bit width of a FLOAT or DOUBLE key type (None: another type)."""
    return {"FLOAT": 32, "DOUBLE": 64}.get(dtype.root)
