"""The published JSON Schemas (``docs/schema/``) are valid schemas, accept the reports
``python -m eval`` writes and reject broken ones; ``tests/conftest.py`` validates every
report the other tests write."""

from __future__ import annotations

import copy
import json

import jsonschema
import pytest
from helpers_schema import SCHEMA_DIR, schema_for, validate

from eval.cli import main

TINY = [
    "--ladder-sizes",
    "tiny",
    "--depth",
    "2",
    "--seeds",
    "1",
    "--episodes",
    "2",
    "--eval-windows",
    "16",
    "--horizon",
    "3",
    "--no-progress",
]


@pytest.fixture(scope="module")
def written(tmp_path_factory) -> dict:
    tmp = tmp_path_factory.mktemp("schemas")
    assert main(["--model", "oracle", "--json", str(tmp / "paper.json"), *TINY]) == 0
    argv = ["--model", "noise", "--sigma-r", "0.5", "--card", "--json", str(tmp / "ladder.json")]
    assert main([*argv, *TINY]) == 0
    argv = ["--compare", "oracle", "noise,sigma_r=0.5", "noise,sigma_i=0.5", "--levels", "L4"]
    assert main([*argv, "--json", str(tmp / "cmp.json"), *TINY]) == 0
    return {
        name: json.loads((tmp / f"{name}.json").read_text())
        for name in ("paper", "ladder", "ladder.card", "cmp")
    }


def test_every_published_schema_is_a_valid_json_schema():
    names = sorted(p.name for p in SCHEMA_DIR.glob("*.schema.json"))
    assert names == [
        "board.schema.json", "card.schema.json", "compare.schema.json", "eval.schema.json"
    ]
    for name in names:
        jsonschema.Draft202012Validator.check_schema(json.loads((SCHEMA_DIR / name).read_text()))


def test_written_reports_validate_against_their_schema(written):
    assert {k: validate(v) for k, v in written.items()} == {
        "paper": "eval.schema.json",
        "ladder": "eval.schema.json",
        "ladder.card": "card.schema.json",
        "cmp": "compare.schema.json",
    }


@pytest.mark.parametrize(
    ("name", "break_it", "message"),
    [
        ("paper", lambda d: d.pop("E_tot"), "is not valid under any of the given schemas"),
        ("ladder", lambda d: d.update(schema_version="3.0"), "is not valid under any"),
        ("ladder", lambda d: d["ladder"]["L4"].pop("decision_regret"), "is not valid under any"),
        ("ladder.card", lambda d: d.pop("what_to_fix"), "'what_to_fix' is a required property"),
        ("cmp", lambda d: d["models"].__delitem__(slice(1, None)), "is too short"),
        ("cmp", lambda d: d.pop("depth"), "'depth' is a required property"),
    ],
    ids=["paper-no-E_tot", "ladder-v3", "ladder-no-regret", "card-no-fix", "cmp-one", "cmp-depth"],
)
def test_a_broken_report_is_rejected(written, name, break_it, message):
    data = copy.deepcopy(written[name])
    kind = schema_for(data)
    break_it(data)
    with pytest.raises(jsonschema.ValidationError, match=message):
        validate(data, kind)
