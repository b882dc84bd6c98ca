"""Shared fixtures: golden vectors from Apache Paimon's Java implementation, and tiny warehouses."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

GOLDEN = Path(__file__).resolve().parents[2] / "shared" / "golden"


def golden(name: str) -> dict:
    """Load one golden vector file (``../shared/golden/<name>``)."""
    return json.loads((GOLDEN / name).read_text())


@pytest.fixture
def warehouse(tmp_path: Path) -> str:
    return str(tmp_path / "warehouse")
