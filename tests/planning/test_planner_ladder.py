"""The ladder and ``python -m eval`` with a chosen planner (``--planner``): decisions, regret
and XGap measured for that planner, the planner recorded in the report, errors on bad input."""

from __future__ import annotations

import json

import jsonschema
import pytest
import torch
from helpers_schema import validate

from eval.cli import main
from gridplan.core.tasks import TASK_A
from gridplan.evaluation.decisions import decide, decide_planner
from gridplan.evaluation.ladder import evaluate
from gridplan.evaluation.planner_choice import PlannerChoice
from gridplan.evaluation.spec import PlannerSpec, load_spec
from gridplan.models.noise import NoiseModel, OracleModel
from gridplan.planning.closed_loop import start_states
from gridplan.planning.planner import Planner

TINY = load_spec("tiny-controlled").replace(seeds=(0,), episodes=6)


def test_decide_planner_of_the_search_equals_decide():
    # The same decisions through both paths: the plain planner's plan and ``decide``.
    roots = start_states((2,), 32, TASK_A)
    model = NoiseModel.controlled(0.3, 0.0)
    ref = decide(model, roots, TASK_A, 3, torch.Generator().manual_seed(5))
    got = decide_planner(Planner(model, 3, TASK_A), roots, torch.Generator().manual_seed(5))
    assert torch.equal(ref.action, got.action)
    torch.testing.assert_close(ref.regret, got.regret, atol=1e-6, rtol=0)
    torch.testing.assert_close(ref.predicted, got.predicted)
    torch.testing.assert_close(ref.achieved, got.achieved, atol=1e-6, rtol=0)


def test_oracle_decisions_of_the_sampling_planners_are_near_optimal():
    # With the oracle and exact V*, CEM's and MPPI's chosen actions are optimal under Q* at
    # >= 90% of start states (measured 0.97-1.00), and their promised return is what the
    # committed sequence achieves (XGap 0: the oracle's relevant dims are exact).
    roots = start_states((2,), 32, TASK_A)
    for name in ("cem", "mppi"):
        planner = PlannerChoice.of(PlannerSpec(name), 4).build(OracleModel(), TASK_A, 4)
        d = decide_planner(planner, roots, torch.Generator().manual_seed(1))
        assert float(d.optimal.double().mean()) >= 0.9
        torch.testing.assert_close(d.xgap, torch.zeros(32), atol=1e-6, rtol=0)


def test_evaluate_records_the_planner_and_measures_with_it():
    plain = evaluate(OracleModel(), TINY, depth=3, levels=("L4",)).to_dict()
    assert "planner" not in plain
    cem = evaluate(
        OracleModel(), TINY, depth=3, levels=("L4", "L7"), planner={"name": "cem"}
    ).to_dict()
    assert cem["planner"] == {
        "name": "cem",
        "settings": {
            "horizon": 3,
            "candidates": 64,
            "elites": 8,
            "iterations": 4,
            "value": "exact",
        },
    }
    assert cem["ladder"]["L4"]["decision_agreement"]["mean"] >= 0.9
    assert cem["ladder"]["L7"]["success"]["mean"] == 1.0
    # The branch set is the search's: the same states, so the same number of them.
    assert cem["ladder"]["L4"]["n_states"] == plain["ladder"]["L4"]["n_states"]
    assert validate(cem) == "eval.schema.json"
    bad = dict(cem, planner={"name": "alphazero", "settings": {}})
    with pytest.raises(jsonschema.ValidationError, match="alphazero"):
        validate(bad)


def test_cli_planner_errors(capsys):
    base = ["--model", "oracle", "--depth", "2", "--seeds", "1", "--episodes", "2"]
    base += ["--eval-windows", "8", "--horizon", "3", "--no-progress"]
    with pytest.raises(SystemExit):
        main([*base, "--planner", "alphazero"])
    assert "invalid choice: 'alphazero'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main([*base, "--planner-setting", "candidates=8"])
    assert "--planner-setting needs --planner NAME" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main([*base, "--planner", "cem", "--planner-setting", "elites=99"])
    assert "elites (99) must not exceed candidates (64)" in capsys.readouterr().err


def test_cli_writes_the_planner_into_the_report(tmp_path):
    out = tmp_path / "mppi.json"
    args = ["--model", "oracle", "--depth", "2", "--seeds", "1", "--episodes", "3"]
    args += ["--eval-windows", "8", "--horizon", "3", "--no-progress", "--planner", "mppi"]
    args += ["--planner-setting", "candidates=16", "--planner-setting", "temperature=5"]
    assert main([*args, "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    assert validate(report) == "eval.schema.json"
    assert report["planner"]["name"] == "mppi"
    assert report["planner"]["settings"]["candidates"] == 16
    assert report["planner"]["settings"]["temperature"] == 5.0


def test_the_card_describes_the_chosen_planner():
    from gridplan.evaluation.card import policy_class

    plain = policy_class({"depth": 4})
    assert plain.startswith("full-width tree search at depth 4") and "V* (exact)" in plain
    settings = {"horizon": 4, "candidates": 64, "elites": 8, "iterations": 4, "value": "none"}
    cem = policy_class({"depth": 4, "planner": {"name": "cem", "settings": settings}})
    assert cem.startswith("cross-entropy method over action sequences (horizon=4, ")
    assert "value=none" in cem


