"""The hot paths on every test device: environment step, planner scorers, learned model.

Devices come from ``GRIDPLAN_TEST_DEVICES`` (comma-separated, default ``cpu``); a CUDA entry
is skipped where torch sees no GPU. ``scripts/gpu_check.sh`` runs this file with
``GRIDPLAN_TEST_DEVICES=cpu,cuda``. Random streams differ between devices, so every
comparison replays draws from a generator on the same device.
"""

from __future__ import annotations

import os

import pytest
import torch

from gridplan.core.env import reset, step, transition
from gridplan.core.tasks import TASK_A, TASK_B
from gridplan.core.values import value_table
from gridplan.models.learned import LearnedWorldModel, MLPDynamics
from gridplan.models.noise import NoiseModel, OracleModel
from gridplan.planning.closed_loop import run_episodes
from gridplan.planning.planner import Planner
from gridplan.planning.reference import ref_decode, ref_encode, ref_step
from gridplan.planning.registry import through_predict
from gridplan.planning.tree import TreeScorer


def _devices() -> list:
    names = [d.strip() for d in os.environ.get("GRIDPLAN_TEST_DEVICES", "cpu").split(",")]
    marks = []
    for name in filter(None, names):
        skip = pytest.mark.skipif(
            torch.device(name).type == "cuda" and not torch.cuda.is_available(),
            reason="no CUDA device",
        )
        marks.append(pytest.param(name, marks=skip, id=name))
    return marks


DEVICES = pytest.mark.parametrize("device", _devices())
TASKS = pytest.mark.parametrize("task", [TASK_A, TASK_B], ids=["A", "B"])


@DEVICES
@TASKS
def test_env_step_on_the_device_matches_the_reference(device, task, replay_draws):
    gen = torch.Generator(device=device).manual_seed(3)
    state = reset(300, gen, task)
    state[100:] = torch.rand(200, 12, generator=gen, device=device) * 1.2 - 0.1
    action = torch.randint(0, 4, (300,), generator=gen, device=device)
    moves, cells = replay_draws(gen, 300)
    nxt, reward, done, info = step(state, action, gen, task)
    assert nxt.device == state.device
    rows = state.cpu().tolist()
    acts = action.cpu().tolist()
    refs = [ref_step(ref_decode(rows[i]), acts[i], moves[i], cells[i], task) for i in range(300)]
    assert torch.equal(nxt.cpu(), torch.tensor([ref_encode(r[0]) for r in refs]))
    assert reward.cpu().tolist() == [r[1] for r in refs]
    assert done.cpu().tolist() == [r[2] for r in refs]
    assert info["pickup"].cpu().tolist() == [r[3]["pickup"] for r in refs]


@DEVICES
@TASKS
@pytest.mark.parametrize(
    ("tree", "factory"), [(None, None), ("shared-prefix", through_predict)], ids=["fused", "tree"]
)
def test_the_oracle_planner_on_the_device_gives_exact_q_star(
    device, task, tree, factory, random_states
):
    state = random_states(40, torch.Generator().manual_seed(4)).to(device)
    planner = Planner(OracleModel(), 3, task, device=device, tree=tree, factory=factory)
    q = planner.action_values(state, torch.Generator(device=device).manual_seed(0))
    want = value_table(task, device).q_values(state)
    torch.testing.assert_close(q, want, atol=1e-6, rtol=0)


@DEVICES
def test_the_learned_tree_on_the_device_chooses_as_independent_leaves(device):
    torch.manual_seed(0)
    model = LearnedWorldModel(MLPDynamics((256, 256))).to(device)
    state = reset(50, torch.Generator(device=device).manual_seed(5))
    tree = Planner(model, 3, device=device)
    assert isinstance(tree.scorer, TreeScorer)
    leaves = Planner(model, 3, device=device, tree="independent")
    q_tree = tree.action_values(state, torch.Generator(device=device))
    q_leaves = leaves.action_values(state, torch.Generator(device=device))
    if torch.device(device).type == "cpu":
        assert torch.equal(q_tree, q_leaves)
    else:  # a GPU GEMM may pick another kernel per batch size: last-bit differences
        torch.testing.assert_close(q_tree, q_leaves, atol=1e-6, rtol=0)
    gens = [torch.Generator(device=device).manual_seed(6) for _ in range(2)]
    assert torch.equal(tree.act(state, gens[0]), leaves.act(state, gens[1]))


@DEVICES
def test_a_noisy_closed_loop_on_the_device_is_seeded(device):
    model = NoiseModel.controlled([0.0, 0.35], [0.1, 0.1])
    runs = [run_episodes(model, TASK_A, 2, (0, 1), 6, device=device) for _ in range(2)]
    assert torch.equal(runs[0].success, runs[1].success)
    assert torch.equal(runs[0].steps, runs[1].steps)
    assert runs[0].success.view(2, -1)[0].float().mean() >= 0.5, "sigma_r = 0 mostly succeeds"


@DEVICES
@pytest.mark.parametrize("factory", [None, through_predict], ids=["fused", "tree"])
def test_shared_prefix_noise_runs_on_the_device(device, factory):
    model = NoiseModel.controlled(0.35, 0.1)
    state = reset(64, torch.Generator(device=device).manual_seed(7))
    planner = Planner(model, 3, device=device, tree="shared-prefix", factory=factory)
    first = planner.act(state, torch.Generator(device=device).manual_seed(8))
    again = planner.act(state, torch.Generator(device=device).manual_seed(8))
    assert first.device == state.device and torch.equal(first, again)


@DEVICES
def test_transition_tables_live_on_the_states_device(device):
    state = reset(8, torch.Generator(device=device).manual_seed(9))
    action = torch.zeros(8, dtype=torch.long, device=device)
    nxt = transition(state, action, torch.Generator(device=device))[0]
    assert nxt.device == state.device and nxt.dtype == state.dtype
