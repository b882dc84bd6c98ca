"""Append tables' own mechanisms: small-file compaction and clustering by sort order."""
