"""Readings of the paper's ambiguous choices (gridplan.core.readings) in the models and the fused
scorer: each switch does what it says on hand-built states, PROJECT is today's model bit for
bit, and the fused scorer decides exactly as the generic one under every reading."""

from __future__ import annotations

import importlib.util
import itertools
from pathlib import Path

import pytest
import torch
from paper_layout import C2, CELL_SCALE, D1_X, D1_Y, D2_X, D2_Y, STATE_DIM

from gridplan.core import readings
from gridplan.core.constants import (
    AGENT_X,
    AGENT_Y,
    C1,
    CARRYING,
    DOOR_OPEN,
    KEY_X,
    KEY_Y,
    LEFT,
    RIGHT,
    UP,
)
from gridplan.core.env import reset, transition
from gridplan.core.readings import CHOICES, PROJECT, Reading
from gridplan.core.tasks import TASK_A, TASK_B, Task
from gridplan.models.noise import (
    AR1NoiseModel,
    NoiseModel,
    OracleModel,
    imagined_transition,
    noise_grid,
)
from gridplan.planning.fused import FusedNoiseScorer
from gridplan.planning.planner import Planner
from gridplan.planning.registry import through_predict
from gridplan.planning.scorers import GenericScorer

TASKS = pytest.mark.parametrize("task", [TASK_A, TASK_B], ids=["A", "B"])


def load_bench():
    path = Path(__file__).resolve().parents[2] / "scripts" / "bench_planner.py"
    spec = importlib.util.spec_from_file_location("bench_planner", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


BENCH = load_bench()


def acts(n: int, action: int) -> torch.Tensor:
    return torch.full((n,), action, dtype=torch.long)


def reading(**switches) -> Reading:
    return PROJECT.replace("test", **switches)


# Every switch that reaches a leaf score, alone and all together.
SCORED_READINGS = {
    "project": PROJECT,
    "no clamp": reading(clamp=False),
    "belief": reading(transition="belief"),
    "belief, no clamp": reading(transition="belief", clamp=False),
    "carried bits": reading(bits="carried"),
    "carried bits, no clamp": reading(bits="carried", clamp=False),
    "carried flags": reading(flags="carried"),
    "carried flags, no clamp": reading(flags="carried", clamp=False),
    "flag noise sigma_r": reading(flag_noise="sigma_r"),
    "everything carried": reading(
        clamp=False,
        transition="belief",
        bits="carried",
        flags="carried",
        flag_noise="sigma_r",
        distractors="expected",
    ),
    "everything carried, clamped": reading(
        transition="belief", bits="carried", flags="carried", distractors="expected"
    ),
    "shared prefix": reading(tree="shared-prefix"),
    "everything carried, shared prefix": reading(
        clamp=False,
        transition="belief",
        bits="carried",
        flags="carried",
        flag_noise="sigma_r",
        tree="shared-prefix",
    ),
}


# --- the Reading type and its registry ----------------------------------------------------


def test_project_is_the_first_value_of_every_switch_and_is_registered():
    assert PROJECT.switches() == {k: v[0] for k, v in CHOICES.items()}
    assert readings.get("project") is PROJECT
    assert "project" in readings.names()
    assert readings.get(PROJECT) is PROJECT


@pytest.mark.parametrize(
    ("build", "match"),
    [
        (lambda: Reading("Bad Name"), "lower-case"),
        (lambda: Reading("x", clamp="yes"), "clamp must be one of"),
        (lambda: Reading("x", transition="smooth"), "transition must be one of"),
        (lambda: Reading("x", flag_noise="sigma_i"), "flag_noise must be one of"),
        (lambda: Reading("x", tree="beam"), "tree must be one of"),
        (lambda: PROJECT.replace("x", colour="red"), "unknown reading switches"),
        (lambda: readings.get("no-such-reading"), "valid readings are project"),
    ],
)
def test_bad_readings_are_rejected_naming_the_problem(build, match):
    with pytest.raises(ValueError, match=match):
        build()


def test_register_refuses_to_overwrite_a_different_reading_and_unregister_removes_it():
    mine = PROJECT.replace("test-mine", clamp=False)
    try:
        readings.register(mine)
        assert readings.get("test-mine") == mine
        readings.register(mine)  # the same reading again is fine
        with pytest.raises(ValueError, match="already registered"):
            readings.register(PROJECT.replace("test-mine"))
    finally:
        readings.unregister("test-mine")
    assert "test-mine" not in readings.names()


def test_models_take_readings_not_names():
    with pytest.raises(TypeError, match="resolve a name with gridplan.core.readings.get"):
        NoiseModel.controlled(0.1, 0.1, reading="project")
    assert reading(clamp=False).differences(PROJECT) == {"clamp": False}


# --- each switch on hand-built states -----------------------------------------------------


def test_project_is_the_true_transition_with_the_same_draws(random_states):
    state = random_states(200, torch.Generator().manual_seed(0))
    action = torch.arange(200) % 4
    want = transition(state, action, torch.Generator().manual_seed(3))[0]
    got = imagined_transition(state, action, torch.Generator().manual_seed(3), PROJECT)
    assert torch.equal(got, want)


def test_expected_distractors_sit_at_the_mean_of_the_walk_and_the_grid_centre(make_state):
    # d1 at (0, 3): x moves right with probability 1/5 and left is clipped, so E[x] = 1/5;
    # y moves up or down with 1/5 each, E[y] = 3. d2 is uniform over cells 0..7: mean 3.5.
    state = make_state(agent=(2, 2), d1=(0, 3), d2=(7, 7), rows=2)
    g = torch.Generator().manual_seed(0)
    before = g.get_state()
    nxt = imagined_transition(state, acts(2, UP), g, reading(distractors="expected"))
    assert torch.equal(g.get_state(), before), "the expected reading draws nothing"
    assert nxt[0, D1_X].item() == pytest.approx(0.2 / CELL_SCALE)
    assert nxt[0, D1_Y].item() == pytest.approx(3 / CELL_SCALE)
    assert nxt[0, D2_X].item() == nxt[0, D2_Y].item() == 0.5
    assert nxt[0, AGENT_Y].item() == pytest.approx(3 / CELL_SCALE)


def test_the_oracles_floor_is_lower_with_expected_distractors(make_state):
    # d2's per-dim squared error is 2 Var = 2 * 63/12 / 49 sampled and Var = 0.107 expected.
    state = make_state(d1=(3, 3), rows=40_000)
    g = torch.Generator().manual_seed(1)
    truth = transition(state, acts(40_000, UP), g)[0]
    for r, want in [(PROJECT, 2 * 5.25 / 49), (reading(distractors="expected"), 5.25 / 49)]:
        pred = OracleModel(r).predict(state, acts(40_000, UP), torch.Generator().manual_seed(2))
        err = (pred[:, D2_X] - truth[:, D2_X]).square().mean().item()
        assert err == pytest.approx(want, rel=0.03)


def test_the_belief_transition_carries_the_sub_cell_offset(make_state):
    state = make_state(agent=(2, 2), key=(4, 4), d1=(3, 3), rows=1)
    state[0, AGENT_X] += 0.3 / CELL_SCALE  # reads as cell 2, 0.3 cells to the right
    state[0, KEY_Y] -= 0.4 / CELL_SCALE
    clean = imagined_transition(state, acts(1, RIGHT), torch.Generator(), PROJECT)
    belief = imagined_transition(
        state, acts(1, RIGHT), torch.Generator(), reading(transition="belief")
    )
    assert clean[0, AGENT_X].item() == pytest.approx(3 / CELL_SCALE)
    assert belief[0, AGENT_X].item() == pytest.approx(3.3 / CELL_SCALE)
    assert belief[0, KEY_Y].item() == pytest.approx(3.6 / CELL_SCALE)
    assert belief[0, AGENT_Y].item() == clean[0, AGENT_Y].item()


def test_carried_bits_keep_c1_and_toggle_c2_as_one_minus_its_value(make_state):
    state = make_state(rows=1)
    state[0, C1], state[0, C2] = 0.7, 0.2
    clean = imagined_transition(state, acts(1, UP), torch.Generator(), PROJECT)
    carried = imagined_transition(state, acts(1, UP), torch.Generator(), reading(bits="carried"))
    assert (clean[0, C1].item(), clean[0, C2].item()) == (1.0, 1.0)
    assert carried[0, C1].item() == pytest.approx(0.7)
    assert carried[0, C2].item() == pytest.approx(0.8)


def test_carried_flags_keep_their_value_until_their_event_sets_them(make_state):
    # Row 0: the agent steps onto the key (pickup) with a noisy carrying of 0.3.
    # Row 1: no event; carrying 0.3 and door 0.2 are kept as they are.
    # Row 2: carrying (0.9 reads as set) into the closed door (0.2): it opens to exactly 1.
    state = torch.cat(
        [
            make_state(agent=(1, 1), key=(2, 1)),
            make_state(agent=(1, 1), key=(3, 3)),
            make_state(agent=(4, 4), carrying=True),
        ]
    )
    state[:2, CARRYING] = 0.3
    state[2, CARRYING] = 0.9
    state[:, DOOR_OPEN] = 0.2
    action = torch.tensor([RIGHT, LEFT, RIGHT])
    nxt = imagined_transition(state, action, torch.Generator(), reading(flags="carried"))
    assert nxt[:, CARRYING].tolist() == pytest.approx([1.0, 0.3, 0.9])
    assert nxt[:, DOOR_OPEN].tolist() == pytest.approx([0.2, 0.2, 1.0])
    assert nxt[0, KEY_X].item() == pytest.approx(2 / CELL_SCALE)


def test_flag_noise_sigma_r_puts_sigma_r_itself_on_the_carrying_and_door_flags():
    model = NoiseModel.controlled(0.35, 0.1, reading=reading(flag_noise="sigma_r"))
    want = [0.05] * 4 + [0.35, 0.35] + [0.1] * 6
    assert model.sigma[0].tolist() == pytest.approx(want)
    assert model.settings() == [{"sigma_r": 0.35, "sigma_i": 0.1}]
    ar1 = AR1NoiseModel.controlled(0.35, 0.1, rho=0.5, reading=reading(flag_noise="sigma_r"))
    assert torch.equal(ar1.sigma, model.sigma)


def test_flag_noise_sigma_r_flips_a_thresholded_flag_in_8_percent_of_steps(make_state):
    # P(N(0, 0.35) > 0.5) = 1 - Phi(1.4286) = 0.0766; with sigma_r / 7 it is 1e-23.
    state = make_state(agent=(2, 2), key=(0, 7), rows=40_000)
    for r, want in [(PROJECT, 0.0), (reading(flag_noise="sigma_r"), 0.0766)]:
        pred = NoiseModel.controlled(0.35, 0.0, reading=r).predict(
            state, acts(40_000, UP), torch.Generator().manual_seed(0)
        )
        assert (pred[:, DOOR_OPEN] > 0.5).float().mean().item() == pytest.approx(want, abs=0.005)


def test_without_the_clamp_predictions_leave_the_unit_box(make_state):
    state = make_state(agent=(0, 7), rows=2000)
    for clamp in (True, False):
        pred = NoiseModel.controlled(2.0, 1.2, reading=reading(clamp=clamp)).predict(
            state, acts(2000, UP), torch.Generator().manual_seed(0)
        )
        inside = bool(((pred >= 0) & (pred <= 1)).all())
        assert inside is clamp


def test_carried_bit_noise_compounds_like_a_random_walk(make_state):
    # Unclamped carried c1: after t steps its error is N(0, t sigma^2); thresholded it stays
    # sigma^2 (the clean bit plus one step's noise).
    n, sigma = 20_000, 0.3
    for r, growth in [(reading(clamp=False, bits="carried"), 4.0), (PROJECT, 1.0)]:
        model = NoiseModel.controlled(0.0, sigma, reading=r)
        state = torch.zeros(n, STATE_DIM)
        g = torch.Generator().manual_seed(5)
        errs = []
        for _ in range(4):
            state = model.predict(state, acts(n, UP), g)
            errs.append(state[:, C1].square().mean().item())
        if r.clamp:
            continue  # clamped at 0: a half-normal, not a random walk
        assert errs[-1] / errs[0] == pytest.approx(growth, rel=0.05)


def test_the_reading_reaches_every_factory():
    r = reading(clamp=False, flag_noise="sigma_r")
    models = [
        OracleModel(r),
        NoiseModel.controlled(0.1, 0.2, reading=r),
        AR1NoiseModel.controlled(0.1, 0.2, rho=0.5, reading=r),
        noise_grid([0.0, 0.1], [0.2], reading=r),
    ]
    assert all(m.reading is r for m in models)
    for m in models:
        assert Planner(m, 2).scorer.reading is r


# --- the fused scorer decides as the generic one under every reading -----------------------


class ReplayedNoise(NoiseModel):
    """The noise family under ``reading``, rolled through ``predict`` (a subclass: the
    generic scorer) with given noise ``(D, K, B, L)`` on the task's relevant dims."""

    def __init__(self, noise: torch.Tensor, task: Task, reading: Reading) -> None:
        super().__init__(torch.ones(STATE_DIM), reading=reading)
        self.replay, self.dims, self.t = noise, list(task.relevant_dims), 0

    def start_rollout(self, batch, generator):
        self.t = 0

    def noise(self, n, generator):
        add = torch.zeros(n, STATE_DIM)
        add[:, self.dims] = self.replay[self.t].reshape(len(self.dims), -1).T
        self.t += 1
        return add


def mixed_roots(task: Task, episodes: int, settings: int, random_states, seed: int = 0):
    """Reset states, random discrete ones and off-cell states a little outside ``[0, 1]``
    (their offsets and out-of-box values are what the belief readings carry)."""
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


@pytest.mark.parametrize("name", list(SCORED_READINGS))
@pytest.mark.parametrize("depth", [1, 3])
@TASKS
def test_fused_oracle_values_equal_the_generic_ones_under_every_reading(
    random_states, name, depth, task
):
    r = SCORED_READINGS[name]
    roots = mixed_roots(task, 60, 1, random_states, seed=depth)
    fused = Planner(OracleModel(r), depth, task)
    generic = Planner(OracleModel(r), depth, task, tree="independent", factory=through_predict)
    assert isinstance(fused.scorer, FusedNoiseScorer)
    assert isinstance(generic.scorer, GenericScorer)
    want = generic.action_values(roots, torch.Generator())
    assert torch.equal(fused.action_values(roots, torch.Generator()), want)


NOISY = {
    "controlled": lambda r: NoiseModel.controlled(0.35, 0.3, reading=r),
    "large sigma flips flags": lambda r: NoiseModel.controlled(2.0, 0.8, reading=r),
    "ar1": lambda r: AR1NoiseModel.controlled(1.0, 0.6, rho=0.7, reading=r),
    "grid of settings": lambda r: noise_grid([0.0, 0.7], [0.0, 1.2], reading=r),
}


@pytest.mark.parametrize(
    ("name", "model"), list(itertools.product(SCORED_READINGS, NOISY))
)
@TASKS
def test_fused_noisy_values_are_bit_identical_to_predict_under_every_reading(
    random_states, name, model, task
):
    r = SCORED_READINGS[name]
    noisy = NOISY[model](r)
    roots = mixed_roots(task, 24, noisy.n_settings, random_states)
    planner = Planner(noisy, 3, task)
    fused = planner.action_values(roots, torch.Generator().manual_seed(7))
    noise = BENCH.fused_draws(planner.scorer, roots, torch.Generator().manual_seed(7))
    # The replayed draws are laid out per leaf, whatever the reading's tree.
    replay = Planner(ReplayedNoise(noise, task, r), 3, task, tree="independent")
    assert isinstance(replay.scorer, GenericScorer)
    assert torch.equal(fused, replay.action_values(roots, torch.Generator()))


def test_readings_that_carry_beliefs_change_noisy_decisions(random_states):
    # The switches are not inert in the scorer: the same draws give other values.
    roots = mixed_roots(TASK_B, 60, 1, random_states)
    values = {}
    for name in ("project", "belief", "carried flags, no clamp", "carried bits, no clamp"):
        model = NoiseModel.controlled(0.7, 0.8, TASK_B, SCORED_READINGS[name])
        planner = Planner(model, 3, TASK_B)
        values[name] = planner.action_values(roots, torch.Generator().manual_seed(1))
    for name in ("belief", "carried flags, no clamp", "carried bits, no clamp"):
        assert not torch.equal(values[name], values["project"]), name


@pytest.mark.parametrize("rho", [None, 0.7])
def test_the_shared_prefix_tree_draws_once_per_node(rho):
    # Depth 3: step t's draw is constant over the 4^(2-t) leaves under each of the 4^(t+1)
    # nodes of level t + 1 and differs between nodes; AR(1) keeps it so (a node's noise
    # depends on its path only).
    model = NoiseModel.controlled(0.7, 0.0, reading=reading(tree="shared-prefix"))
    scorer = FusedNoiseScorer(model.sigma, rho, TASK_A, 3, reading=model.reading)
    noise = scorer.draw_noise(torch.zeros(5, dtype=torch.long), torch.Generator().manual_seed(0))
    assert noise.shape == (3, 6, 5, 64)
    for t in range(3):
        nodes = noise[t].reshape(6, 5, 4 ** (t + 1), -1)
        assert torch.equal(nodes, nodes[..., :1].expand_as(nodes))
        assert nodes[..., 0].unique().numel() == 6 * 5 * 4 ** (t + 1)
    independent = FusedNoiseScorer(model.sigma, rho, TASK_A, 3)
    draws = independent.draw_noise(torch.zeros(5, dtype=torch.long), torch.Generator())
    assert draws[2].unique().numel() == draws[2].numel()


@pytest.mark.parametrize("rho", [None, 0.7])
def test_an_explicit_tree_wins_over_the_readings_tree(random_states, rho):
    # The paper reading shares prefixes; Planner(tree="independent") must draw per leaf, as
    # the same reading with independent leaves does, and the reverse.
    shared = readings.PAPER
    independent = shared.replace("paper-independent", tree="independent")

    def model(r: Reading):
        if rho is None:
            return NoiseModel.controlled(1.0, 0.6, reading=r)
        return AR1NoiseModel.controlled(1.0, 0.6, rho=rho, reading=r)

    roots = mixed_roots(TASK_A, 30, 1, random_states, seed=13)

    def values(planner: Planner) -> torch.Tensor:
        assert isinstance(planner.scorer, FusedNoiseScorer)
        return planner.action_values(roots, torch.Generator().manual_seed(14))

    by_reading = {r.tree: values(Planner(model(r), 3)) for r in (shared, independent)}
    assert not torch.equal(by_reading["independent"], by_reading["shared-prefix"])
    explicit = Planner(model(shared), 3, tree="independent")
    assert explicit.tree == explicit.scorer.tree == "independent"
    assert torch.equal(values(explicit), by_reading["independent"])
    reverse = Planner(model(independent), 3, tree="shared-prefix")
    assert torch.equal(values(reverse), by_reading["shared-prefix"])


def test_fused_shared_prefixes_and_the_tree_scorer_agree_in_distribution(make_state):
    # One state, many independent searches: the generic shared-prefix tree
    # (gridplan.planning.tree.TreeScorer, one predict per node) and the fused scorer's per-node
    # draws must give each first action the same mean value within sampling error, and both must
    # differ from independent leaves (the max over leaves sharing draws is smaller).
    state = make_state(agent=(3, 4), key=(2, 4), rows=3000)
    shared = NoiseModel.controlled(1.0, 0.6, reading=reading(tree="shared-prefix"))
    fused = Planner(shared, 2).action_values(state, torch.Generator().manual_seed(0))
    tree = Planner(
        NoiseModel.controlled(1.0, 0.6), 2, tree="shared-prefix", factory=through_predict
    )
    assert type(tree.scorer).__name__ == "TreeScorer"
    generic = tree.action_values(state, torch.Generator().manual_seed(1))
    independent = Planner(NoiseModel.controlled(1.0, 0.6), 2).action_values(
        state, torch.Generator().manual_seed(2)
    )
    se = (fused.var(dim=0) / 3000 + generic.var(dim=0) / 3000).sqrt()
    assert ((fused.mean(dim=0) - generic.mean(dim=0)).abs() < 4 * se).all()
    assert (independent.mean(dim=0) - fused.mean(dim=0) > 4 * se).any()
