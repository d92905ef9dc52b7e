"""E12: E1's controlled grid on MiniGrid DoorKey (``gridplan/experiments/e12.py``): the tiny
profile end to end, with the sanity checks that hold by construction, and the config's
refusals."""

from __future__ import annotations

import csv
import dataclasses
import json

import pytest

from gridplan.experiments import GROUPS, settings
from gridplan.experiments.e12 import CLAIMS
from gridplan.experiments.runner import read_done, run_groups


def test_e12_refuses_a_world_without_tiles_or_an_unmeasured_learned_world():
    full = settings.E12["full"]
    with pytest.raises(ValueError, match="DoorKey worlds with tiles"):
        dataclasses.replace(full, worlds=("minigrid-doorkey-8x8",))
    with pytest.raises(ValueError, match="DoorKey worlds with tiles"):
        dataclasses.replace(full, worlds=("g8-k2",))
    with pytest.raises(ValueError, match="not measured"):
        dataclasses.replace(full, learned_worlds=("minigrid-doorkey-5x5-t2",))
    zoo = full.egocentric
    with pytest.raises(ValueError, match="egocentric.world 'minigrid-doorkey-5x5-t2' is not"):
        dataclasses.replace(
            full, egocentric=dataclasses.replace(zoo, world="minigrid-doorkey-5x5-t2")
        )
    with pytest.raises(ValueError, match="'mlp' is not a latent family"):
        dataclasses.replace(zoo, families=("mlp",))
    with pytest.raises(ValueError, match="EgocentricZoo.budgets is empty"):
        dataclasses.replace(zoo, budgets=())
    # Without families there are no egocentric models, and nothing else is asked.
    assert not settings.EgocentricZoo().families


@pytest.mark.slow
def test_e12_tiny_measures_the_grid_and_states_no_verdict(tmp_path):
    assert run_groups(GROUPS, ["e12"], tmp_path, "tiny", progress=False) == {"e12": "ran"}
    folder = tmp_path / "e12"
    with (folder / "worlds.csv").open() as f:
        (row,) = list(csv.DictReader(f))
    assert row["world"] == "minigrid-doorkey-6x6-t4" and int(row["state_width"]) == 17
    assert float(row["oracle_success"]) == 1.0
    assert float(row["irrelevant_drpe_max"]) == 0.0  # the tiles weigh 0 in Eq. 1
    models = json.loads((folder / "models.json").read_text())["models"]
    grid = [m for m in models if m["family"] == "controlled"]
    assert len(grid) == 4 and sum(m["family"] == "learned" for m in models) == 1
    (ego,) = [m for m in models if m["family"] == "egocentric"]
    assert ego["key"] == "rssm-egocentric-300" and ego["world"] == "minigrid-doorkey-6x6-t4"
    with (folder / "egocentric.csv").open() as f:
        (summary,) = list(csv.DictReader(f))
    # One model ranks nothing: its ρ are undefined, the pooled ones are over grid + model.
    assert int(summary["n_models"]) == 1 and summary["rho_DRPE"] == ""
    assert summary["pooled_rho_DRPE"] != ""
    # Noise on the tiles alone plays the oracle's episodes.
    assert {m["success"] for m in grid if m["sigma_r"] == 0.0} == {1.0}
    done = read_done(folder)
    assert [v["claim"] for v in done["verdicts"]] == list(CLAIMS.values())
    assert all(v["reproduced"] is None for v in done["verdicts"])
    assert (folder / "fig_doorkey.png").stat().st_size > 0
