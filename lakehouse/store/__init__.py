"""The storage layer: a table's files and metadata (``TableStore``), data files, tags, consumers."""
