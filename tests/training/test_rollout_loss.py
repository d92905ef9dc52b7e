"""The multi-step (open-loop rollout) loss: links between logged steps, the loss on hand-built
values, and a rollout member of a vectorized group equals its run alone (gridplan.training.module,
gridplan.training.vectorized)."""

from __future__ import annotations

import pytest
import torch
from helpers_learned import assert_members_equal_runs_alone, debug_overrides, zero_last_layer

from gridplan.models.learned import MLPDynamics
from gridplan.training.config import compose
from gridplan.training.module import next_rows, rollout_mse, rollout_rows, weighted_mse
from gridplan.training.runs import new_run_dir, train
from gridplan.training.vectorized import Member, train_group


def test_next_rows_follow_each_episode_and_stop_at_its_end():
    episode = torch.tensor([0, 0, 0, 1, 1, 2])
    t = torch.tensor([0, 1, 2, 0, 1, 5])
    assert next_rows(episode, t).tolist() == [1, 2, -1, 4, -1, -1]
    # A step missing from the split (t jumps) ends the chain too.
    assert next_rows(torch.tensor([0, 0]), torch.tensor([0, 2])).tolist() == [-1, -1]


def test_rollout_rows_repeat_the_last_row_once_the_episode_ends():
    links = torch.tensor([1, 2, -1, 4, -1])
    steps, valid = rollout_rows(links, torch.tensor([0, 1, 3]), 3)
    assert steps.tolist() == [[0, 1, 2], [1, 2, 2], [3, 4, 4]]
    assert valid.tolist() == [[True, True, True], [True, True, False], [True, True, False]]


def test_rollout_mse_on_a_model_that_predicts_no_change():
    """A delta model with a zero output layer predicts ``s' = s``: step k's error is the true
    change over k steps, worked out by hand."""
    net = zero_last_layer(MLPDynamics([8], 1))
    s0 = torch.zeros(1, 12)
    targets = torch.zeros(1, 3, 12)
    targets[0, :, 0] = torch.tensor([0.1, 0.2, 0.4])  # a_x moves by 0.1, 0.1, 0.2
    actions = torch.zeros(1, 3, dtype=torch.long)
    ones = torch.ones(12)
    pred = net(s0, actions[:, 0])
    one_step = weighted_mse(pred, targets[:, 0], ones, torch.ones(1))
    assert one_step.item() == pytest.approx(0.01 / 12)
    events = torch.tensor([[False, True]])
    valid = torch.tensor([[True, True]])
    loss = rollout_mse(
        net,
        pred,
        targets[:, 0],
        torch.ones(1),
        actions[:, 1:],
        targets[:, 1:],
        events,
        valid,
        ones,
        10.0,
    )
    # Steps 1..3 errors 0.1^2, 0.2^2 and (event-weighted 10x) 0.4^2, over 12 dims and 3 steps.
    assert loss.item() == pytest.approx((0.01 + 0.04 + 10 * 0.16) / 12 / 3, rel=1e-6)
    cut = rollout_mse(
        net,
        pred,
        targets[:, 0],
        torch.ones(1),
        actions[:, 1:],
        targets[:, 1:],
        events,
        torch.tensor([[True, False]]),
        ones,
        10.0,
    )
    assert cut.item() == pytest.approx((0.01 + 0.04) / 12 / 3, rel=1e-6)


def test_a_horizon_below_one_is_rejected(tmp_path):
    with pytest.raises(ValueError, match="variant.rollout_horizon must be >= 1"):
        compose([*debug_overrides(tmp_path), "variant.rollout_horizon=0"])


def _configs(tmp):
    base = [*debug_overrides(tmp), "trainer.limit_train_batches=null"]
    return [
        compose([*base, "seed=0"]),
        compose([*base, "seed=1", "variant=rollout"]),
        compose(
            [
                *[o for o in base if not o.startswith("data.budget=")],
                "seed=2",
                "variant=rollout",
                "variant.rollout_horizon=3",
                "variant.event_weight=5.0",
                "data.budget=400",
            ]
        ),
    ]


@pytest.mark.slow
def test_a_rollout_member_ends_with_the_weights_and_metrics_of_its_run_alone(tmp_path):
    cfgs = _configs(tmp_path)
    alone = [train(cfg) for cfg in cfgs]
    members = [Member(c, new_run_dir(tmp_path / "grouped", f"m{i}")[0]) for i, c in enumerate(cfgs)]
    result = train_group(members, name="rollout", progress=False)
    assert_members_equal_runs_alone(alone, result.runs, ("best/E_tot", "best/DRPE_graded"))
    # The rollout loss is another objective: the H = 4 run differs from a one-step run of
    # the same seed.
    one_step = train(
        compose([*debug_overrides(tmp_path), "trainer.limit_train_batches=null", "seed=1"])
    )
    assert one_step[0]["best_score"] != pytest.approx(alone[1][0]["best_score"], rel=1e-3)
