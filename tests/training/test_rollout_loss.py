"""The multi-step (open-loop rollout) loss: links between logged steps, the loss on hand-built
values, and a rollout member of a vectorized group equals its run alone
(gridplan.training.engine, gridplan.training.vectorized)."""

from __future__ import annotations

import pytest
import torch
from helpers_learned import (
    assert_members_equal_runs_alone,
    debug_overrides,
    tiny_stack,
    zero_last_layer,
)

from gridplan.training.config import compose
from gridplan.training.module import next_rows, rollout_rows
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


def _rollout_errors(tmp_path, links: list[int]) -> float:
    """The loss sum of a delta model with a zero output layer (it predicts ``s' = s``),
    ``H = 3``, event weight 10, from row 0 of three logged steps in which ``a_x`` moves by
    0.1, 0.1 and 0.2, the last an event; ``links`` chains the rows."""
    states, next_states = torch.zeros(3, 12), torch.zeros(3, 12)
    next_states[:, 0] = torch.tensor([0.1, 0.2, 0.4])
    states[1:, 0] = next_states[:2, 0]
    module = tiny_stack(
        tmp_path,
        "variant=rollout",
        "variant.rollout_horizon=3",
        "variant.event_weight=10.0",
        states=states,
        actions=torch.zeros(3, dtype=torch.long),
        next_states=next_states,
        event=torch.tensor([False, False, True]),
        next=torch.tensor(links),
    )
    zero_last_layer(module.net)
    rows = torch.zeros(1, 1, dtype=torch.long)
    return float(module.errors("train", rows, torch.ones(1, 1)).detach())


def test_the_rollout_loss_of_a_model_that_predicts_no_change(tmp_path):
    """Step k's error is the true change over k steps, worked out by hand."""
    # Steps 1..3 errors 0.1^2, 0.2^2 and (event-weighted 10x) 0.4^2.
    assert _rollout_errors(tmp_path, [1, 2, -1]) == pytest.approx(0.01 + 0.04 + 1.6, rel=1e-6)
    # The episode's logged steps end after step 2: step 3 weighs 0.
    assert _rollout_errors(tmp_path, [1, -1, -1]) == pytest.approx(0.01 + 0.04, rel=1e-6)


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
