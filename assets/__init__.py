"""Dagster definitions of the lakehouse: Paimon tables as assets, maintenance, sensors, checks."""
