"""The batched environment and planner against the plain per-episode reference
(gridplan/planning/reference.py), on random seeds.

How randomness is matched:

- Environment: every compared step replays the generator's distractor draws (d1 move, d2
  cell) from a copy of the generator and hands them to ``ref_step``, so all 12 dims, the
  reward, termination and events are compared exactly.
- Planner: compared with models that are deterministic on the relevant dims (the oracle and
  a deterministic biased model). Leaf scores never read the distractors, so the reference
  rolls its leaves with fixed distractor draws; the tie draws are replayed from a copy of the
  generator (``Planner.act`` draws them first).
- Closed loop: the run's planning noise is not replayed. Each recorded step is checked
  instead: the executed action is one of the reference's best first actions, and the next
  true state is ``ref_step`` of the recorded state with the distractor move read off the
  recording (which must itself be a legal d1 move).
"""

from __future__ import annotations

import math

import pytest
import torch
from paper_layout import CELL_SCALE

from gridplan.core.constants import AGENT_Y, C1, RIGHT, UP
from gridplan.core.env import reset, step, to_cell, to_flag
from gridplan.core.tasks import TASK_A, TASK_B
from gridplan.core.values import value_table
from gridplan.core.world import DEFAULT
from gridplan.models.contract import WorldModel
from gridplan.models.noise import OracleModel
from gridplan.planning.closed_loop import run_closed_loop, start_states
from gridplan.planning.planner import TIE_TOLERANCE, Planner
from gridplan.planning.reference import (
    REF_DISTRACTOR_MOVES,
    RefState,
    ref_action_values,
    ref_decode,
    ref_encode,
    ref_oracle_predict,
    ref_plan,
    ref_step,
    ref_value,
    value_table_list,
)

TASKS = pytest.mark.parametrize("task", [TASK_A, TASK_B], ids=["A", "B"])
GAMMA = TASK_A.gamma


def compare_step(state, action, generator, task, replay_draws, ref_of):
    """Step the batch and assert every row equals the reference step; return the batch."""
    moves, d2_cells = replay_draws(generator, state.shape[0])
    nxt, reward, done, info = step(state, action, generator, task)
    for i in range(state.shape[0]):
        ref = ref_step(ref_of(state[i]), int(action[i]), moves[i], d2_cells[i], task)
        want_state, want_reward, want_done, want_info = ref
        assert ref_of(nxt[i]) == want_state, (i, ref_of(state[i]), int(action[i]))
        assert torch.equal(nxt[i], torch.tensor(ref_encode(want_state))), i
        assert reward[i].item() == want_reward and done[i].item() == want_done
        assert {k: bool(v[i]) for k, v in info.items()} == want_info
    return nxt


def test_the_reference_step_follows_the_door_and_key_rules_on_hand_built_states():
    at_door = RefState(4, 4, 4, 4, True, False, False, False, 0, 0, 3, 3)
    opened, reward, done, info = ref_step(at_door, RIGHT, 4, (1, 2))
    assert opened == at_door._replace(door_open=True, c2=True, d2_x=1, d2_y=2)
    assert info["door_opened"] and not done and reward == 0.0
    entered = ref_step(opened, RIGHT, 3, (0, 0))[0]
    assert (entered.agent_x, entered.agent_y, entered.key_x, entered.key_y) == (5, 4, 5, 4)
    assert (entered.d1_x, entered.d1_y, entered.c2) == (1, 0, False)
    no_key = at_door._replace(carrying=False, key_x=0, key_y=0)
    assert ref_step(no_key, RIGHT, 4, (0, 0))[0].door_open is False
    cornered = RefState(0, 7, 1, 7, False, False, False, False, 0, 0, 0, 0)
    assert ref_step(cornered, UP, 2, (0, 0))[0][:2] == (0, 7)
    picked, _, _, info = ref_step(cornered, RIGHT, 2, (0, 0))
    assert picked.carrying and info["pickup"] and picked.d1_x == 0


def test_ref_decode_rounds_like_the_batched_code_at_half_cell_boundaries():
    # (k + 0.5) / 7 in float32 times 7 lands on or beside k + 0.5; torch rounds that in
    # float32, half to even. A double-precision rounding would disagree on some of these.
    values = [(k + 0.5) / 7 for k in range(-1, 8)] + [-0.3, 1.4, 0.5, 0.5000001]
    batch = torch.tensor(values, dtype=torch.float32)
    cells, flags = to_cell(batch, DEFAULT).tolist(), to_flag(batch).tolist()
    for v, cell, flag in zip(values, cells, flags, strict=True):
        decoded = ref_decode([v] * 12)
        assert decoded.agent_x == cell, v
        assert decoded.carrying == flag, v


@TASKS
def test_batched_step_matches_the_reference_on_random_states_and_every_action(
    random_states, replay_draws, ref_of, task
):
    gen = torch.Generator().manual_seed(11)
    state = random_states(256, gen).repeat(4, 1)
    action = torch.arange(4).repeat_interleave(256)
    compare_step(state, action, gen, task, replay_draws, ref_of)


@TASKS
def test_batched_episodes_match_the_reference_step_by_step(replay_draws, ref_of, task):
    gen = torch.Generator().manual_seed(12)
    state = reset(48, gen, task)
    for _ in range(40):
        action = torch.randint(0, 4, (48,), generator=gen)
        state = compare_step(state, action, gen, task, replay_draws, ref_of)


def test_batched_step_matches_the_reference_on_off_grid_noisy_states(replay_draws, ref_of):
    gen = torch.Generator().manual_seed(13)
    state = torch.rand(512, 12, generator=gen) * 1.6 - 0.3
    state[:64] = torch.randint(-1, 9, (64, 12), generator=gen) / CELL_SCALE + 0.5 / CELL_SCALE
    action = torch.randint(0, 4, (512,), generator=gen)
    moves, d2_cells = replay_draws(gen, 512)
    nxt, reward, done, _ = step(state, action, gen, TASK_B)
    for i in range(512):
        ref = ref_step(ref_decode(state[i].tolist()), int(action[i]), moves[i], d2_cells[i], TASK_B)
        assert ref_of(nxt[i]) == ref[0] and reward[i].item() == ref[1], i


def test_ref_value_reads_the_table_like_the_batched_lookup(random_states):
    state = random_states(200, torch.Generator().manual_seed(14))
    for task in (TASK_A, TASK_B):
        table = value_table_list(task)
        batched = value_table(task).lookup(state).tolist()
        for row, want in zip(state, batched, strict=True):
            assert ref_value(table, ref_decode(row.tolist()), task) == want


def replayed_ties(generator: torch.Generator, batch: int) -> list[list[float]]:
    copy = torch.Generator().set_state(generator.get_state())
    return torch.rand(batch, 4, generator=copy).tolist()


@pytest.mark.parametrize("rule", ["first", "random"])
@pytest.mark.parametrize(("depth", "batch"), [(1, 32), (2, 32), (3, 8), (4, 3)])
@TASKS
def test_batched_oracle_planner_matches_the_reference_planner(
    random_states, depth, batch, task, rule
):
    gen = torch.Generator().manual_seed(100 * depth + ord(task.name))
    state = reset(batch // 2, gen, task)
    state = torch.cat([state, random_states(batch - batch // 2, gen)])
    planner = Planner(OracleModel(), depth, task, ties=rule)
    values = planner.action_values(state, torch.Generator())
    ties = replayed_ties(gen, batch)
    actions = planner.act(state, gen)
    for i in range(batch):
        want = ref_action_values(state[i].tolist(), depth, task, ref_oracle_predict)
        assert values[i].tolist() == pytest.approx(want, abs=1e-5), i
        assert actions[i].item() == ref_plan(
            state[i].tolist(), depth, task, ref_oracle_predict, ties[i], ties=rule
        )


# A deterministic but wrong model: the true step, then the agent believed 0.9 cells higher
# and c1 flipped. It puts agents on goal and hazard cells that the truth does not reach,
# so it exercises the reward and V* read on predicted (clamped, rounded) states.
SHIFT = 0.9 / CELL_SCALE


class ShiftedModel(WorldModel):
    def predict(self, state, action, generator):
        nxt = OracleModel().predict(state, action, generator)
        nxt[:, AGENT_Y] = (nxt[:, AGENT_Y] + SHIFT).clamp(0.0, 1.0)
        nxt[:, C1] = 1.0 - nxt[:, C1]
        return nxt


def shifted_predict(vector, action):
    nxt = ref_oracle_predict(vector, action)
    nxt[AGENT_Y] = min(max(nxt[AGENT_Y] + SHIFT, 0.0), 1.0)
    nxt[C1] = 1.0 - nxt[C1]
    return nxt


@TASKS
def test_batched_planner_matches_the_reference_with_a_deterministic_wrong_model(
    random_states, task
):
    gen = torch.Generator().manual_seed(15)
    state = random_states(24, gen)
    values = Planner(ShiftedModel(), 2, task).action_values(state, gen)
    for i in range(24):
        want = ref_action_values(state[i].tolist(), 2, task, shifted_predict)
        assert values[i].tolist() == pytest.approx(want, abs=1e-5), i


def test_ref_plan_breaks_ties_by_the_largest_draw_among_the_best_actions():
    # From (0, 0) carrying with the door open (11 steps to go), up and right are both
    # shortest; down and left bump the border and cost one step.
    state = RefState(0, 0, 0, 0, True, True, False, False, 3, 3, 3, 3)
    values = ref_action_values(state, 2, TASK_A, ref_oracle_predict)
    assert values == pytest.approx([GAMMA**10, GAMMA**11, GAMMA**11, GAMMA**10])
    draws = ([0.2, 0.9, 0.9, 0.1], [0.2, 0.9, 0.9, 0.3])
    assert ref_plan(state, 2, TASK_A, ref_oracle_predict, draws[0], ties="random") == UP
    assert ref_plan(state, 2, TASK_A, ref_oracle_predict, draws[1], ties="random") == RIGHT
    # The first tie rule takes the lowest tied index whatever the draws.
    assert [ref_plan(state, 2, TASK_A, ref_oracle_predict, d) for d in draws] == [UP, UP]
    with pytest.raises(ValueError, match="ties must be 'first' or 'random', got 'up'"):
        ref_plan(state, 2, TASK_A, ref_oracle_predict, draws[0], ties="up")


def legal_d1_move(before: tuple[int, int], after: tuple[int, int]) -> int:
    """Index of a d1 move that takes ``before`` to ``after`` once clipped; fails if none."""
    for i, (dx, dy) in enumerate(REF_DISTRACTOR_MOVES):
        if (min(max(before[0] + dx, 0), 7), min(max(before[1] + dy, 0), 7)) == after:
            return i
    raise AssertionError(f"d1 jumped from {before} to {after}")


@TASKS
def test_closed_loop_runs_agree_with_the_reference_at_every_recorded_step(ref_of, task):
    start = start_states((21, 22), 3, task)
    result = run_closed_loop(
        Planner(OracleModel(), 2, task), start, torch.Generator().manual_seed(0), record=True
    )
    for ep in range(start.shape[0]):
        for t in range(int(result.steps[ep])):
            now, nxt = ref_of(result.trajectory[t, ep]), ref_of(result.trajectory[t + 1, ep])
            action = int(result.actions[t, ep])
            values = ref_action_values(now, 2, task, ref_oracle_predict)
            assert values[action] >= max(values) - TIE_TOLERANCE, (ep, t)
            move = legal_d1_move((now.d1_x, now.d1_y), (nxt.d1_x, nxt.d1_y))
            want, _, done, info = ref_step(now, action, move, (nxt.d2_x, nxt.d2_y), task)
            assert nxt == want, (ep, t)
            assert done == (t + 1 == int(result.steps[ep]))
        assert bool(result.success[ep]) == info["goal"]


def test_the_reference_rejects_bad_input_naming_the_problem():
    state = RefState(2, 2, 0, 0, False, False, False, False, 0, 0, 0, 0)
    with pytest.raises(ValueError, match=r"action must be an int in 0\.\.3, got 4"):
        ref_step(state, 4, 0, (0, 0))
    with pytest.raises(ValueError, match=r"action must be an int in 0\.\.3, got 1\.0"):
        ref_step(state, 1.0, 0, (0, 0))
    with pytest.raises(ValueError, match=r"d1_move must be an int in 0\.\.4, got 5"):
        ref_step(state, 0, 5, (0, 0))
    with pytest.raises(TypeError, match="got str 'C'"):
        ref_step(state, 0, 0, (0, 0), "C")
    with pytest.raises(ValueError, match="depth must be an integer >= 1, got 0"):
        ref_plan(state, 0, TASK_A, ref_oracle_predict, [0.1] * 4)
    with pytest.raises(ValueError, match="tie_draws must hold 4 values, got 3"):
        ref_plan(state, 1, TASK_A, ref_oracle_predict, [0.1] * 3)
    with pytest.raises(ValueError, match="must have 12 entries, got 11"):
        ref_decode([0.0] * 11)
    with pytest.raises(ValueError, match="non-finite"):
        ref_action_values([math.nan] + [0.0] * 11, 1, TASK_A, ref_oracle_predict)
