"""The fused leaf scorer (gridplan.planning.fused) decides exactly as the generic one
(gridplan.planning.scorers).

The generic scorer calls ``model.predict`` on full states; the fused one rolls the noise family
on the task's relevant dims only. Given the same noise they must give bit-identical action
values, and the noise they draw must have the model's law. The fused draws are replayed with
``fused_draws`` of ``scripts/bench_planner.py``, the benchmark's reference adapter.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch
from paper_layout import STATE_DIM

import gridplan.planning.fused
from gridplan.core.constants import AGENT_X, CARRYING
from gridplan.core.env import reset, transition
from gridplan.core.tasks import TASK_A, TASK_B, Task
from gridplan.core.values import value_table
from gridplan.models.contract import WorldModel
from gridplan.models.noise import AR1NoiseModel, NoiseModel, OracleModel, noise_grid
from gridplan.planning.fused import FusedNoiseScorer, noise_scorer
from gridplan.planning.planner import Planner
from gridplan.planning.registry import register_scorer, through_predict
from gridplan.planning.scorers import GenericScorer

TASKS = pytest.mark.parametrize("task", [TASK_A, TASK_B], ids=["A", "B"])


def load_bench():
    """``scripts/bench_planner.py`` as a module (scripts/ is not a package)."""
    path = Path(__file__).resolve().parents[2] / "scripts" / "bench_planner.py"
    spec = importlib.util.spec_from_file_location("bench_planner", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


BENCH = load_bench()


def fused_draws(planner: Planner, roots: torch.Tensor, seed: int, episodes=None):
    """The noise ``planner.action_values(roots, Generator().manual_seed(seed))`` draws."""
    return BENCH.fused_draws(planner.scorer, roots, torch.Generator().manual_seed(seed), episodes)


class ReplayedNoise(WorldModel):
    """The true transition plus given noise on the relevant dims, through ``predict``: the
    generic scorer of a noise-family model whose draws are ``noise`` ``(D, K, B, L)``."""

    def __init__(self, noise: torch.Tensor, task: Task) -> None:
        self.noise = noise
        self.dims = list(task.relevant_dims)
        self.t = 0

    def start_rollout(self, batch, generator):
        self.t = 0

    def predict(self, state, action, generator):
        nxt = transition(state, action, generator)[0]
        add = torch.zeros_like(nxt)
        add[:, self.dims] = self.noise[self.t].reshape(len(self.dims), -1).T
        self.t += 1
        return (nxt + add).clamp_(0.0, 1.0)


def mixed_roots(task: Task, episodes: int, settings: int, random_states, seed: int = 0):
    """Reset states, random discrete ones (door open, key carried, agents near the goals) and
    continuous ones a little outside ``[0, 1]`` (read through clamped cells), repeated
    setting-major."""
    gen = torch.Generator().manual_seed(seed)
    third = episodes // 3
    roots = torch.cat(
        [
            reset(third, gen, task),
            random_states(third, gen),
            torch.rand(episodes - 2 * third, STATE_DIM, generator=gen) * 1.2 - 0.1,
        ]
    )
    return roots.repeat(settings, 1)


NOISY_MODELS = {
    "controlled": lambda: NoiseModel.controlled(0.35, 0.1),
    "large sigma flips flags": lambda: NoiseModel.controlled(2.0, 0.8),
    "ar1": lambda: AR1NoiseModel.controlled(1.0, 0.6, rho=0.7),
    "grid of settings": lambda: noise_grid([0.0, 0.7], [0.0, 1.2]),
}


@pytest.mark.parametrize("depth", [1, 2, 3])
@TASKS
def test_fused_oracle_values_are_bit_identical_to_the_generic_scorers(random_states, depth, task):
    roots = mixed_roots(task, 40, 1, random_states, seed=depth)
    fused = Planner(OracleModel(), depth, task)
    generic = Planner(OracleModel(), depth, task, factory=through_predict)
    assert isinstance(fused.scorer, FusedNoiseScorer)
    assert isinstance(generic.scorer, GenericScorer)
    want = generic.action_values(roots, torch.Generator())
    assert torch.equal(fused.action_values(roots, torch.Generator()), want)


@pytest.mark.parametrize("name", list(NOISY_MODELS))
@TASKS
def test_fused_noisy_values_are_bit_identical_to_predict_given_the_same_noise(
    random_states, name, task
):
    model = NOISY_MODELS[name]()
    roots = mixed_roots(task, 24, model.n_settings, random_states)
    planner = Planner(model, 3, task)
    fused = planner.action_values(roots, torch.Generator().manual_seed(7))
    noise = fused_draws(planner, roots, 7)
    replay = Planner(ReplayedNoise(noise, task), 3, task)
    assert isinstance(replay.scorer, GenericScorer)
    assert torch.equal(fused, replay.action_values(roots, torch.Generator()))
    oracle = Planner(OracleModel(), 3, task).action_values(roots, torch.Generator())
    assert not torch.equal(fused, oracle), "the noise must change some values"


def test_fused_and_generic_noisy_planners_agree_in_distribution(make_state):
    # One state, many independent searches: the mean of each first action's value must agree
    # between the scorers within sampling error (the generic one also draws noise on c2, d1,
    # d2 and the distractor moves, which cannot change a score).
    state = make_state(agent=(3, 4), key=(2, 4), rows=3000)
    model = NoiseModel.controlled(1.0, 0.6)
    fused = Planner(model, 2).action_values(state, torch.Generator().manual_seed(0))
    generic = Planner(model, 2, factory=through_predict).action_values(
        state, torch.Generator().manual_seed(1)
    )
    se = (fused.var(dim=0) / 3000 + generic.var(dim=0) / 3000).sqrt()
    assert ((fused.mean(dim=0) - generic.mean(dim=0)).abs() < 4 * se).all()
    assert (se > 0).all()


def test_fused_noise_has_each_settings_std_on_noisy_dims_and_zeros_elsewhere():
    model = NoiseModel.controlled([0.35, 1.4], [0.0, 0.0])
    roots = reset(8, torch.Generator().manual_seed(0)).repeat(2, 1)
    noise = fused_draws(Planner(model, 3, TASK_B), roots, 1)
    assert noise.shape == (3, 7, 16, 64)
    for block, sigma in [(slice(0, 8), 0.05), (slice(8, 16), 0.2)]:
        part = noise[:, : CARRYING + 2, block]
        assert part.std().item() == pytest.approx(sigma, rel=0.02)
    assert (noise[:, -1] == 0).all(), "c1 has sigma_i = 0: nothing is drawn for it"


def test_ar1_fused_noise_is_correlated_across_steps_with_rho():
    model = AR1NoiseModel.controlled(1.4, 0.0, rho=0.8)
    roots = reset(40, torch.Generator().manual_seed(0))
    noise = fused_draws(Planner(model, 2), roots, 1)
    first, second = noise[0, AGENT_X].flatten(), noise[1, AGENT_X].flatten()
    assert torch.corrcoef(torch.stack([first, second]))[0, 1].item() == pytest.approx(0.8, abs=0.03)
    assert second.std().item() == pytest.approx(0.2, rel=0.03)


def test_a_task_a_planner_with_only_irrelevant_noise_draws_nothing_and_acts_as_the_oracle():
    roots = reset(30, torch.Generator().manual_seed(2))
    gen = torch.Generator().manual_seed(3)
    before = gen.get_state()
    values = Planner(NoiseModel.controlled(0.0, 1.2), 2).action_values(roots, gen)
    assert torch.equal(gen.get_state(), before)
    oracle = Planner(OracleModel(), 2).action_values(roots, torch.Generator())
    assert torch.equal(values, oracle)


@pytest.mark.parametrize("max_rows", [1, 5 * 64 + 3, 10**9])
def test_chunk_size_never_changes_fused_noisy_decisions(max_rows):
    model = noise_grid([0.35, 1.0], [0.1])
    roots = reset(20, torch.Generator().manual_seed(4)).repeat(2, 1)
    whole = Planner(model, 3).act(roots, torch.Generator().manual_seed(5))
    chunked = Planner(model, 3, max_rows=max_rows)
    assert torch.equal(chunked.act(roots, torch.Generator().manual_seed(5)), whole)


def test_several_draw_units_replay_exactly_and_quiet_units_draw_nothing(monkeypatch, random_states):
    # Units of 4 episodes at depth 2: the first setting (sigma 0) fills units that draw no
    # noise and must equal the oracle; the rest must still match the generic replay.
    monkeypatch.setitem(gridplan.planning.fused.UNIT_ROWS, "cpu", 4 * 16)
    model = noise_grid([0.0, 1.0], [0.0])
    roots = mixed_roots(TASK_A, 12, 2, random_states, seed=6)
    planner = Planner(model, 2, max_rows=3 * 16)
    assert planner.scorer.unit_episodes() == 4
    fused = planner.action_values(roots, torch.Generator().manual_seed(8))
    noise = fused_draws(planner, roots, 8)
    assert (noise[:, :, :12] == 0).all() and (noise[:, :, 12:] != 0).any()
    first = fused_draws(planner, roots, 8, episodes=15)
    assert torch.equal(first, noise[:, :, :15])
    replay = Planner(ReplayedNoise(noise, TASK_A), 2).action_values(roots, torch.Generator())
    assert torch.equal(fused, replay)
    oracle = Planner(OracleModel(), 2).action_values(roots[:12], torch.Generator())
    assert torch.equal(fused[:12], oracle)


def test_reused_buffers_do_not_leak_between_decisions_of_different_sizes(random_states):
    model = NoiseModel.controlled(0.7, 0.0)
    planner = Planner(model, 2)
    batches = [mixed_roots(TASK_A, n, 1, random_states, seed=n) for n in (30, 7, 30)]
    for roots in batches:
        fresh = Planner(model, 2).action_values(roots, torch.Generator().manual_seed(9))
        reused = planner.action_values(roots, torch.Generator().manual_seed(9))
        assert torch.equal(reused, fresh)


@TASKS
@pytest.mark.parametrize("name", ["large sigma flips flags", "ar1"])
def test_the_plain_python_reference_handed_the_fused_draws_chooses_the_same_actions(
    random_states, task, name
):
    # The benchmark's adapter feeds ref_plan the batched planner's tie and noise draws.
    planner = Planner(NOISY_MODELS[name](), 2, task)
    roots = mixed_roots(task, 30, 1, random_states, seed=11)
    result = BENCH.run_reference(planner, roots, episodes=30)
    assert (result["identical"], result["checked"]) == (True, 30)


def test_a_noise_family_subclass_is_rolled_through_predict_unless_it_registers_a_scorer():
    class Custom(NoiseModel):
        def predict(self, state, action, generator):
            return super().predict(state, action, generator)

    class Declared(Custom):
        pass

    register_scorer(Declared, noise_scorer)

    def scorer(model):
        return type(Planner(model, 1).scorer)

    assert scorer(NoiseModel.controlled(0.1, 0.1)) is FusedNoiseScorer
    assert scorer(AR1NoiseModel.controlled(0.1, 0.1)) is FusedNoiseScorer
    assert scorer(OracleModel()) is FusedNoiseScorer
    assert scorer(Custom(torch.zeros(STATE_DIM))) is GenericScorer
    assert scorer(Declared(torch.zeros(STATE_DIM))) is FusedNoiseScorer
    assert type(Planner(OracleModel(), 1, factory=through_predict).scorer) is GenericScorer


@pytest.mark.parametrize(
    "task",
    [
        Task(name="static hazard", goal=(7, 0), hazard=(6, 1)),
        Task(name="diagonal swap", goal=(7, 0), hazard=(6, 7), swap_on_c1=True),
    ],
    ids=lambda t: t.name,
)
def test_the_fused_scorer_reads_any_goal_and_hazard_geometry_from_the_task(random_states, task):
    # Beyond the paper's tasks: a hazard that never swaps, and a swap across rows and columns.
    roots = mixed_roots(task, 30, 1, random_states, seed=12)
    fused = Planner(OracleModel(), 2, task)
    generic = Planner(OracleModel(), 2, task, factory=through_predict)
    want = generic.action_values(roots, torch.Generator())
    assert torch.equal(fused.action_values(roots, torch.Generator()), want)
    torch.testing.assert_close(want, value_table(task).q_values(roots), atol=1e-6, rtol=0)
    model = NoiseModel.controlled(2.0, 0.8)
    noisy = Planner(model, 2, task).action_values(roots, torch.Generator().manual_seed(3))
    replay = ReplayedNoise(fused_draws(Planner(model, 2, task), roots, 3), task)
    assert torch.equal(noisy, Planner(replay, 2, task).action_values(roots, torch.Generator()))
