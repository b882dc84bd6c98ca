"""Which writer each row goes to when several processes write one table (Spark tasks, say).

A primary-key bucket is an LSM tree whose rows its one writer numbers in arrival order, so every
bucket must reach exactly one writer; a bucketed append table is written with fewer files that
way too. :class:`RowRouter` computes, from a row's key columns alone, what decides its writer:

- ``HASH_FIXED``: its bucket (``abs(hash(bucket key) % N)``, as the engine's writers compute it);
  rows of one (partition, bucket) must meet in one writer;
- ``HASH_DYNAMIC``: its assigner channel ``0 .. writers-1`` (Paimon's
  ``BucketAssigner.computeAssigner``: the partition's hash picks the first channel, the key's hash
  the offset among the assigners); channel ``c``'s rows must reach the writer that writes as
  assigner ``c`` (``WriteJob.task(..., assigner=c)``), which creates and writes only the buckets
  that assigner owns;
- ``KEY_DYNAMIC``: every row to one writer (only it knows where each key lives);
- ``BUCKET_UNAWARE``: anywhere.

:attr:`RowRouter.formula` states what :meth:`RowRouter.route` computes in terms another engine can
evaluate itself (Spark in its JVM, say): the BinaryRows hashed (each field's column, type and
:class:`Slot`), and the arithmetic on their hash codes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from lakehouse.bucket.channels import assigner_channel, assigners_per_partition
from lakehouse.bucket.dynamic import DynamicBucketOptions
from lakehouse.bucket.fixed import java_bucket
from lakehouse.bucket.mode import BucketMode
from lakehouse.errors import InvalidArgumentError
from lakehouse.manifest import binary_row
from lakehouse.manifest.binary_row import Slot
from lakehouse.schema import TableSchema
from lakehouse.types import DataType


@dataclass(frozen=True)
class HashedField:
    """One field of a hashed BinaryRow: the column it is read from, its type, how it fills its slot."""

    name: str
    type: DataType
    slot: Slot


@dataclass(frozen=True)
class FixedBucketFormula:
    """``HASH_FIXED``: a row's route is its bucket, ``abs(h % buckets)`` (Java's truncating ``%``),
    ``h`` the ``BinaryRow.hashCode`` of its ``key`` fields."""

    key: tuple[HashedField, ...]
    buckets: int


@dataclass(frozen=True)
class ChannelFormula:
    """``HASH_DYNAMIC``: a row's route is its assigner channel, ``(abs(p % channels) + abs(k %
    assigners)) % channels`` (Java's ``%``), ``p`` and ``k`` the ``BinaryRow.hashCode`` of its
    ``partition`` and ``key`` fields."""

    partition: tuple[HashedField, ...]
    key: tuple[HashedField, ...]
    channels: int
    assigners: int


class RowRouter:
    """Routes rows of one table to ``writers`` writers (see the module's documentation)."""

    def __init__(self, schema: TableSchema, writers: int) -> None:
        if writers < 1:
            raise InvalidArgumentError(f"a write needs at least one writer, not {writers}")
        self.schema = schema
        self.mode = BucketMode.of(schema)
        self.writers = 1 if self.mode == BucketMode.KEY_DYNAMIC else writers

    @property
    def columns(self) -> list[str]:
        """The columns :meth:`route` takes, in its argument order (none: it routes nothing)."""
        if self.mode == BucketMode.HASH_FIXED:
            return list(self.schema.bucket_keys)
        if self.mode == BucketMode.HASH_DYNAMIC:
            return [*self.schema.partition_keys, *self.schema.trimmed_primary_keys]
        return []

    @property
    def formula(self) -> FixedBucketFormula | ChannelFormula | None:
        """What :meth:`route` computes, as hashes of BinaryRows and arithmetic on them (None: the
        table routes no rows)."""
        if self.mode == BucketMode.HASH_FIXED:
            return FixedBucketFormula(self._hashed(self.schema.bucket_keys), self.schema.core_options.bucket)
        if self.mode == BucketMode.HASH_DYNAMIC:
            initial = DynamicBucketOptions.from_table(self.schema.core_options).initial_buckets
            return ChannelFormula(
                self._hashed(self.schema.partition_keys),
                self._hashed(self.schema.trimmed_primary_keys),
                self.writers,
                assigners_per_partition(self.writers, initial),
            )
        return None

    def _hashed(self, names: list[str] | tuple[str, ...]) -> tuple[HashedField, ...]:
        return tuple(HashedField(f.name, f.type, Slot.of(f.type)) for f in self.schema.fields_named(names))

    def route(self, *columns: pa.Array) -> np.ndarray:
        """Per row, from the :attr:`columns`: its bucket (``HASH_FIXED``) or its writer's
        assigner channel (``HASH_DYNAMIC``), int32: the :attr:`formula`, evaluated."""
        formula = self.formula
        if formula is None:
            raise InvalidArgumentError(f"{self.mode} tables route no rows: any writer may take them")
        types = self.schema.arrow_types()
        given = {
            n: c if c.type == types[n] else c.cast(types[n])
            for c, n in zip(columns, self.columns, strict=True)
        }
        rows = len(columns[0])

        def hashed(fields: tuple[HashedField, ...]) -> np.ndarray:
            return binary_row.row_hashes([given[f.name] for f in fields], [f.type for f in fields], rows)

        if isinstance(formula, FixedBucketFormula):
            ids = java_bucket(hashed(formula.key), formula.buckets)
        else:
            ids = assigner_channel(
                hashed(formula.partition), hashed(formula.key), formula.channels, formula.assigners
            )
        return np.asarray(ids, np.int32)
