"""The batched full-width planner (paper §3 "Planner", appendix D) on constructed states."""

from __future__ import annotations

import pytest
import torch
from paper_layout import STATE_DIM

from gridplan.core import readings, tasks
from gridplan.core.constants import DOWN, LEFT, RIGHT, UP
from gridplan.core.env import reset
from gridplan.core.tasks import TASK_A, TASK_B
from gridplan.core.values import value_table
from gridplan.models.contract import WorldModel
from gridplan.models.noise import NoiseModel, OracleModel
from gridplan.planning import closed_loop
from gridplan.planning.planner import Planner, action_sequences, break_ties, resolve_ties
from gridplan.planning.registry import register_scorer, through_predict
from gridplan.planning.scorers import (
    GenericScorer,
    LeafScorer,
    check_prediction,
    generic_bytes_per_row,
)

# (task, state, the one optimal first action, why), worked out by hand.
CONSTRUCTED = [
    ("A", {"agent": (3, 4), "key": (2, 4)}, LEFT, "key behind: step back onto it"),
    ("A", {"agent": (2, 3), "key": (2, 4)}, UP, "beside the key: step onto it"),
    ("A", {"agent": (4, 4), "carrying": True}, RIGHT, "carrying at the closed door: open it"),
    ("A", {"agent": (4, 4), "carrying": True, "door_open": True}, RIGHT, "enter the open door"),
    ("A", {"agent": (4, 2), "carrying": True}, UP, "carrying: walk to the door"),
    ("A", {"agent": (7, 3), "carrying": True, "door_open": True}, UP, "goal above"),
    ("A", {"agent": (6, 4), "carrying": True, "door_open": True}, RIGHT, "goal to the right"),
    ("B", {"agent": (6, 5), "carrying": True, "door_open": True}, DOWN, "hazard right"),
    ("B", {"agent": (6, 5), "carrying": True, "door_open": True, "c1": True}, RIGHT, "goal"),
    ("B", {"agent": (7, 4), "carrying": True, "door_open": True}, DOWN, "hazard above"),
    ("B", {"agent": (7, 4), "carrying": True, "door_open": True, "c1": True}, UP, "goal above"),
]


@pytest.mark.parametrize("depth", [1, 2, 4])
@pytest.mark.parametrize(("name", "kwargs", "best", "why"), CONSTRUCTED)
def test_the_oracle_planner_picks_the_one_optimal_first_action(
    make_state, depth, name, kwargs, best, why
):
    task = tasks.get(name)
    state = make_state(**kwargs)
    assert value_table(task).q_values(state).argmax().item() == best, why
    planner = Planner(OracleModel(), depth, task)
    assert planner.act(state, torch.Generator().manual_seed(depth)).item() == best, why


@pytest.mark.parametrize("depth", [1, 2, 3])
@pytest.mark.parametrize("task", [TASK_A, TASK_B], ids=["A", "B"])
@pytest.mark.parametrize("factory", [None, through_predict], ids=["registered", "generic"])
def test_oracle_action_values_equal_exact_q_star_at_every_depth(
    random_states, depth, task, factory
):
    # With the exact model, D steps of lookahead plus gamma^D V* is Bellman's equation.
    state = random_states(24, torch.Generator().manual_seed(10 + depth))
    planner = Planner(OracleModel(), depth, task, factory=factory)
    q = planner.action_values(state, torch.Generator())
    torch.testing.assert_close(q, value_table(task).q_values(state), atol=1e-6, rtol=0)


def test_ties_between_optimal_actions_are_broken_at_random_and_reproducibly(make_state):
    # From (0, 0) carrying with the door open, up and right are both shortest.
    state = make_state(agent=(0, 0), carrying=True, door_open=True, rows=400)
    planner = Planner(OracleModel(), 2, ties="random")
    chosen = planner.act(state, torch.Generator().manual_seed(0))
    assert set(chosen.tolist()) == {UP, RIGHT}
    assert (chosen == UP).float().mean().item() == pytest.approx(0.5, abs=0.08)
    assert torch.equal(chosen, planner.act(state, torch.Generator().manual_seed(0)))


def test_the_first_tie_rule_takes_the_lowest_index_among_the_tied_best(make_state):
    # Up (0) and right (3) tie; the default reading's rule takes up in every row.
    state = make_state(agent=(0, 0), carrying=True, door_open=True, rows=400)
    planner = Planner(OracleModel(), 2)
    assert planner.ties == "first"
    assert planner.act(state, torch.Generator().manual_seed(0)).tolist() == [UP] * 400


def test_break_ties_on_hand_built_values():
    q = torch.tensor(
        [
            [0.5, 0.5, 0.1, 0.5],
            [0.0, 0.2, 0.2, 0.2],
            [0.3, 0.1, 0.1, 0.3 - 1e-7],
            [0.0, 0.0, 0.9, 0.0],
        ]
    )
    tie = torch.tensor(
        [[0.1, 0.2, 0.9, 0.3], [0.9, 0.1, 0.3, 0.2], [0.1, 0.1, 0.1, 0.5], [0.9] * 4]
    )
    # Within TIE_TOLERANCE (1e-6) is a tie; "random" takes the largest draw among the tied.
    assert break_ties(q, tie, "first").tolist() == [0, 1, 0, 2]
    assert break_ties(q, tie, "random").tolist() == [3, 2, 3, 2]
    with pytest.raises(ValueError, match="ties must be one of first, random, got 'lowest'"):
        break_ties(q, tie, "lowest")


def test_random_ties_are_uniform_over_the_tied_actions():
    # Three tied actions (0, 1, 3): seeded frequencies of 30,000 rows, each 1/3 within 0.01
    # (about 4 standard errors); action 2 is never taken.
    q = torch.tensor([[1.0, 1.0, 0.0, 1.0]]).expand(30_000, 4)
    tie = torch.rand(30_000, 4, generator=torch.Generator().manual_seed(3))
    counts = torch.bincount(break_ties(q, tie, "random"), minlength=4).double() / 30_000
    assert counts[2].item() == 0.0
    for a in (0, 1, 3):
        assert counts[a].item() == pytest.approx(1 / 3, abs=0.01)


def test_both_tie_rules_draw_the_same_stream_so_only_exact_ties_decide_differently():
    model = NoiseModel.controlled(0.35, 0.1)
    state = reset(64, torch.Generator().manual_seed(4))
    first, random = Planner(model, 2, ties="first"), Planner(model, 2, ties="random")
    gen_a, gen_b = torch.Generator().manual_seed(9), torch.Generator().manual_seed(9)
    chosen_first, chosen_random = first.act(state, gen_a), random.act(state, gen_b)
    # The generators end in the same state: the same draws were taken under both rules.
    assert torch.equal(gen_a.get_state(), gen_b.get_state())
    # The values are the same, so every row without a tie chooses the same action.
    gen_a, gen_b = torch.Generator().manual_seed(9), torch.Generator().manual_seed(9)
    torch.rand(64, 4, generator=gen_a)
    torch.rand(64, 4, generator=gen_b)
    q = first.action_values(state, gen_a)
    torch.testing.assert_close(q, random.action_values(state, gen_b), atol=0, rtol=0)
    tied = (q >= q.amax(dim=1, keepdim=True) - 1e-6).sum(dim=1) > 1
    assert torch.equal(chosen_first[~tied], chosen_random[~tied])


class _Read:
    """A model stand-in that carries only a reading (the planner reads its tie rule)."""


def test_the_tie_rule_comes_from_the_model_reading_unless_given():
    random_reading = readings.PROJECT.replace("ties-test", ties="random")
    noisy = NoiseModel.controlled(0.35, 0.1, reading=random_reading)
    assert Planner(noisy, 1).ties == "random"
    assert Planner(noisy, 1, ties="first").ties == "first"
    assert Planner(NoiseModel.controlled(0.35, 0.1), 1).ties == "first"
    assert resolve_ties(_Read(), None) == readings.PROJECT.ties == readings.PAPER.ties == "first"
    with pytest.raises(ValueError, match="ties must be one of first, random or None, got 'any'"):
        Planner(OracleModel(), 1, ties="any")


@pytest.mark.parametrize("max_rows", [1, 16, 50, 999])
def test_chunked_and_unchunked_planning_choose_identically_with_the_oracle(max_rows):
    state = reset(24, torch.Generator().manual_seed(1))
    whole = Planner(OracleModel(), 2).act(state, torch.Generator().manual_seed(2))
    chunked = Planner(OracleModel(), 2, max_rows=max_rows)
    assert torch.equal(chunked.act(state, torch.Generator().manual_seed(2)), whole)


def test_chunking_keeps_each_setting_block_on_its_own_setting():
    # Irrelevant noise never changes a Task A decision, so every block must choose as the
    # oracle does; a chunk that mixed up blocks would still pass that, hence sigma_r in the
    # last block, which must differ from the oracle somewhere.
    model = NoiseModel.controlled([0.0, 0.0, 1.5], [0.0, 1.2, 0.0])
    state = reset(16, torch.Generator().manual_seed(3)).repeat(3, 1)
    whole = Planner(model, 2).action_values(state, torch.Generator().manual_seed(4))
    chunked = Planner(model, 2, max_rows=3 * 16 * 5).action_values(
        state, torch.Generator().manual_seed(4)
    )
    oracle = Planner(OracleModel(), 2).action_values(state[:16], torch.Generator())
    for q in (whole, chunked):
        blocks = q.view(3, 16, 4)
        torch.testing.assert_close(blocks[0], oracle)
        torch.testing.assert_close(blocks[1], oracle)
        assert not torch.allclose(blocks[2], oracle)


def test_irrelevant_noise_leaves_every_task_a_choice_as_the_oracles():
    state = reset(32, torch.Generator().manual_seed(5))
    oracle = Planner(OracleModel(), 2).act(state, torch.Generator().manual_seed(6))
    noisy = Planner(NoiseModel.controlled(0.0, 1.2), 2).act(state, torch.Generator().manual_seed(6))
    assert torch.equal(noisy, oracle)


def test_action_sequences_enumerate_leaves_with_the_first_action_most_significant():
    seqs = action_sequences(2)
    assert seqs.shape == (16, 2)
    assert seqs[:5].tolist() == [[0, 0], [0, 1], [0, 2], [0, 3], [1, 0]]
    assert seqs[-1].tolist() == [3, 3]
    assert action_sequences(3)[37].tolist() == [2, 1, 1]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"depth": 0}, "depth must be an integer >= 1, got 0"),
        ({"depth": -2}, "depth must be an integer >= 1, got -2"),
        ({"depth": 2.0}, "depth must be an integer >= 1, got 2.0"),
        ({"depth": 2, "max_rows": 0}, "must be positive"),
    ],
)
def test_planner_rejects_bad_settings_naming_the_problem(kwargs, match):
    with pytest.raises(ValueError, match=match):
        Planner(OracleModel(), **kwargs)


def test_planner_rejects_a_task_name_instead_of_a_task():
    with pytest.raises(TypeError, match="got str 'A'; resolve a name with gridplan.core.tasks.get"):
        Planner(OracleModel(), 2, "A")


@pytest.mark.parametrize(
    ("root", "match"),
    [
        (torch.zeros(2, 13), r"root state must have shape \(B, 12\), got \(2, 13\)"),
        (torch.full((2, 12), float("nan")), "root state holds non-finite"),
        ([[0.0] * 12], "root state must be a torch.Tensor"),
    ],
)
def test_planner_rejects_a_malformed_root_naming_the_problem(root, match):
    with pytest.raises(ValueError, match=match):
        Planner(OracleModel(), 1).act(root, torch.Generator())


def test_planner_rejects_a_batch_that_does_not_split_into_setting_blocks():
    model = NoiseModel.controlled([0.0, 0.1], [0.0, 0.0])
    with pytest.raises(ValueError, match="batch of 3 episodes does not split into 2"):
        Planner(model, 1).act(reset(3, torch.Generator()), torch.Generator())


def test_planner_rejects_a_model_that_returns_the_wrong_shape():
    class Broken(OracleModel):
        def predict(self, state, action, generator):
            return super().predict(state, action, generator)[:, :11]

    shape = r"Broken.predict returned shape \(8, 11\) at imagined step 0"
    with pytest.raises(ValueError, match=shape):
        Planner(Broken(), 1).act(reset(2, torch.Generator()), torch.Generator())


class ScriptedScorer(LeafScorer):
    """Hands the search fixed leaf scores, one episode per chunk, in reverse order."""

    def __init__(self, scores: torch.Tensor) -> None:
        self.task, self.depth, self.scores = TASK_A, 2, scores
        self.draws = []

    def leaf_scores(self, root, generator):
        for row in reversed(range(root.shape[0])):
            self.draws.append(torch.rand(1, generator=generator).item())
            yield torch.tensor([row]), self.scores[row : row + 1]


class Scripted(WorldModel):
    def __init__(self, scores: torch.Tensor) -> None:
        self.scorer = ScriptedScorer(scores)

    def predict(self, state, action, generator):
        raise AssertionError("the search must only use the registered scorer")


def scripted_scorer(model, task, depth, device, max_memory, max_rows, tree):
    assert (task, depth, tree) == (TASK_A, 2, "independent")
    return model.scorer


register_scorer(Scripted, scripted_scorer)


def test_the_search_takes_the_best_leaf_per_first_action_from_any_registered_scorer():
    # 16 leaves per episode; leaves 4a..4a+3 start with action a.
    scores = torch.zeros(3, 16)
    scores[0, 9] = 0.5  # first action 2 (left)
    scores[1, 3] = 0.75  # first action 0 (up) ...
    scores[1, 15] = 0.875  # ... beaten by first action 3 (right)
    scores[2] = -1.0
    scores[2, 4] = scores[2, 7] = -0.25  # first action 1 (down), twice
    model = Scripted(scores)
    planner = Planner(model, 2)
    gen = torch.Generator().manual_seed(0)
    q = planner.action_values(reset(3, torch.Generator()), gen)
    assert q.tolist() == [[0.0, 0.0, 0.5, 0.0], [0.75, 0.0, 0.0, 0.875], [-1.0, -0.25, -1.0, -1.0]]
    assert planner.act(reset(3, torch.Generator()), gen).tolist() == [LEFT, RIGHT, DOWN]


def test_ties_are_drawn_before_the_scorer_draws():
    model = Scripted(torch.zeros(2, 16))
    gen = torch.Generator().manual_seed(5)
    Planner(model, 2).act(reset(2, torch.Generator()), gen)
    replay = torch.Generator().manual_seed(5)
    torch.rand(2, 4, generator=replay)
    assert model.scorer.draws == [torch.rand(1, generator=replay).item() for _ in range(2)]


def test_a_model_without_a_registered_scorer_is_rolled_through_predict():
    class Bare:  # duck-typed: predict only
        def predict(self, state, action, generator):
            return OracleModel().predict(state, action, generator)

    planner = Planner(Bare(), 1)
    assert isinstance(planner.scorer, GenericScorer)
    assert isinstance(Planner(OracleModel(), 1, factory=through_predict).scorer, GenericScorer)
    state = reset(5, torch.Generator().manual_seed(1))
    want = Planner(OracleModel(), 1).action_values(state, torch.Generator())
    assert torch.equal(planner.action_values(state, torch.Generator()), want)


class NaNOnRight(OracleModel):
    """The oracle, except that every leaf whose imagined action is RIGHT becomes NaN."""

    def predict(self, state, action, generator):
        nxt = super().predict(state, action, generator)
        return torch.where((action == RIGHT).unsqueeze(1), torch.nan, nxt)


class AllNaN(OracleModel):
    def predict(self, state, action, generator):
        return torch.full_like(state, torch.nan)


def test_a_model_returning_nan_for_some_leaves_stops_the_planner_with_a_clear_error():
    root = reset(3, torch.Generator().manual_seed(0))
    # Depth 2: 16 leaves per episode, 4 of them RIGHT at step 0 -> 12 of 48 rows.
    with pytest.raises(
        ValueError,
        match=r"NaNOnRight.predict returned non-finite values \(NaN or inf\) at imagined step 0 "
        r"in 12 of 48 leaf rows",
    ):
        Planner(NaNOnRight(), 2).act(root, torch.Generator().manual_seed(1))


def test_a_model_returning_nan_everywhere_cannot_finish_a_closed_loop():
    with pytest.raises(ValueError, match=r"AllNaN.predict returned non-finite .* in 16 of 16"):
        closed_loop.run_episodes(AllNaN(), depth=1, seeds=[0], episodes=4)


def test_the_generic_path_of_a_built_in_model_is_checked_too():
    # through_predict routes the oracle through predict; a finite model passes untouched.
    root = reset(4, torch.Generator().manual_seed(0))
    fused = Planner(OracleModel(), 2).action_values(root, torch.Generator())
    generic = Planner(OracleModel(), 2, factory=through_predict)
    assert isinstance(generic.scorer, GenericScorer)
    generic = generic.action_values(root, torch.Generator())
    torch.testing.assert_close(fused, generic, rtol=0, atol=0)


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf")])
def test_check_prediction_counts_the_rows_holding_any_non_finite_value(value):
    pred = torch.zeros(5, STATE_DIM)
    pred[1, 3] = value
    pred[4, 0] = value
    pred[4, 11] = value
    with pytest.raises(ValueError, match=r"OracleModel.predict .* imagined step 2 in 2 of 5"):
        check_prediction(pred, OracleModel(), 2, 5)
    check_prediction(torch.zeros(5, STATE_DIM), OracleModel(), 2, 5)


@pytest.mark.parametrize("factory", [None, through_predict], ids=["fused", "generic"])
def test_a_depth_beyond_the_memory_budget_is_refused_before_any_allocation(factory):
    with pytest.raises(ValueError, match=r"depth 20 needs .* GiB .* max_memory = 2.00 GiB"):
        Planner(OracleModel(), 20, factory=factory)


def test_the_budget_check_names_the_largest_depth_that_fits_and_counts_setting_blocks():
    # Generic scorer: 4^D leaves x (generic_bytes_per_row(12) + 8 (D + 1)) bytes per setting.
    per_leaf = generic_bytes_per_row(12) + 8 * 4
    Planner(OracleModel(), 3, max_memory=64 * per_leaf, factory=through_predict)
    with pytest.raises(ValueError, match="depth 4 .* the largest depth that fits is 3"):
        Planner(OracleModel(), 4, max_memory=64 * per_leaf + 8 * 64, factory=through_predict)
    two = NoiseModel.controlled([0.0, 0.1], [0.0, 0.0])
    with pytest.raises(ValueError, match=r"depth 3 needs .* \(2 x 4\^3 leaves"):
        Planner(two, 3, max_memory=64 * per_leaf, factory=through_predict)
