"""Plumbing of the learned-model groups E3 (Table 3) and E4 (Table 4) on the tiny profile.

One tiny run of e1, e2, e3 and e4 into a shared results root (debug trainer, a few hundred
transitions, 2 episodes): folder layout, the model records e2 pools, the paper's numbers beside
ours, and e4 reusing everything finished before it. Not the paper's numbers: those need a full
run.
"""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path
from unittest import mock

import pytest
import torch
from paper_layout import DIM_NAMES, STATE_DIM

from gridplan.core.tasks import TASK_A
from gridplan.data.datasets import eval_windows
from gridplan.experiments import GROUPS, e3, e4, settings
from gridplan.experiments.learned_runs import DATA_CACHE, RUNS, ModelStack, group_relative
from gridplan.experiments.records import MODEL_FIELDS, LearnedRecord, read_models
from gridplan.experiments.runner import read_done, run_groups
from gridplan.metrics.prediction import PredictionMetrics, prediction_metrics
from gridplan.models.contract import WorldModel
from gridplan.models.learned import load_world_model
from gridplan.training import module as training_module


def read_csv(path: Path) -> list[dict]:
    with path.open() as f:
        return list(csv.DictReader(f))


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    """e1, e2, e3 and e4 once on the tiny profile; e4 must reuse the other three."""
    out = tmp_path_factory.mktemp("results")
    # Windows another test made earlier in this process would be reused from memory and never
    # written to this results root's cache.
    with mock.patch.dict(training_module._WINDOWS, clear=True):
        status = run_groups(GROUPS, ["e4", "e3", "e2", "e1"], out, "tiny", progress=False)
    assert status == {"e1": "ran", "e3": "ran", "e2": "ran", "e4": "ran"}
    return out


def test_e3_trains_into_its_group_folder_and_caches_datasets_under_the_results_root(root):
    cfg = settings.E3["tiny"]
    runs = read_csv(root / "e3" / "runs.csv")
    assert len(runs) == (len(cfg.rows) + 1) * len(cfg.protocol.seeds)
    for run in runs:
        ckpt = Path(run["checkpoint"])
        assert not ckpt.is_absolute() and ckpt.parts[0] == RUNS
        assert (root / "e3" / ckpt).is_file()
    cached = sorted(p.name for p in (root / DATA_CACHE).iterdir())
    # One dataset per (policy, budget, seed): the two 600-transition rows share one; one file
    # of held-out windows, shared by every run.
    assert cached == [
        "A-balanced-200-seed0.pt",
        "A-balanced-600-seed0.pt",
        "A-random-400-seed0.pt",
        "A-windows-balanced-16x10-seed10000.pt",
    ]


def test_checkpoints_are_recorded_relative_to_the_group_folder_even_from_a_relative_root(
    tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    ckpt = tmp_path / "results" / ".e3.tmp-1" / "runs" / "r" / "best.ckpt"
    assert group_relative(ckpt, Path("results/.e3.tmp-1")) == "runs/r/best.ckpt"
    assert group_relative("/elsewhere/best.ckpt", Path("results")) == "/elsewhere/best.ckpt"


def test_e3_models_json_holds_learned_records_for_e2_and_the_random_model_apart(root):
    records = read_models(root / "e3", LearnedRecord)
    cfg = settings.E3["tiny"]
    learned = [r for r in records if r.family == "learned"]
    assert [r.name for r in learned] == ["uniform 20k", "rel-only 20k", "uniform 4k"]
    extra = [r for r in records if r.family == "learned_extra"]
    assert [r.name for r in extra] == ["uniform 12k (random data)"]
    rows = json.loads((root / "e3" / "models.json").read_text())["models"]
    for rec, row in zip(records, rows, strict=True):
        assert set(MODEL_FIELDS) <= set(row) and {f"err_{d}" for d in DIM_NAMES} <= set(row)
        assert rec.n_episodes == cfg.protocol.n_episodes
        assert sum(rec.outcomes.values()) == rec.n_episodes
        assert 0.0 <= rec.carrying_at_pickup <= 1.0
        # The profile sums to 12 E_tot, the identity e4 relies on.
        assert sum(rec.profile) == pytest.approx(12 * rec.E_tot, rel=1e-5)


def test_e2_pools_the_learned_models_e3_wrote(root):
    results = json.loads((root / "e2" / "results.json").read_text())
    assert results["learned_available"] is True
    assert [r["name"] for r in results["learned"]] == ["uniform 20k", "rel-only 20k", "uniform 4k"]
    assert read_done(root / "e2")["inputs"]["e3"] == read_done(root / "e3")["run_id"]


def test_e3_table_prints_the_paper_numbers_beside_ours(root):
    text = (root / "e3" / "table.md").read_text()
    assert "| variant | success | success (paper) | E_tot | E_tot (paper) |" in text
    assert "| uniform 20k |" in text and "0.75 ± 0.03" in text and "| 0.145 |" in text
    assert "0.04 ± 0.04" in text and "| 0.011 |" in text
    assert "| predicted carrying at pickup |" in text and "| 0.19 |" in text
    assert "| E_tot | 3 |" in text and "| 0.43 |" in text
    assert "SE over the episodes (one training seed in this profile)" in text
    for png in ("fig8_random_data_failure.png", "fig_table3_success.png"):
        assert (root / "e3" / png).stat().st_size > 0


def test_e3_reports_both_tie_rules_the_cycling_and_the_noise_twins(root):
    text = (root / "e3" / "table.md").read_text()
    for rule in ("first", "random"):
        assert f"### Table 3 — learned world models (ties={rule})" in text
        assert f"broken by `{rule}`" in text
    assert "### Table 3's ordering under each tie rule" in text
    assert "### Does the deterministic closed-loop policy cycle? (§5.4 (ii))" in text
    assert "### Bias vs noise at equal E_tot" in text
    results = json.loads((root / "e3" / "results.json").read_text())
    assert results["ties"] == "first" and set(results["by_ties"]) == {"first", "random"}
    # The same models: prediction metrics agree under both rules, only success may differ.
    first, random = (results["by_ties"][r]["models"] for r in ("first", "random"))
    assert [m["E_tot"] for m in first] == [m["E_tot"] for m in random]
    assert [m["E_tot"] for m in first] == [m["E_tot"] for m in results["models"]]
    assert len(results["noise_twins"]) == len(first) + 1
    t3 = read_csv(root / "e3" / "table3_ties-random.csv")
    assert {r["ties"] for r in t3} == {"random"}


def test_e4_reuses_the_grid_the_sweep_and_the_learned_model_and_collects_no_data(root):
    results = json.loads((root / "e4" / "results.json").read_text())
    assert results["grid_source"] == "e1" and results["sweep_source"] == "e2"
    # The sweep profiles recomputed here are e2's own (same windows, same generator).
    assert results["sweep_max_etot_diff_vs_e2"] == 0.0
    assert results["profile_identity_max_error"] < 1e-6
    assert [(e["seed"], e["source"]) for e in results["estimates"]] == [(0, "e3")]
    assert not (root / "e4" / "runs").exists()
    done = read_done(root / "e4")
    assert set(done["inputs"]) == {"e1", "e2", "e3"} and None not in done["inputs"].values()
    assert len(list((root / DATA_CACHE).iterdir())) == 4


def test_e4_weights_are_normalized_and_the_masks_are_the_named_dimension_sets(root):
    rows = {r["weighting"]: r for r in read_csv(root / "e4" / "weights.csv")}
    for name, row in rows.items():
        w = [float(v) for k, v in row.items() if k != "weighting"]
        assert len(w) == STATE_DIM and sum(w) == pytest.approx(1.0, abs=1e-6), name
    c1 = rows["binary + c1"]
    assert float(c1["c1"]) == pytest.approx(1 / 7) and float(c1["agent_x"]) == pytest.approx(1 / 7)
    assert float(c1["c2"]) == 0.0
    no_key = rows["binary − key (x, y)"]
    assert float(no_key["key_x"]) == 0.0 and float(no_key["carrying"]) == pytest.approx(1 / 4)
    for dim in ("c1", "c2", "d1_x", "d1_y", "d2_x", "d2_y"):
        assert float(rows["graded"][dim]) == 0.0
    table = {r["weighting"]: r for r in read_csv(root / "e4" / "table4.csv")}
    assert float(table["binary + c1"]["paper_rho"]) == -0.45
    assert float(table["estimated (seed 0)"]["paper_rho"]) == -0.24
    mass = float(table["estimated (seed 0)"]["irrelevant_mass"])
    estimate = json.loads((root / "e4" / "results.json").read_text())["estimates"][0]
    assert mass == pytest.approx(estimate["irrelevant_mass"], abs=1e-6)
    assert sum(estimate["weights"]) == pytest.approx(1.0, abs=1e-6)
    text = (root / "e4" / "table.md").read_text()
    assert "| binary + c1 | false positive | 0.14 |" in text and "| -0.45 |" in text


def test_a_model_stack_scores_every_model_exactly_as_alone(root):
    records = read_models(root / "e3", LearnedRecord)
    models = [load_world_model(root / "e3" / r.checkpoints[0]) for r in records[:2]]
    w = eval_windows(8)
    stacked = prediction_metrics(ModelStack(models), w, TASK_A)
    alone = [prediction_metrics(m, w, TASK_A)[0] for m in models]
    for s, a in zip(stacked, alone, strict=True):
        assert s.E_tot == a.E_tot and s.DRPE == a.DRPE
        assert torch.equal(s.profile, a.profile)


class _Constant(WorldModel):
    def __init__(self, value: float) -> None:
        self.value = value

    def predict(self, state, action, generator):
        return torch.full_like(state, self.value)


def test_a_model_stack_predicts_block_m_with_model_m_and_rejects_uneven_batches():
    stack = ModelStack([_Constant(0.25), _Constant(0.75)])
    assert stack.n_settings == 2
    out = stack.predict(torch.zeros(4, STATE_DIM), torch.zeros(4, dtype=torch.long), None)
    assert out[:2].eq(0.25).all() and out[2:].eq(0.75).all()
    with pytest.raises(ValueError, match="does not split into 2 blocks"):
        stack.predict(torch.zeros(3, STATE_DIM), torch.zeros(3, dtype=torch.long), None)
    with pytest.raises(ValueError, match="at least one model"):
        ModelStack([])


def _seed_result(success: float) -> e3.SeedResult:
    metrics = PredictionMetrics(
        E_tot=0.1,
        DRPE={"graded": 0.05, "binary": 0.04},
        profile=torch.full((STATE_DIM,), 0.1),
        step_profile=torch.zeros(1, STATE_DIM),
        event_audit={
            k: 0.5 for k in ("carrying_at_pickup", "pickup_mse", "door_open_at_opening", "door_mse")
        },
        VPE=0.0,
        horizon=1,
        n_windows=1,
    )
    outcomes = {"goal": 1, "hazard": 0, "timeout": 3}
    return e3.SeedResult(metrics, success, outcomes, picked_up_key=1.0, opened_door=0.5)


def test_success_se_is_taken_over_the_seeds_success_rates():
    per_seed = [_seed_result(s) for s in (0.5, 0.7, 0.9)]
    rec = e3.aggregate(settings.ROWS[0], "learned", per_seed, 40)
    # mean 0.7; sample std of (0.5, 0.7, 0.9) is 0.2, so SE = 0.2 / sqrt(3).
    assert rec.success == pytest.approx(0.7)
    assert rec.success_se == pytest.approx(0.2 / math.sqrt(3))
    assert rec.success_se_over == "seeds" and rec.n_episodes == 120
    assert rec.outcomes == {"goal": 3, "hazard": 0, "timeout": 9}


def test_with_one_seed_the_se_is_taken_over_its_episodes():
    rec = e3.aggregate(settings.ROWS[0], "learned", [_seed_result(0.5)], 4)
    # Episodes (1, 1, 0, 0): sample std sqrt(1/3), SE = sqrt(1/3) / 2.
    assert rec.success_se == pytest.approx(math.sqrt(1 / 3) / 2)
    assert rec.success_se_over == "episodes"


def test_approximate_masks_name_their_kind():
    masks = e4.approximate_masks()
    kinds = {name: kind for name, (_, kind) in masks.items()}
    assert kinds["binary + c1"] == "false positive" and kinds["binary − door_open"] == (
        "false negative"
    )
    assert masks["binary + d1"][0].nonzero().flatten().tolist() == [0, 1, 2, 3, 4, 5, 8, 9]
