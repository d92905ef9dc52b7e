"""Decision agreement and regret use the planner's tie rule (``gridplan.evaluation.decisions``)
and the readings carry it (``gridplan.core.readings``, ``docs/PREREGISTERED.md`` Rule 1)."""

from __future__ import annotations

import pytest
import torch

from gridplan.core import readings
from gridplan.core.constants import RIGHT, UP
from gridplan.core.env import reset
from gridplan.core.tasks import TASK_A
from gridplan.evaluation.decisions import decide
from gridplan.models.noise import NoiseModel, OracleModel
from gridplan.planning.planner import Planner


def test_decide_breaks_ties_as_the_planner_does(make_state):
    # Up and right tie from (0, 0) carrying with the door open: both optimal.
    roots = make_state(agent=(0, 0), carrying=True, door_open=True, rows=200)
    first = decide(OracleModel(), roots, TASK_A, 2, torch.Generator().manual_seed(1))
    assert first.action.tolist() == [UP] * 200
    rand = decide(OracleModel(), roots, TASK_A, 2, torch.Generator().manual_seed(1), ties="random")
    assert set(rand.action.tolist()) == {UP, RIGHT}
    assert bool(first.optimal.all()) and bool(rand.optimal.all())


def test_decide_chooses_what_the_planner_acts_under_both_rules():
    model = NoiseModel.controlled(0.35, 0.1)
    roots = reset(48, torch.Generator().manual_seed(2))
    for rule in ("first", "random"):
        chosen = decide(model, roots, TASK_A, 2, torch.Generator().manual_seed(3), ties=rule)
        acted = Planner(model, 2, ties=rule).act(roots, torch.Generator().manual_seed(3))
        assert torch.equal(chosen.action, acted), rule


def test_decide_rejects_a_bad_tie_rule(make_state):
    with pytest.raises(ValueError, match="ties must be one of first, random or None"):
        decide(OracleModel(), make_state(), TASK_A, 1, torch.Generator(), ties="last")


def test_readings_carry_the_preregistered_tie_rule():
    assert readings.PROJECT.ties == readings.PAPER.ties == "first"
    assert readings.CHOICES["ties"] == ("first", "random")
    assert readings.with_ties(readings.PAPER, None) is readings.PAPER
    assert readings.with_ties(readings.PAPER, "first") is readings.PAPER
    other = readings.with_ties(readings.PAPER, "random")
    assert (other.name, other.differences(readings.PAPER)) == (
        "paper-ties-random",
        {"ties": "random"},
    )
    with pytest.raises(ValueError, match="ties must be one of"):
        readings.with_ties(readings.PROJECT, "lowest")
    with pytest.raises(ValueError, match="ties must be one of"):
        readings.PROJECT.replace("bad-ties", ties="lowest")
