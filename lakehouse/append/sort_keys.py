"""Sort orders for clustering append tables: lexicographic, z-order and Hilbert curve.

A curve key maps each row's values of the order columns to bytes whose unsigned lexicographic
order is the order of the rows along the curve. Every column first becomes an order-preserving
fixed-width big-endian encoding (``ZOrderByteUtils``): integers, dates and timestamps as 64-bit
values with the sign bit flipped, floating point numbers as their IEEE bits (all bits flipped when
negative, else the sign bit), booleans as ``0x81``/``0x00``, strings and binaries as their first
``zorder.var-length-contribution`` bytes zero-padded; nulls as zero bytes (they sort first).

Z-order interleaves the bits of those encodings (``ZOrderByteUtils.interleaveBits``: a column
that has no bit left at a position is skipped). The Hilbert key takes the first 8 bytes of each
column as an unsigned 64-bit coordinate and computes its index on the 64-bit Hilbert curve with
Skilling's transposition (*Programming the Hilbert curve*, 2004) - Paimon's ``HilbertIndexer``
feeds its 63-bit curve raw signed values instead, which does not preserve order of negatives.
Everything is vectorized over the rows with numpy.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

import numpy as np
import pyarrow as pa

from lakehouse import nulls_first
from lakehouse.errors import InvalidArgumentError, SchemaMismatchError, UnsupportedFeatureError
from lakehouse.options import ZORDER_VAR_LENGTH_CONTRIBUTION, parse_int
from lakehouse.schema import TableSchema

PRIMITIVE_BYTES = 8  # ZOrderByteUtils.PRIMITIVE_BUFFER_SIZE
SIGN = np.uint64(1 << 63)


class SortStrategy(StrEnum):
    """How ``sort_compact`` orders rows (Paimon's ``order_strategy``)."""

    ORDER = "order"
    ZORDER = "zorder"
    HILBERT = "hilbert"


@dataclass(frozen=True)
class SortOrder:
    """Columns and strategy of a clustering, checked against a table's schema."""

    columns: tuple[str, ...]
    strategy: SortStrategy
    var_length: int = PRIMITIVE_BYTES  # bytes a string or binary column contributes to a z-value

    @classmethod
    def of(cls, schema: TableSchema, table: str, order_by: Sequence[str], strategy: str) -> SortOrder:
        """Parse and check ``order_by`` and ``strategy`` for ``table`` (refused before any work)."""
        try:
            kind = SortStrategy(str(strategy).strip().lower())
        except ValueError:
            choices = ", ".join(s.value for s in SortStrategy)
            raise InvalidArgumentError(
                f"sort_compact of table {table}: unknown strategy {strategy!r}; use one of {choices}"
            ) from None
        if isinstance(order_by, str) or not order_by:
            raise InvalidArgumentError(
                f"sort_compact of table {table}: order_by must be a non-empty list of column names, "
                f"not {order_by!r}"
            )
        if kind == SortStrategy.HILBERT and len(order_by) < 2:
            raise InvalidArgumentError(
                f"sort_compact of table {table}: a Hilbert curve needs at least two columns, not "
                f"{list(order_by)}; use strategy 'order' for one column"
            )
        names = schema.field_names
        for column in order_by:
            if column not in names:
                raise SchemaMismatchError(
                    f"sort_compact of table {table}: no column {column!r}; its columns are {list(names)}"
                )
            if column in schema.partition_keys:
                raise InvalidArgumentError(
                    f"sort_compact of table {table}: {column!r} is a partition key, constant within a "
                    f"partition; order by other columns"
                )
        types = schema.arrow_types()
        if kind != SortStrategy.ORDER:
            for column in order_by:
                if not _curve_type(types[column]):
                    raise UnsupportedFeatureError(
                        f"sort_compact of table {table}: column {column!r} ({types[column]}) has no "
                        f"{kind.value} encoding; use numeric, boolean, string, binary, date or time "
                        f"columns, or strategy 'order'"
                    )
        option = schema.core_options.required(ZORDER_VAR_LENGTH_CONTRIBUTION)
        var_length = parse_int(option, ZORDER_VAR_LENGTH_CONTRIBUTION, 1)
        return cls(tuple(order_by), kind, var_length)

    def sort_indices(self, rows: pa.Table) -> np.ndarray:
        """The row positions of ``rows`` in this order (stable)."""
        if self.strategy == SortStrategy.ORDER:
            indices: np.ndarray = nulls_first.sort_indices(rows, self.columns).to_numpy()
            return indices
        columns = [rows.column(c) for c in self.columns]
        if self.strategy == SortStrategy.ZORDER:
            key = z_values([ordered_bytes(c, self.var_length) for c in columns])
        else:
            key = hilbert_index([ordered_uint64(c) for c in columns])
        return sort_bytes(key)


def _curve_type(t: pa.DataType) -> bool:
    return (
        pa.types.is_integer(t)
        or pa.types.is_floating(t)
        or pa.types.is_boolean(t)
        or pa.types.is_temporal(t)
        or pa.types.is_decimal(t)
        or _variable_width(t)
    )


def ordered_bytes(column: pa.Array | pa.ChunkedArray, var_length: int = PRIMITIVE_BYTES) -> np.ndarray:
    """Each value's order-preserving encoding, ``(rows, width)`` uint8: 8 bytes for fixed-width
    types, ``var_length`` for strings and binaries; nulls are zero bytes."""
    array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    t = array.type
    if _variable_width(t):
        return _prefix_bytes(array.cast(pa.large_binary()), var_length)
    return _big_endian(_ordered_words(array))


def ordered_uint64(column: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """Each value's first 8 encoded bytes as an unsigned 64-bit number (order-preserving)."""
    raw = np.ascontiguousarray(ordered_bytes(column, PRIMITIVE_BYTES))
    return raw.view(">u8").reshape(-1).astype(np.uint64)


def _variable_width(t: pa.DataType) -> bool:
    return bool(
        pa.types.is_string(t)
        or pa.types.is_large_string(t)
        or pa.types.is_binary(t)
        or pa.types.is_large_binary(t)
        or pa.types.is_fixed_size_binary(t)
    )


def _ordered_words(array: pa.Array) -> np.ndarray:
    """A fixed-width column as order-preserving uint64 words (``ZOrderByteUtils``), nulls zero."""
    t = array.type
    valid = ~np.asarray(array.is_null(), dtype=bool)
    if pa.types.is_boolean(t):
        words = np.where(np.asarray(array.fill_null(False), dtype=bool), np.uint64(0x81 << 56), np.uint64(0))
    elif pa.types.is_floating(t) or pa.types.is_decimal(t):
        bits = np.asarray(array.cast(pa.float64()).fill_null(0.0), dtype=np.float64).view(np.uint64)
        words = np.where(bits & SIGN, ~bits, bits | SIGN)
    else:  # integers and temporal types by their physical integer
        physical = array.cast(pa.int64()) if pa.types.is_integer(t) else _as_int64(array)
        words = np.asarray(physical.fill_null(0), dtype=np.int64).view(np.uint64) ^ SIGN
    return np.where(valid, words, np.uint64(0))


def _as_int64(array: pa.Array) -> pa.Array:
    """A temporal column's physical integers (days, millis, micros, nanos)."""
    width = array.type.bit_width
    return array.view(pa.int32() if width == 32 else pa.int64()).cast(pa.int64())


def _big_endian(words: np.ndarray) -> np.ndarray:
    return words.astype(">u8").view(np.uint8).reshape(-1, PRIMITIVE_BYTES)


def _prefix_bytes(array: pa.Array, width: int) -> np.ndarray:
    """The first ``width`` bytes of each binary value, zero-padded (nulls all zero)."""
    n = len(array)
    offsets = np.frombuffer(array.buffers()[1], dtype=np.int64)[array.offset : array.offset + n + 1]
    data_buffer = array.buffers()[2]
    data = np.frombuffer(data_buffer, dtype=np.uint8) if data_buffer is not None else np.zeros(0, np.uint8)
    lengths = np.minimum(np.diff(offsets), width)
    lengths[np.asarray(array.is_null(), dtype=bool)] = 0
    take = np.arange(width)[None, :] < lengths[:, None]
    out = np.zeros((n, width), dtype=np.uint8)
    out[take] = data[(offsets[:-1, None] + np.arange(width)[None, :])[take]]
    return out


def interleave_order(widths: Sequence[int]) -> np.ndarray:
    """Positions in the concatenated bit columns (of ``widths`` bits each) in interleaved order:
    bit 0 of every column, then bit 1 of every column that has one, and so on."""
    starts = np.concatenate([[0], np.cumsum(widths)[:-1]]).astype(np.int64)
    order = [starts[c] + b for b in range(max(widths)) for c in range(len(widths)) if b < widths[c]]
    return np.asarray(order, dtype=np.int64)


def interleave_bits(bits: Sequence[np.ndarray]) -> np.ndarray:
    """Interleave per-column bit matrices (``(rows, width)`` of 0/1, most significant first)
    into packed big-endian bytes ``(rows, ceil(total / 8))``."""
    stacked = np.concatenate(bits, axis=1)
    return np.packbits(stacked[:, interleave_order([b.shape[1] for b in bits])], axis=1)


def z_values(encoded: Sequence[np.ndarray]) -> np.ndarray:
    """Z-values of rows from their columns' encodings (``(rows, bytes)`` uint8 each)."""
    if len({e.shape[1] for e in encoded}) == 1 and len(encoded) <= PRIMITIVE_BYTES:
        return _interleave_bytes(encoded)
    return interleave_bits([np.unpackbits(e, axis=1) for e in encoded])


def _interleave_bytes(encoded: Sequence[np.ndarray]) -> np.ndarray:
    """:func:`interleave_bits` for up to 8 columns of equal width, a byte position at a time:
    byte ``i`` of every column spreads (by table) into bytes ``i*k .. i*k+k-1`` of the output."""
    k = len(encoded)
    rows, width = encoded[0].shape
    spread = _spread_table(k)
    out = np.empty((rows, width * k), dtype=np.uint8)
    for i in range(width):
        field = np.zeros(rows, dtype=np.uint64)
        for c, e in enumerate(encoded):
            field |= spread[e[:, i]] >> np.uint64(c)
        out[:, i * k : (i + 1) * k] = _big_endian(field)[:, PRIMITIVE_BYTES - k :]
    return out


def _spread_table(k: int) -> np.ndarray:
    """Each byte value with its bit ``j`` (most significant first) moved to bit ``j*k`` (from the
    top) of an ``8*k``-bit field."""
    values = np.arange(256, dtype=np.uint64)
    table = np.zeros(256, dtype=np.uint64)
    for j in range(8):
        table |= ((values >> np.uint64(7 - j)) & np.uint64(1)) << np.uint64(8 * k - 1 - j * k)
    return table


def hilbert_index(coordinates: Sequence[np.ndarray], bits: int = 64) -> np.ndarray:
    """Hilbert-curve index of each row's point (the low ``bits`` bits of each uint64 coordinate)
    as packed big-endian bytes (Skilling's ``AxestoTranspose``, then the bits interleaved)."""
    x = [np.asarray(c, dtype=np.uint64) & _mask(bits) for c in coordinates]
    n = len(x)
    q = np.uint64(1) << np.uint64(bits - 1)
    while q > 1:  # inverse undo
        p = q - np.uint64(1)
        for i in range(n):
            hit = (x[i] & q) != 0
            if i == 0:
                x[0] = np.where(hit, x[0] ^ p, x[0])
                continue
            t = (x[0] ^ x[i]) & p
            x[0], x[i] = np.where(hit, x[0] ^ p, x[0] ^ t), np.where(hit, x[i], x[i] ^ t)
        q >>= np.uint64(1)
    for i in range(1, n):  # Gray encode
        x[i] = x[i] ^ x[i - 1]
    t = np.zeros_like(x[0])
    q = np.uint64(1) << np.uint64(bits - 1)
    while q > 1:
        t = np.where((x[n - 1] & q) != 0, t ^ (q - np.uint64(1)), t)
        q >>= np.uint64(1)
    if bits % 8 == 0:
        return z_values([_big_endian(xi ^ t)[:, PRIMITIVE_BYTES - bits // 8 :] for xi in x])
    return interleave_bits([np.unpackbits(_big_endian(xi ^ t), axis=1)[:, 64 - bits :] for xi in x])


def _mask(bits: int) -> np.uint64:
    return np.uint64((1 << bits) - 1)


def sort_bytes(keys: np.ndarray) -> np.ndarray:
    """Stable order of rows by their fixed-width byte keys (``(rows, width)`` uint8), unsigned
    lexicographically."""
    rows, width = keys.shape
    words = -(-width // 8)
    padded = np.zeros((rows, words * 8), dtype=np.uint8)
    padded[:, :width] = keys
    as_words = padded.view(">u8").astype(np.uint64)
    return np.lexsort(as_words.T[::-1])
