"""The package layout of docs/DESIGN.md: layers as subpackages, no import cycle between files.

The layers contract itself is ``lint-imports`` (``pyproject.toml``, run by
``scripts/run_tests.sh``); these tests check what a layers contract cannot: cycles between
modules of one package, modules left at the top level, and module names used twice.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import grimp
import networkx as nx
import pytest

import gridplan

PACKAGE = Path(gridplan.__file__).parent


@pytest.fixture(scope="module")
def graph() -> nx.DiGraph:
    # Every import counts, at module level, inside functions and under TYPE_CHECKING alike.
    imports = grimp.build_graph("gridplan", exclude_type_checking_imports=False)
    g = nx.DiGraph()
    for module in imports.modules:
        g.add_node(module)
        for imported in imports.find_modules_directly_imported_by(module):
            g.add_edge(module, imported)
    return g


def test_no_import_cycle_between_modules(graph):
    cycles = [sorted(c) for c in nx.strongly_connected_components(graph) if len(c) > 1]
    assert cycles == []


def test_the_graph_sees_function_local_imports(graph):
    # gridplan/__init__.py reaches the ladder through import_module, which no graph sees, but
    # the planner's scorers are imported at module level: the graph must hold that edge.
    assert graph.has_edge("gridplan.planning.planner", "gridplan.planning.scorers")
    assert len(graph) > 60


def test_no_module_at_the_top_level():
    modules = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert modules == ["__init__.py"]


def test_every_subpackage_is_a_layer_of_the_contract():
    import tomllib

    pyproject = tomllib.loads((PACKAGE.parent / "pyproject.toml").read_text())
    (contract,) = pyproject["tool"]["importlinter"]["contracts"]
    named = {name.strip() for layer in contract["layers"] for name in layer.split("|")}
    packages = {p.parent.name for p in PACKAGE.glob("*/__init__.py")}
    assert named == packages


def test_no_two_modules_share_a_name():
    # A package's __init__ and __main__ are Python's names, not ours.
    stems = (p.stem for p in PACKAGE.rglob("*.py"))
    names = Counter(s for s in stems if s not in ("__init__", "__main__"))
    assert [name for name, n in names.items() if n > 1] == []


def test_no_two_public_classes_share_a_name():
    import ast

    defined = Counter(
        node.name
        for path in PACKAGE.rglob("*.py")
        for node in ast.parse(path.read_text()).body
        if isinstance(node, ast.ClassDef) and not node.name.startswith("_")
    )
    assert [name for name, n in defined.items() if n > 1] == []
