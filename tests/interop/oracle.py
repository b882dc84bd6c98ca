"""pypaimon, the official Paimon Python implementation, as the compatibility oracle.

pypaimon (the dev extra) is imported by the calls, not by this module: modules whose tests call it
(marked ``interop``) collect where it is not installed, and their other tests run there."""

from __future__ import annotations

import pyarrow as pa


def catalog(warehouse: str, options: dict | None = None):
    """pypaimon's filesystem catalog; ``options``: how to reach the store (``s3.endpoint``, ...)."""
    from pypaimon import CatalogFactory

    return CatalogFactory.create({"warehouse": warehouse, **(options or {})})


def create(
    warehouse: str, identifier: str, schema: pa.Schema, primary_keys=(), partition_keys=(), options=None
):
    from pypaimon import Schema

    cat = catalog(warehouse)
    cat.create_database(identifier.split(".")[0], True)
    paimon_schema = Schema.from_pyarrow_schema(
        schema,
        partition_keys=list(partition_keys),
        primary_keys=list(primary_keys),
        options=dict(options or {}),
    )
    cat.create_table(identifier, paimon_schema, False)


def write(warehouse: str, identifier: str, data: pa.Table, overwrite: dict | None = None) -> None:
    table = catalog(warehouse).get_table(identifier)
    builder = table.new_batch_write_builder()
    if overwrite is not None:
        builder = builder.overwrite(overwrite)
    writer = builder.new_write()
    writer.write_arrow(data)
    commit = builder.new_commit()
    commit.commit(writer.prepare_commit())
    writer.close()
    commit.close()


def read(warehouse: str, identifier: str, options: dict | None = None) -> pa.Table:
    table = catalog(warehouse, options).get_table(identifier)
    builder = table.new_read_builder()
    return builder.new_read().to_arrow(builder.new_scan().plan().splits())


def alter(warehouse: str, identifier: str, changes: list) -> None:
    catalog(warehouse).alter_table(identifier, changes, False)
