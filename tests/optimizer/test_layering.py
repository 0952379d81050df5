"""The optimizer layer reads typed plans only: none of its modules imports the SQL front end.

Why (issue 30 item 0, DataFusion's split): rules over the typed plan apply to every plan — planned from SQL,
built with PlanBuilder, read from JSON, planned by Spark — and the SQL planner calls into them (the estimate
rules of :mod:`gpu_engine.optimizer.statistics`), not the other way round; the typed estimates once imported
``gpu_engine.sql.statistics``' private helpers. Read from the source (ast), so the check costs no import.
"""

from __future__ import annotations

import ast
from pathlib import Path

import gpu_engine.optimizer

OPTIMIZER = Path(gpu_engine.optimizer.__file__).parent


def _imports(path: Path) -> list[tuple[str, list[str]]]:
    """Return (module, imported names) of each import statement in ``path``."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module:
            out.append((node.module, [alias.name for alias in node.names]))
        elif isinstance(node, ast.Import):
            out.extend((alias.name, []) for alias in node.names)
    return out


def test_no_optimizer_module_imports_the_sql_front_end():
    modules = sorted(OPTIMIZER.glob("*.py"))
    assert len(modules) > 5
    offending = [f"{path.name}: {module}" for path in modules for module, _ in _imports(path)
                 if module == "gpu_engine.sql" or module.startswith("gpu_engine.sql.")]
    assert offending == []


def _private_uses(path: Path) -> list[str]:
    """Return the private names ``path`` takes from a module outside the optimizer: imported by name
    (``from gpu_engine.sql.statistics import _range_selectivity``) or read off an imported module
    (``statistics._range_selectivity``)."""
    tree = ast.parse(path.read_text(), str(path))
    foreign: set[str] = set()  # local names bound to modules of other packages
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and not node.module.startswith("gpu_engine.optimizer"):
            for alias in node.names:
                if alias.name.startswith("_") and not alias.name.startswith("__"):
                    out.append(f"{node.module}.{alias.name}")
                foreign.add(alias.asname or alias.name)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if not alias.name.startswith("gpu_engine.optimizer"):
                    foreign.add(alias.asname or alias.name.split(".")[0])
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in foreign
                and node.attr.startswith("_") and not node.attr.startswith("__")):
            out.append(f"{node.value.id}.{node.attr}")
    return out


def test_no_optimizer_module_uses_a_private_name_of_another_package():
    offending = [f"{path.name}: {use}" for path in sorted(OPTIMIZER.glob("*.py")) for use in _private_uses(path)]
    assert offending == []
