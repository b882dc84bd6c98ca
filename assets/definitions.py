"""The example lakehouse's code location (``workspace.yaml`` and ``dg`` load it): the components
and definitions under :mod:`assets.defs`."""

from pathlib import Path

from dagster import load_from_defs_folder

from dagster_lakehouse.definitions import PIPELINE

defs = load_from_defs_folder(path_within_project=Path(__file__).parent)

__all__ = ["PIPELINE", "defs"]
