"""The leaderboard: rows of (model, track) results in a board folder and their static site.

``gridplan-eval --suite NAME --board DIR`` writes one row per (model, track) of a suite;
``gridplan-board DIR --html SITE`` (``python -m gridplan.board``) publishes them. Layout
(``docs/DESIGN.md``):

- ``row_schema``: a row's layout, ``ROW_SCHEMA`` (``docs/schema/board.schema.json``),
  ``validate_row`` and ``BoardError``;
- ``store``: ``Board``, the board folder (one file per row, atomic writes, no silent
  overwrite);
- ``leaderboard``: the suite tables, the rankings per track and their rank agreement;
- ``pages``, ``plots``, ``assets``: the HTML pages, the figures, the CSS and JavaScript;
- ``site``: ``render_site``, which writes the site.

Its public names (``__all__``) are imported on first use.
"""

from gridplan.util.lazy import lazy_exports

_EXPORTS = {
    "Board": "store",
    "BoardError": "row_schema",
    "ROW_SCHEMA": "row_schema",
    "SCHEMA_VERSION": "row_schema",
    "SuiteTable": "leaderboard",
    "render_site": "site",
    "suite_tables": "leaderboard",
    "validate_row": "row_schema",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
