"""A task defined here and nowhere else runs through the whole library (``docs/DESIGN.md``).

The task moves Task A's goal to the south-east corner (7, 0). Nothing in ``gridplan``, ``eval``
or ``train`` names it: the environment, V*, the planner (both scorers), the reference, the
metrics, the data and the command line read everything from the ``Task``.
"""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch
from paper_layout import CELL_SCALE, STATE_DIM

from eval.cli import main as eval_main
from gridplan.core import tasks
from gridplan.core.constants import AGENT_X, AGENT_Y, DOWN, RIGHT
from gridplan.core.env import reset, step
from gridplan.core.relevance import relevance_weights
from gridplan.core.tasks import TASK_A
from gridplan.core.values import value_table
from gridplan.data.datasets import collect, eval_windows
from gridplan.metrics.prediction import prediction_metrics
from gridplan.models.noise import NoiseModel, OracleModel
from gridplan.planning.closed_loop import GOAL, run_episodes
from gridplan.planning.planner import Planner
from gridplan.planning.reference import ref_action_values, ref_oracle_predict
from gridplan.planning.registry import through_predict

CORNER = (7, 0)


@pytest.fixture
def corner():
    task = tasks.register("corner", dataclasses.replace(TASK_A, name="corner", goal=CORNER))
    yield task
    tasks.unregister("corner")


def agent_cells(state: torch.Tensor) -> list[tuple[int, int]]:
    xy = torch.round(state[:, [AGENT_X, AGENT_Y]] * CELL_SCALE).long()
    return [tuple(c) for c in xy.tolist()]


def test_the_registry_resolves_the_new_task_and_forgets_it_afterwards(corner):
    assert tasks.get("corner") is corner
    assert "corner" in tasks.names()
    assert corner.relevant_dims == TASK_A.relevant_dims and not corner.reads_c1


def test_reaching_the_new_goal_pays_one_and_the_old_goal_pays_nothing(corner, make_state, gen):
    state = torch.cat(
        [
            make_state(agent=(6, 0), carrying=True, door_open=True),
            make_state(agent=(6, 4), carrying=True, door_open=True),
        ]
    )
    nxt, reward, done, info = step(state, torch.tensor([RIGHT, RIGHT]), gen, corner)
    assert agent_cells(nxt) == [CORNER, (7, 4)]
    assert reward.tolist() == [1.0, 0.0] and done.tolist() == [True, False]
    assert info["goal"].tolist() == [True, False]
    _, reward_a, _, _ = step(state, torch.tensor([RIGHT, RIGHT]), gen, TASK_A)
    assert reward_a.tolist() == [0.0, 1.0]
    assert reset(5, torch.Generator().manual_seed(0), corner).shape == (5, STATE_DIM)


def test_v_star_counts_steps_to_the_new_goal(corner, make_state):
    table = value_table(corner)
    gamma = corner.gamma
    one_step = make_state(agent=(7, 1), carrying=True, door_open=True)
    old_goal = make_state(agent=(7, 4), carrying=True, door_open=True)
    at_door = make_state(agent=(4, 4), carrying=True)
    assert table(one_step).item() == 1.0
    assert table(old_goal).item() == pytest.approx(gamma**3, rel=1e-6)
    # Bump the door, enter, (6, 4), then 4 down and 1 right (any order): 8 steps.
    assert table(at_door).item() == pytest.approx(gamma**7, rel=1e-6)
    assert value_table(corner) is table


@pytest.mark.parametrize("factory", [None, through_predict], ids=["fused", "generic"])
def test_the_oracle_planner_heads_for_the_new_goal(corner, make_state, random_states, factory):
    state = torch.cat(
        [
            make_state(agent=(7, 1), carrying=True, door_open=True),
            make_state(agent=(6, 0), carrying=True, door_open=True),
        ]
    )
    planner = Planner(OracleModel(), 2, corner, factory=factory)
    assert planner.act(state, torch.Generator().manual_seed(0)).tolist() == [DOWN, RIGHT]
    roots = random_states(20, torch.Generator().manual_seed(3))
    q = planner.action_values(roots, torch.Generator())
    torch.testing.assert_close(q, value_table(corner).q_values(roots), atol=1e-6, rtol=0)
    for i in range(3):
        want = ref_action_values(roots[i].tolist(), 2, corner, ref_oracle_predict)
        assert q[i].tolist() == pytest.approx(want, abs=1e-6)


def test_a_short_closed_loop_reaches_the_new_goal_in_every_episode(corner):
    result = run_episodes(OracleModel(), corner, depth=2, seeds=(0,), episodes=4, record=True)
    assert result.success.float().mean().item() == 1.0
    assert (result.outcome == GOAL).all()
    last = result.trajectory[result.steps, torch.arange(4)]
    assert agent_cells(last) == [CORNER] * 4
    noisy = run_episodes(NoiseModel.controlled(0.35, 0.1), corner, depth=2, seeds=(0,), episodes=4)
    assert noisy.success.shape == (4,)


def test_metrics_and_data_of_the_new_task(corner):
    windows = eval_windows(60, horizon=5, task=corner)
    assert windows.meta["task"] == "corner"
    (oracle,) = prediction_metrics(OracleModel(), windows, corner)
    # The oracle is exact on every dim V* reads: no VPE, no binary DRPE; distractors do differ.
    assert oracle.VPE == 0.0 and oracle.DRPE["binary"] == 0.0 and oracle.E_tot > 0
    assert set(oracle.DRPE) == {"binary", "graded"}
    data = collect("balanced", 2000, seed=0, task=corner)
    assert data.meta["task"] == "corner" and data.event_counts()["goals"] > 5
    at_goal = torch.tensor(agent_cells(data.next_states)) == torch.tensor(CORNER)
    assert torch.equal(at_goal.all(dim=1), data.goal)
    w = relevance_weights(corner)
    assert w.sum().item() == pytest.approx(1.0, abs=1e-6) and (w[6:] == 0).all()


def test_the_command_line_evaluates_the_new_task_by_name(corner, tmp_path, capsys):
    out = tmp_path / "corner.json"
    args = ["--model", "oracle", "--task", "corner", "--depth", "2", "--seeds", "1"]
    args += ["--episodes", "3", "--eval-windows", "20", "--json", str(out), "--no-progress"]
    assert eval_main(args) == 0
    report = json.loads(out.read_text())
    assert report["task"] == "corner" and report["success"]["mean"] == 1.0
