"""Validation of every report the tests write against the published JSON Schemas of
``docs/schema/`` (``eval.schema.json``, ``card.schema.json``, ``compare.schema.json``).

``schema_for(data)`` tells a report's kind from its content; ``validate(data)`` raises
``jsonschema.ValidationError`` naming the first violation; ``validate_file(path)`` reads one.
``tests/conftest.py`` validates every JSON report written through
``gridplan.evaluation.schema.write_text`` (reports, comparisons) and the card's writer.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import jsonschema
from referencing import Registry, Resource

SCHEMA_DIR = Path(__file__).resolve().parents[1] / "docs" / "schema"


@cache
def _schemas() -> dict[str, dict]:
    return {p.name: json.loads(p.read_text()) for p in sorted(SCHEMA_DIR.glob("*.schema.json"))}


@cache
def _registry() -> Registry:
    return Registry().with_resources(
        (s["$id"], Resource.from_contents(s)) for s in _schemas().values()
    )


def schema_for(data) -> str | None:
    """The schema file of a report dict (``None``: not a report)."""
    if not isinstance(data, dict):
        return None
    if "compare_schema_version" in data:
        return "compare.schema.json"
    if "card_schema_version" in data:
        return "card.schema.json"
    if "model" in data and ("schema_version" in data or "E_tot" in data or "success" in data):
        return "eval.schema.json"
    return None


def validate(data, name: str | None = None) -> str | None:
    """Validate ``data`` against its schema (``name``, or the one ``schema_for`` picks).

    Returns:
        The schema's file name, or None if ``data`` is not a report.

    Raises:
        jsonschema.ValidationError: on the first violation.
    """
    name = name or schema_for(data)
    if name is None:
        return None
    schema = _schemas()[name]
    jsonschema.Draft202012Validator(schema, registry=_registry()).validate(data)
    return name


def validate_file(path: str | Path) -> str | None:
    """``validate`` the JSON file at ``path``."""
    return validate(json.loads(Path(path).read_text()))
