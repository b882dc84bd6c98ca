"""The engine's layers, read from its imports: no import cycle, and every import points down.

Every import counts, those under ``TYPE_CHECKING`` and inside functions too: a type hint on the
``Table`` facade below it is an upward dependency as much as a call. ``docs/architecture.md``
describes the layers.
"""

from __future__ import annotations

import ast
import graphlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent / "lakehouse"

# Bottom to top; a module may import its own layer and the layers below.
LAYERS = (
    (
        "formats",
        "errors types options partition_time paths predicate json_pretty murmur rowkind nulls_first io "
        "format manifest snapshot schema fileindex deletionvectors",
    ),
    ("store", "store"),
    ("mechanisms", "bucket mergetree append"),
    ("read", "read"),
    ("write", "write"),
    ("commit", "commit"),
    ("operations", "ops"),
    ("facade", "table"),
    ("system tables", "system"),
    ("catalog", "catalog __init__"),  # hands out tables and system tables
    ("integrations", "spark dagster"),
)
RANK = {part: rank for rank, (_, parts) in enumerate(LAYERS) for part in parts.split()}


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in ROOT.rglob("*.py")}


def imported(name: str, path: Path) -> set[str]:
    """The engine modules ``name`` imports (``from pkg import mod`` names the module ``mod``)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([base] if base else []))
            found.update(
                f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base for alias in node.names
            )
    return {_owner(m) for m in found if _owner(m)} - {name}


def _owner(dotted: str) -> str | None:
    """The engine module ``dotted`` is or is in (None: not the engine's)."""
    while dotted and dotted not in MODULES:
        dotted = dotted.rpartition(".")[0]
    return dotted or None


def layer(name: str) -> int:
    part = name.split(".")[1] if "." in name else "__init__"
    assert part in RANK, f"{name} belongs to no layer; add its package to LAYERS in {__file__}"
    return RANK[part]


GRAPH = {name: imported(name, path) for name, path in MODULES.items()}


def test_the_engine_has_no_import_cycle():
    try:
        tuple(graphlib.TopologicalSorter(GRAPH).static_order())
    except graphlib.CycleError as e:
        pytest.fail(f"import cycle: {' -> '.join(e.args[1])}")


def test_every_import_points_down():
    upward = [
        f"{name} ({LAYERS[layer(name)][0]}) imports {target} ({LAYERS[layer(target)][0]})"
        for name, targets in GRAPH.items()
        for target in sorted(targets)
        if layer(target) > layer(name)
    ]
    assert not upward, "\n".join(upward)


def test_only_the_facade_and_above_know_table():
    facade = RANK["table"]
    knowing = [n for n, targets in GRAPH.items() if "lakehouse.table.table" in targets]
    below = sorted(n for n in knowing if layer(n) < facade)
    assert not below, f"modules below the facade import Table: {below}"


def test_the_walk_sees_what_it_checks():
    assert len(MODULES) > 80
    assert "lakehouse.store.table_store" in GRAPH["lakehouse.table.table"]
    assert "lakehouse.schema" in GRAPH["lakehouse.store.table_store"]
