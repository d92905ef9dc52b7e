"""gridplan's CEM and MPPI against TorchRL's ``CEMPlanner``/``MPPIPlanner`` on the same model
and the same candidate draws (``scripts/bench_planners.py``): identical actions where the
model's relevant predictions are deterministic."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch

pytest.importorskip("torchrl")

from gridplan.core.tasks import TASK_A  # noqa: E402
from gridplan.core.values import value_table  # noqa: E402
from gridplan.models.noise import NoiseModel, OracleModel  # noqa: E402
from gridplan.planning.closed_loop import start_states  # noqa: E402
from gridplan.planning.planners import make_planner  # noqa: E402


def bench():
    path = Path(__file__).resolve().parents[2] / "scripts" / "bench_planners.py"
    spec = importlib.util.spec_from_file_location("bench_planners", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("name", ["cem", "mppi"])
@pytest.mark.parametrize("model", [OracleModel(), NoiseModel.controlled(0.0, 0.5)])
def test_same_actions_as_torchrl(name, model):
    b = bench()
    roots = start_states((7,), 24, TASK_A)
    settings = dict(b.SETTINGS[name], candidates=32)
    ours = make_planner(name, model, TASK_A, 4, settings)
    theirs = b.torchrl_planner(name, model, TASK_A, settings, value_table(TASK_A))
    for seed in (0, 1):
        mine = ours.act(roots, torch.Generator().manual_seed(seed))
        assert torch.equal(mine, b.torchrl_act(theirs, roots, b.own_seed(seed)))
