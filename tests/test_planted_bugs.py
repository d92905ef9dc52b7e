"""The planted bugs of ``scripts/planted_bugs.py``: each bug's exact effect on hand-built data
and states, and the suite end to end on a tiny budget (slow)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch

from gridplan.core import env
from gridplan.core.constants import DOWN, LEFT, RIGHT, UP
from gridplan.core.tasks import TASK_A
from gridplan.data.datasets import collect
from gridplan.models.noise import OracleModel

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))
import planted_bugs  # noqa: E402

sys.path.pop(0)


class _Oracle(OracleModel):
    metadata: dict = {}


def test_shifted_actions_take_the_next_steps_action_within_an_episode():
    data = collect("balanced", 1000, seed=3)
    shifted = planted_bugs.shifted_actions(data)
    for i in range(len(data) - 1):
        same = bool(data.episode[i + 1] == data.episode[i])
        assert int(shifted.actions[i]) == int(data.actions[i + 1 if same else i])
    assert int(shifted.actions[-1]) == int(data.actions[-1])
    assert torch.equal(shifted.next_states, data.next_states)
    assert not torch.equal(shifted.actions, data.actions)
    assert set(planted_bugs.ignored_action(data).actions.tolist()) == {0}


def _start():
    state = env.reset(4, torch.Generator().manual_seed(0), TASK_A)
    state[:, 0:2] = torch.tensor([2.0, 2.0]) / 7  # the agent at (2, 2), in the open
    return state


def _predict(bug: str, state, action, **stats):
    model = planted_bugs.BuggyModel(_Oracle(), bug, **stats)
    return model.predict(state, action, torch.Generator().manual_seed(1))


def test_each_bug_in_use_changes_the_step_as_it_says():
    state, gen = _start(), torch.Generator().manual_seed(1)
    actions = torch.tensor([UP, DOWN, LEFT, RIGHT])
    oracle = _Oracle().predict(state, actions, gen)
    clean = _predict("clean", state, actions)
    assert torch.equal(clean, oracle)
    cells = torch.round(_predict("delta-twice", state, actions)[:, 0:2] * 7)
    # Every move goes two cells instead of one: (2, 4), (2, 0), (0, 2), (4, 2).
    assert cells.tolist() == [[2, 4], [2, 0], [0, 2], [4, 2]]
    swapped = _predict("swapped-actions", state, actions)
    assert torch.equal(swapped[:, 0:2], oracle[[0, 1, 3, 2], 0:2])
    ignored = _predict("ignored-action", state, actions)
    assert torch.round(ignored[:, 0:2] * 7).tolist() == [[2, 3]] * 4


def test_refit_normalization_is_harmless_only_where_the_batch_looks_like_the_training_data():
    state = collect("balanced", 256, seed=5).states
    actions = torch.arange(256) % 4
    mean, std = state.mean(dim=0), state.std(dim=0, unbiased=False)
    same = _predict("refit-normalization", state, actions, mean=mean, std=std)
    clean = _predict("clean", state, actions)
    assert (same[:, 0:6] - clean[:, 0:6]).abs().max() < 1e-3
    # One state repeated (as a planner's leaves from one root): every dim maps to the mean.
    one = state[:1].repeat(4, 1)
    refit = _predict("refit-normalization", one, actions[:4], mean=mean, std=std)
    assert not torch.equal(refit[:, 0:2], _predict("clean", one, actions[:4])[:, 0:2])


def test_an_unknown_bug_is_refused():
    with pytest.raises(ValueError, match="unknown bug 'typo'; valid: clean, shifted-actions"):
        planted_bugs.BuggyModel(_Oracle(), "typo")


@pytest.mark.slow
def test_the_suite_trains_evaluates_and_tabulates_every_bug(tmp_path, capsys):
    out = tmp_path / "planted"
    assert planted_bugs.main(["--out", str(out), "--quick"]) == 0
    results = json.loads((out / "results.json").read_text())
    rows = results["rows"]
    assert "data.budget=2000" in results["settings"]["training"]  # a quick table says so
    assert [r["bug"] for r in rows] == list(planted_bugs.BUGS)
    by_bug = {r["bug"]: r for r in rows}
    for bug in planted_bugs.USE_BUGS:  # trained clean: the clean model's loss, exactly
        assert by_bug[bug]["val_loss_ratio"] == 1.0
    assert all(0 <= r["decision_agreement"] <= 1 for r in rows)
    text = (out / "table.md").read_text()
    assert "| delta-twice | " in text and "data.budget=2000" in text.splitlines()[0]
    assert planted_bugs.main(["--out", str(out), "--quick"]) == 2  # never into a used folder
    assert "is not empty" in capsys.readouterr().err
