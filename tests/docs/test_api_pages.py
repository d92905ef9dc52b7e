"""The site's API reference (scripts/mkdocs_hooks.py): one page per subpackage of gridplan, the
package docstring and then each public module, every one a module that exists."""

from __future__ import annotations

import importlib.util

import pytest

from tests.experiments.test_templates import REPO, load_script

pytest.importorskip("mkdocs", reason="the site's packages are the `docs` extra")
HOOKS = load_script("mkdocs_hooks")


def test_a_hand_built_package_gets_one_page_per_subpackage(tmp_path):
    root = tmp_path / "pkg"
    (root / "core").mkdir(parents=True)
    (root / "__init__.py").write_text('"""The package."""')
    (root / "core" / "__init__.py").write_text('"""Tasks and values.\n\nMore text."""')
    for name in ("values.py", "env.py", "_private.py", "__main__.py"):
        (root / "core" / name).write_text("")
    (root / "notes").mkdir()  # a folder without __init__.py is no subpackage
    pages = HOOKS.api_pages(root)
    assert list(pages) == ["index.md", "core.md"]
    assert pages["core.md"] == (
        "# `pkg.core`\n\n::: pkg.core\n    options:\n      show_root_heading: false\n"
        "      members: false\n\n::: pkg.core.env\n\n::: pkg.core.values\n"
    )
    assert "- [`pkg.core`](core.md): Tasks and values." in pages["index.md"]


def test_a_folder_that_is_no_package_is_refused(tmp_path):
    with pytest.raises(FileNotFoundError, match="is not a package"):
        HOOKS.api_pages(tmp_path)


def test_every_module_on_the_reference_pages_of_gridplan_exists():
    pages = HOOKS.api_pages(REPO / "gridplan")
    names = [
        line[4:] for text in pages.values() for line in text.splitlines() if line.startswith("::: ")
    ]
    assert "gridplan.models.noise" in names and "gridplan.core" in names
    assert [n for n in names if importlib.util.find_spec(n) is None] == []
    subpackages = {p.parent.name for p in (REPO / "gridplan").glob("*/__init__.py")}
    assert set(pages) == {"index.md", *(f"{s}.md" for s in subpackages)}
