"""E7: which metric ranks learned world models? A learned-model zoo and the metric
meta-evaluation (paper §4.3 Corollary, §5.2 "learned pool", §5.4).

Within the paper's seven learned models neither ``E_tot`` nor DRPE ranks the models (Spearman
+0.43 for both, §5.2); DRPE misses event-level failures and rollout drift (§5.4), and the
Corollary of §4.3 names the distribution of errors over decision-relevant events as the
target of better metrics. E7 measures which metric ranks a harder learned pool:

- **The zoo** (``configs/zoo/<name>.yaml``, ``settings.load_zoo``): learned configurations spanning
  data budget and behaviour policy (``random``, ``balanced``, ``expert``), network size,
  training length, the loss variants of Table 3, a multi-step rollout loss and an ensemble;
  each trained once per training seed, all as vectorized groups
  (``gridplan.training.runs.train_all`` through ``learned_runs.run_config``). A second zoo
  (``replication``: the same configurations, independent training and closed-loop seeds) is
  evaluated once, at the end, the same way.
- **Every metric of every model**: the paper's metrics on E1's held-out windows
  (``gridplan.metrics.prediction.prediction_metrics``: ``E_tot``, DRPE graded and binary, the
  12-dimension profile, the event audit, VPE), and the decision-centric ladder
  (``gridplan.evaluate`` at depth 2: IPE, action-effect consistency, decision agreement and
  regret, the WorldModelGym probe's regret and reward error, reward and value error, success
  calibration (Brier), policy ranking ρ / PRA / MMRV, the exploitability gap, and for
  ensembles the uncertainty's Spearman and AURC). The ladder's own closed-loop success at
  depth 2 (the paper's learned protocol; L7) and depth 4 (one batched closed loop), on the
  zoo's evaluation seeds.
- **The held-out success** (``heldout_starts``, ``heldout_success``; ``docs/PREREGISTERED.md``
  Rule 4): every model of both zoos plays the same ``heldout_episodes`` (at least 100 in the
  full profile) start states at depth 2, in one batched closed loop. They are the first start
  states of a seed of their own that equal no state a decision metric uses (the branch set,
  the oracle's decision states, the anchor starts, every model's own ladder episodes, which
  hold its XGap states: ``state_keys``, compared exactly) and whose *start configuration* --
  agent cell, key cell and colour bits ``c1``, ``c2``, everything a start state holds but the
  distractors (``configuration_dims``) -- is that of no episode in any dataset a model of
  either zoo trained on (``training_configurations``). Every (agent, key) pair of the
  paper's world occurs in the zoos' training data, so the colour bits are what keeps the
  held-out configurations apart.
- **Non-circular variants** (``noncircular``, ``VARIANTS``): decision regret, decision
  agreement and the probe's regret with the branch set from the held-out behaviour states
  only, at the success target's depth and at ``variant_depth`` (3); XGap is measured at the
  model's own ladder episodes, which are no longer the scored ones.
- **The meta-evaluation** (``meta_table``): Spearman ρ of each metric with the held-out
  success over the zoo's models, with three seeded bootstrap 95% CIs (``rank_metric``: the
  two-stage cluster bootstrap, configurations then training seeds within them, which every
  ranking verdict reads; and beside it the old ones, resampling models, and resampling
  training seeds within each configuration), the ρ with the ladder's own success (the
  circular target), the replication zoo's ρ, the zoo's ρ with depth-4 success, and, for the
  metrics E1 records, ρ over E1's controlled grid (read from e1's result files, or computed
  when e1 has not finished) and over the pool of grid and zoo, both with depth-4 success
  (the grid's planner).
- **Verdicts** (``verdicts``, Rule 4): a metric ranks the zoo only if its clustered CI
  excludes 0 on its side (``SIDE``: below 0 for an error); the non-circular variants get
  the same rule (``NONCIRCULAR_CLAIMS``). The quick and tiny profiles state none (Rule 5).

Nothing is tuned toward a target ρ: the zoo is fixed in its config files, the table is what
it gives. Writes ``zoo.csv`` (every model of both zoos, every metric), ``configurations.csv``
(means over seeds), ``meta.csv`` (the sorted table), ``runs.csv``, ``results.json``,
``fig_zoo_scatter.png`` (one panel per metric) and ``fig_pool_scatter.png``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from gridplan import evaluate as ladder_evaluate
from gridplan.core.tasks import TASK_A
from gridplan.core.world import DEFAULT as PAPER_WORLD
from gridplan.core.world import World
from gridplan.data.datasets import eval_windows, parse_budget
from gridplan.evaluation.branch import decision_states
from gridplan.evaluation.decisions import decide, decision_quality
from gridplan.evaluation.ladder import check_levels
from gridplan.evaluation.probe import answer, build_questions
from gridplan.experiments import paper
from gridplan.experiments.figures import pool_scatter_figure, zoo_scatter_figure
from gridplan.experiments.learned_runs import (
    DATA_CACHE,
    RUNS,
    DeterministicStack,
    ModelStack,
    cpu_threads,
    group_relative,
    plans_deterministically,
    quiet_lightning,
    run_config,
)
from gridplan.experiments.measure import standard_windows
from gridplan.experiments.pools import controlled_grid
from gridplan.experiments.records import Record
from gridplan.experiments.runner import GroupContext
from gridplan.experiments.settings import E7Config, Zoo
from gridplan.experiments.tables import GroupReport, fmt, fmt_rho, fmt_se
from gridplan.metrics.bootstrap import cluster_counts, percentile_interval, spearman_of_counts
from gridplan.metrics.prediction import prediction_metrics
from gridplan.metrics.stats import SpearmanResult, mean_se, spearman_ci, summarize_episodes
from gridplan.models.contract import WorldModel
from gridplan.models.learned import load_world_model
from gridplan.models.noise import OracleModel
from gridplan.planning.closed_loop import run_closed_loop, run_episodes, start_states
from gridplan.planning.planner import Planner
from gridplan.util.threads import available_cpus

#: The zoo "spans" success when its configurations' depth-2 success reaches at most this ...
SPAN_LOW = 0.1
#: ... and at least this (otherwise the pool cannot rank anything).
SPAN_HIGH = 0.9
#: As in e3: a metric does not "rank" the learned models while its ρ stays above this
#: (paper §5.2: +0.43 for E_tot and DRPE).
MAX_RANKING_RHO = -0.5
#: A metric defined on fewer models (the uncertainty scores: ensembles only) is listed but
#: not ranked: a Spearman ρ over a handful of points says nothing.
MIN_MODELS = 10
#: The closed loops of many models run as this many fixed shards of models, one worker job
#: each: the numbers do not depend on the machine's core count.
LOOP_SHARDS = 2
#: Candidate start states drawn for the held-out success (``heldout_starts``).
HELDOUT_CANDIDATES = 20_000
#: The paper's learned-pool ρ, printed beside ours (§5.2).
PAPER_RHO = {
    "E_tot": paper.TABLE_1["learned"]["E_tot"],
    "DRPE_graded": paper.TABLE_1["learned"]["DRPE"],
}


# --------------------------------------------------------------------------- metrics


#: ``(key, label, read)``: every metric; ``read(pm, ladder)`` takes a model's
#: ``PredictionMetrics.to_dict()`` and its ladder ``Report.ladder`` (None where undefined).
def _ladder(level: str, *path: str) -> Callable[[dict, dict], float | None]:
    def read(pm: dict, ladder: dict) -> float | None:
        node: Any = ladder.get(level)
        for part in path:
            node = None if node is None else node.get(part)
        if isinstance(node, dict):
            node = node.get("mean", node.get("rho"))
        return None if node is None else float(node)

    return read


#: Where the non-circular variants sit beside the ladder's levels in a model's numbers.
NONCIRCULAR = "noncircular"


def _pm(*path: str) -> Callable[[dict, dict], float | None]:
    def read(pm: dict, ladder: dict) -> float | None:
        node: Any = pm
        for part in path:
            node = node.get(part) if isinstance(node, dict) else None
        return None if node is None else float(node)

    return read


METRICS: tuple[tuple[str, str, Callable], ...] = (
    ("E_tot", "E_tot", _pm("E_tot")),
    ("DRPE_graded", "DRPE graded", _pm("DRPE", "graded")),
    ("DRPE_binary", "DRPE binary", _pm("DRPE", "binary")),
    ("VPE", "VPE", _pm("VPE")),
    *((f"err_{d}", f"profile: {d}", _pm("profile", d)) for d in PAPER_WORLD.dim_names),
    ("carrying_at_pickup", "event: carrying at pickup", _pm("event_audit", "carrying_at_pickup")),
    ("pickup_mse", "event: pickup MSE", _pm("event_audit", "pickup_mse")),
    (
        "door_open_at_opening",
        "event: door open at opening",
        _pm("event_audit", "door_open_at_opening"),
    ),
    ("door_mse", "event: door MSE", _pm("event_audit", "door_mse")),
    ("ipe", "IPE (L4)", _ladder("L4", "ipe")),
    ("ipe_shifted", "IPE off the behaviour states (L4)", _ladder("L4", "ipe_shifted")),
    ("teacher_forced", "teacher-forced error on Q (L4)", _ladder("L4", "teacher_forced")),
    ("action_effect", "action-effect consistency error (L4)", _ladder("L4", "action_effect")),
    ("decision_agreement", "decision agreement (L4)", _ladder("L4", "decision_agreement")),
    ("decision_regret", "decision regret (L4)", _ladder("L4", "decision_regret")),
    ("probe_regret", "WorldModelGym regret", _ladder("probe", "regret")),
    ("probe_reward_error", "WorldModelGym reward error", _ladder("probe", "reward_error")),
    ("reward_error", "reward-prediction error (L5)", _ladder("L5", "reward_error")),
    ("value_error", "value error (L5)", _ladder("L5", "value_error")),
    ("brier", "success calibration, Brier (L5)", _ladder("L5", "brier")),
    ("ranking_rho", "policy ranking ρ (L6)", _ladder("L6", "spearman")),
    ("pra", "policy ranking PRA (L6)", _ladder("L6", "pra")),
    ("mmrv", "policy ranking MMRV (L6)", _ladder("L6", "mmrv")),
    ("xgap", "exploitability gap (L7)", _ladder("L7", "xgap")),
    ("uncertainty_rho", "uncertainty-error ρ", _ladder("uncertainty", "spearman")),
    ("uncertainty_aurc", "uncertainty AURC", _ladder("uncertainty", "aurc")),
    *(
        (f"{key}_{part}", f"{label}, {where}", _ladder(NONCIRCULAR, f"{key}_{part}"))
        for part, where in (
            ("behaviour", "held-out behaviour states only"),
            ("behaviour_depth", "held-out behaviour states only, variant depth"),
        )
        for key, label in (
            ("decision_regret", "decision regret"),
            ("decision_agreement", "decision agreement"),
            ("probe_regret", "WorldModelGym regret"),
        )
    ),
)
#: Metrics that should rise with success (``SIDE`` +1); every other metric is an error, which
#: should fall (-1). A ranking verdict holds only on its metric's side (Rule 4 of
#: ``docs/PREREGISTERED.md``).
HIGHER_IS_BETTER = frozenset(
    {
        "decision_agreement",
        "decision_agreement_behaviour",
        "decision_agreement_behaviour_depth",
        "pra",
        "ranking_rho",
        "carrying_at_pickup",
        "door_open_at_opening",
        "uncertainty_rho",
    }
)
SIDE = {key: 1 if key in HIGHER_IS_BETTER else -1 for key, _, _ in METRICS}
#: The non-circular variants of the decision metrics (Rule 4) beside today's metric they
#: vary: branch set from held-out behaviour states only at the success target's depth
#: (``_behaviour``) and at ``E7Config.variant_depth`` (``_behaviour_depth``), and XGap,
#: whose episodes (the ladder's own closed loop) are not the scored ones once success is the
#: held-out success.
VARIANTS: tuple[tuple[str, str], ...] = (
    ("decision_regret_behaviour", "decision_regret"),
    ("decision_agreement_behaviour", "decision_agreement"),
    ("probe_regret_behaviour", "probe_regret"),
    ("decision_regret_behaviour_depth", "decision_regret"),
    ("decision_agreement_behaviour_depth", "decision_agreement"),
    ("probe_regret_behaviour_depth", "probe_regret"),
    ("xgap", "xgap"),
)
#: Metrics E1's grid records (``ControlledRecord``): the grid and pooled columns.
GRID_METRICS = (
    "E_tot",
    "DRPE_graded",
    "DRPE_binary",
    "VPE",
    *(f"err_{d}" for d in PAPER_WORLD.dim_names),
)
LABELS = {key: label for key, label, _ in METRICS}


@dataclass(frozen=True, kw_only=True)
class ZooRecord(Record):
    """One trained model of a zoo (a row of ``zoo.csv``): its success and every metric
    (``METRICS``; None where undefined).

    ``success`` is the held-out success every verdict ranks against (``heldout_starts``:
    ``n_episodes`` episodes at the first depth); ``success_ladder`` the ladder's own closed
    loop (the zoo's evaluation seeds, whose episodes also give XGap's states and, with the
    oracle's, the branch set: the target the metrics were first ranked against);
    ``success_deep`` the second depth's closed loop on the evaluation seeds.
    """

    zoo: str
    key: str
    name: str
    seed: int
    success: float
    success_se: float
    n_episodes: int
    success_ladder: float
    success_ladder_se: float
    n_episodes_ladder: int
    success_deep: float
    success_deep_se: float
    epochs: int
    checkpoint: str
    metrics: dict[str, float | None] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        row = {k: v for k, v in vars(self).items() if k != "metrics"}
        return {**row, **self.metrics}


# --------------------------------------------------------------------------- compute


def train_zoo(ctx: GroupContext, cfg: E7Config, zoo: Zoo) -> tuple[dict, float, set]:
    """Every model of ``zoo`` trained as vectorized groups (``gridplan.training.runs.train_all``:
    runs of one architecture share groups, an ensemble's members join them; on CPU one worker
    process per core). The runs draw no dashboard images and score the held-out windows
    only with their best checkpoint (``trainer.metrics_every_n_epochs=0``): neither is part
    of the training protocol, which early-stops and keeps the best checkpoint on
    ``val/loss`` every epoch (as E3's, ``learned_runs.train_runs``). Returns
    ``(key, seed) -> (metrics, checkpoint relative to the group folder)``, the wall time and
    the ``(policy, transitions, seed)`` of every logged dataset the models trained on."""
    from gridplan.training import runs

    out = ctx.out / RUNS / zoo.name
    workers = max(1, min(available_cpus(), len(zoo.jobs()) // 8)) if ctx.device.type == "cpu" else 1
    extra = (
        "trainer.figures_every_n_epochs=0",
        "trainer.metrics_every_n_epochs=0",
        f"train.workers={workers}",
    )
    jobs = zoo.jobs()
    configs = [run_config(ctx, cfg, model, seed, out, *extra) for model, seed in jobs]
    t0 = time.perf_counter()
    with quiet_lightning(), cpu_threads(ctx):
        results = runs.train_all(
            configs, progress=ctx.progress, record_dir=out / "groups", launcher=ctx.launcher
        )
    wall = time.perf_counter() - t0
    ctx.log(f"zoo {zoo.name}: trained {len(jobs)} models in {wall:.0f} s ({workers} worker(s))")
    trained = {
        (model.key, seed): (metrics, group_relative(artifacts["best_checkpoint"], ctx.out))
        for (model, seed), (metrics, artifacts) in zip(jobs, results, strict=True)
    }
    datasets = {(c.data.policy, parse_budget(c.data.budget), int(c.data.seed)) for c in configs}
    return trained, wall, datasets


def _stacks(models: list) -> list[tuple[list[int], WorldModel]]:
    """``models`` as at most two batches: the deterministic ones in one shared-prefix
    ``DeterministicStack``, the others in one independent-leaf ``ModelStack``; each with the
    indices of its models."""
    det = [k for k, m in enumerate(models) if plans_deterministically(m)]
    rest = [k for k in range(len(models)) if k not in det]
    out = []
    for idx, make in ((det, DeterministicStack), (rest, ModelStack)):
        if idx:
            out.append((idx, make([models[k] for k in idx])))
    return out


def _shards(n: int) -> list[range]:
    """``range(n)`` in ``LOOP_SHARDS`` contiguous parts (fewer if ``n`` is smaller)."""
    size = -(-n // LOOP_SHARDS)
    return [range(k, min(n, k + size)) for k in range(0, n, size)]


def _loop_job(job: tuple) -> list[tuple[float, float, int]]:
    """``(success, SE, episodes)`` of every model of one shard (``_stacks``: one batched
    closed loop per stack): from the evaluation ``seeds`` x ``episodes`` (``run_episodes``)
    when ``start`` is None, else from every ``start`` state with a generator seeded by
    ``gen_seed``; ties broken by ``ties``."""
    models, depth, device, seeds, episodes, start, gen_seed, ties = job
    torch.set_num_threads(1)
    out: list = [None] * len(models)
    for idx, stack in _stacks(models):
        if start is None:
            results = run_episodes(stack, TASK_A, depth, list(seeds), episodes, device, ties=ties)
            summaries = summarize_episodes(results, len(idx), len(seeds))
        else:
            planner = Planner(stack, depth, TASK_A, device=device, ties=ties)
            gen = torch.Generator(device=device).manual_seed(gen_seed)
            results = run_closed_loop(planner, start.to(device).repeat(len(idx), 1), gen)
            summaries = summarize_episodes(results, len(idx))
        for k, summary in zip(idx, summaries, strict=True):
            out[k] = (summary.success, summary.success_se, summary.n_episodes)
    return out


def _job(job: tuple) -> Any:
    kind, payload = job
    return _ladder_report(payload) if kind == "ladder" else _loop_job(payload)


def _run_jobs(ctx: GroupContext, jobs: list, tag: str) -> list:
    """``_job`` of every job, in order, as jobs of the group's launcher (``ctx.launch``: on
    CPU one worker process per core, one thread each); every job draws from its own seeded
    generators, so the results equal those of one process."""
    ctx.log(f"{len(jobs)} evaluation job(s): {tag}")
    return ctx.launch(_job, [{"job": job} for job in jobs], tag)


def _deep_jobs(cfg: E7Config, zoo: Zoo, models: list, device: torch.device, ties: str) -> list:
    """The second depth's closed loops (``cfg.depths[1]``, ``cfg.deep_episodes`` per
    evaluation seed) as ``LOOP_SHARDS`` jobs."""
    return [
        (
            "loop",
            (
                [models[k] for k in part],
                cfg.depths[1],
                device,
                zoo.eval_seeds,
                cfg.deep_episodes,
                None,
                None,
                ties,
            ),
        )
        for part in _shards(len(models))
    ]


def state_keys(states: torch.Tensor, world: World) -> set[tuple[int, ...]]:
    """The true states ``(N, S)`` as hashable rows of integers: every dim in cells
    (positions; flags read 0 or ``world.size - 1``), so two true states are equal exactly
    when their keys are."""
    cells = torch.round(states.detach().cpu().double() * world.cell_scale).long()
    return {tuple(row) for row in cells.tolist()}


def configuration_dims(world: World) -> list[int]:
    """The dims of a start configuration: the agent's cell, the key's cell and the colour
    bits ``c1`` and ``c2`` (``gridplan.core.env.reset``): everything a start state holds
    except the distractors' cells (redrawn or moved at every step, never a configuration),
    the door (closed) and the carried flag (not carried)."""
    names = world.dim_names
    fixed = [names.index(n) for n in ("agent_x", "agent_y", "key_x", "key_y")]
    return fixed + [k for k, n in enumerate(names) if n.startswith(("c1", "c2"))]


def start_configurations(states: torch.Tensor, world: World) -> set[tuple[int, ...]]:
    """The start configurations (``configuration_dims``) of true states ``(N, S)``."""
    dims = configuration_dims(world)
    return {tuple(row[k] for k in dims) for row in state_keys(states, world)}


def start_like(states: torch.Tensor, world: World) -> torch.Tensor:
    """The rows of true states ``(N, S)`` that could be a start state: key not carried, door
    closed (``gridplan.core.env.reset``); no other state equals one."""
    names = world.dim_names
    keep = (states[:, names.index("carrying")] < 0.5) & (states[:, names.index("door_open")] < 0.5)
    return states[keep]


def training_configurations(ctx: GroupContext, datasets: set) -> set:
    """Every start configuration of the logged ``datasets`` (``(policy, transitions, seed)``,
    as ``train_zoo`` returns them): the first row of each episode, ``t == 0``, training and
    validation split alike, read from the shared dataset cache (``learned_runs.DATA_CACHE``).
    """
    # gridplan.training.module imports Lightning: only when this runs.
    from gridplan.training.module import cached_dataset

    out: set = set()
    for policy, budget, seed in sorted(datasets):
        dataset = cached_dataset(policy, budget, seed, TASK_A, ctx.root / DATA_CACHE)
        out |= start_configurations(dataset.states[dataset.t == 0], TASK_A.world)
    return out


def decision_roots(cfg: E7Config, zoo: Zoo, device: torch.device, ties: str) -> torch.Tensor:
    """Every state a decision metric of ``zoo``'s ladder starts from that no model chooses:
    the branch set's behaviour part (the held-out windows' starts), every state at which the
    oracle planner decided in the ladder's closed loop (a superset of the branch set's
    oracle-visited part and of the probe's questions) and the anchor runs' starts. The
    XGap states come from each model's own episodes (``_ladder_report``)."""
    ladder = cfg.ladder(zoo)
    windows = eval_windows(ladder.n_windows, ladder.horizon, task=TASK_A, device=device)
    oracle = run_episodes(
        OracleModel(world=TASK_A.world),
        TASK_A,
        cfg.depths[0],
        list(ladder.seeds),
        ladder.episodes,
        device,
        record=True,
        ties=ties,
    )
    anchors = start_states([ladder.anchor_seed], ladder.anchor_starts, TASK_A, device)
    return torch.cat([windows.start[: ladder.branch_states], decision_states(oracle), anchors])


def heldout_starts(
    cfg: E7Config, used_states: set, training: set, world: World = TASK_A.world
) -> torch.Tensor:
    """The held-out success's start states, ``(cfg.heldout_episodes, S)``: in order, the
    start states of closed-loop seed ``cfg.heldout_seed`` (``start_states``) that equal no
    state in ``used_states`` (``state_keys`` of every state the decision metrics use) and
    whose start configuration (``configuration_dims``) is not in ``training`` (every
    training episode's).

    Raises:
        ValueError: if fewer than ``cfg.heldout_episodes`` of the first ``HELDOUT_CANDIDATES``
            candidates qualify.
    """
    candidates = start_states([cfg.heldout_seed], HELDOUT_CANDIDATES, TASK_A)
    cells = torch.round(candidates.double() * world.cell_scale).long().tolist()
    dims = configuration_dims(world)
    keep = [
        k
        for k, row in enumerate(cells)
        if tuple(row) not in used_states and tuple(row[d] for d in dims) not in training
    ]
    if len(keep) < cfg.heldout_episodes:
        raise ValueError(
            f"only {len(keep)} of {HELDOUT_CANDIDATES} candidate start states of seed "
            f"{cfg.heldout_seed} are disjoint from the decision metrics' states and the "
            f"training starts; heldout_episodes is {cfg.heldout_episodes}"
        )
    return candidates[keep[: cfg.heldout_episodes]]


def heldout_success(
    ctx: GroupContext, cfg: E7Config, models: list, start: torch.Tensor
) -> list[tuple[float, float, int]]:
    """``(success, SE, episodes)`` of every model from the held-out ``start`` states at the
    first depth, every model playing every start state: ``LOOP_SHARDS`` contiguous shards of
    ``models``, each one batched closed loop per stack (``_stacks``) whose environment and
    planning stream is seeded by ``cfg.heldout_seed`` plus the shard's index."""
    jobs = [
        (
            "loop",
            (
                [models[k] for k in part],
                cfg.depths[0],
                ctx.device,
                None,
                None,
                start,
                cfg.heldout_seed + i,
                ctx.reading.ties,
            ),
        )
        for i, part in enumerate(_shards(len(models)))
    ]
    with cpu_threads(ctx):
        return [r for shard in _run_jobs(ctx, jobs, "heldout_success") for r in shard]


def noncircular(
    model, behaviour: torch.Tensor, depths: Sequence[int], seed: int, ties: str
) -> dict[str, float | None]:
    """The non-circular variants of decision regret, decision agreement and the probe's
    regret: the model's decisions at the held-out behaviour states only (the branch set
    without its oracle-visited part, every state a probe question), at each of ``depths``
    (the success target's, then ``variant_depth``); keys as ``VARIANTS``."""
    suffixes = ("behaviour", "behaviour_depth")
    out: dict[str, float | None] = {}
    for depth, suffix in zip(depths, suffixes, strict=True):
        gen = torch.Generator(device=behaviour.device).manual_seed(seed)
        decisions = decide(model, behaviour, TASK_A, depth, gen, keep_scores=True, ties=ties)
        quality = decision_quality(decisions)
        questions = build_questions(decisions.true_scores, depth, gen)
        probe = answer(questions, decisions.model_scores)
        out[f"decision_regret_{suffix}"] = quality.regret.mean
        out[f"decision_agreement_{suffix}"] = quality.agreement.mean
        out[f"probe_regret_{suffix}"] = None if probe.regret is None else probe.regret.mean
    return out


def _ladder_report(job: tuple) -> tuple[Any, dict, set]:
    """One model's ladder report, its non-circular variants and the keys of the start-like
    states of its own ladder episodes (a superset of its XGap states)."""
    model, depth, ladder, device, behaviour, variant_depth, ties = job
    torch.set_num_threads(1)
    levels = [lv for lv in check_levels(None, model) if lv != "L1"]
    spec = ladder.replace(depth=depth, levels=tuple(levels), planner={"ties": ties})
    report = ladder_evaluate(model, spec, device=device)
    variants = noncircular(model, behaviour, (depth, variant_depth), ladder.seed, ties)
    # The ladder's closed loop again (run_episodes is seeded by its arguments): the states
    # XGap sampled from are among its decision states.
    loop = run_episodes(
        model, TASK_A, depth, list(ladder.seeds), ladder.episodes, device, record=True, ties=ties
    )
    again = summarize_episodes(loop, n_seeds=len(ladder.seeds))[0].success
    if again != report.closed_loop["success"]["mean"]:
        raise ValueError(
            f"the ladder's closed loop did not replay: success {again} vs "
            f"{report.closed_loop['success']['mean']}"
        )
    used = state_keys(start_like(decision_states(loop), TASK_A.world), TASK_A.world)
    return report, variants, used


@dataclass
class ZooEvaluation:
    """Everything measured on one zoo before its held-out success: its models, their
    prediction metrics, ladder reports with variants, second-depth ``(success, SE,
    episodes)``, and the keys of every state its decision metrics used."""

    zoo: Zoo
    models: list
    trained: dict
    metrics: list
    deep: list
    reports: list
    used_states: set


def evaluate_zoo(ctx: GroupContext, cfg: E7Config, zoo: Zoo, trained: dict) -> ZooEvaluation:
    """Every metric, the non-circular variants and the second depth's closed loop of every
    model of ``zoo`` (``Zoo.jobs`` order)."""
    jobs = zoo.jobs()
    models = [load_world_model(ctx.out / trained[(m.key, s)][1], ctx.device) for m, s in jobs]
    windows = standard_windows(ctx, cfg.closed_loop(zoo, cfg.depths[0]))
    ladder = cfg.ladder(zoo)
    behaviour = eval_windows(
        ladder.n_windows, ladder.horizon, task=TASK_A, device=ctx.device
    ).start[: ladder.branch_states]
    depth, variant, ties = cfg.depths[0], cfg.variant_depth, ctx.reading.ties
    # The long closed loops first: the workers deal out the ladder's jobs behind them.
    jobs = [
        *_deep_jobs(cfg, zoo, models, ctx.device, ties),
        *(("ladder", (m, depth, ladder, ctx.device, behaviour, variant, ties)) for m in models),
    ]
    with cpu_threads(ctx):
        metrics = prediction_metrics(ModelStack(models), windows, TASK_A)
        done = _run_jobs(ctx, jobs, f"{zoo.name}_ladder_and_loops")
        used = state_keys(decision_roots(cfg, zoo, ctx.device, ties), TASK_A.world)
    n_deep = len(jobs) - len(models)
    deep = [r for shard in done[:n_deep] for r in shard]
    reports = done[n_deep:]
    for _, _, keys in reports:
        used |= keys
    return ZooEvaluation(zoo, models, trained, metrics, deep, reports, used)


def zoo_records(ev: ZooEvaluation, heldout: list) -> list[ZooRecord]:
    """The records of one evaluated zoo with its models' held-out success."""
    records = []
    rows = zip(ev.zoo.jobs(), ev.metrics, ev.deep, ev.reports, heldout, strict=True)
    for (model, seed), pm, (deep, deep_se, _), (report, variants, _), (succ, se, n) in rows:
        pm_dict, loop = pm.to_dict(), report.closed_loop
        numbers = {**report.ladder, NONCIRCULAR: variants}
        records.append(
            ZooRecord(
                zoo=ev.zoo.name,
                key=model.key,
                name=model.name,
                seed=seed,
                success=succ,
                success_se=se,
                n_episodes=n,
                success_ladder=loop["success"]["mean"],
                success_ladder_se=loop["success"]["se"],
                n_episodes_ladder=loop["success"]["n"],
                success_deep=deep,
                success_deep_se=deep_se,
                epochs=int(ev.trained[(model.key, seed)][0]["epochs"]),
                checkpoint=ev.trained[(model.key, seed)][1],
                metrics={key: _finite(read(pm_dict, numbers)) for key, _, read in METRICS},
            )
        )
    return records


def _finite(x: float | None) -> float | None:
    return None if x is None or not math.isfinite(x) else float(x)


# --------------------------------------------------------------------------- meta-evaluation


def within_group_counts(groups: Sequence, n_resamples: int, seed: int) -> np.ndarray:
    """``(R, n)`` copies of each unit in ``R`` stratified bootstrap resamples: every group
    (a configuration) keeps its size and draws its units (its training seeds) with
    replacement from ``numpy.random.default_rng(seed)``."""
    labels = np.asarray([str(g) for g in groups])
    rng = np.random.default_rng(seed)
    counts = np.zeros((n_resamples, labels.size))
    rows = np.arange(n_resamples)[:, None]
    for g in dict.fromkeys(labels):
        idx = np.flatnonzero(labels == g)
        draws = idx[rng.integers(0, idx.size, size=(n_resamples, idx.size))]
        np.add.at(counts, (rows, draws), 1.0)
    return counts


@dataclass(frozen=True)
class MetricRank:
    """Spearman ρ of one metric with success over a set of models.

    Attributes:
        models: ρ with the percentile CI of resampling models (``spearman_ci``).
        seed_low, seed_high: the CI of resampling training seeds within configurations (NaN
            when no configuration has two seeds).
        cluster_low, cluster_high: the CI of the two-stage cluster bootstrap
            (``gridplan.metrics.bootstrap.cluster_counts``: configurations, then training
            seeds within the drawn configurations), the interval every ranking verdict
            reads (``docs/PREREGISTERED.md``, Rule 4); NaN without configurations.
    """

    models: SpearmanResult
    seed_low: float = float("nan")
    seed_high: float = float("nan")
    cluster_low: float = float("nan")
    cluster_high: float = float("nan")

    def to_dict(self) -> dict:
        return {
            **self.models.to_dict(),
            "seed_low": _finite(self.seed_low),
            "seed_high": _finite(self.seed_high),
            "cluster_low": _finite(self.cluster_low),
            "cluster_high": _finite(self.cluster_high),
        }


def rank_metric(
    values: Sequence[float | None],
    success: Sequence[float],
    groups: Sequence | None,
    n_resamples: int,
    seed: int = 0,
) -> MetricRank | None:
    """ρ of ``values`` with ``success`` over the models where the metric is defined, with
    the CI over models and, given ``groups`` (a configuration per model), the CI over seeds
    within configurations and the two-stage cluster CI; None when fewer than 3 models define
    it."""
    keep = [k for k, v in enumerate(values) if v is not None and math.isfinite(v)]
    if len(keep) < 3:
        return None
    x = np.asarray([values[k] for k in keep], dtype=np.float64)
    y = np.asarray([success[k] for k in keep], dtype=np.float64)
    models = spearman_ci(x, y, n_resamples, seed)
    if groups is None or math.isnan(models.rho):
        return MetricRank(models)
    labels = [groups[k] for k in keep]
    cluster = percentile_interval(
        spearman_of_counts(x, y, cluster_counts(labels, n_resamples, seed))
    )
    seeds = (float("nan"), float("nan"))
    if max(labels.count(g) for g in set(labels)) >= 2:
        seeds = percentile_interval(
            spearman_of_counts(x, y, within_group_counts(labels, n_resamples, seed))
        )
    return MetricRank(models, *seeds, *cluster)


@dataclass(frozen=True, kw_only=True)
class MetaRow(Record):
    """One metric of the meta-evaluation (a row of ``meta.csv``)."""

    metric: str
    label: str
    zoo: dict | None
    replication: dict | None
    zoo_ladder: dict | None
    zoo_deep: dict | None
    grid: dict | None
    pooled: dict | None

    @property
    def sort_key(self) -> tuple[int, float]:
        """``|ρ|`` on the zoo, descending; metrics on fewer than ``MIN_MODELS`` models, then
        undefined ones, last."""
        zoo = self.zoo or {}
        rho = zoo.get("rho")
        if rho is None:
            return (2, 0.0)
        return (0 if zoo["n"] >= MIN_MODELS else 1, -abs(rho))


def _ranked(records: Sequence, key: str, col: str, groups: bool, n_resamples: int) -> dict | None:
    values = [_value(r, key) for r in records]
    succ = [getattr(r, col) for r in records]
    labels = [r.key for r in records] if groups else None
    result = rank_metric(values, succ, labels, n_resamples)
    return None if result is None else result.to_dict()


def _value(record, key: str) -> float | None:
    if isinstance(record, ZooRecord):
        return record.metrics.get(key)
    if key.startswith("err_"):
        return float(record.profile[PAPER_WORLD.dim_names.index(key[4:])])
    return float(getattr(record, key))


def meta_table(
    zoo: Sequence[ZooRecord],
    replication: Sequence[ZooRecord],
    grid: Sequence,
    n_resamples: int,
) -> list[MetaRow]:
    """Every metric's ρ on the zoo (held-out success; CIs over models, over seeds within
    configurations and over configurations then seeds), on the replication zoo, on the zoo
    with the ladder's own depth-2 success and with depth-4 success, and, for
    ``GRID_METRICS``, on the grid and on the grid pooled with the zoo (depth-4 success);
    sorted by ``|ρ|`` on the zoo (undefined last)."""
    rows = []
    for key, label, _ in METRICS:
        on_grid = key in GRID_METRICS and len(grid) > 0
        pooled = [*grid, *zoo]
        rows.append(
            MetaRow(
                metric=key,
                label=label,
                zoo=_ranked(zoo, key, "success", True, n_resamples),
                replication=_ranked(replication, key, "success", True, n_resamples),
                zoo_ladder=_ranked(zoo, key, "success_ladder", True, n_resamples),
                zoo_deep=_ranked(zoo, key, "success_deep", True, n_resamples),
                grid=_ranked(grid, key, "success", False, n_resamples) if on_grid else None,
                pooled=(rank_pooled(pooled, key, n_resamples) if on_grid else None),
            )
        )
    return sorted(rows, key=lambda r: r.sort_key)


def rank_pooled(pooled: Sequence, key: str, n_resamples: int) -> dict | None:
    """ρ over grid models and zoo models together, each with its depth-4 success."""
    values = [_value(r, key) for r in pooled]
    succ = [r.success_deep if isinstance(r, ZooRecord) else r.success for r in pooled]
    result = rank_metric(values, succ, None, n_resamples)
    return None if result is None else result.to_dict()


def configurations(records: Sequence[ZooRecord]) -> list[dict]:
    """Per configuration of a zoo: the held-out success, the ladder's and the second
    depth's (mean ± SE over its seeds) and the mean over seeds of every metric."""
    out = []
    for key in dict.fromkeys(r.key for r in records):
        rs = [r for r in records if r.key == key]
        row: dict[str, Any] = {"zoo": rs[0].zoo, "key": key, "name": rs[0].name, "n_seeds": len(rs)}
        for col in ("success", "success_ladder", "success_deep"):
            values = [getattr(r, col) for r in rs]
            row[col] = float(np.mean(values))
            row[f"{col}_se"] = mean_se(values)[1] if len(values) > 1 else None
        for metric, _, _ in METRICS:
            values = [r.metrics[metric] for r in rs if r.metrics.get(metric) is not None]
            row[metric] = float(np.mean(values)) if values else None
        out.append(row)
    return out


# --------------------------------------------------------------------------- report


def _ci(d: dict | None, kind: str) -> str:
    low, high = (None, None) if d is None else (d.get(f"{kind}low"), d.get(f"{kind}high"))
    return "—" if low is None or high is None else f"[{fmt(low, 2)}, {fmt(high, 2)}]"


def _rho_cell(d: dict | None, old: bool = False) -> str:
    """ρ with its clustered CI; with ``old``, the CIs over models and over seeds beside it."""
    if d is None or d.get("rho") is None:
        return "—"
    text = f"{fmt(d['rho'], 2)} {_ci(d, 'cluster_')}"
    if old:
        text += f" / {_ci(d, '')} / {_ci(d, 'seed_')}"
    return text


def _signed(cell: str) -> str:
    """A paper value with its sign, as §5.2 writes it (``+0.43``)."""
    return cell if cell.startswith(("-", "+")) else f"+{cell}"


def _n(d: dict | None) -> str:
    return "—" if d is None else str(d["n"])


def meta_report(report: GroupReport, rows: Sequence[MetaRow], cfg: E7Config) -> None:
    """The sorted table: ρ with the held-out success on the zoo (clustered CI beside the old
    model-level ones), beside the ladder's success, the replication zoo, depth 4, the grid,
    the pool and the paper."""
    cells = []
    for r in rows:
        ref = PAPER_RHO.get(r.metric)
        cells.append(
            [
                r.label,
                _n(r.zoo),
                _rho_cell(r.zoo, old=True),
                _rho_cell(r.zoo_ladder),
                _rho_cell(r.replication),
                fmt_rho(r.zoo_deep),
                f"{fmt_rho(r.grid)} (n {_n(r.grid)})" if r.grid else "—",
                f"{fmt_rho(r.pooled)} (n {_n(r.pooled)})" if r.pooled else "—",
                _signed(ref.cell()) if ref else "—",
            ]
        )
    d2, d4 = cfg.depths
    report.table(
        "Which metric ranks learned world models? Spearman ρ with closed-loop success, sorted "
        "by |ρ| on the zoo",
        [
            "metric",
            "n (zoo)",
            f"zoo ρ, held-out success, depth {d2} [clustered CI] / [CI models] / [CI seeds]",
            f"zoo ρ, the ladder's own success, depth {d2} [clustered CI]",
            "replication zoo ρ, held-out success [clustered CI]",
            f"zoo ρ, depth {d4} [CI models]",
            f"controlled grid ρ, depth {d4}",
            f"grid + zoo ρ, depth {d4}",
            "paper (learned pool)",
        ],
        cells,
        f"Every model of the zoo is one point (n = configurations x training seeds); metrics "
        f"defined on fewer than {MIN_MODELS} models come last. Held-out success: "
        f"{cfg.heldout_episodes} episodes per model from start states disjoint from every "
        "state the decision metrics use and from every training episode's start "
        "configuration (agent cell, key cell, colour bits). Brackets: seeded percentile "
        f"bootstrap 95% CIs ({cfg.n_resamples} resamples). The clustered CI resamples "
        "configurations, then training seeds within the drawn configurations (the one every "
        "ranking verdict reads, docs/PREREGISTERED.md Rule 4); beside it the old CIs, "
        "resampling models as independent, and resampling seeds within each configuration. "
        "The ladder's own success is the closed loop on the zoo's evaluation seeds, whose "
        "episodes also give XGap's states and, with the oracle's, the branch set. A negative "
        "ρ means the metric falls as success rises (right for an error; agreement, PRA and "
        "policy-ranking ρ should rise instead). The grid is E1's controlled grid (its result "
        f"files), which records only the prediction metrics; grid and pool use depth-{d4} "
        "success, the grid's planner, on the evaluation seeds' start states. The paper's "
        "+0.43 is its seven-model learned pool (§5.2; depth 2).",
    )


def variants_report(report: GroupReport, rows: Sequence[MetaRow], cfg: E7Config) -> None:
    """The non-circular variants of the decision metrics beside today's."""
    by = {r.metric: r for r in rows}
    cells = []
    for variant, today in VARIANTS:
        v, t = by[variant], by[today]
        cells.append(
            [
                v.label if variant != today else f"{v.label}, off the scored episodes",
                _rho_cell(v.zoo),
                _rho_cell(v.replication),
                f"{t.label}: {_rho_cell(t.zoo_ladder)}",
            ]
        )
    d2 = cfg.depths[0]
    report.table(
        "The decision metrics made non-circular: Spearman ρ with the held-out success",
        [
            "variant",
            f"zoo ρ, held-out success, depth {d2} [clustered CI]",
            "replication zoo ρ [clustered CI]",
            f"today's metric with the ladder's own success, depth {d2} [clustered CI]",
        ],
        cells,
        "Held-out behaviour states only: the branch set without its oracle-visited part (the "
        f"first {dict(cfg.ladder_sizes)['branch_states']} starts of the held-out windows, "
        "every one a probe question), at the success target's depth "
        f"{d2} and at depth {cfg.variant_depth}. XGap is the ladder's, at states of the "
        "model's own ladder episodes, which are not the scored (held-out) episodes. Today's "
        "metric: the ladder's (branch set of behaviour and oracle-visited states, "
        f"depth {d2}) against the ladder's own closed-loop success.",
    )


def zoo_report(
    report: GroupReport, zoo_rows: list[dict], rep_rows: list[dict], cfg: E7Config
) -> None:
    """Per configuration: the held-out success, the ladder's, depth 4, the headline metrics,
    and the replication zoo's held-out success."""
    rep = {r["key"]: r for r in rep_rows}
    cells = []
    for r in zoo_rows:
        other = rep.get(r["key"], {})
        cells.append(
            [
                r["name"],
                fmt_se(r["success"], r["success_se"]),
                fmt_se(r["success_ladder"], r["success_ladder_se"]),
                fmt_se(r["success_deep"], r["success_deep_se"]),
                fmt_se(other.get("success"), other.get("success_se")),
                fmt(r["E_tot"]),
                fmt(r["DRPE_graded"]),
                fmt(r["carrying_at_pickup"], 2),
                fmt(r["decision_regret"]),
            ]
        )
    d2, d4 = cfg.depths
    z = cfg.zoo
    report.table(
        "The zoo: success and headline metrics per configuration",
        [
            "configuration",
            f"held-out success, depth {d2}",
            f"ladder's success, depth {d2}",
            f"success, depth {d4}",
            f"replication held-out success, depth {d2}",
            "E_tot",
            "DRPE graded",
            "carrying at pickup",
            "decision regret",
        ],
        cells,
        f"Means over {len(z.seeds)} training seed(s) (SE over their success rates); each model "
        f"plays the {cfg.heldout_episodes} held-out start states at depth {d2}, and "
        f"{len(z.eval_seeds)} closed-loop seed(s) x {cfg.episodes} episodes (the ladder's) at "
        f"depth {d2} and x {cfg.deep_episodes} at depth {d4}. E_tot and "
        f"DRPE on E1's {cfg.n_windows} held-out H = {cfg.horizon} windows. Every model and "
        "metric: `zoo.csv`.",
    )


def _rho(row: MetaRow | None, part: str = "zoo") -> float:
    d = getattr(row, part) if row is not None else None
    return float("nan") if d is None or d.get("rho") is None else float(d["rho"])


def _ranks(d: dict | None, metric: str) -> bool:
    """Defined on at least ``MIN_MODELS`` models, and the clustered CI excludes zero on the
    metric's side (``SIDE``; docs/PREREGISTERED.md, Rule 4)."""
    if d is None or d.get("cluster_low") is None or d["n"] < MIN_MODELS:
        return False
    return d["cluster_low"] > 0 if SIDE[metric] > 0 else d["cluster_high"] < 0


def _rank_detail(row: MetaRow) -> str:
    return (
        f"zoo ρ {fmt(_rho(row), 2)} {_ci(row.zoo, 'cluster_')}, replication "
        f"{fmt(_rho(row, 'replication'), 2)} {_ci(row.replication, 'cluster_')}"
    )


#: The non-circular ranking verdicts, stated before the full run: ``(metric, claim)``.
NONCIRCULAR_CLAIMS = (
    (
        "decision_regret_behaviour",
        "Decision regret ranks the zoo with its branch set from held-out behaviour states only "
        "(clustered 95% CI of ρ with the held-out success below 0, on the zoo and on the "
        "replication zoo)",
    ),
    (
        "decision_regret_behaviour_depth",
        "Decision regret ranks the zoo at a planner depth other than the success target's "
        "(held-out behaviour states; clustered 95% CI below 0 on both zoos)",
    ),
    (
        "probe_regret_behaviour_depth",
        "The WorldModelGym probe's regret ranks the zoo at a planner depth other than the "
        "success target's (held-out behaviour states; clustered 95% CI below 0 on both zoos)",
    ),
    (
        "xgap",
        "The exploitability gap ranks the zoo off the scored episodes (clustered 95% CI of ρ "
        "with the held-out success below 0 on both zoos)",
    ),
)


def verdicts(report: GroupReport, cfg: E7Config, rows: list[MetaRow], zoo_rows, rep_rows) -> None:
    """The effects E7 can fail to show, every ranking one on the clustered CI of ρ with the
    held-out success (docs/PREREGISTERED.md, Rule 4)."""
    by = {r.metric: r for r in rows}
    succ = [r["success"] for r in zoo_rows]
    lo, hi = min(succ), max(succ)
    report.verdict(
        f"The zoo's configurations span success {SPAN_LOW} to {SPAN_HIGH} (a pool that can rank)",
        lo <= SPAN_LOW and hi >= SPAN_HIGH,
        f"held-out depth-{cfg.depths[0]} success of the {len(zoo_rows)} configurations (means "
        f"over seeds) from {fmt(lo, 2)} to {fmt(hi, 2)}; replication "
        f"{fmt(min(r['success'] for r in rep_rows), 2)} to "
        f"{fmt(max(r['success'] for r in rep_rows), 2)}",
    )
    re, rd = _rho(by.get("E_tot")), _rho(by.get("DRPE_graded"))
    old_reading = re > MAX_RANKING_RHO and rd > MAX_RANKING_RHO
    report.verdict(
        "Within the learned pool neither E_tot nor DRPE ranks the models (§5.2: +0.43 for both)",
        None
        if math.isnan(re) or math.isnan(rd)
        else not (_ranks(by["E_tot"].zoo, "E_tot") or _ranks(by["DRPE_graded"].zoo, "DRPE_graded")),
        f"held-out success: E_tot {_rank_detail(by['E_tot'])}; DRPE graded "
        f"{_rank_detail(by['DRPE_graded'])} (Rule 4: a metric ranks when its clustered CI "
        f"excludes 0 on its side; the criterion before Rule 4, both zoo ρ > {MAX_RANKING_RHO}, "
        f"reads {'holds' if old_reading else 'fails'})",
    )
    ranking = [r for r in rows if _ranks(r.zoo, r.metric)]
    replicated = [r for r in ranking if _ranks(r.replication, r.metric)]
    report.verdict(
        "Which metrics rank the zoo replicates on the independently seeded zoo",
        None if not ranking else len(replicated) == len(ranking),
        f"{len(ranking)} metric(s) whose clustered CI excludes 0 on their side on the zoo; "
        f"{len(replicated)} of them also on the replication zoo"
        + (
            f"; not replicated: {', '.join(r.label for r in ranking if r not in replicated)}"
            if len(replicated) < len(ranking)
            else ""
        ),
    )
    drpe = sorted(
        zoo_rows, key=lambda r: r["DRPE_graded"] if r["DRPE_graded"] is not None else math.inf
    )
    best = drpe[: max(1, len(drpe) // 4)]
    failing = [r for r in best if r["success"] < 0.5]
    report.verdict(
        "DRPE misses failures: a configuration in DRPE's best quarter plans poorly "
        "(success < 0.5; §5.4: rel-only has the lowest DRPE and the worst success)",
        bool(failing),
        "DRPE's best quarter: "
        + ", ".join(
            f"{r['name']} (DRPE {fmt(r['DRPE_graded'])}, held-out success {fmt(r['success'], 2)})"
            for r in best
        ),
    )
    for metric, claim in NONCIRCULAR_CLAIMS:
        row = by[metric]
        report.verdict(
            claim,
            None
            if row.zoo is None
            else _ranks(row.zoo, metric) and _ranks(row.replication, metric),
            f"{row.label}: {_rank_detail(row)}",
        )


def ranking_text(report: GroupReport, rows: list[MetaRow]) -> None:
    """Which metrics rank the zoo and which do not, in plain words, from the table."""
    ranking = [r for r in rows if _ranks(r.zoo, r.metric)]
    both = [r for r in ranking if _ranks(r.replication, r.metric)]
    not_ranking = [
        r for r in rows if r.zoo is not None and r.zoo["n"] >= MIN_MODELS and r not in ranking
    ]
    few = [r for r in rows if r.zoo is not None and r.zoo["n"] < MIN_MODELS]
    lines = [
        "**Metrics that rank the zoo** (held-out success; clustered CI excludes 0 on the "
        "metric's side): "
        + (", ".join(f"{r.label} ({fmt(_rho(r), 2)})" for r in ranking) or "none")
        + ".",
        "**Of these, also on the replication zoo:** "
        + (", ".join(r.label for r in both) or "none")
        + ".",
        "**Metrics that do not rank it:** "
        + (", ".join(f"{r.label} ({fmt(_rho(r), 2)})" for r in not_ranking) or "none")
        + ".",
    ]
    if few:
        lines.append(
            f"**Defined on fewer than {MIN_MODELS} models, not ranked:** "
            + ", ".join(f"{r.label} (n = {r.zoo['n']})" for r in few)
            + "."
        )
    report.text("\n\n".join(lines))


# --------------------------------------------------------------------------- run


def write_tables(
    ctx: GroupContext,
    cfg: E7Config,
    zoos: tuple,
    means: tuple,
    rows: list,
    trained: tuple,
    grid: list,
) -> None:
    """``zoo.csv``, ``configurations.csv``, ``meta.csv``, ``runs.csv`` and both figures;
    ``zoos``, ``means`` and ``trained`` hold the zoo's and the replication zoo's records,
    configuration means and runs."""
    zoo, replication = zoos
    ctx.write_csv("zoo.csv", [*zoo, *replication])
    ctx.write_csv("configurations.csv", [*means[0], *means[1]])
    ctx.write_csv("meta.csv", [{"metric": r.metric, "label": r.label, **_flat(r)} for r in rows])
    runs = [
        {
            "zoo": name,
            "key": k,
            "seed": s,
            "epochs": m["epochs"],
            "train_seconds": m["train_seconds"],
            "checkpoint": c,
        }
        for name, table in zip((cfg.zoo.name, cfg.replication.name), trained, strict=True)
        for (k, s), (m, c) in table.items()
    ]
    ctx.write_csv("runs.csv", runs)
    # The variants are tabled, not drawn (the figure keeps its panels).
    drawn = {variant for variant, today in VARIANTS if variant != today}
    panels = [r.metric for r in rows if r.zoo is not None and r.metric not in drawn]
    ctx.save_figure(
        zoo_scatter_figure(zoo, replication, panels, LABELS, cfg.depths[0]), "fig_zoo_scatter.png"
    )
    ctx.save_figure(
        pool_scatter_figure(grid, zoo, ("E_tot", "DRPE_graded", "VPE"), LABELS, cfg.depths[1]),
        "fig_pool_scatter.png",
    )


def e7_report(cfg: E7Config, rows: list[MetaRow], zoo_rows, rep_rows) -> GroupReport:
    """The verdicts, the meta-evaluation, the variants, the ranking text, the zoo tables
    and the figures' captions."""
    report = GroupReport("E7 — which metric ranks learned world models? (§4.3, §5.2, §5.4)")
    verdicts(report, cfg, rows, zoo_rows, rep_rows)
    meta_report(report, rows, cfg)
    variants_report(report, rows, cfg)
    ranking_text(report, rows)
    zoo_report(report, zoo_rows, rep_rows, cfg)
    report.figure(
        "fig_zoo_scatter.png",
        f"Every metric against the held-out depth-{cfg.depths[0]} success, one point per model "
        "(filled: zoo, open: replication zoo)",
    )
    report.figure(
        "fig_pool_scatter.png",
        f"E_tot, DRPE and VPE against depth-{cfg.depths[1]} success: E1's grid beside the zoo",
    )
    return report


def run(ctx: GroupContext) -> GroupReport:
    """E7 (see the module docstring)."""
    cfg: E7Config = ctx.config
    if cfg.variant_depth == cfg.depths[0]:
        raise ValueError(
            f"variant_depth {cfg.variant_depth} must differ from the success target's depth "
            f"{cfg.depths[0]}"
        )
    laps: dict[str, float] = {}
    t0 = time.perf_counter()
    trained, wall, datasets = train_zoo(ctx, cfg, cfg.zoo)
    t1 = time.perf_counter()
    first = evaluate_zoo(ctx, cfg, cfg.zoo, trained)
    eval_wall = time.perf_counter() - t1
    ctx.log(f"zoo {cfg.zoo.name}: evaluated {len(first.models)} models in {eval_wall:.0f} s")
    grid, source = controlled_grid(ctx)
    rep_trained, rep_wall, rep_datasets = train_zoo(ctx, cfg, cfg.replication)
    t2 = time.perf_counter()
    second = evaluate_zoo(ctx, cfg, cfg.replication, rep_trained)
    laps["evaluate replication zoo"] = time.perf_counter() - t2
    t3 = time.perf_counter()
    training = training_configurations(ctx, datasets | rep_datasets)
    start = heldout_starts(cfg, first.used_states | second.used_states, training)
    heldout = heldout_success(ctx, cfg, [*first.models, *second.models], start)
    laps["held-out success"] = time.perf_counter() - t3
    zoo = zoo_records(first, heldout[: len(first.models)])
    replication = zoo_records(second, heldout[len(first.models) :])
    rows = meta_table(zoo, replication, grid, cfg.n_resamples)
    zoo_rows, rep_rows = configurations(zoo), configurations(replication)
    laps.update({"train zoo": wall, "evaluate zoo": eval_wall, "train replication zoo": rep_wall})
    laps["total"] = time.perf_counter() - t0
    ctx.log("E7 wall seconds: " + ", ".join(f"{k} {v:.0f}" for k, v in laps.items()))

    write_tables(
        ctx, cfg, (zoo, replication), (zoo_rows, rep_rows), rows, (trained, rep_trained), grid
    )
    report = e7_report(cfg, rows, zoo_rows, rep_rows)
    report.text(
        "Wall seconds: "
        + ", ".join(f"{k} {v:.0f}" for k, v in laps.items())
        + f" (vectorized training groups). Grid: {source}."
    )
    ctx.write_json(
        "results.json",
        {
            "config": cfg,
            "zoo": zoo,
            "replication": replication,
            "configurations": {"zoo": zoo_rows, "replication": rep_rows},
            "meta": [{"metric": r.metric, "label": r.label, **_flat(r)} for r in rows],
            "heldout": {
                "episodes": int(start.shape[0]),
                "seed": cfg.heldout_seed,
                "used_states": len(first.used_states | second.used_states),
                "training_configurations": len(training),
                "starts": start.tolist(),
            },
            "grid_source": source,
            "train_wall_seconds": {cfg.zoo.name: wall, cfg.replication.name: rep_wall},
            "wall_seconds": laps,
            "paper": {k: v for k, v in PAPER_RHO.items()},
        },
    )
    return report


def _flat(row: MetaRow) -> dict:
    out = {}
    keys = ("rho", "low", "high", "seed_low", "seed_high", "cluster_low", "cluster_high", "n")
    for part in ("zoo", "replication", "zoo_ladder", "zoo_deep", "grid", "pooled"):
        d = getattr(row, part) or {}
        for k in keys:
            out[f"{part}_{k}"] = d.get(k)
    return out
