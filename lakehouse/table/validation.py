"""The checks of a new schema version that need the engine's mechanisms: the merge engine
(sequence groups, aggregate functions per column type), the changelog producer and automatic
tags. The schema layer checks everything else; both run before a schema file is written."""

from __future__ import annotations

from lakehouse.commit.auto_tags import AutoTags
from lakehouse.mergetree.changelog import ChangelogProducer
from lakehouse.mergetree.engine import MergeEngine
from lakehouse.schema import TableSchema


def check_mechanisms(schema: TableSchema, table: str) -> TableSchema:
    """Refuse ``schema`` if the mechanisms it configures cannot serve it; return it otherwise."""
    if schema.primary_keys:
        MergeEngine(schema, table)
    ChangelogProducer.of(schema, table)
    AutoTags.of(schema.core_options, table)
    return schema
