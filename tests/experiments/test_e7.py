"""E7: the zoo definitions, the meta-evaluation's Spearman and bootstraps on hand-built
tables with known values, and a tiny zoo end to end."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf
from scipy.stats import spearmanr

from gridplan.core.tasks import TASK_A
from gridplan.experiments import GROUPS, settings
from gridplan.experiments.e7 import (
    HELDOUT_CANDIDATES,
    METRICS,
    SIDE,
    VARIANTS,
    DeterministicStack,
    ZooRecord,
    _ranks,
    configuration_dims,
    heldout_starts,
    meta_table,
    rank_metric,
    start_configurations,
    state_keys,
    within_group_counts,
)
from gridplan.experiments.learned_runs import DATA_CACHE
from gridplan.experiments.runner import read_done, run_groups
from gridplan.experiments.settings import load_zoo
from gridplan.metrics.bootstrap import cluster_counts, percentile_interval, spearman_of_counts
from gridplan.models.noise import NoiseModel
from gridplan.planning.closed_loop import start_states
from gridplan.training.config import compose
from gridplan.training.module import cached_dataset


def _policy(model) -> str:
    return next(
        (o.split("=", 1)[1] for o in model.settings if o.startswith("data.policy=")), "balanced"
    )


def _budget(model) -> int:
    budget = compose(model.overrides()).data.budget
    return int(str(budget).rstrip("k")) * (1000 if str(budget).endswith("k") else 1)


# --------------------------------------------------------------------------- the zoo


@pytest.mark.slow
def test_the_default_zoo_spans_the_failure_modes_it_is_meant_to():
    zoo = load_zoo("default")
    assert len(zoo.models) >= 16 and len(zoo.seeds) == 3
    assert {_policy(m) for m in zoo.models} == {"random", "balanced", "expert"}
    budgets = [_budget(m) for m in zoo.models]
    assert min(budgets) == 1000 and max(budgets) == 20_000
    settings = [set(m.settings) for m in zoo.models]
    variants = {o.split("=", 1)[1] for s in settings for o in s if o.startswith("variant=")}
    assert {"uniform", "event_weighted", "anti_weighted", "rel_heavy", "rel_only"} <= variants
    assert "rollout" in variants
    assert any("model.members=5" in s for s in settings)
    widths = {o for s in settings for o in s if o.startswith("model.hidden=")}
    assert len(widths) >= 3
    epochs = {o for s in settings for o in s if o.startswith("trainer.max_epochs=")}
    assert "trainer.max_epochs=2" in epochs and "trainer.max_epochs=30" in epochs


@pytest.mark.slow
def test_a_models_override_replaces_the_common_one_and_every_model_composes():
    zoo = load_zoo("default")
    small = next(m for m in zoo.models if m.key == "small_20k")
    assert [o for o in small.settings if o.startswith("model.hidden=")] == ["model.hidden=[16,16]"]
    raw = OmegaConf.load(settings.ZOO_DIR / "default.yaml").models
    for m in zoo.models:
        cfg = compose(m.overrides())
        sets_patience = any(o.startswith("trainer.patience=") for o in raw[m.key].overrides)
        assert cfg.data.windows == 128 and (cfg.trainer.patience == 5 or sets_patience)
    assert compose(small.overrides()).model.hidden == [16, 16]


def test_the_replication_zoo_has_the_same_models_and_other_seeds():
    zoo, rep = load_zoo("default"), load_zoo("replication")
    assert rep.models == zoo.models
    assert not set(rep.seeds) & set(zoo.seeds)
    assert not set(rep.eval_seeds) & set(zoo.eval_seeds)


@pytest.mark.slow
def test_reduced_zoos_cap_training_and_keep_shorter_runs_short():
    zoo = load_zoo("default").reduced(seeds=1, eval_seeds=1, max_epochs=5)
    assert zoo.seeds == (0,) and zoo.eval_seeds == (0,)
    by = {m.key: compose(m.overrides()).trainer.max_epochs for m in zoo.models}
    assert by["uniform_20k"] == 5 and by["undertrained_20k"] == 2


def test_an_unknown_zoo_names_the_valid_ones(tmp_path):
    with pytest.raises(ValueError, match="valid zoos: .*default"):
        load_zoo("nope")
    (tmp_path / "empty.yaml").write_text("seeds: [0]\neval_seeds: [0]\nmodels: {}\n")
    with pytest.raises(ValueError, match="zoo 'empty' .*: names no model"):
        load_zoo("empty", tmp_path)
    (tmp_path / "bare.yaml").write_text("seeds: [0]\neval_seeds: [0]\nmodels: {a: {name: A}}\n")
    with pytest.raises(ValueError, match="zoo 'bare' .*missing mandatory value: overrides"):
        load_zoo("bare", tmp_path)
    (tmp_path / "typo.yaml").write_text("seed: [0]\nmodels: {a: {overrides: [seed=1]}}\n")
    with pytest.raises(ValueError, match="zoo 'typo' .*Key 'seed' not in 'ZooFile'"):
        load_zoo("typo", tmp_path)


def test_a_zoo_file_extends_another_through_its_defaults_list(tmp_path):
    (tmp_path / "base.yaml").write_text(
        "seeds: [0, 1]\neval_seeds: [0]\ncommon: [trainer=debug, data.windows=16]\n"
        "models:\n  one: {name: first, overrides: [data.windows=8]}\n"
        "  two: {overrides: [variant=rel_only]}\n"
    )
    (tmp_path / "more.yaml").write_text(
        "defaults: [base, _self_]\nseeds: [7]\nmodels:\n  three: {overrides: [data=4k]}\n"
    )
    zoo = load_zoo("more", tmp_path)
    assert (zoo.seeds, zoo.eval_seeds) == ((7,), (0,))
    assert [(m.key, m.name, m.settings) for m in zoo.models] == [
        ("one", "first", ("trainer=debug", "data.windows=8")),
        ("two", "two", ("trainer=debug", "data.windows=16", "variant=rel_only")),
        ("three", "three", ("trainer=debug", "data.windows=16", "data=4k")),
    ]


def test_the_deterministic_stack_refuses_a_stochastic_model():
    with pytest.raises(ValueError, match="not deterministic"):
        DeterministicStack([NoiseModel.controlled(0.0, 0.0), NoiseModel.controlled(0.3, 0.0)])


# --------------------------------------------------------------------------- meta-evaluation


def test_within_group_counts_resample_each_configuration_inside_itself():
    groups = ["a", "a", "a", "b", "b", "c"]
    counts = within_group_counts(groups, 500, seed=3)
    assert counts.shape == (500, 6)
    np.testing.assert_array_equal(counts[:, :3].sum(1), 3)
    np.testing.assert_array_equal(counts[:, 3:5].sum(1), 2)
    np.testing.assert_array_equal(counts[:, 5], 1)  # a lone seed is always kept once
    assert counts[:, 0].std() > 0
    np.testing.assert_array_equal(counts, within_group_counts(groups, 500, seed=3))
    assert not np.array_equal(counts, within_group_counts(groups, 500, seed=4))


def test_rank_metric_on_a_perfectly_ordered_table_is_minus_one_with_degenerate_cis():
    """Three configurations x 2 seeds; the error falls as success rises within and across
    configurations: every resample keeps ρ = -1."""
    values = [0.9, 0.8, 0.5, 0.4, 0.2, 0.1]
    success = [0.1, 0.2, 0.5, 0.6, 0.8, 0.9]
    rank = rank_metric(values, success, ["a", "a", "b", "b", "c", "c"], 400, seed=0)
    assert rank.models.rho == pytest.approx(-1.0)
    assert (rank.models.low, rank.models.high) == pytest.approx((-1.0, -1.0))
    assert (rank.seed_low, rank.seed_high) == pytest.approx((-1.0, -1.0))


def test_rank_metric_point_value_is_scipys_and_the_seed_ci_is_the_stratified_replicates():
    values = [0.3, 0.1, 0.5, 0.2, 0.9, 0.4, 0.7, 0.6]
    success = [0.5, 0.9, 0.2, 0.6, 0.1, 0.3, 0.4, 0.8]
    groups = ["a", "a", "b", "b", "c", "c", "d", "d"]
    rank = rank_metric(values, success, groups, 1000, seed=7)
    assert rank.models.rho == pytest.approx(spearmanr(values, success).statistic)
    rep = spearman_of_counts(values, success, within_group_counts(groups, 1000, 7))
    low, high = np.percentile(rep[np.isfinite(rep)], [2.5, 97.5])
    assert (rank.seed_low, rank.seed_high) == pytest.approx((low, high))
    assert rank.models.low <= rank.models.rho <= rank.models.high
    # Resampling seeds keeps each configuration: a narrower spread than resampling models.
    assert rank.seed_high - rank.seed_low < rank.models.high - rank.models.low
    # The clustered CI: configurations, then seeds within them (cluster_counts).
    cluster = percentile_interval(
        spearman_of_counts(values, success, cluster_counts(groups, 1000, 7))
    )
    assert (rank.cluster_low, rank.cluster_high) == pytest.approx(cluster)
    assert rank.cluster_high - rank.cluster_low > rank.seed_high - rank.seed_low


def test_a_ranking_verdict_reads_the_clustered_ci_on_the_metrics_side():
    """Rule 4: an error ranks when its clustered CI lies below 0, an agreement when above;
    the old model-level CI does not count, nor a pool under MIN_MODELS models."""
    below = {
        "rho": -0.8,
        "low": -0.9,
        "high": -0.7,
        "cluster_low": -0.9,
        "cluster_high": -0.1,
        "n": 20,
    }
    assert SIDE["decision_regret"] == -1 and SIDE["decision_agreement_behaviour"] == 1
    assert _ranks(below, "decision_regret") and not _ranks(below, "decision_agreement")
    wide = dict(below, cluster_high=0.05)  # the model-level CI still excludes 0
    assert not _ranks(wide, "decision_regret")
    assert not _ranks(dict(below, n=9), "decision_regret")
    assert all(key in SIDE and today in SIDE for key, today in VARIANTS)


def test_rank_metric_skips_undefined_values_and_needs_three_models():
    assert rank_metric([None, 1.0, float("nan"), 2.0], [0, 1, 0, 1], None, 50) is None
    rank = rank_metric([None, 1.0, 2.0, 3.0], [0.9, 0.3, 0.2, 0.1], None, 50)
    assert rank.models.n == 3 and rank.models.rho == pytest.approx(-1.0)


def _record(zoo, key, seed, success, deep, ladder=None, **metrics) -> ZooRecord:
    full = {k: None for k, _, _ in METRICS}
    full.update(metrics)
    return ZooRecord(
        zoo=zoo,
        key=key,
        name=key,
        seed=seed,
        success=success,
        success_se=0.0,
        n_episodes=100,
        success_ladder=success if ladder is None else ladder,
        success_ladder_se=0.0,
        n_episodes_ladder=10,
        success_deep=deep,
        success_deep_se=0.0,
        epochs=1,
        checkpoint="",
        metrics=full,
    )


def test_meta_table_sorts_by_abs_rho_and_pools_the_grid_at_its_depth():
    """E_tot ranks the hand-built zoo backwards (ρ = +1), decision regret perfectly (ρ = -1),
    DRPE not at all; on the grid (depth-4 success) DRPE ranks perfectly."""
    success = [0.1, 0.3, 0.5, 0.7, 0.9, 0.95]
    zoo = [
        _record(
            "z",
            f"c{k // 2}",
            k % 2,
            s,
            1 - s,
            1 - s,
            E_tot=s,
            decision_regret=1 - s,
            DRPE_graded=[0.2, 0.1, 0.1, 0.2, 0.2, 0.1][k],
        )
        for k, s in enumerate(success)
    ]
    rep = [_record("r", r.key, r.seed + 10, r.success, r.success_deep, **r.metrics) for r in zoo]

    class Grid:
        def __init__(self, drpe, success):
            self.DRPE_graded, self.E_tot, self.success = drpe, 0.5, success
            self.DRPE_binary = self.VPE = drpe
            self.profile = (drpe,) * 12

    grid = [Grid(d, 1 - d) for d in (0.0, 0.1, 0.2, 0.3)]
    rows = meta_table(zoo, rep, grid, 300)
    by = {r.metric: r for r in rows}
    assert by["E_tot"].zoo["rho"] == pytest.approx(1.0)
    assert by["decision_regret"].zoo["rho"] == pytest.approx(-1.0)
    assert abs(by["DRPE_graded"].zoo["rho"]) < 0.3
    assert [r.metric for r in rows[:2]] in (
        ["E_tot", "decision_regret"],
        ["decision_regret", "E_tot"],
    )
    assert by["DRPE_graded"].grid["rho"] == pytest.approx(-1.0)
    # The pool: 4 grid + 6 zoo models; success_deep = 1 - success reverses E_tot's sign.
    assert by["E_tot"].pooled["n"] == 10
    assert by["E_tot"].zoo_deep["rho"] == pytest.approx(-1.0)
    assert by["decision_regret"].grid is None and by["decision_regret"].pooled is None
    assert by["E_tot"].replication["rho"] == pytest.approx(1.0)
    # The ladder's own success (here 1 - held-out) is ranked beside it.
    assert by["E_tot"].zoo_ladder["rho"] == pytest.approx(-1.0)
    assert rows[-1].zoo is None


# --------------------------------------------------------------------------- held-out starts


def test_a_start_configuration_is_agent_key_and_colour_bits():
    world = TASK_A.world
    assert [world.dim_names[k] for k in configuration_dims(world)] == [
        "agent_x",
        "agent_y",
        "key_x",
        "key_y",
        "c1",
        "c2",
    ]
    s = start_states([0], 2, TASK_A)
    moved = s.clone()
    moved[:, 8:] = 1.0 - moved[:, 8:]  # other distractor cells: the same configuration
    assert start_configurations(s, world) == start_configurations(moved, world)
    assert state_keys(s, world).isdisjoint(state_keys(moved, world))


def test_heldout_starts_skip_used_states_and_training_configurations():
    """The first candidates of the held-out seed made 'used' (as states) or 'trained on' (as
    configurations) are skipped; the rest come in order."""
    cfg = settings.E7["tiny"]
    world = TASK_A.world
    candidates = start_states([cfg.heldout_seed], HELDOUT_CANDIDATES, TASK_A)
    used = state_keys(candidates[:3], world)
    training = start_configurations(candidates[3:6], world)
    start = heldout_starts(cfg, used, training)
    assert start.shape == (cfg.heldout_episodes, world.state_dim)
    assert state_keys(start, world).isdisjoint(used)
    assert start_configurations(start, world).isdisjoint(training)
    everything = start_configurations(candidates, world)
    with pytest.raises(ValueError, match="only 0 of .* candidate start states"):
        heldout_starts(cfg, set(), everything)


# --------------------------------------------------------------------------- end to end


def _csv(path: Path) -> list[dict]:
    with path.open() as f:
        return list(csv.DictReader(f))


@pytest.mark.slow
def test_a_tiny_zoo_runs_end_to_end(tmp_path):
    status = run_groups(GROUPS, ["e7", "e1"], tmp_path, "tiny", progress=False)
    assert status == {"e1": "ran", "e7": "ran"}
    folder = tmp_path / "e7"
    done = read_done(folder)
    assert done["inputs"]["e1"] == read_done(tmp_path / "e1")["run_id"]
    cfg = settings.E7["tiny"]
    n = len(cfg.zoo.jobs())
    rows = _csv(folder / "zoo.csv")
    assert len(rows) == n + len(cfg.replication.jobs())
    assert {r["zoo"] for r in rows} == {"tiny", "tiny_replication"}
    for r in rows:
        assert 0.0 <= float(r["success"]) <= 1.0 and float(r["E_tot"]) > 0
        assert r["decision_regret"] != "" and r["xgap"] != ""
        # The ensemble alone has an uncertainty score.
        assert (r["uncertainty_aurc"] != "") == (r["key"] == "ensemble")
    meta = _csv(folder / "meta.csv")
    assert {m["metric"] for m in meta} == {k for k, _, _ in METRICS}
    results = json.loads((folder / "results.json").read_text())
    assert results["grid_source"] == "e1"
    # The held-out starts share no start configuration with any training episode of either
    # zoo (every dataset a model trained on, from the shared cache).
    start = torch.tensor(results["heldout"]["starts"])
    assert start.shape[0] == cfg.heldout_episodes
    trained = set()
    for zoo in (cfg.zoo, cfg.replication):
        for model, seed in zoo.jobs():
            data = compose([*model.overrides(), *cfg.train_overrides, f"seed={seed}"]).data
            budget = int(str(data.budget).rstrip("k")) * (
                1000 if str(data.budget).endswith("k") else 1
            )
            dataset = cached_dataset(data.policy, budget, seed, TASK_A, tmp_path / DATA_CACHE)
            trained |= start_configurations(dataset.states[dataset.t == 0], TASK_A.world)
    assert trained and start_configurations(start, TASK_A.world).isdisjoint(trained)
    assert results["heldout"]["training_configurations"] == len(trained)
    for r in rows:
        assert int(r["n_episodes"]) == cfg.heldout_episodes
        assert r["decision_regret_behaviour_depth"] != ""
    table = (folder / "table.md").read_text()
    assert "| +0.43 |" in table
    assert "smoke run, numbers only, no verdict stated" in table.splitlines()[0]
    assert all(v["reproduced"] is None for v in done["verdicts"])
    for png in ("fig_zoo_scatter.png", "fig_pool_scatter.png"):
        assert (folder / png).stat().st_size > 0
    # Finished: skipped unless forced.
    again = run_groups(GROUPS, ["e7"], tmp_path, "tiny", progress=False)
    assert again == {"e7": "skipped"}


def test_seeded_compose_equals_a_fresh_compose_for_every_seed():
    from gridplan.experiments.learned_runs import seeded_compose

    model = next(m for m in load_zoo("default").models if m.key == "random_4k")
    overrides = [*model.overrides(), "trainer.metrics_every_n_epochs=0"]
    for seed in (3, 11):
        fresh = compose([*overrides, f"seed={seed}"])
        cached = seeded_compose(overrides, seed)
        assert OmegaConf.to_yaml(cached) == OmegaConf.to_yaml(fresh)
        assert int(cached.data.seed) == seed and cached.data.policy == "random"
    with pytest.raises(ValueError, match="sets the seed itself"):
        seeded_compose([*overrides, "seed=1"], 2)


def _loop_jobs() -> list:
    from gridplan.models.noise import OracleModel

    start = start_states((0,), 8, TASK_A)
    models = [OracleModel(), NoiseModel.controlled(2.0, 0.0)]
    cpu = torch.device("cpu")
    return [("loop", (models, 1, cpu, None, None, start, 11 + i, "first")) for i in range(2)]


@pytest.mark.parametrize(
    "workers", [1, pytest.param(2, marks=pytest.mark.slow)], ids=["basic", "joblib"]
)
def test_evaluation_jobs_run_through_the_groups_launcher_as_they_run_here(tmp_path, workers):
    # The held-out loops as launcher jobs (this process, or two joblib workers) give exactly
    # the numbers of calling them here; their files are gone afterwards.
    from gridplan.experiments import e7
    from gridplan.experiments.runner import GroupContext

    threads = torch.get_num_threads()
    try:
        ctx = GroupContext(
            "e7", "tiny", None, tmp_path, tmp_path, torch.device("cpu"), progress=False
        )
        jobs = _loop_jobs()
        direct = [e7._job(job) for job in jobs]
        launched = ctx.launch(e7._job, [{"job": job} for job in jobs], "check", workers)
    finally:
        torch.set_num_threads(threads)
    assert launched == direct
    assert len(direct) == 2 and all(len(shard) == 2 for shard in direct)
    assert direct[0] != direct[1]  # the shards' seeds differ, and so do their draws
    assert not (tmp_path / "jobs").exists()
