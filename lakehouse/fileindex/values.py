"""How Paimon's index writers see timestamps: one long per value, whatever the Arrow unit.

``Timestamp.getMillisecond`` for precision up to 3 and ``Timestamp.toMicros`` above (nanoseconds
floored), the value every index type hashes, compares or slices.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from lakehouse.manifest.binary_row import physical_array
from lakehouse.types import DataType, type_param


def timestamp_longs(values: pa.Array, dtype: DataType) -> np.ndarray:
    """Millis (precision <= 3) or micros (above) of each non-null TIMESTAMP / TIMESTAMP_LTZ value."""
    raw = physical_array(values, dtype).to_numpy(zero_copy_only=False).astype(np.int64)
    digits = type_param(dtype, "precision")
    if digits == 0:
        return raw * 1000  # seconds -> millis
    return raw if digits <= 6 else raw // 1000  # nanos -> micros, floored like toMicros
