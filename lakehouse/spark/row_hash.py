"""Routes computed by Spark itself: a :class:`~lakehouse.RowRouter`'s formula in Spark's JVM.

A route hashes BinaryRows. When every field of a row fills its slot with an integer
(:class:`~lakehouse.Slot` ``INT8`` .. ``INT64``: integers, booleans, dates), the row is a fixed
number of 32-bit words - the header (the RowKind byte, then the null bits) and two words per
slot - and its ``hashCode`` is MurmurHash3 over them (as :mod:`lakehouse.murmur` computes it),
which Spark evaluates here as long arithmetic: one projection scrambles every word, then each
projection mixes a few words into the state. A mix refers to the state twice, and Spark keeps a
projection whose output is used more than once apart, so the expressions stay small. Computed in
Spark, a route costs no trip of the key columns through a Python worker and back, as the engine's
Arrow UDF does.

Rows with strings or binaries (a varying number of words), other types, or a column not of the
table's type (a cast here could disagree with the engine's) give ``None``: the caller routes with
the engine's UDF.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import ModuleType

from pyspark.sql import Column, DataFrame
from pyspark.sql import types as st

from lakehouse import ChannelFormula, FixedBucketFormula, HashedField, Slot
from lakehouse.spark.kinds import functions_for
from lakehouse.spark.types import spark_type

MASK = 0xFFFFFFFF  # a word: Murmur's arithmetic is modulo 2^32, here on non-negative longs
SEED, C1, C2 = 42, 0xCC9E2D51, 0x1B873593  # MurmurHashUtils' seed and mixing constants
FINAL = (0x85EBCA6B, 0xC2B2AE35)  # the final avalanche's factors
MAX_FIELDS = 56  # the null bits of the header's two words (after the RowKind byte)
_INTEGERS = (st.BooleanType, st.ByteType, st.ShortType, st.IntegerType, st.LongType, st.DateType)
_STATE = "__lakehouse_hash"  # working columns' prefix, dropped at the end
MIXES = 4  # words mixed into the state per projection (a mix refers to the state twice)


def with_route(df: DataFrame, formula: FixedBucketFormula | ChannelFormula, name: str) -> DataFrame | None:
    """``df`` with column ``name``: each row's route (bucket or assigner channel, as
    ``RowRouter.route``), or None when a field cannot be hashed in Spark."""
    F = functions_for(df)
    types = {f.name: f.dataType for f in df.schema}  # asked once: a Connect client asks the server
    rows = (formula.key,) if isinstance(formula, FixedBucketFormula) else (formula.partition, formula.key)
    if any(
        len(fields) > MAX_FIELDS or not all(_integral(types.get(f.name), f) for f in fields)
        for fields in rows
    ):
        return None
    hashes = [f"{_STATE}{i}" for i in range(len(rows))]
    for fields, hashed in zip(rows, hashes, strict=True):
        df = _with_hash(df, F, [(f, types[f.name]) for f in fields], hashed)
    codes = [_signed(F, F.col(h)) for h in hashes]
    if isinstance(formula, FixedBucketFormula):
        route = F.abs(codes[0] % formula.buckets)
    else:
        start, offset = F.abs(codes[0] % formula.channels), F.abs(codes[1] % formula.assigners)
        route = (start + offset) % formula.channels
    return df.withColumn(name, route.cast("int")).drop(*hashes)


def _integral(given: st.DataType | None, field: HashedField) -> bool:
    """Whether ``field`` fills its slot with an integer and ``df`` holds it in the table's type."""
    integer_slot = field.slot not in (Slot.BYTES, Slot.OTHER)
    return integer_slot and isinstance(given, _INTEGERS) and given == spark_type(field.type)


def _with_hash(
    df: DataFrame, F: ModuleType, fields: Sequence[tuple[HashedField, st.DataType]], name: str
) -> DataFrame:
    """``df`` with column ``name``: the ``BinaryRow.hashCode`` of ``fields`` (each with its Spark
    type), as a word (0 .. 2^32-1)."""
    words = [*_header(F, [f for f, _ in fields]), *(w for f, given in fields for w in _slot(F, f, given))]
    scrambled = [f"{name}_{i}" for i in range(len(words))]
    df = df.withColumns({s: _scrambled(F, w) for s, w in zip(scrambled, words, strict=True)})
    state: Column = F.lit(SEED).cast("long")
    for i, s in enumerate(scrambled):
        state = _mixed(F, state, F.col(s))
        if i % MIXES == MIXES - 1:  # a projection of its own: the next mixes refer to it twice each
            df, state = df.withColumn(name, state), F.col(name)
    state = state.bitwiseXOR(4 * len(words))
    for shift, factor in zip((16, 13), FINAL, strict=True):
        df = df.withColumn(name, _shift_xor(F, state, shift))
        state = _times(F, F.col(name), factor)
    return df.withColumn(name, _shift_xor(F, state, 16)).drop(*scrambled)


def _header(F: ModuleType, fields: Sequence[HashedField]) -> list[Column]:
    """The header's two words: the RowKind byte (+I: 0), then bit ``8 + i`` set for a null field ``i``."""
    words = [F.lit(0).cast("long"), F.lit(0).cast("long")]
    for i, f in enumerate(fields):
        bit = 8 + i
        null = F.when(_column(F, f.name).isNull(), 1 << (bit % 32)).otherwise(0)
        words[bit // 32] = words[bit // 32] + null
    return words


def _slot(F: ModuleType, field: HashedField, given: st.DataType) -> tuple[Column, Column]:
    """A field's slot as two words: the low bytes of its integer, little-endian, zero when null."""
    value = _column(F, field.name)
    number = (F.unix_date(value) if isinstance(given, st.DateType) else value).cast("long")
    assert isinstance(field.slot.value, int)
    if field.slot is not Slot.INT64:
        number = number.bitwiseAND((1 << (8 * field.slot.value)) - 1)
    number = F.coalesce(number, F.lit(0).cast("long"))
    return number.bitwiseAND(MASK), F.shiftright(number, 32).bitwiseAND(MASK)


def _column(F: ModuleType, name: str) -> Column:
    return F.col("`" + name.replace("`", "``") + "`")  # a name, never a path into a struct


def _scrambled(F: ModuleType, word: Column) -> Column:
    """Murmur's ``mixK1``: the word multiplied, rotated, multiplied."""
    return _times(F, _rotated(F, _times(F, word, C1), 15), C2)


def _mixed(F: ModuleType, state: Column, scrambled: Column) -> Column:
    """Murmur's ``mixH1``: a scrambled word into the state."""
    return (_times(F, _rotated(F, state.bitwiseXOR(scrambled), 13), 5) + 0xE6546B64).bitwiseAND(MASK)


def _times(F: ModuleType, word: Column, factor: int) -> Column:
    """``word * factor`` modulo 2^32, in halves of the factor so that no product passes 2^48."""
    low = word * (factor & 0xFFFF)
    if factor >> 16:
        low = low + F.shiftleft((word * (factor >> 16)).bitwiseAND(0xFFFF), 16)
    return low.bitwiseAND(MASK)


def _rotated(F: ModuleType, word: Column, bits: int) -> Column:
    return F.shiftleft(word, bits).bitwiseOR(F.shiftright(word, 32 - bits)).bitwiseAND(MASK)


def _shift_xor(F: ModuleType, word: Column, bits: int) -> Column:
    return word.bitwiseXOR(F.shiftright(word, bits))


def _signed(F: ModuleType, word: Column) -> Column:
    """A word as Java's int (two's complement)."""
    return word - F.shiftleft(F.shiftright(word, 31), 32)
