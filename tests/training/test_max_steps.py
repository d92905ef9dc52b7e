"""``trainer.max_steps``: a run stops at the step cap, inside an epoch too, validated there
(best checkpoint and held-out metrics), alone and as a member of a vectorized group."""

from __future__ import annotations

import math

import pytest
import torch
from helpers_learned import assert_members_equal_runs_alone, debug_overrides

from gridplan.training.config import compose
from gridplan.training.runs import new_run_dir, train
from gridplan.training.vectorized import Member, train_group

#: 540 training rows of the 600-transition debug data at batch 64: 9 steps an epoch.
FULL_EPOCHS = ("trainer.limit_train_batches=null",)


def _steps_taken(ckpt_path: str) -> tuple[int, int]:
    """``(global_step, AdamW step count)`` recorded in a checkpoint."""
    ckpt = torch.load(ckpt_path, weights_only=False)
    return int(ckpt["global_step"]), int(ckpt["optimizer_states"][0]["state"][0]["step"])


def test_a_debug_run_with_max_steps_3_takes_exactly_3_optimizer_steps(tmp_path):
    """Debug trainer, 9 steps an epoch: the cap ends the first epoch after 3 steps, before
    any epoch-end validation, and the run still has a best checkpoint and metrics."""
    cfg = compose([*debug_overrides(tmp_path), *FULL_EPOCHS, "trainer.max_steps=3"])
    metrics, artifacts = train(cfg)
    assert _steps_taken(artifacts["last_checkpoint"]) == (3, 3)
    assert _steps_taken(artifacts["best_checkpoint"]) == (3, 3)
    assert metrics["epochs"] == 1
    assert math.isfinite(metrics["best/E_tot"]) and math.isfinite(metrics["best_score"])


def test_max_steps_must_be_a_positive_count(tmp_path):
    for bad in ("0", "-5"):
        with pytest.raises(ValueError, match=r"trainer.max_steps must be >= 1 or null, got"):
            compose([*debug_overrides(tmp_path), f"trainer.max_steps={bad}"])
    with pytest.raises(ValueError, match="max_steps"):
        compose([*debug_overrides(tmp_path), "trainer.max_steps=many"])


@pytest.mark.slow
def test_members_with_step_caps_end_as_their_runs_alone(tmp_path):
    """A group of a 3-step member (inside epoch 1), a 12-step member (9 + 3: inside epoch 2,
    where it takes fewer steps than the 5-step member of a smaller dataset, so the cohorts
    are re-ranked) and two uncapped members (3 epochs): each ends with its run alone's steps,
    epochs, weights and metrics."""
    base = [*debug_overrides(tmp_path), *FULL_EPOCHS, "trainer.max_epochs=3"]
    small = [o for o in base if not o.startswith("data.budget=")] + ["data.budget=300"]
    cfgs = [
        compose([*base, "seed=0", "trainer.max_steps=3"]),
        compose([*base, "seed=1", "trainer.max_steps=12"]),
        compose([*small, "seed=2"]),
        compose([*base, "seed=3"]),
    ]
    alone = [train(c) for c in cfgs]
    members = [Member(c, new_run_dir(tmp_path / "g", f"m{i}")[0]) for i, c in enumerate(cfgs)]
    result = train_group(members, progress=False)
    assert_members_equal_runs_alone(alone, result.runs, ("best/E_tot", "best/DRPE_graded"))
    steps = [m["global_step"] for m in result.record["members"]]
    assert steps == [3, 12, 15, 27]
    for (_, a_alone), (_, a_group), n in zip(alone, result.runs, steps, strict=True):
        assert _steps_taken(a_alone["last_checkpoint"]) == (n, n)
        assert _steps_taken(a_group["last_checkpoint"]) == (n, n)
    stopped = [m["stopped"] for m in result.record["members"]]
    assert stopped[:2] == ["max_steps=3 reached", "max_steps=12 reached"]
