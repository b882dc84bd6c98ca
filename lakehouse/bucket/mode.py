"""How a table puts rows into buckets (Paimon's ``BucketMode``), decided once from its schema."""

from __future__ import annotations

from enum import StrEnum

from lakehouse.schema import TableSchema


class BucketMode(StrEnum):
    """``HASH_FIXED``: ``bucket = N``, a row's bucket is the hash of its bucket key modulo N
    (primary-key and append tables); ``HASH_DYNAMIC``: ``bucket = -1`` with a primary key that holds
    the partition keys, keys get buckets from the hash index as they arrive; ``KEY_DYNAMIC``:
    ``bucket = -1`` with a primary key that lacks a partition key (cross-partition upserts: a
    key's partition and bucket come from the table's key index); ``BUCKET_UNAWARE``: an append
    table with ``bucket = -1``, files in one bucket per partition."""

    HASH_FIXED = "HASH_FIXED"
    HASH_DYNAMIC = "HASH_DYNAMIC"
    KEY_DYNAMIC = "KEY_DYNAMIC"
    BUCKET_UNAWARE = "BUCKET_UNAWARE"

    @classmethod
    def of(cls, schema: TableSchema) -> BucketMode:
        if schema.core_options.bucket > 0:
            return cls.HASH_FIXED
        if schema.cross_partition_update:
            return cls.KEY_DYNAMIC
        return cls.HASH_DYNAMIC if schema.primary_keys else cls.BUCKET_UNAWARE
