"""The engine's layers, read from its imports: no import cycle, and every import points down.

Every import counts, those under ``TYPE_CHECKING`` and inside functions too: a type hint on the
``Table`` facade below it is an upward dependency as much as a call. ``docs/architecture.md``
describes the layers.

The integrations - the PySpark data source (``lakehouse.spark``, ``pyspark_paimon``) and the Dagster
library (``dagster_lakehouse``) - use the engine as any user's code does: through the names the
``lakehouse`` package exports (``__all__``) and ``lakehouse.errors``; the Dagster library uses the
Spark integration through the names ``lakehouse.spark`` exports.
"""

from __future__ import annotations

import ast
import graphlib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
ROOT = REPO / "lakehouse"

# Bottom to top; a module may import its own layer and the layers below.
LAYERS = (
    (
        "formats",
        "errors types options partition_time paths predicate json_pretty murmur rowkind nulls_first io "
        "format manifest snapshot schema schema_change metastore fileindex deletionvectors",
    ),
    ("store", "store"),
    ("mechanisms", "bucket mergetree append iceberg"),
    ("read", "read"),
    ("write", "write"),
    ("commit", "commit"),
    ("operations", "ops"),
    ("facade", "table"),
    ("system tables", "system"),
    ("REST catalog client", "rest"),  # the catalog's requests when a server owns it
    ("catalog", "catalog __init__"),  # hands out tables and system tables
    ("REST catalog server", "rest.server rest.service rest.requests rest.grants cli"),  # serves a catalog
    ("integrations", "spark"),
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
    """The layer of a module: its own (``rest.server``) if listed, else its package's (``rest``)."""
    parts = name.split(".")[1:] or ["__init__"]
    part = next((p for p in (".".join(parts[:2]), parts[0]) if p in RANK), parts[0])
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


# ---- the integrations use the public API only ---------------------------------------------

INTEGRATIONS = {  # where Spark finds the data source by name (pyspark_paimon) is the Spark integration's
    ROOT / "spark": "lakehouse.spark",
    REPO / "pyspark_paimon": "lakehouse.spark",
    REPO / "integrations" / "dagster-lakehouse" / "dagster_lakehouse": "dagster_lakehouse",
}
# what each integration may import of the others' packages, and which names each exports
PUBLIC = {"lakehouse": "lakehouse", "lakehouse.errors": None, "lakehouse.spark": "lakehouse.spark"}
ALLOWED = {
    "lakehouse.spark": ["lakehouse", "lakehouse.errors"],
    "dagster_lakehouse": ["lakehouse", "lakehouse.errors", "lakehouse.spark"],
}


def _exported(package: str) -> set[str]:
    """The ``__all__`` of a package's ``__init__``, read from its source."""
    path = ROOT.parent.joinpath(*package.split("."), "__init__.py")
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__all__" for t in node.targets):
            return {e.value for e in node.value.elts}
    raise AssertionError(f"{package} has no __all__")


def internal_imports(integration: str, source: str, path: str = "<source>") -> list[str]:
    """What ``source`` (a module of ``integration``) imports of the engine beyond what it may: an
    internal module (``lakehouse.store``...), or a name its package does not export."""
    allowed = ALLOWED[integration]
    found = []
    for node in ast.walk(ast.parse(source, path)):
        if isinstance(node, ast.Import):
            targets = [(alias.name, None) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            targets = [(node.module, alias.name) for alias in node.names]
        else:
            continue
        for module, name in targets:
            if module.split(".")[0] != "lakehouse" or module.startswith(integration + "."):
                continue
            if module == integration:
                continue
            if module not in allowed:
                found.append(f"{path}: imports {module}")
            elif name is not None and PUBLIC[module] is not None and name not in _exported(PUBLIC[module]):
                found.append(f"{path}: imports {name} from {module}, which {module} does not export")
    return found


def test_integrations_import_only_the_public_api():
    problems = [
        p
        for directory, integration in INTEGRATIONS.items()
        for path in sorted(directory.rglob("*.py"))
        for p in internal_imports(integration, path.read_text(), str(path.relative_to(REPO)))
    ]
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize(
    ("integration", "source"),
    [
        ("lakehouse.spark", "from lakehouse.store import consumers"),
        ("lakehouse.spark", "import lakehouse.read.scan"),
        ("lakehouse.spark", "from lakehouse import TableStore"),
        ("dagster_lakehouse", "from lakehouse.spark.writer import COMMIT_USER"),
        ("dagster_lakehouse", "def f():\n    from lakehouse.options import SCAN_SNAPSHOT_ID"),
    ],
)
def test_an_integration_importing_an_internal_module_is_caught(integration, source):
    assert internal_imports(integration, source)


def test_the_public_imports_pass():
    ok = "from lakehouse import Table, col\nfrom lakehouse.errors import LakehouseError\nimport lakehouse"
    assert not internal_imports("dagster_lakehouse", ok + "\nfrom lakehouse.spark import read")
    assert not internal_imports("lakehouse.spark", ok + "\nfrom lakehouse.spark.options import flag")
