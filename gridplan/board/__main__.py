"""``python -m gridplan.board DIR --html SITE`` (console script ``gridplan-board``): summarise a
board folder of leaderboard rows and publish it as a static site (``gridplan.board.site``).

Examples::

    gridplan-eval --suite quick --model oracle --board board    # writes board/rows/*.json
    gridplan-board board                                        # the summary only
    gridplan-board board --html site                            # and the site: site/index.html

One line per suite (``quick: 3 models, 2 tracks, 6 rows``, with the rows of older track
versions left out, if any), then ``site: SITE/index.html``. A missing folder, a folder without
rows, a malformed row or a site folder that is neither empty nor a board site (without
``--force``) exits 2 with a one-line message naming it.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from gridplan.board.leaderboard import suite_tables
from gridplan.board.pages import summary
from gridplan.board.row_schema import BoardError
from gridplan.board.site import board_rows, render_site
from gridplan.board.store import Board


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gridplan-board",
        description="Summarise a board folder of leaderboard rows (gridplan-eval --board) and "
        "publish it as a static HTML site (python -m gridplan.board).",
    )
    parser.add_argument("board", type=Path, metavar="DIR", help="the board folder")
    parser.add_argument("--html", type=Path, metavar="SITE",
                        help="write the static site into this folder (new, empty or a "
                        "previous board site)")
    parser.add_argument("--force", action="store_true",
                        help="write the site into a non-empty folder that is not a board site")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the command line on ``argv`` (default ``sys.argv[1:]``); returns the exit status:
    0, or 2 on a bad board folder or site folder (nothing is written then)."""
    args = build_parser().parse_args(argv)
    board = Board(args.board)
    try:
        rows = board_rows(board)
        lines = [f"{table.suite}: {summary(table)}" for table in suite_tables(rows)]
        index = render_site(board, args.html, args.force) if args.html else None
    except BoardError as err:
        print(f"gridplan-board: error: {err}", file=sys.stderr)
        return 2
    for line in lines:
        print(line)
    if index is not None:
        print(f"site: {index}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
