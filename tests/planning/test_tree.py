"""The shared-prefix tree (gridplan.planning.tree) and the model-sized predict calls
(gridplan.planning.scorers).

For a deterministic model the tree must give the independent-leaf search's scores bit for
bit (hence its decisions) at every depth, in both tasks, however the work is chunked; for a
stochastic one it must draw once per tree node, every leaf under a node sharing its path.
"""

from __future__ import annotations

import pytest
import torch
from paper_layout import D2_X, STATE_DIM

from gridplan.core.constants import N_ACTIONS
from gridplan.core.env import reset, transition
from gridplan.core.tasks import TASK_A, TASK_B, Task
from gridplan.core.values import value_table
from gridplan.models.contract import WorldModel
from gridplan.models.learned import LearnedWorldModel, MLPDynamics
from gridplan.models.noise import AR1NoiseModel, NoiseModel, OracleModel
from gridplan.planning.fused import FusedNoiseScorer
from gridplan.planning.planner import Planner
from gridplan.planning.registry import through_predict
from gridplan.planning.scorers import (
    MIN_CALL_ROWS,
    GenericScorer,
    cache_rows,
    measured_bytes_per_row,
    model_bytes_per_row,
    predict_in_calls,
)
from gridplan.planning.tree import TreeScorer

TASKS = pytest.mark.parametrize("task", [TASK_A, TASK_B], ids=["A", "B"])


def mlp(seed: int, hidden=(256, 256), members: int = 1) -> LearnedWorldModel:
    """An untrained delta MLP: imagined states wander, so leaves differ and some terminate."""
    torch.manual_seed(seed)
    return LearnedWorldModel(MLPDynamics(hidden, members=members))


def roots(task: Task, n: int, seed: int, random_states) -> torch.Tensor:
    """Reset states, random discrete states (near the goals too) and continuous states a
    little outside [0, 1]."""
    gen = torch.Generator().manual_seed(seed)
    third = max(1, n // 3)
    parts = [reset(third, gen, task), random_states(third, gen)]
    parts.append(torch.rand(n - 2 * third, STATE_DIM, generator=gen) * 1.2 - 0.1)
    return torch.cat(parts)


# (depth, episodes, MLP seed): every depth 1-6; fewer episodes where a tree has more leaves.
CASES = [(1, 60, 0), (2, 60, 1), (3, 30, 2), (4, 12, 3), (5, 6, 4), (6, 4, 5)]


@TASKS
@pytest.mark.parametrize(("depth", "episodes", "seed"), CASES)
def test_the_tree_scores_a_learned_model_bit_for_bit_as_independent_leaves(
    task, depth, episodes, seed, random_states
):
    model = mlp(seed)
    state = roots(task, episodes, seed, random_states)
    tree = Planner(model, depth, task)
    assert isinstance(tree.scorer, TreeScorer)
    independent = Planner(model, depth, task, tree="independent")
    assert isinstance(independent.scorer, GenericScorer)
    q_tree = tree.action_values(state, torch.Generator())
    q_leaves = independent.action_values(state, torch.Generator())
    assert torch.equal(q_tree, q_leaves)
    assert len(set(q_leaves.flatten().tolist())) >= 4, "the values must not be trivial"
    gen_tree, gen_leaves = torch.Generator().manual_seed(seed), torch.Generator().manual_seed(seed)
    assert torch.equal(tree.act(state, gen_tree), independent.act(state, gen_leaves))
    assert torch.equal(gen_tree.get_state(), gen_leaves.get_state()), "no extra draws"


@pytest.mark.parametrize("seed", range(4))
def test_tree_and_independent_leaves_choose_alike_on_many_states_of_an_ensemble(
    seed, random_states
):
    model = mlp(10 + seed, hidden=(64, 64), members=3)
    state = roots(TASK_B, 300, seed, random_states)
    gen = [torch.Generator().manual_seed(seed) for _ in range(2)]
    tree = Planner(model, 3, TASK_B).act(state, gen[0])
    leaves = Planner(model, 3, TASK_B, tree="independent").act(state, gen[1])
    assert torch.equal(tree, leaves)


@pytest.mark.parametrize("max_rows", [1, 7, 64, 1000, 5000])
def test_tree_chunks_blocks_and_calls_never_change_a_deterministic_score(max_rows, random_states):
    model = mlp(7, hidden=(32, 32))
    state = roots(TASK_A, 20, 7, random_states)
    whole = Planner(model, 3).action_values(state, torch.Generator())
    chunked = Planner(model, 3, max_rows=max_rows)
    assert chunked.scorer.max_rows == max_rows
    assert torch.equal(chunked.action_values(state, torch.Generator()), whole)


def test_a_small_memory_budget_splits_the_tree_into_chunks_of_whole_episodes(random_states):
    model = mlp(8, hidden=(32, 32))
    state = roots(TASK_A, 9, 8, random_states)
    small = Planner(model, 4, max_memory=40_000)
    leaves_per_chunk = small.scorer.max_rows
    assert 256 <= leaves_per_chunk < 9 * 256
    chunks = list(small.scorer.leaf_scores(state, torch.Generator()))
    assert len(chunks) == -(-9 // (leaves_per_chunk // 256))
    want = Planner(model, 4).action_values(state, torch.Generator())
    assert torch.equal(small.action_values(state, torch.Generator()), want)


@TASKS
@pytest.mark.parametrize("depth", [1, 2, 3])
def test_the_oracle_through_the_tree_gives_exact_q_star(task, depth, random_states):
    # The oracle's distractors are random, but its relevant dims are deterministic: the tree
    # shares their prefixes exactly (one distractor draw per node changes no score).
    state = random_states(24, torch.Generator().manual_seed(20 + depth))
    planner = Planner(OracleModel(), depth, task, tree="shared-prefix", factory=through_predict)
    assert isinstance(planner.scorer, TreeScorer)
    q = planner.action_values(state, torch.Generator().manual_seed(0))
    torch.testing.assert_close(q, value_table(task).q_values(state), atol=1e-6, rtol=0)


class Recorder(WorldModel):
    """The oracle's predict, recording every call's input and output."""

    def __init__(self, n_settings: int = 1) -> None:
        self.n_settings = n_settings
        self.calls: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = []

    def predict(self, state, action, generator):
        out = transition(state, action, generator)[0]
        self.calls.append((state.clone(), action.clone(), out.clone()))
        return out


@pytest.mark.parametrize("depth", [1, 2, 3])
def test_the_tree_predicts_once_per_node_and_children_start_from_their_parent(depth):
    model = Recorder()
    state = reset(5, torch.Generator().manual_seed(1))
    Planner(model, depth, tree="shared-prefix").action_values(state, torch.Generator())
    ins = torch.cat([c[0] for c in model.calls])
    acts = torch.cat([c[1] for c in model.calls])
    outs = torch.cat([c[2] for c in model.calls])
    sizes = [5 * N_ACTIONS**t for t in range(1, depth + 1)]
    assert ins.shape[0] == sum(sizes), "4 + 16 + ... + 4^D predictions per episode"
    level_in = list(torch.split(ins, sizes))
    level_out = list(torch.split(outs, sizes))
    level_act = list(torch.split(acts, sizes))
    parents = state
    for t in range(depth):
        assert torch.equal(level_act[t], torch.arange(N_ACTIONS).repeat(sizes[t] // N_ACTIONS))
        assert torch.equal(level_in[t], parents.repeat_interleave(N_ACTIONS, dim=0))
        parents = level_out[t]
    # One distractor draw per node: the 4 children of a node get different d2 draws.
    children = level_out[-1][:, D2_X:].view(-1, N_ACTIONS, 2)
    assert (children != children[:, :1]).any(dim=2).any()


def test_shared_prefix_noise_keeps_every_setting_block_on_its_own_setting():
    # Irrelevant noise cannot change a Task A decision; relevant noise in the last block must.
    model = NoiseModel.controlled([0.0, 0.0, 1.5], [0.0, 1.2, 0.0])
    state = reset(16, torch.Generator().manual_seed(3)).repeat(3, 1)
    oracle = Planner(OracleModel(), 2).action_values(state[:16], torch.Generator())
    for max_rows in (None, 3 * 16 * 5):
        planner = Planner(
            model, 2, tree="shared-prefix", max_rows=max_rows, factory=through_predict
        )
        assert isinstance(planner.scorer, TreeScorer)
        blocks = planner.action_values(state, torch.Generator().manual_seed(4)).view(3, 16, 4)
        torch.testing.assert_close(blocks[0], oracle)
        torch.testing.assert_close(blocks[1], oracle)
        assert not torch.allclose(blocks[2], oracle)


def test_shared_prefix_noise_is_seeded_and_differs_from_independent_leaves():
    model = NoiseModel.controlled(0.35, 0.1)
    state = reset(200, torch.Generator().manual_seed(5))
    shared = Planner(model, 3, tree="shared-prefix", factory=through_predict)
    first = shared.action_values(state, torch.Generator().manual_seed(6))
    assert torch.equal(first, shared.action_values(state, torch.Generator().manual_seed(6)))
    independent = Planner(model, 3).action_values(state, torch.Generator().manual_seed(6))
    assert isinstance(Planner(model, 3).scorer, FusedNoiseScorer), "default unchanged"
    assert not torch.equal(first, independent)
    # Same law at the root: relevant noise lowers values the same way on average.
    assert abs(first.mean().item() - independent.mean().item()) < 0.05


def test_the_tree_refuses_a_model_with_memory_across_imagined_steps():
    model = AR1NoiseModel.controlled(0.35, 0.1)
    with pytest.raises(ValueError, match="AR1NoiseModel defines start_rollout"):
        Planner(model, 2, tree="shared-prefix", factory=through_predict)
    # Its fused scorer draws per node instead, so the planner's own choice serves it.
    fused = Planner(model, 2, tree="shared-prefix").scorer
    assert isinstance(fused, FusedNoiseScorer) and fused.tree == "shared-prefix"


def test_the_planner_rejects_an_unknown_tree():
    with pytest.raises(ValueError, match="tree must be one of independent, shared-prefix"):
        Planner(OracleModel(), 2, tree="shared")


def test_which_scorer_each_model_and_option_gets():
    learned = mlp(0, hidden=(8,))
    assert isinstance(Planner(learned, 2).scorer, TreeScorer)
    assert isinstance(Planner(learned, 2, tree="independent").scorer, GenericScorer)
    assert isinstance(Planner(learned, 2, tree="shared-prefix").scorer, TreeScorer)
    for tree in (None, "independent", "shared-prefix"):
        fused = Planner(OracleModel(), 2, tree=tree).scorer
        assert isinstance(fused, FusedNoiseScorer) and fused.tree == (tree or "independent")
    generic = Planner(OracleModel(), 2, factory=through_predict)
    assert type(generic.scorer) is GenericScorer and generic.tree == "independent"
    shared = Planner(OracleModel(), 2, tree="shared-prefix", factory=through_predict).scorer
    assert isinstance(shared, TreeScorer)


class Duck:
    """A duck-typed deterministic model: a fixed linear map, clamped."""

    deterministic = True

    def predict(self, state, action, generator):
        return (0.9 * state + 0.01 * action.unsqueeze(1)).clamp(0.0, 1.0)


def test_a_deterministic_model_without_a_declaration_is_measured_on_a_probe():
    measured = measured_bytes_per_row(Duck())
    # float32 outputs of 0.9 * state, 0.01 * action (one column), the sum and the clamp.
    assert measured == 4 * STATE_DIM * 3 + 4
    assert model_bytes_per_row(Duck()) == measured
    assert isinstance(Planner(Duck(), 2).scorer, TreeScorer)


def test_the_learned_models_declared_working_memory_bounds_its_measured_one():
    for hidden, members in [((256, 256), 1), ((32, 32), 1), ((128, 64, 32), 3)]:
        model = mlp(0, hidden, members)
        declared, measured = model.bytes_per_row, measured_bytes_per_row(model)
        assert measured <= declared <= 1.1 * measured, (hidden, members)


def test_working_memory_declarations_and_their_errors():
    assert model_bytes_per_row(NoiseModel.controlled(0.1, 0.1)) == 0, "stochastic: not probed"
    with pytest.raises(ValueError, match="only a model declared deterministic"):
        measured_bytes_per_row(OracleModel())

    class Bad(Duck):
        bytes_per_row = -1

    with pytest.raises(ValueError, match=r"model.bytes_per_row must be an integer >= 0, got -1"):
        Planner(Bad(), 2)


def test_cache_sized_calls_of_the_generic_path():
    model = mlp(0)
    rows = cache_rows(model.bytes_per_row)
    assert 2048 <= rows <= 4096, "the 16-256-256-12 MLP's measured best call sizes"
    assert cache_rows(10**9) == MIN_CALL_ROWS
    generic = Planner(model, 4, tree="independent")
    assert generic.scorer.call_rows == rows
    noisy = Planner(NoiseModel.controlled(0.1, 0.1), 4, factory=through_predict)
    assert noisy.scorer.call_rows is None
    state = reset(10, torch.Generator().manual_seed(2))
    split = generic.action_values(state, torch.Generator())
    generic.scorer.call_rows = None
    assert torch.equal(split, generic.action_values(state, torch.Generator()))


class BlockOffset(WorldModel):
    """Two settings: block ``m`` of a batch moves every dim by ``0.01 * (m + 1)``."""

    n_settings = 2
    deterministic = True

    def predict(self, state, action, generator):
        n = state.shape[0] // 2
        offset = torch.tensor([0.01, 0.02]).repeat_interleave(n).unsqueeze(1)
        return (state + offset + 0.001 * action.unsqueeze(1)).clamp(0.0, 1.0)


@pytest.mark.parametrize("call_rows", [2, 6, 50])
def test_split_calls_keep_each_setting_block_on_its_own_setting(call_rows):
    model = BlockOffset()
    state = torch.rand(40, STATE_DIM, generator=torch.Generator().manual_seed(0))
    action = torch.randint(0, 4, (40,), generator=torch.Generator().manual_seed(1))
    whole = model.predict(state, action, None)
    split = predict_in_calls(model, state, action, None, call_rows, n_settings=2)
    assert torch.equal(split, whole)


@pytest.mark.parametrize("max_rows", [None, 40, 24])
def test_the_tree_of_a_two_setting_model_matches_independent_leaves_in_any_block(max_rows):
    # 24 rows: blocks of 3 parents per setting, so most blocks start past a level's first node.
    model = BlockOffset()
    state = torch.rand(6, STATE_DIM, generator=torch.Generator().manual_seed(2)).repeat(2, 1)
    tree = Planner(model, 3, tree="shared-prefix", max_rows=max_rows)
    assert isinstance(tree.scorer, TreeScorer)
    leaves = Planner(model, 3, tree="independent")
    q_tree = tree.action_values(state, torch.Generator())
    assert torch.equal(q_tree, leaves.action_values(state, torch.Generator()))
    assert not torch.equal(q_tree[:6], q_tree[6:]), "the same states plan apart per setting"


def test_split_calls_reject_a_misshapen_prediction():
    class Short(Duck):
        def predict(self, state, action, generator):
            return super().predict(state, action, generator)[:, :11]

    with pytest.raises(ValueError, match=r"Short.predict returned shape \(4, 11\) at imagined"):
        Planner(Short(), 2).act(reset(1, torch.Generator()), torch.Generator())


def test_a_non_finite_prediction_in_the_tree_names_the_step_and_the_nodes():
    class NaNRight(Duck):
        def predict(self, state, action, generator):
            out = super().predict(state, action, generator)
            return torch.where((action == 3).unsqueeze(1), torch.nan, out)

    # Level 1 of 2 episodes: 8 nodes, the 2 under action 3 are NaN.
    with pytest.raises(ValueError, match=r"NaNRight.predict .* imagined step 0 in 2 of 8 tree"):
        Planner(NaNRight(), 3).act(reset(2, torch.Generator()), torch.Generator())
    # 22 bytes per leaf: 4^12 leaves fit in 1 GiB, 4^13 do not.
    with pytest.raises(ValueError, match=r"depth 14 needs .* the largest depth that fits is 12"):
        Planner(Duck(), 14, max_memory=2**30)
