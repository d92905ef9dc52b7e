"""A leaderboard row: one model on one benchmark track, as the JSON file a board folder holds.

``gridplan-eval --suite NAME --board DIR`` writes one row per (model, track) of the suite;
``gridplan.board.store.Board`` keeps them and ``gridplan.board.site`` publishes them. A row
(``ROW_SCHEMA``, published as ``docs/schema/board.schema.json``) holds:

- ``schema_version``: ``SCHEMA_VERSION``; a row of another version is refused;
- ``gridplan_version``: the gridplan that measured it; ``suite``: the suite it was run under;
- ``track``: ``name``, ``version`` (>= 1), ``hash`` (SHA-256 of the track's spec, 64 hex
  digits) and ``spec`` (the whole spec); rows of one track name with different hashes were
  measured on different benchmarks and are never compared;
- ``model``: ``name``, ``fingerprint`` (SHA-256, 64 hex digits: the model's identity),
  ``kind`` (one of ``MODEL_KINDS``) and ``info`` (free-form description);
- ``metrics``: name -> ``{"value", "ci", "se"}``: ``value`` a number or ``null`` (not
  measured or undefined), ``ci`` a 95% interval ``[low, high]`` or ``null``, ``se`` optional.
  ``success`` (the closed-loop success rate, in ``[0, 1]``) is required; the site's tables
  read ``regret`` (decision regret), ``drpe`` (DRPE) and ``e_tot`` (E_tot) when present;
- ``wall_s`` (seconds the evaluation took), ``created`` (ISO 8601 with a time zone) and
  optionally ``report``: the full report's path, relative to the board folder.

``validate_row`` checks a row against the schema and the rules a schema cannot state
(``low <= high``, a parseable time, a relative report path).
"""

from __future__ import annotations

import json
import math
from datetime import datetime
from pathlib import PurePosixPath

import jsonschema

#: Version of the row layout; readers refuse rows of any other version.
SCHEMA_VERSION = 1
#: The kinds of model a row may describe (``model.kind``).
MODEL_KINDS = ("controlled", "oracle", "plugin", "checkpoint", "latent")
#: Suite and track names: they name files of the board folder and of the site.
NAME_PATTERN = "^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"

_SHA256 = {"type": "string", "pattern": "^[0-9a-f]{64}$"}
_NUMBER = {"type": ["number", "null"]}
_INTERVAL = {
    "type": ["array", "null"],
    "prefixItems": [{"type": "number"}, {"type": "number"}],
    "minItems": 2,
    "maxItems": 2,
}

#: The JSON Schema (draft 2020-12) of a row, as published in ``docs/schema/board.schema.json``.
ROW_SCHEMA: dict = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": "https://gridplan.example/schema/board.schema.json",
    "title": "gridplan leaderboard row (gridplan-eval --suite NAME --board DIR)",
    "description": "One model on one benchmark track: the track's spec and hash, the model's "
    "fingerprint and description, and every metric with its 95% interval "
    "(gridplan.board.row_schema).",
    "type": "object",
    "required": [
        "schema_version", "gridplan_version", "suite", "track", "model", "metrics", "wall_s",
        "created",
    ],
    "additionalProperties": False,
    "$defs": {
        "metric": {
            "type": "object",
            "required": ["value"],
            "additionalProperties": False,
            "properties": {"value": _NUMBER, "ci": _INTERVAL, "se": _NUMBER},
        },
    },
    "properties": {
        "schema_version": {"const": SCHEMA_VERSION},
        "gridplan_version": {"type": "string", "minLength": 1},
        "suite": {"type": "string", "pattern": NAME_PATTERN},
        "track": {
            "type": "object",
            "required": ["name", "version", "hash", "spec"],
            "additionalProperties": False,
            "properties": {
                "name": {"type": "string", "pattern": NAME_PATTERN},
                "version": {"type": "integer", "minimum": 1},
                "hash": _SHA256,
                "spec": {"type": "object"},
            },
        },
        "model": {
            "type": "object",
            "required": ["name", "fingerprint", "kind", "info"],
            "additionalProperties": False,
            "properties": {
                "name": {"type": "string", "minLength": 1},
                "fingerprint": _SHA256,
                "kind": {"enum": list(MODEL_KINDS)},
                "info": {"type": "object"},
            },
        },
        "metrics": {
            "type": "object",
            "required": ["success"],
            "propertyNames": {"minLength": 1, "maxLength": 64},
            "additionalProperties": {"$ref": "#/$defs/metric"},
            "properties": {
                "success": {
                    "$ref": "#/$defs/metric",
                    "properties": {"value": {"type": "number", "minimum": 0, "maximum": 1}},
                },
            },
        },
        "wall_s": {"type": "number", "minimum": 0},
        "created": {"type": "string", "minLength": 1},
        "report": {"type": "string", "minLength": 1},
    },
}

_VALIDATOR = jsonschema.Draft202012Validator(ROW_SCHEMA)


class BoardError(ValueError):
    """A board folder, a row or a site folder that gridplan cannot use; the message names the
    file and the problem."""


def schema_text() -> str:
    """``ROW_SCHEMA`` as the text of ``docs/schema/board.schema.json`` (2-space indent)."""
    return json.dumps(ROW_SCHEMA, indent=2) + "\n"


def _where(path) -> str:
    return ".".join(str(part) for part in path) or "the row"


def _check_rules(row: dict) -> str | None:
    """The first rule of the module docstring that ``row`` (schema-valid) breaks, or None."""
    numbers = [("wall_s", row["wall_s"])]
    for name, metric in row["metrics"].items():
        numbers += [(f"metrics.{name}.{key}", metric.get(key)) for key in ("value", "se")]
        numbers += [(f"metrics.{name}.ci", x) for x in metric.get("ci") or ()]
    for where, x in numbers:
        if x is not None and not math.isfinite(x):
            return f"{where}: {x} is not a finite number (null is a value that is not defined)"
    for name, metric in row["metrics"].items():
        ci = metric.get("ci")
        if ci is not None and ci[0] > ci[1]:
            return f"metrics.{name}.ci: low {ci[0]} is above high {ci[1]}"
    try:
        created = datetime.fromisoformat(row["created"].replace("Z", "+00:00"))
    except ValueError:
        return f"created: {row['created']!r} is not an ISO 8601 time"
    if created.tzinfo is None:
        return f"created: {row['created']!r} has no time zone"
    report = row.get("report")
    if report is not None:
        path = PurePosixPath(report)
        if path.is_absolute() or ".." in path.parts or "\\" in report:
            return f"report: {report!r} is not a path inside the board folder"
    return None


def validate_row(row, source) -> dict:
    """Return ``row`` if it is a board row of ``SCHEMA_VERSION`` (module docstring).

    Args:
        row: the decoded JSON of one row.
        source: where it came from, for messages (a file path, or e.g. ``"row to write"``).

    Raises:
        BoardError: ``"<source>: <field>: <problem>"`` for the first problem found; a row of
            another ``schema_version`` names both versions.
    """
    if not isinstance(row, dict):
        raise BoardError(f"{source}: a board row is a JSON object, got {type(row).__name__}")
    version = row.get("schema_version")
    if type(version) is not int or version != SCHEMA_VERSION:
        raise BoardError(
            f"{source}: a board row of schema_version {version!r}; this gridplan reads "
            f"schema_version {SCHEMA_VERSION} only (re-run gridplan-eval --board to rewrite it)"
        )
    error = jsonschema.exceptions.best_match(_VALIDATOR.iter_errors(row))
    if error is not None:
        raise BoardError(f"{source}: {_where(error.absolute_path)}: {error.message}")
    problem = _check_rules(row)
    if problem is not None:
        raise BoardError(f"{source}: {problem}")
    return row
