"""A group's recorded name is its composed choice: ``variant.name=bogus`` never trains."""

from __future__ import annotations

import pytest

from gridplan.training.config import compose, run_name
from train.__main__ import main

VARIANTS = "anti_weighted, event_weighted, rel_heavy, rel_only, rollout, uniform"


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["variant.name=bogus"], f"variant.name='bogus' does not match the chosen variant "
         f"'uniform'.*valid variant choices: {VARIANTS}"),
        # A known name without its weights would train uniform weights under rel_only's name.
        (["variant.name=rel_only"], "chosen variant 'uniform'"),
        (["variant=rel_only", "variant.name=uniform"], "chosen variant 'rel_only'"),
        (["data.name=4k"], "data.name='4k' does not match the chosen data '20k'.*12k, 20k, 4k"),
        (["model.name=ensemble5"], "chosen model 'mlp'.*ensemble5, jepa, latent_recon, mlp"),
        (["trainer.name=debug"], "chosen trainer 'default'.*debug, default"),
    ],
)
def test_a_group_name_that_is_not_the_choice_is_refused(overrides, message):
    with pytest.raises(ValueError, match=message):
        compose(overrides)


def test_the_choice_itself_and_a_preset_compose():
    cfg = compose(["variant=rel_only", "variant.name=rel_only"])
    assert (cfg.variant.name, cfg.variant.irrelevant_weight) == ("rel_only", 0.0)
    assert run_name(cfg) == "rel_only-balanced-20k-seed0"
    preset = compose(["experiment=random_12k"])
    assert (preset.experiment, preset.variant.name, preset.data.name) == (
        "random_12k", "uniform", "12k"
    )


def test_train_cli_exits_2_naming_the_valid_variants(capsys, tmp_path):
    assert main(["variant.name=bogus", f"out_dir={tmp_path}"]) == 2
    err = capsys.readouterr().err
    assert f"valid variant choices: {VARIANTS}" in err
    assert not any(tmp_path.iterdir())


def test_a_sweep_point_with_a_wrong_name_trains_nothing(capsys, tmp_path):
    assert main(["-m", "seed=0,1", "variant.name=bogus", f"out_dir={tmp_path}"]) == 2
    assert "variant.name='bogus'" in capsys.readouterr().err
    assert not any(tmp_path.iterdir())
