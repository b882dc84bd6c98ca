"""Iceberg-compatible metadata of Paimon tables (``metadata.iceberg.*``): Iceberg readers read
the tables' Parquet files in place."""
