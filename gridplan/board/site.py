"""The static leaderboard site of a board folder: ``render_site(board, out_dir)``.

The site is plain files (``gridplan.board.pages``, ``gridplan.board.plots``,
``gridplan.board.assets``): ``index.html``, ``suite-<S>.html`` per suite, ``models/<fp>.html``
per model, ``figures/*.png``, ``style.css``, ``sort.js``, and under ``files/`` a copy of every
full report the rows name that the board folder holds. ``board-site.json`` lists the files
written: it marks the folder as a board site, and a later render into it removes the files of
the old site that the new one does not write (and nothing else).

The whole site is rendered in memory first, so a row that cannot be rendered leaves the
folder as it was; each file is then written atomically.
"""

from __future__ import annotations

import json
from pathlib import Path

from gridplan.board import pages
from gridplan.board.assets import SORT_JS, STYLE_CSS
from gridplan.board.leaderboard import suite_tables
from gridplan.board.plots import success_scatter
from gridplan.board.row_schema import BoardError
from gridplan.board.store import Board
from gridplan.util.files import write_atomic, write_text_atomic

#: The file that marks a folder as a board site and lists the files of that site.
MARKER = "board-site.json"
#: Version of ``MARKER``'s layout.
SITE_VERSION = 1
#: Where the site holds the copies of the rows' full reports.
REPORTS = "files"


def board_rows(board: Board) -> list[dict]:
    """``board.rows()``, of which a site needs one at least.

    Raises:
        BoardError: if the folder is missing, holds no row or holds a malformed row.
    """
    rows = board.rows()
    if not rows:
        raise BoardError(f"{board.folder}: the board folder holds no rows (rows/*.json)")
    return rows


def build_site(board: Board) -> dict[str, bytes]:
    """Every file of the site of ``board``: relative path -> content.

    Raises:
        BoardError: as ``board_rows``.
    """
    rows = board_rows(board)
    tables = suite_tables(rows)
    files: dict[str, bytes] = {"style.css": STYLE_CSS.encode(), "sort.js": SORT_JS.encode()}
    reports = {}
    for name in sorted({row["report"] for row in rows if "report" in row}):
        source = board.folder / name
        if source.is_file():
            reports[name] = f"{REPORTS}/{name}"
            files[reports[name]] = source.read_bytes()
    for table in tables:
        figures = {}
        for metric, title in pages.FIGURE_METRICS.items():
            png = success_scatter(table, metric, title)
            figures[metric] = None if png is None else pages.figure_name(table.suite, metric)
            if png is not None:
                files[figures[metric]] = png
        files[pages.suite_file(table.suite)] = pages.suite_page(table, figures).encode()
    for fp in {row["model"]["fingerprint"] for row in rows}:
        files[pages.model_file(fp)] = pages.model_page(fp, rows, tables, reports).encode()
    files["index.html"] = pages.index_page(tables, rows).encode()
    return files


def _previous_files(out_dir: Path, force: bool) -> list[str]:
    """The files of the board site already in ``out_dir`` (none for a new or empty folder).

    Raises:
        BoardError: if ``out_dir`` is a file, or a non-empty folder without ``MARKER`` and
            ``force`` is False, or its ``MARKER`` cannot be read.
    """
    if out_dir.exists() and not out_dir.is_dir():
        raise BoardError(f"{out_dir} is a file; give a folder for the site")
    if not out_dir.exists() or not any(out_dir.iterdir()):
        return []
    marker = out_dir / MARKER
    if not marker.is_file():
        if force:
            return []
        raise BoardError(
            f"{out_dir} is not empty and is not a board site (no {MARKER}); give a new or "
            "empty folder, or --force to write the site among its files"
        )
    try:
        listed = json.loads(marker.read_text(encoding="utf-8"))["files"]
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise BoardError(f"{marker}: not a readable board site marker ({err})") from err
    return [name for name in listed if isinstance(name, str)]


def render_site(board: Board | str | Path, out_dir: str | Path, force: bool = False) -> Path:
    """Write the static site of ``board`` (module docstring) into ``out_dir``.

    Args:
        board: a ``Board`` or its folder.
        out_dir: the site's folder: new, empty or a previous board site.
        force: write into a non-empty folder that is not a board site (its files are kept,
            those of the same names replaced).

    Returns:
        The path of the site's ``index.html``.

    Raises:
        BoardError: as ``build_site`` and for an ``out_dir`` the site cannot go into; nothing
            is written then.
    """
    board = board if isinstance(board, Board) else Board(board)
    out = Path(out_dir)
    previous = _previous_files(out, force)
    files = build_site(board)
    root = out.resolve()
    for name in set(previous) - set(files):
        stale = (out / name).resolve()
        if stale.is_relative_to(root) and stale != root and stale.is_file():
            stale.unlink()
    for name, content in files.items():
        write_atomic(out / name, lambda tmp, content=content: tmp.write_bytes(content))
    marker = {"site_version": SITE_VERSION, "files": sorted(files)}
    write_text_atomic(out / MARKER, json.dumps(marker, indent=2) + "\n")
    return out / "index.html"
