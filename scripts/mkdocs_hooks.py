"""MkDocs hooks of the documentation site (``mkdocs.yml``, ``hooks:``): the API reference pages.

Each subpackage of ``gridplan`` gets one page, ``api/<subpackage>.md``, generated at build time
from the source tree: the subpackage's docstring, then every public module of it (no leading
underscore, no ``__main__``) rendered by mkdocstrings. A page per module block, rather than one
``::: gridplan.<subpackage>`` with its submodules, keeps the reference the same whether or not a
subpackage re-exports names in ``__all__`` (each object is documented once, where it is
defined), and a module added to the package appears without editing the site.
"""

from __future__ import annotations

import ast
from pathlib import Path

from mkdocs.structure.files import File, Files

#: The package whose subpackages the reference documents, beside ``mkdocs.yml``.
PACKAGE = "gridplan"
#: Where the generated pages live in the site.
API_FOLDER = "api"


def public_modules(folder: Path) -> list[str]:
    """Dotted names of the public modules directly in the package ``folder``, sorted."""
    return sorted(
        f"{folder.name}.{p.stem}" for p in folder.glob("*.py") if not p.stem.startswith("_")
    )


def summary(init: Path) -> str:
    """The first line of a package's docstring (``__init__.py``), or ``""``."""
    doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))) or ""
    return doc.strip().splitlines()[0] if doc.strip() else ""


def api_pages(root: Path) -> dict[str, str]:
    """File name -> Markdown of the reference pages for the package at ``root``: ``index.md``
    (the package's docstring and a list of its subpackages) and one page per subpackage.

    Raises:
        FileNotFoundError: if ``root`` holds no ``__init__.py`` (not a package).
    """
    if not (root / "__init__.py").is_file():
        raise FileNotFoundError(f"{root} is not a package (no __init__.py)")
    subpackages = sorted(p.parent for p in root.glob("*/__init__.py"))
    index = [
        "# API reference",
        "",
        f"::: {root.name}",
        "    options:",
        "      show_root_heading: false",
        "      members: false",
        "",
        "## Subpackages",
        "",
    ]
    pages = {}
    for folder in subpackages:
        name = f"{root.name}.{folder.name}"
        index.append(f"- [`{name}`]({folder.name}.md): {summary(folder / '__init__.py')}")
        body = [
            f"# `{name}`",
            "",
            f"::: {name}",
            "    options:",
            "      show_root_heading: false",
            "      members: false",
        ]
        for module in public_modules(folder):
            body += ["", f"::: {root.name}.{module}"]
        pages[f"{folder.name}.md"] = "\n".join(body) + "\n"
    return {"index.md": "\n".join(index) + "\n", **pages}


def on_files(files: Files, config) -> Files:
    """Add the generated reference pages to the site's files."""
    root = Path(config.config_file_path).parent / PACKAGE
    for name, text in api_pages(root).items():
        files.append(File.generated(config, f"{API_FOLDER}/{name}", content=text))
    return files
