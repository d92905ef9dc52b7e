"""A board row is checked against its published JSON Schema and the rules a schema cannot
state; every refusal names the row's source and the field."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import jsonschema
import pytest
from helpers_board import make_row

from gridplan.board import ROW_SCHEMA, SCHEMA_VERSION, BoardError, validate_row
from gridplan.board.row_schema import schema_text

PUBLISHED = Path(__file__).resolve().parents[2] / "docs" / "schema" / "board.schema.json"


def test_a_good_row_is_returned_as_it_is():
    row = make_row("oracle", "quick-a")
    assert validate_row(row, "rows/x.json") is row
    assert SCHEMA_VERSION == 1


def test_the_published_schema_is_the_one_the_code_checks():
    jsonschema.Draft202012Validator.check_schema(ROW_SCHEMA)
    assert PUBLISHED.read_text() == schema_text(), (
        "regenerate: python -c 'from gridplan.board.row_schema import schema_text; "
        "print(schema_text(), end=\"\")' > docs/schema/board.schema.json"
    )


def _broken(change) -> dict:
    row = copy.deepcopy(make_row("noise(0.35,0.1)", "quick-b"))
    change(row)
    return row


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda r: r["metrics"].pop("success"),
         "rows/a.json: metrics: 'success' is a required property"),
        (lambda r: r["metrics"]["success"].update(value="0.8"),
         "rows/a.json: metrics.success.value: '0.8' is not of type 'number'"),
        (lambda r: r["metrics"]["success"].update(value=None),
         "rows/a.json: metrics.success.value: None is not of type 'number'"),
        (lambda r: r["metrics"]["success"].update(value=1.2),
         "rows/a.json: metrics.success.value: 1.2 is greater than the maximum of 1"),
        (lambda r: r["metrics"]["drpe"].update(ci=[0.1]),
         "rows/a.json: metrics.drpe.ci: [0.1] is too short"),
        (lambda r: r["metrics"]["regret"].update(vaule=0.1),
         "rows/a.json: metrics.regret: Additional properties are not allowed ('vaule'"),
        (lambda r: r["track"].update(hash="ABC"),
         "rows/a.json: track.hash: 'ABC' does not match"),
        (lambda r: r["track"].update(version=0),
         "rows/a.json: track.version: 0 is less than the minimum of 1"),
        (lambda r: r["track"].update(name="../up"),
         "rows/a.json: track.name: '../up' does not match"),
        (lambda r: r["model"].update(kind="magic"),
         "rows/a.json: model.kind: 'magic' is not one of"),
        (lambda r: r.pop("wall_s"), "rows/a.json: the row: 'wall_s' is a required property"),
        (lambda r: r["metrics"]["success"].update(ci=[0.9, 0.5]),
         "rows/a.json: metrics.success.ci: low 0.9 is above high 0.5"),
        (lambda r: r["metrics"]["e_tot"].update(value=float("nan")),
         "rows/a.json: metrics.e_tot.value: nan is not a finite number"),
        (lambda r: r["metrics"]["regret"].update(ci=[0.0, float("inf")]),
         "rows/a.json: metrics.regret.ci: inf is not a finite number"),
        (lambda r: r.update(created="yesterday"),
         "rows/a.json: created: 'yesterday' is not an ISO 8601 time"),
        (lambda r: r.update(created="2026-12-04T18:00:00"),
         "rows/a.json: created: '2026-12-04T18:00:00' has no time zone"),
        (lambda r: r.update(report="../elsewhere/report.json"),
         "rows/a.json: report: '../elsewhere/report.json' is not a path inside the board"),
        (lambda r: r.update(report="/abs/report.json"),
         "rows/a.json: report: '/abs/report.json' is not a path inside the board"),
    ],
    ids=["no-success", "success-str", "success-null", "success-1.2", "short-ci", "typo",
         "hash", "version-0", "track-path", "kind", "no-wall", "ci-order", "nan", "inf", "created",
         "created-naive", "report-up", "report-abs"],
)
def test_a_broken_row_is_refused_naming_its_source_and_field(change, message):
    with pytest.raises(BoardError) as caught:
        validate_row(_broken(change), "rows/a.json")
    assert str(caught.value).startswith(message), str(caught.value)


@pytest.mark.parametrize("version", [2, 0, "1", True, None])
def test_a_row_of_another_schema_version_names_both_versions(version):
    row = _broken(lambda r: r.update(schema_version=version))
    with pytest.raises(BoardError) as caught:
        validate_row(row, "rows/b.json")
    assert str(caught.value).startswith(
        f"rows/b.json: a board row of schema_version {version!r}; this gridplan reads "
        "schema_version 1 only"
    )


def test_a_row_that_is_not_an_object_is_refused():
    with pytest.raises(BoardError, match="rows/c.json: a board row is a JSON object, got list"):
        validate_row([1, 2], "rows/c.json")


def test_extra_metrics_may_be_null_and_keep_their_interval():
    row = _broken(lambda r: r["metrics"].update(L6_spearman={"value": None, "ci": None}))
    assert validate_row(json.loads(json.dumps(row)), "x")["metrics"]["L6_spearman"]["value"] is None
